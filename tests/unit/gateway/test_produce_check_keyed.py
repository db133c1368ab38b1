"""Produce's topic_data is a keyed array (``mapKey`` name up to v12): a Produce naming one
topic twice, or topics whose names' Java hash codes crowd Kafka's table, is refused in the
walk the gateway already makes of it (gateway/produce_check.py, keyed_arrays.py) and never
forwarded: Kafka 4.4's network thread would parse it in time cubic in the crowd."""
from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from coordinator.gateway import produce_check
from coordinator.gateway.guarded import GuardStage
from coordinator.gateway.produce_check import (
    NAMES_LAID_OUT_FROM,
    RecordChecks,
    RepeatedKeys,
    TooLarge,
    refused_partitions,
)
from coordinator.gateway.routes import build_routes, route_key
from coordinator.gateway.state_guard import StateTopicGuard
from coordinator.protocol.apis import PRODUCE

from .test_keyed_arrays import _one_hash_code
from .test_produce_check import batch, produce

CHECKS = RecordChecks(max_message_bytes=2**31 - 1, verify_crc=True)


@pytest.mark.parametrize("version", [3, 8, 9])
def test_a_topic_named_twice_is_refused(version: int) -> None:
    data, offset = produce(version, [("a", [(0, batch())]), ("b", [(0, batch())]), ("a", [(1, batch())])])
    with pytest.raises(RepeatedKeys, match=r"topic_data\[2\] repeats the name of topic_data\[0\] \('a'\)"):
        refused_partitions(data, offset, version, CHECKS)
    # a Produce not walked beforehand is checked within its budget too
    with pytest.raises(RepeatedKeys):
        refused_partitions(data, offset, version, CHECKS, walked=False)


def test_distinct_names_and_one_topic_pass() -> None:
    data, offset = produce(9, [("a", [(0, batch())]), ("b", [(0, batch()), (1, batch())])])
    assert refused_partitions(data, offset, 9, CHECKS) is None
    data, offset = produce(9, [("a", [(0, batch())])])
    assert refused_partitions(data, offset, 9, CHECKS) is None
    many, offset = produce(9, [(f"orders-{i}", [(0, None)]) for i in range(2_000)])
    refused = refused_partitions(many, offset, 9, CHECKS)
    assert refused is not None and len(refused) == 2_000       # null records, each refused on its own


def test_names_of_one_hash_code_are_refused() -> None:
    names = _one_hash_code(1_000)
    data, offset = produce(9, [(name, [(0, batch())]) for name in names])
    with pytest.raises(RepeatedKeys, match="topic_data: its keys' Java hash codes meet.* 1,000 keys"):
        refused_partitions(data, offset, 9, CHECKS)
    few, offset = produce(9, [(name, [(0, batch())]) for name in names[:NAMES_LAID_OUT_FROM - 1]])
    assert refused_partitions(few, offset, 9, CHECKS) is None


class _Client:
    def __init__(self) -> None:
        self.rejected: list[str] = []
        self.forwarded: list[bytes] = []

    def reject(self, what: str, route: Any = None, correlation_id: Any = None, api_key: Any = None,
               api_version: Any = None, *, reason: str = "") -> None:
        self.rejected.append(what)

    def forward(self, frame: bytes, pending: Any) -> None:
        self.forwarded.append(frame)


def test_the_gateway_closes_instead_of_forwarding() -> None:
    guard = StateTopicGuard("__kcoord_offsets", uuid.uuid4, lambda: True)
    guard.record_checks = CHECKS
    route = build_routes({PRODUCE: (3, 9)}, ())[route_key(PRODUCE, 9)]
    client = _Client()
    stage = GuardStage(client, SimpleNamespace(guard=guard), 4 * 1024 * 1024 + 4)  # type: ignore[arg-type]
    data, _ = produce(9, [("a", [(0, batch())]), ("a", [(1, batch())])])
    stage.produce(data, route, 7)
    assert client.forwarded == []
    assert client.rejected == [     # it parses: not "body does not parse"
        "Produce v9: topic_data[1] repeats the name of topic_data[0] ('a'): Kafka's clients never repeat a key "
        "of this array"]
    good, _ = produce(9, [("a", [(0, batch())]), ("b", [(1, batch())])])
    stage.produce(good, route, 8)
    assert client.forwarded == [good] and len(client.rejected) == 1


