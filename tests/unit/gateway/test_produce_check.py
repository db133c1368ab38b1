"""Each partition's record batch of a forwarded Produce (produce_check.py), and the guard's
per-partition split (state_guard.StateTopicGuard.produce)."""
from __future__ import annotations

import sys
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.errors import ErrorCode

from coordinator.gateway import produce_check
from coordinator.gateway.produce_check import (
    RecordChecks,
    TooLarge,
    record_checks,
    record_spans,
    refused_partitions,
)
from coordinator.gateway.state_guard import Close, Local, Split, StateTopicGuard
from coordinator.protocol.apis import PRODUCE, request_class, request_header_version, response_class
from coordinator.protocol.codec import BodyError, decode_body, decode_response_frame, encode_body, encode_response_frame
from coordinator.protocol.framing import RequestHeader, frame, request_body_offset

STATE = "__kcoord_offsets"
STATE_ID = uuid.uuid4()
CHECKS = RecordChecks(max_message_bytes=2**31 - 1, verify_crc=True)


def batch(value: bytes = b"v") -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 16)
    builder.append(0, timestamp=int(time.time() * 1000), key=None, value=value, headers=[])
    return bytes(builder.build())


def bad_crc(value: bytes = b"v") -> bytes:
    data = bytearray(batch(value))
    data[-1] ^= 0xFF
    return bytes(data)


def produce(version: int, topics: list[tuple[object, list[tuple[int, bytes | None]]]], acks: int = -1):  # type: ignore[no-untyped-def]
    cls = request_class(PRODUCE, version)
    m = sys.modules[cls.__module__]
    body = cls(transactional_id="tx" if version >= 3 else None, acks=acks, timeout=timedelta(0), topic_data=tuple(
        m.TopicProduceData(partition_data=tuple(m.PartitionProduceData(index=i, records=r) for i, r in parts),
                           **({"topic_id": key} if version >= 13 else {"name": key}))
        for key, parts in topics))
    head = RequestHeader(PRODUCE, version, 7, "c").encode(request_header_version(PRODUCE, version))
    data = frame(head + encode_body(body))
    return data, request_body_offset(data, request_header_version(PRODUCE, version))[1]


def test_record_spans_find_each_partitions_records_at_every_layout() -> None:
    one, two = batch(b"one"), batch(b"two-two")
    for version in (3, 8, 9, 12, 13):
        keys = (uuid.uuid4(), uuid.uuid4()) if version >= 13 else ("a", "bb")
        data, offset = produce(version, [(keys[0], [(0, one), (5, None)]), (keys[1], [(1, two)])])
        spans = [(t, p, data[s:e]) for t, p, s, e in record_spans(data, offset, version)]
        assert spans == [(0, 0, one), (0, 1, b""), (1, 0, two)], version


def test_good_batches_pass_and_bad_ones_get_kafkas_codes_per_partition() -> None:
    data, offset = produce(9, [("a", [(0, batch()), (1, bad_crc()), (2, None)])])
    refused = refused_partitions(data, offset, 9, CHECKS)
    assert refused is not None and set(refused) == {(0, 1), (0, 2)}
    assert refused[0, 1][0] == ErrorCode.corrupt_message
    assert refused[0, 2][0] == ErrorCode.invalid_record
    assert refused_partitions(data, offset, 9, RecordChecks(2**31 - 1, verify_crc=False)) == {
        (0, 2): refused[0, 2]}
    good, offset = produce(9, [("a", [(0, batch())])])
    assert refused_partitions(good, offset, 9, CHECKS) is None


def test_crc_is_checked_in_front_of_tansu_and_not_kafka_by_default() -> None:
    class Config:
        produce_verify_crc = "auto"
        message_max_bytes = 1000
    assert record_checks(Config(), {0: (0, 9), 1: (0, 12)}) == RecordChecks(1000, True)        # Tansu
    assert record_checks(Config(), {0: (0, 9), 23: (0, 4)}) == RecordChecks(1000, False)       # Kafka
    Config.produce_verify_crc = "true"
    assert record_checks(Config(), {23: (0, 4)}).verify_crc


