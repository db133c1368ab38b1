"""OffsetCommit v2-v4's retention_time_ms at any int64 (coordinator/protocol/retention.py).

kio reads the field as a timedelta (at most +-9.2e15 ms); Kafka takes any long there and
answers. A value beyond timedelta's range decodes to an int of milliseconds with every
other field intact; a value inside it keeps kio's timedelta; the core's ``to_ms`` reads
both as the same milliseconds, and the expire timestamp the core computes (commit time +
retention) wraps as Kafka's Java long does, so the record's int64 field takes it.
"""
from __future__ import annotations

import struct
from datetime import timedelta

import pytest

from coordinator.group.timeutil import to_ms
from coordinator.protocol.apis import OFFSET_COMMIT, request_class
from coordinator.protocol.codec import decode_body, encode_body
from coordinator.protocol.retention import RETENTION_VERSIONS, TIMEDELTA_MS, JavaLongMs, retention_offset

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
BEYOND = (I64_MAX, I64_MIN, TIMEDELTA_MS[1] + 1, TIMEDELTA_MS[0] - 1, 2**62)
WITHIN = (-1, 0, 2**31 - 1, 2**53, *TIMEDELTA_MS)


def body(version: int, group: str = "grp-ü", member: str = "member-1", generation: int = 7) -> bytes:
    cls = request_class(OFFSET_COMMIT, version)
    mod = __import__(cls.__module__, fromlist=["_"])
    part = mod.OffsetCommitRequestPartition(partition_index=3, committed_offset=42, committed_metadata="meta")
    request = cls(group_id=group, generation_id_or_member_epoch=generation, member_id=member,
                  retention_time=timedelta(milliseconds=-1),
                  topics=(mod.OffsetCommitRequestTopic(name="orders", partitions=(part,)),))
    return encode_body(request)


def with_retention(data: bytes, ms: int) -> bytes:
    at = retention_offset(data, 0)
    assert struct.unpack_from(">q", data, at)[0] == -1     # the offset found is the field's
    return data[:at] + struct.pack(">q", ms) + data[at + 8:]


@pytest.mark.parametrize("version", RETENTION_VERSIONS)
@pytest.mark.parametrize("ms", BEYOND)
def test_retention_beyond_timedelta_decodes_to_its_milliseconds(version, ms):
    data = with_retention(body(version), ms)
    request = decode_body(request_class(OFFSET_COMMIT, version), data, 0)
    assert request.retention_time == ms and to_ms(request.retention_time) == ms
    assert (request.group_id, request.generation_id_or_member_epoch, request.member_id) == ("grp-ü", 7, "member-1")
    [topic] = request.topics
    [part] = topic.partitions
    assert (topic.name, part.partition_index, part.committed_offset, part.committed_metadata) == \
        ("orders", 3, 42, "meta")


@pytest.mark.parametrize("version", RETENTION_VERSIONS)
@pytest.mark.parametrize("ms", WITHIN)
def test_retention_within_timedelta_keeps_kio_reading(version, ms):
    data = with_retention(body(version, group="g", member=""), ms)
    request = decode_body(request_class(OFFSET_COMMIT, version), data, 0)
    assert isinstance(request.retention_time, timedelta)
    assert to_ms(request.retention_time) == ms


def test_a_truncated_body_is_still_refused():
    from coordinator.protocol.codec import BodyError

    data = with_retention(body(2), I64_MAX)
    with pytest.raises(BodyError):
        decode_body(request_class(OFFSET_COMMIT, 2), data[:-3], 0)


def java_long(value: int) -> int:
    return (value + 2**63) % 2**64 - 2**63


@pytest.mark.parametrize("ms", BEYOND)
def test_expire_timestamp_wraps_as_kafkas_long_sum(ms):
    now_ms = 1_795_000_000_000
    expire = now_ms + JavaLongMs(ms)
    assert expire == java_long(now_ms + ms) and type(expire) is int
    assert -(2**63) <= JavaLongMs(ms) + now_ms <= 2**63 - 1
    if ms == I64_MAX:
        assert expire < 0     # Kafka's sum overflows: the offset expires at the next pass
