"""The message generator against kio, and its output against Kafka 4.4's jar.

Where kio (generated from Kafka 4.3) and the generator (reading Kafka 4.4's
`kafka-clients` jar) both have a version, their classes must be the same field by field;
the only differences allowed are the field renames Kafka 4.4 made in its definitions
(same wire format). The generated modules on disk must be what the jar gives, and each
must round-trip through kio's own reader and writer.
"""
from __future__ import annotations

import importlib
import random
from pathlib import Path

import pytest

from coordinator.protocol import messages
from coordinator.protocol.codec import decode_body, encode_body
from coordinator.protocol.messagegen.__main__ import kafka_jar, main
from coordinator.protocol.messagegen.compare import differences, generated_class, kio_class
from coordinator.protocol.messagegen.render import api_module
from coordinator.protocol.messagegen.schema import Message, read_jar
from coordinator.protocol.messages.index import GENERATED
from fuzz.samples import sample

# Renames in Kafka 4.4's definitions of versions kio (4.3) already has: same wire, new name.
RENAMED_IN_44 = {
    ("TxnOffsetCommitRequest", "generation_id_or_member_epoch", "generation_id"),
    ("StreamsGroupHeartbeatResponse", "acceptable_recovery_lag_legacy", "acceptable_recovery_lag"),
}


@pytest.fixture(scope="module")
def definitions() -> list[Message]:
    return [m for m in read_jar(kafka_jar()) if m.type in ("request", "response")]


def _renamed(message: Message, diff: str) -> bool:
    return any(name == message.name and new in diff and old in diff for name, new, old in RENAMED_IN_44)


def test_every_version_kio_has_is_generated_the_same(definitions: list[Message]) -> None:
    compared, mismatches = 0, []
    for message in definitions:
        for version in message.versions():
            theirs = kio_class(message, version)
            if theirs is None:
                continue
            compared += 1
            diffs = [d for d in differences(generated_class(message, version), theirs)
                     if not _renamed(message, d)]
            mismatches += [f"{message.name} v{version}: {d}" for d in diffs]
    assert compared > 550, compared  # every API kio knows, in every version
    assert mismatches == []


def test_the_renames_allowed_are_real(definitions: list[Message]) -> None:
    """Each allowed rename still differs from kio: when kio catches up, the entry goes."""
    names = {m.name: m for m in definitions}
    for message_name, new, old in RENAMED_IN_44:
        message = names[message_name]
        diffs = [d for v in message.versions() if (theirs := kio_class(message, v)) is not None
                 for d in differences(generated_class(message, v), theirs)]
        assert any(new in d and old in d for d in diffs), (message_name, diffs)


def test_the_files_on_disk_are_what_the_jar_gives() -> None:
    assert main(["--check"]) == 0


def test_the_versions_kio_lacks_are_generated(definitions: list[Message]) -> None:
    lacking = {(api_module(m), v, m.type)
               for m in definitions for v in m.versions() if kio_class(m, v) is None}
    assert lacking == set(GENERATED)
    assert {("delete_groups", 3, "response"), ("txn_offset_commit", 6, "request"),
            ("streams_group_heartbeat", 1, "request")} <= lacking


@pytest.mark.parametrize("key", sorted(GENERATED))
def test_a_generated_message_round_trips_through_kio(key: tuple[str, int, str]) -> None:
    api, version, kind = key
    module = messages.schema(api, version, kind)
    name = next(n for n in dir(module) if n.endswith(kind.capitalize()) and not n.startswith("_"))
    cls = getattr(module, name)
    rng = random.Random(f"{api}{version}{kind}")
    for _ in range(20):
        message = sample(cls, rng)
        assert decode_body(cls, encode_body(message), 0) == message


def test_lookup_prefers_kio_and_falls_back_to_generated() -> None:
    assert messages.schema("delete_groups", 2).__name__ == "kio.schema.delete_groups.v2.response"
    assert messages.schema("delete_groups", 3).__name__ == (
        "coordinator.protocol.messages.delete_groups.v3.response")
    assert Path(importlib.import_module("coordinator.protocol.messages.index").__file__ or "").exists()
