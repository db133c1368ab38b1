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


# --- walk_produce: topics, partitions, records skipped by length, every length bounded ----

import struct  # noqa: E402
import sys  # noqa: E402
import uuid  # noqa: E402

from coordinator.protocol.codec import BodyError, decode_body  # noqa: E402
from coordinator.protocol.produce import walk_produce, without_topics  # noqa: E402

RECORDS = b"\x01" * 70   # opaque to the walker: skipped by its length


def produce_with(version: int, topics: list[tuple[object, list[int]]], acks: int = -1) -> bytes:
    cls = request_class(PRODUCE, version)
    m = sys.modules[cls.__module__]
    data = []
    for key, partitions in topics:
        parts = tuple(m.PartitionProduceData(index=p, records=RECORDS) for p in partitions)
        field = {"topic_id": key} if version >= 13 else {"name": key}
        data.append(m.TopicProduceData(partition_data=parts, **field))
    body = encode_body(cls(transactional_id="tx", acks=acks, timeout=timedelta(seconds=5), topic_data=tuple(data)))
    head = RequestHeader(PRODUCE, version, 7, "p").encode(request_header_version(PRODUCE, version))
    return frame(head + body)


@pytest.mark.parametrize("version", [3, 8, 9, 12, 13])
def test_walk_finds_every_topic_and_partition(version: int) -> None:
    ids = [uuid.uuid4(), uuid.uuid4()]
    keys = ids if version >= 13 else ["orders", "__kcoord_offsets"]
    data = produce_with(version, [(keys[0], [0, 3]), (keys[1], [7])], acks=1)
    _, offset = request_body_offset(data, request_header_version(PRODUCE, version))
    layout = walk_produce(data, offset, version)
    assert layout.acks == 1
    assert [(t.key, t.partitions) for t in layout.topics] == [(keys[0], (0, 3)), (keys[1], (7,))]
    # Splicing a topic out leaves a request kio decodes to exactly the other one.
    rest = without_topics(data, layout, {1}, version >= 9)
    _, rest_offset = request_body_offset(rest, request_header_version(PRODUCE, version))
    decoded = decode_body(request_class(PRODUCE, version), rest, rest_offset)
    assert len(decoded.topic_data) == 1 and [p.index for p in decoded.topic_data[0].partition_data] == [0, 3]
    assert decoded.topic_data[0].partition_data[0].records == RECORDS and decoded.acks == 1


@pytest.mark.parametrize("version", [8, 9])
def test_every_truncation_is_a_body_error_never_anything_else(version: int) -> None:
    data = produce_with(version, [("orders", [0, 1])])
    _, offset = request_body_offset(data, request_header_version(PRODUCE, version))
    for cut in range(offset, len(data)):
        short = struct.pack(">i", cut - 4) + data[4:cut]
        with pytest.raises(BodyError):
            walk_produce(short, offset, version)


def test_length_bombs_are_refused_naming_the_field() -> None:
    data = bytearray(produce_with(8, [("orders", [0])]))
    _, offset = request_body_offset(bytes(data), 1)
    # records length (int32) of the only partition: the 4 bytes before RECORDS.
    at = bytes(data).index(RECORDS) - 4
    data[at:at + 4] = struct.pack(">i", 0x7FFFFFF0)
    with pytest.raises(BodyError, match=r"topic_data\[0\]\.partition_data\[0\]\.records: length 2147483632 runs past"):
        walk_produce(bytes(data), offset, 8)
    # topic_data count: after transactional_id "tx", acks and timeout.
    bomb = bytearray(produce_with(8, [("orders", [0])]))
    count_at = offset + 2 + 2 + 2 + 4
    bomb[count_at:count_at + 4] = struct.pack(">i", 0x7FFFFFFF)
    with pytest.raises(BodyError, match="topic_data of 2147483647 entries"):
        walk_produce(bytes(bomb), offset, 8)


def test_null_topic_name_and_trailing_bytes_are_malformed() -> None:
    data = bytearray(produce_with(8, [("orders", [0])]))
    _, offset = request_body_offset(bytes(data), 1)
    name_at = bytes(data).index(b"orders") - 2
    data[name_at:name_at + 2] = struct.pack(">h", -1)
    with pytest.raises(BodyError, match=r"topic_data\[0\]\.name: null"):
        walk_produce(bytes(data), offset, 8)
    padded = produce_with(9, [("orders", [0])]) + b"\x00"
    padded = struct.pack(">i", len(padded) - 4) + padded[4:]
    with pytest.raises(BodyError, match="1 bytes left after the body"):
        walk_produce(padded, request_body_offset(padded, 2)[1], 9)


# --- scan_produce: the per-request check, same bounds, nothing built ---------------------

from coordinator.protocol.produce import scan_produce  # noqa: E402


@pytest.mark.parametrize("version", [3, 8, 9, 12, 13])
def test_scan_finds_the_state_topic_as_the_walk_does(version: int) -> None:
    state_id, other_id = uuid.uuid4(), uuid.uuid4()
    state, other = (state_id, other_id) if version >= 13 else ("__kcoord_offsets", "__kcoord_offsetz")
    header_version = request_header_version(PRODUCE, version)
    for topics, expected in (([(other, [0, 1])], False), ([(other, [0]), (state, [2])], True)):
        data = produce_with(version, topics, acks=-1)
        offset = request_body_offset(data, header_version)[1]
        assert scan_produce(data, offset, version, b"__kcoord_offsets", state_id.bytes) == (-1, expected)
    # Records of 200 bytes (a two-byte varint length) and of 20,000 (three bytes) are skipped too.
    global RECORDS
    saved = RECORDS
    try:
        for size in (200, 20_000):
            RECORDS = b"\x02" * size
            data = produce_with(version, [(other, [0]), (state, [1])])
            assert scan_produce(data, request_body_offset(data, header_version)[1], version,
                                b"__kcoord_offsets", state_id.bytes) == (-1, True)
    finally:
        RECORDS = saved


@pytest.mark.parametrize("version", [8, 9])
def test_scan_truncations_are_body_errors(version: int) -> None:
    data = produce_with(version, [("orders", [0, 1])])
    _, offset = request_body_offset(data, request_header_version(PRODUCE, version))
    for cut in range(offset, len(data)):
        short = struct.pack(">i", cut - 4) + data[4:cut]
        with pytest.raises(BodyError):
            scan_produce(short, offset, version, b"orders", None)