def test_a_produce_above_the_walk_bound_has_its_names_read_too(monkeypatch: Any) -> None:
    """Above max_decoded_request_bytes a Produce is read within MAX_NAMED_PARTITIONS before its
    walk (one of 100 MiB could name 10**5 topics of one hash code): a repeated name is refused
    as in a walked one, and past the bound the whole Produce is."""
    small = StateTopicGuard("__state", lambda: None, lambda: True, max_walked_frame=10)
    names = [f"t{i}" for i in range(1_000)] + ["t7"]
    twice, offset = produce(9, [(name, [(0, batch())]) for name in names])
    for checks in (CHECKS, None):
        with pytest.raises(RepeatedKeys, match=r"topic_data\[1000\] repeats the name of topic_data\[7\]"):
            small.produce(twice, 9, offset, checks)
    distinct, offset = produce(9, [(f"t{i}", [(0, batch())]) for i in range(1_001)])
    assert small.produce(distinct, 9, offset, CHECKS) == (-1, None)
    monkeypatch.setattr(produce_check, "MAX_NAMED_PARTITIONS", 1_500)
    with pytest.raises(TooLarge, match="more than 1,500 topics, partitions and tagged fields: above max_decoded_request_bytes"):
        small.produce(distinct, 9, offset, CHECKS)


def test_with_the_record_checks_off_names_are_still_read() -> None:
    guard = StateTopicGuard("__state", lambda: None, lambda: True)
    twice, offset = produce(9, [("a", [(0, batch())]), ("a", [(1, batch())])])
    with pytest.raises(RepeatedKeys, match=r"topic_data\[1\] repeats the name of topic_data\[0\]"):
        guard.produce(twice, 9, offset, None)
    crowd, offset = produce(9, [(name, [(0, batch())]) for name in _one_hash_code(1_000)])
    with pytest.raises(RepeatedKeys, match="Java hash codes meet"):
        guard.produce(crowd, 9, offset, None)
    one, offset = produce(9, [("a", [(0, batch())])])
    assert guard.produce(one, 9, offset, None) == (-1, None)


def test_topic_ids_are_keys_from_v13() -> None:
    """From v13 topic_data is keyed by topic id: an id twice, or ids of one Java hash code (any
    id whose halves are equal hashes to 0), are refused as names are."""
    same = uuid.uuid4()
    twice, offset = produce(13, [(same, [(0, batch())]), (uuid.uuid4(), [(0, batch())]), (same, [(1, batch())])])
    with pytest.raises(RepeatedKeys, match=rf"topic_data\[2\] repeats the topic id of topic_data\[0\] \({same}\)"):
        refused_partitions(twice, offset, 13, CHECKS)
    halves = [uuid.UUID(bytes=i.to_bytes(8, "big") * 2) for i in range(1, 1_001)]
    crowd, offset = produce(13, [(topic_id, [(0, batch())]) for topic_id in halves])
    with pytest.raises(RepeatedKeys, match="Java hash codes meet"):
        refused_partitions(crowd, offset, 13, CHECKS)
    guard = StateTopicGuard("__state", lambda: None, lambda: True)
    with pytest.raises(RepeatedKeys):
        guard.produce(crowd, 13, offset, None)           # record checks off too
    distinct, offset = produce(13, [(uuid.uuid4(), [(0, batch())]) for _ in range(1_000)])
    assert refused_partitions(distinct, offset, 13, CHECKS) is None


def test_names_are_held_to_kafkas_length_and_their_bytes_to_a_bound(monkeypatch: Any) -> None:
    """A frame not walked is held to the 32,767 bytes Kafka's reader takes per name; names laid
    out (hashed in Python) to MAX_NAME_BYTES_LAID_OUT together."""
    from coordinator.protocol.codec import BodyError
    long_name, offset = produce(9, [("a" * 40_000, [(0, batch())]), ("b", [(0, batch())])])
    with pytest.raises(BodyError, match=r"topic_data\[0\].name has invalid length 40000"):
        produce_check.check_names(long_name, offset, 9, walked=False)
    monkeypatch.setattr(produce_check, "MAX_NAME_BYTES_LAID_OUT", 10_000)
    names, offset = produce(9, [(f"{i:040d}", [(0, batch())]) for i in range(NAMES_LAID_OUT_FROM)])
    with pytest.raises(RepeatedKeys, match="the names of its 256 topics take 10,240 bytes, over 10,000"):
        refused_partitions(names, offset, 9, CHECKS)
