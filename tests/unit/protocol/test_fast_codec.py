"""The hand-written encoders write exactly kio's bytes."""
from __future__ import annotations

import io
import uuid
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.consumer_group_heartbeat.v0 import response as v0
from kio.schema.consumer_group_heartbeat.v1 import response as v1
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from coordinator.protocol.codec import encode_body
from coordinator.protocol.fast_codec import FAST_ENCODERS
from coordinator.protocol.framing import write_uvarint as uvarint


def kio_bytes(message) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(message))(buf, message)
    return buf.getvalue()


text = st.one_of(st.none(), st.text(max_size=300))
topic_partitions = st.tuples(st.one_of(st.none(), st.uuids()),
                             st.lists(st.integers(0, 2**31 - 1), max_size=200).map(tuple))


def response(mod, error, message, member_id, epoch, interval, throttle, assignment):
    return mod.ConsumerGroupHeartbeatResponse(
        throttle_time=timedelta(milliseconds=throttle), error_code=error, error_message=message,
        member_id=member_id, member_epoch=epoch, heartbeat_interval=timedelta(milliseconds=interval),
        assignment=None if assignment is None else mod.Assignment(topic_partitions=tuple(
            mod.TopicPartitions(topic_id=tid, partitions=parts) for tid, parts in assignment)))


@settings(max_examples=300, deadline=None)
@given(mod=st.sampled_from([v0, v1]), error=st.sampled_from(list(ErrorCode)), message=text, member_id=text,
       epoch=st.integers(-2**31, 2**31 - 1), interval=st.integers(-2**31, 2**31 - 1),
       throttle=st.integers(0, 2**31 - 1), assignment=st.one_of(st.none(), st.lists(topic_partitions, max_size=40)))
def test_consumer_group_heartbeat_response_matches_kio(mod, error, message, member_id, epoch, interval, throttle,
                                                       assignment):
    msg = response(mod, error, message, member_id, epoch, interval, throttle, assignment)
    assert FAST_ENCODERS[type(msg)](msg) == kio_bytes(msg)


def test_encode_body_uses_the_fast_encoder_and_keeps_kio_bytes():
    msg = response(v1, ErrorCode.none, None, "m" * 22, 7, 5000, 0,
                   [(uuid.uuid4(), (0, 1, 2)), (uuid.uuid4(), ())])
    assert type(msg) in FAST_ENCODERS
    assert encode_body(msg) == kio_bytes(msg)


def test_uvarint_matches_kafka_unsigned_varint():
    assert uvarint(0) == b"\x00"
    assert uvarint(127) == b"\x7f"
    assert uvarint(128) == b"\x80\x01"
    assert uvarint(300) == b"\xac\x02"
    assert uvarint(2**31) == b"\x80\x80\x80\x80\x08"


def test_an_answer_without_assignment_or_error_is_encoded_once(monkeypatch):
    from coordinator.protocol import fast_codec

    monkeypatch.setattr(fast_codec, "BODIES_KEPT", 2)
    monkeypatch.setattr(fast_codec, "_BODIES", {})
    steady = response(v1, ErrorCode.none, None, "m1", 5, 5000, 0, None)
    first = encode_body(steady)
    assert first == kio_bytes(steady) and encode_body(steady) is first
    equal = response(v1, ErrorCode.none, None, "m1", 5, 5000, 0, None)
    assert encode_body(equal) == first and encode_body(equal) is not first   # by identity, not by value
    failed = response(v1, ErrorCode.unknown_member_id, "gone", "m1", 5, 5000, 0, None)
    assert encode_body(failed) == kio_bytes(failed) and id(failed) not in fast_codec._BODIES
    for epoch in range(6, 10):
        encode_body(response(v0, ErrorCode.none, None, "m1", epoch, 5000, 0, None))
        assert len(fast_codec._BODIES) <= 2
    fast_codec._BODIES.clear()
    huge = response(v1, ErrorCode.none, None, "m" * 2000, 5, 5000, 0, None)
    assert encode_body(huge) == kio_bytes(huge) and not fast_codec._BODIES