def test_a_bad_partition_is_answered_and_the_rest_forwarded() -> None:
    guard = StateTopicGuard(STATE, lambda: STATE_ID, lambda: True)
    data, offset = produce(9, [("a", [(0, batch()), (1, bad_crc())]), ("b", [(3, None)]), (STATE, [(0, bad_crc())])])
    acks, decision = guard.produce(data, 9, offset, CHECKS)
    assert acks == -1 and isinstance(decision, Split) and decision.rule
    forwarded = decode_body(request_class(PRODUCE, 9), decision.frame, request_body_offset(decision.frame, 2)[1])
    assert [(t.name, [p.index for p in t.partition_data]) for t in forwarded.topic_data] == [("a", [0])]
    m = sys.modules[response_class(PRODUCE, 9).__module__]
    upstream = response_class(PRODUCE, 9)(throttle_time=timedelta(0), responses=(m.TopicProduceResponse(
        name="a", partition_responses=(m.PartitionProduceResponse(
            index=0, error_code=ErrorCode.none, base_offset=4, log_append_time=None, log_start_offset=0,
            record_errors=(), error_message=None),)),))
    merged = decode_response_frame(PRODUCE, 9, decision.merge(encode_response_frame(PRODUCE, 9, 7, upstream)))[1]
    got = {(t.name, p.index): p.error_code for t in merged.responses for p in t.partition_responses}
    # The state topic's partition gets Kafka's internal-topic error first, whatever its batch.
    assert got == {("a", 0): ErrorCode.none, ("a", 1): ErrorCode.corrupt_message,
                   ("b", 3): ErrorCode.invalid_record, (STATE, 0): ErrorCode.invalid_topic_exception}
    assert [len(t.partition_responses) for t in merged.responses] == [2, 1, 1]


def test_all_partitions_refused_is_answered_here_and_acks_zero_closes() -> None:
    guard = StateTopicGuard(STATE, lambda: STATE_ID, lambda: True)
    for version in (9, 13):
        key = uuid.uuid4() if version >= 13 else "a"
        data, offset = produce(version, [(key, [(0, bad_crc())])])
        _, decision = guard.produce(data, version, offset, CHECKS)
        assert isinstance(decision, Local)
        (topic,) = decision.response.responses
        assert topic.partition_responses[0].error_code == ErrorCode.corrupt_message
        assert "partition 0" in topic.partition_responses[0].error_message
        encode_response_frame(PRODUCE, version, 7, decision.response)       # it encodes
    data, offset = produce(9, [("a", [(0, bad_crc())])], acks=0)
    assert isinstance(guard.produce(data, 9, offset, CHECKS)[1], Close)


def test_without_checks_nothing_is_checked() -> None:
    data, offset = produce(9, [("a", [(0, bad_crc())])])
    assert StateTopicGuard(STATE, lambda: STATE_ID, lambda: True).produce(data, 9, offset) == (-1, None)


def test_a_produce_above_the_walk_bound_is_read_within_a_bound_then_walked_and_checked(monkeypatch: Any) -> None:
    """Above max_decoded_request_bytes a Produce is read within MAX_NAMED_PARTITIONS topics and
    partitions, then walked and checked as any other: over the bound, or not fitting its frame
    (one topic too), it is refused whole; nothing goes up unwalked or with unchecked records."""
    small = StateTopicGuard(STATE, lambda: STATE_ID, lambda: True, max_walked_frame=10)
    data, offset = produce(9, [("a", [(0, batch()), (1, bad_crc())])])
    acks, decision = small.produce(data, 9, offset, CHECKS)
    assert isinstance(decision, Close) and "a batch Kafka would refuse" in decision.reason   # not decoded
    assert isinstance(StateTopicGuard(STATE, lambda: STATE_ID, lambda: True).produce(data, 9, offset, CHECKS)[1],
                      Split)                # walked at once: answered per partition
    monkeypatch.setattr(produce_check, "MAX_NAMED_PARTITIONS", 1_000)
    many, offset = produce(9, [("t", [(p, batch()) for p in range(1_000)] + [(1_000, bad_crc())])])
    with pytest.raises(TooLarge, match=r"Produce v9 of [\d,]+ bytes has more than 1,000 topics, partitions and tagged fields"):
        small.produce(many, 9, offset, CHECKS)
    with pytest.raises(TooLarge):
        small.produce(many, 9, offset, None)                 # the record checks off too
    good, offset = produce(9, [("t", [(p, batch()) for p in range(999)])])     # 1,000 with its topic
    assert small.produce(good, 9, offset, CHECKS) == (-1, None)
    with pytest.raises(BodyError, match=r"partition_data\[0\]'s records end past the frame"):
        refused_partitions(data[:-120], offset, 9, CHECKS, walked=False)
    broken = frame(good[4:-3])                                # the last batch cut short: the walk refuses it
    for checks in (CHECKS, None):
        with pytest.raises(BodyError):
            small.produce(broken, 9, offset, checks)


