"""acks=0 detection at the start of a Produce body (no response may be awaited for it)."""
from __future__ import annotations

from datetime import timedelta

import pytest

from coordinator.protocol.apis import PRODUCE, request_class, request_header_version
from coordinator.protocol.codec import encode_body
from coordinator.protocol.framing import HeaderError, RequestHeader, frame, request_body_offset
from coordinator.protocol.produce import produce_acks


def produce_frame(version: int, acks: int, transactional_id: str | None) -> bytes:
    body = encode_body(request_class(PRODUCE, version)(
        transactional_id=transactional_id, acks=acks, timeout=timedelta(seconds=30), topic_data=()))
    head = RequestHeader(PRODUCE, version, 1, "p").encode(request_header_version(PRODUCE, version))
    return frame(head + body)


@pytest.mark.parametrize("version", [3, 8, 9])
@pytest.mark.parametrize("acks", [0, 1, -1])
@pytest.mark.parametrize("transactional_id", [None, "", "txn-1"])
def test_acks_and_transactional_id(version: int, acks: int, transactional_id: str | None) -> None:
    data = produce_frame(version, acks, transactional_id)
    _, offset = request_body_offset(data, request_header_version(PRODUCE, version))
    assert produce_acks(data, offset, version >= 9) == (transactional_id, acks)


def test_truncated_produce_body_raises() -> None:
    data = produce_frame(8, 0, "txn-1")
    _, offset = request_body_offset(data, 1)
    with pytest.raises(HeaderError):
        produce_acks(data[:offset + 4], offset, False)


# --- the state-topic check of every Produce (coordinator/gateway/state_guard.py) ----------
# Every Produce is walked with its bounds checked (records skipped by their length); only a
# frame holding the state topic's name or id bytes is decoded.

import struct  # noqa: E402
import sys  # noqa: E402
import uuid  # noqa: E402

from coordinator.gateway.state_guard import StateTopicGuard  # noqa: E402
from coordinator.protocol.codec import BodyError  # noqa: E402

RECORDS = b"\x01" * 70
STATE = "__kcoord_offsets"


def produce_with(version: int, topics: list[tuple[object, list[int]]], acks: int = -1,
                 records: bytes = RECORDS) -> bytes:
    cls = request_class(PRODUCE, version)
    m = sys.modules[cls.__module__]
    data = []
    for key, partitions in topics:
        parts = tuple(m.PartitionProduceData(index=p, records=records) for p in partitions)
        field = {"topic_id": key} if version >= 13 else {"name": key}
        data.append(m.TopicProduceData(partition_data=parts, **field))
    body = encode_body(cls(transactional_id="tx", acks=acks, timeout=timedelta(seconds=5), topic_data=tuple(data)))
    head = RequestHeader(PRODUCE, version, 7, "p").encode(request_header_version(PRODUCE, version))
    return frame(head + body)


def guard(state_id: uuid.UUID | None = None) -> StateTopicGuard:
    return StateTopicGuard(STATE, lambda: state_id, lambda: True)


@pytest.mark.parametrize("version", [3, 8, 9, 12, 13])
def test_other_topics_pass_and_the_state_topic_is_found(version: int) -> None:
    state_id, other_id = uuid.uuid4(), uuid.uuid4()
    state, other = (state_id, other_id) if version >= 13 else (STATE, "__kcoord_offsetz")
    offset = lambda data: request_body_offset(data, request_header_version(PRODUCE, version))[1]  # noqa: E731
    data = produce_with(version, [(other, [0, 1])], acks=1)
    assert guard(state_id).produce(data, version, offset(data)) == (1, None)
    data = produce_with(version, [(other, [0]), (state, [2])])
    assert guard(state_id).produce(data, version, offset(data))[1] is not None
    # Records holding the name's bytes do not make a topic the state topic.
    data = produce_with(version, [(other, [0])], records=STATE.encode() + state_id.bytes)
    assert guard(state_id).produce(data, version, offset(data)) == (-1, None)


@pytest.mark.parametrize("version", [8, 9])
def test_every_truncation_is_a_body_error_never_anything_else(version: int) -> None:
    data = produce_with(version, [("orders", [0, 1])])
    _, offset = request_body_offset(data, request_header_version(PRODUCE, version))
    for cut in range(offset, len(data)):
        short = struct.pack(">i", cut - 4) + data[4:cut]
        with pytest.raises(BodyError):
            guard().produce(short, version, offset)


def test_length_bombs_are_refused_naming_the_field() -> None:
    data = bytearray(produce_with(8, [("orders", [0])]))
    _, offset = request_body_offset(bytes(data), 1)
    at = bytes(data).index(RECORDS) - 4          # the records length (int32) of the only partition
    data[at:at + 4] = struct.pack(">i", 0x7FFFFFF0)
    with pytest.raises(BodyError, match=r"topic_data\[0\]\.partition_data\[0\]\.records: length 2147483632"):
        guard().produce(bytes(data), 8, offset)
    bomb = bytearray(produce_with(8, [("orders", [0])]))
    count_at = offset + 2 + 2 + 2 + 4            # after transactional_id "tx", acks and timeout
    bomb[count_at:count_at + 4] = struct.pack(">i", 0x7FFFFFFF)
    with pytest.raises(BodyError, match="topic_data: tried to allocate a collection of size 2147483647"):
        guard().produce(bytes(bomb), 8, offset)


def test_null_topic_name_is_malformed() -> None:
    data = bytearray(produce_with(8, [("orders", [0])]))
    _, offset = request_body_offset(bytes(data), 1)
    name_at = bytes(data).index(b"orders") - 2
    data[name_at:name_at + 2] = struct.pack(">h", -1)
    with pytest.raises(BodyError, match=r"topic_data\[0\]\.name: non-nullable field was serialized as null"):
        guard().produce(bytes(data), 8, offset)
