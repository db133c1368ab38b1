"""The structured fuzzer's frames (fuzz/structured.py) are what their labels say: valid
requests of the named API and version, each patched field holding the named extreme at
the right offset, a patched record batch with a correct CRC; and the same seed gives the
same frames."""
from __future__ import annotations

import random
import re
import struct

import pytest
from aiokafka.record.util import calc_crc32c

from coordinator.protocol.apis import (
    GROUP_APIS,
    forwardable_range,
    kio_version_range,
    request_class,
    request_header_version,
)
from coordinator.protocol.codec import BodyError, decode_body
from coordinator.protocol.framing import decode_request_header
from fuzz.health import UpstreamWatch
from fuzz.structured import BATCH_HEADER, EXCLUDED, StructuredFrames, _get

ADVERTISED = {key: kio_version_range(key) for key in [*range(0, 100), *range(32700, 32707)]
              if kio_version_range(key) and (forwardable_range(key, kio_version_range(key)) or key in GROUP_APIS)}


@pytest.fixture(scope="module")
def frames() -> StructuredFrames:
    return StructuredFrames(ADVERTISED, random.Random(3), heavy=0.0)


def _path(label: str) -> tuple[str | int, ...]:
    return tuple(int(step) if step.isdigit() else step for step in re.findall(r"\w+", label))


def _decode(frame: bytes):
    key, version = struct.unpack_from(">hh", frame, 4)
    header, offset = decode_request_header(frame, request_header_version(key, version))
    return header, decode_body(request_class(header.api_key, header.api_version), frame, offset)


def test_every_advertised_api_but_the_excluded_has_templates_with_fields_to_patch(frames):
    covered = {key for key, _ in frames.versions}
    assert covered == set(ADVERTISED) - set(EXCLUDED)
    # the streams group APIs (KIP-1071), their topology's values among them
    assert {(88, 0), (88, 1), (89, 0), (89, 1), (93, 0)} <= set(frames.versions)
    fields = {(t.label.split(" v")[0], re.sub(r"\[\d+\]", "", path)) for t in frames.templates
              for path, _, _ in t.slots}
    # the numbers the issue names as what a receiver allocates from or waits on
    assert {("create_topics", "topics.num_partitions"), ("create_topics", "topics.replication_factor"),
            ("create_partitions", "topics.count"), ("fetch", "max_bytes"), ("fetch", "max_wait"),
            ("fetch", "topics.partitions.partition_max_bytes"), ("produce", "topic_data.partition_data.records"),
            ("offset_commit", "topics.partitions.committed_offset")} <= fields
    assert {("streams_group_heartbeat", "member_epoch"), ("streams_group_heartbeat", "rebalance_timeout"),
            ("streams_group_heartbeat", "topology.subtopologies.repartition_source_topics.partitions"),
            ("streams_group_heartbeat", "topology.subtopologies.repartition_source_topics.replication_factor"),
            ("streams_group_heartbeat", "user_endpoint.port"), ("streams_group_heartbeat", "topology.epoch")} <= fields


def test_each_patched_field_decodes_to_the_extreme_its_label_names(frames):
    rng = random.Random(5)
    checked = 0
    for template in frames.templates:
        for _ in range(4):
            label, frame = template.variant(rng)
            try:
                header, body = _decode(frame)
            except (BodyError, ValueError) as e:   # int64 milliseconds past Python's timedelta: kio's limit
                assert "timedelta" in str(e), (label, e)
                continue
            assert label.startswith(f"{template.label}:")
            for field, value in re.findall(r"([\w\[\].]+)=(-?\d+)(?=,|$| )", label.split(": ", 1)[1]):
                if ".records." in f".{field}" or field.startswith("records"):
                    continue
                got = _get(body, _path(field))
                got = int(got.total_seconds() * 1000) if hasattr(got, "total_seconds") else got
                assert got == int(value), (label, field, got)
                checked += 1
    assert checked > 1000


def test_a_patched_record_batch_has_one_extreme_header_field_and_a_correct_crc(frames):
    rng = random.Random(9)
    produce = [t for t in frames.templates if t.label.startswith("produce") and any(s[2] == "records" for s in t.slots)]
    assert produce
    seen = set()
    for _ in range(300):
        template = rng.choice(produce)
        label, frame = template.variant(rng)
        for path, name, value in re.findall(r"([\w\[\].]+records)\.(\w+)=(-?\d+)", label):
            seen.add(name)
            at = next(offset for where, offset, fmt in template.slots if where == path and fmt == "records")
            offset, fmt = BATCH_HEADER[name]
            assert struct.unpack_from(fmt, frame, at + offset)[0] == int(value)
            if name != "crc" and offset >= 21:
                size = struct.unpack_from(">i", frame, at + 8)[0] + 12 if name != "batch_length" else None
                end = at + size if size is not None else None
                if end is not None and end <= len(frame):
                    assert struct.unpack_from(">I", frame, at + 17)[0] == calc_crc32c(frame[at + 21:end])
    assert {"records_count", "batch_length", "magic", "crc"} <= seen


def test_the_same_seed_gives_the_same_frames():
    def some(seed: int) -> list[bytes]:
        built = StructuredFrames({19: (2, 7), 1: (4, 15)}, random.Random(seed))
        rng = random.Random(seed)
        return [built.frame(rng, i)[1] for i in range(200)]
    assert some(1) == some(1) != some(2)


def test_suspects_are_the_frames_sent_just_before_the_broker_went_and_those_unanswered():
    watch = UpstreamWatch("broker", "127.0.0.1", 1, pid=1, rss_limit_mb=1, window_s=0.5)
    old = [("old answered", b"1")]
    watch.sent(1, old)
    watch.answered(1)
    watch.recent[-1] = (watch.recent[-1][0] - 10, old)      # sent 10 s ago
    watch.sent(2, [("still unanswered", b"2")])
    watch.recent[-1] = (watch.recent[-1][0] - 10, watch.recent[-1][1])
    watch.sent(3, [("a", b"3"), ("b", b"4")])
    watch.answered(3)                                        # kcoord answered, the broker may still work
    watch._stop("died")
    assert [label for label, _ in watch.suspects] == ["b", "a", "still unanswered"]