def test_an_unwalked_frame_cut_or_flipped_anywhere_raises_only_a_body_error() -> None:
    """A Produce not walked beforehand is read within a bound before its walk: a cut or flipped
    one that no longer parses is a BodyError (the connection closed; RepeatedKeys and TooLarge
    are BodyErrors), never another exception."""
    import random

    rng = random.Random(7)
    for version in (3, 9, 13):
        key = uuid.uuid4() if version >= 13 else "topic"
        data, offset = produce(version, [(key, [(0, batch()), (1, None)]), ("other" if version < 13 else uuid.uuid4(),
                                                                             [(2, bad_crc())])])
        assert refused_partitions(data, offset, version, CHECKS, walked=False) is not None
        variants = [data[:cut] for cut in range(offset, len(data))]
        for _ in range(300):
            flipped = bytearray(data)
            flipped[rng.randrange(offset, len(data))] = rng.randrange(256)
            variants.append(bytes(flipped))
        small = StateTopicGuard(STATE, lambda: STATE_ID, lambda: True, max_walked_frame=10)
        refused = []
        for variant in variants:
            try:
                small.produce(variant, version, offset, CHECKS)
            except BodyError:
                refused.append(variant)
        assert all(cut in refused for cut in variants[:len(data) - offset])    # every cut: none is whole
        assert len(refused) > len(data) - offset


def test_tagged_fields_count_against_the_bound_above_the_walk_bound(monkeypatch: Any) -> None:
    """Tagged fields cost a step each here and in the walk after, and at 2 bytes each 50 million fit
    in a socket.request.max.bytes frame: above the walk bound they count with topics and
    partitions, the partitions', the topics' and the request's own; within the bound they pass."""
    from coordinator.protocol.framing import write_uvarint
    monkeypatch.setattr(produce_check, "MAX_NAMED_PARTITIONS", 50)
    small = StateTopicGuard(STATE, lambda: STATE_ID, lambda: True, max_walked_frame=10)
    data, offset = produce(9, [("a", [(0, batch())])])
    assert data[-3:] == b"\x00\x00\x00"         # the partition's, the topic's and the request's tags
    for at in (-3, -2, -1):
        for count, refused in ((60, True), (40, False)):
            tags = write_uvarint(count) + bytes(2 * count)        # tag 0, size 0, count times
            body = data[4:len(data) + at] + tags + (data[len(data) + at + 1:] if at < -1 else b"")
            tagged = frame(body)
            for checks in (CHECKS, None):
                if refused:
                    with pytest.raises(TooLarge, match="more than 50 topics, partitions and tagged fields"):
                        small.produce(tagged, 9, offset, checks)
                else:
                    try:
                        small.produce(tagged, 9, offset, checks)
                    except TooLarge:
                        raise AssertionError(f"{count} tags at {at} are within the bound") from None
                    except BodyError:
                        pass                              # the walk may refuse repeated tags: not the bound


def test_a_transactional_id_longer_than_kafka_reads_is_refused_before_it_is_decoded() -> None:
    from coordinator.protocol.framing import HeaderError
    from coordinator.protocol.produce import produce_acks
    data, offset = produce(9, [("a", [(0, batch())])])
    long_id = frame(data[4:offset] + write_compact_length(40_000) + b"x" * 40_000 + data[offset + 3:])
    with pytest.raises(HeaderError, match="transactional_id length 40000"):
        produce_acks(long_id, offset, True)
    small = StateTopicGuard(STATE, lambda: STATE_ID, lambda: True, max_walked_frame=10)
    with pytest.raises(BodyError):
        small.produce(long_id, 9, offset, CHECKS)


def write_compact_length(n: int) -> bytes:
    from coordinator.protocol.framing import write_uvarint
    return write_uvarint(n + 1)
