"""The durable OffsetCommit's fast response encoder (coordinator/protocol/fast_codec.py)
writes exactly kio's bytes, for random valid responses of every version it covers."""
from __future__ import annotations

import io
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.schema.offset_commit.v8 import response as v8
from kio.schema.offset_commit.v9 import response as v9
from kio.schema.offset_commit.v10 import response as v10
from kio.serial import entity_writer

from coordinator.protocol.codec import encode_body
from coordinator.protocol.fast_codec import FAST_ENCODERS


def kio_bytes(message) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(message))(buf, message)
    return buf.getvalue()


partitions = st.lists(st.tuples(st.integers(-2**31, 2**31 - 1), st.sampled_from(list(ErrorCode))), max_size=150)
named = st.lists(st.tuples(st.text(max_size=300), partitions), max_size=20)
by_id = st.lists(st.tuples(st.one_of(st.none(), st.uuids()), partitions), max_size=20)


def response(mod, throttle, topics):
    def topic(key, parts):
        fields = {"topic_id": key} if mod is v10 else {"name": key}
        return mod.OffsetCommitResponseTopic(**fields, partitions=tuple(
            mod.OffsetCommitResponsePartition(partition_index=i, error_code=code) for i, code in parts))
    return mod.OffsetCommitResponse(throttle_time=timedelta(milliseconds=throttle),
                                    topics=tuple(topic(k, p) for k, p in topics))


@settings(max_examples=300, deadline=None)
@given(mod=st.sampled_from([v8, v9]), throttle=st.integers(0, 2**31 - 1), topics=named)
def test_offset_commit_response_by_name_matches_kio(mod, throttle, topics):
    msg = response(mod, throttle, topics)
    assert FAST_ENCODERS[type(msg)](msg) == kio_bytes(msg)


@settings(max_examples=200, deadline=None)
@given(throttle=st.integers(0, 2**31 - 1), topics=by_id)
def test_offset_commit_response_by_id_matches_kio(throttle, topics):
    msg = response(v10, throttle, topics)
    assert FAST_ENCODERS[type(msg)](msg) == kio_bytes(msg)


def test_encode_body_takes_the_fast_encoder_for_the_common_commit():
    msg = response(v9, 0, [("orders", [(p, ErrorCode.none) for p in range(4)])])
    assert type(msg) in FAST_ENCODERS
    assert encode_body(msg) == kio_bytes(msg)
    # throttle 0, one topic "orders", four partitions of (index, NONE, no tags), no tags
    assert encode_body(msg)[:13] == b"\x00\x00\x00\x00\x02\x07orders\x05"


def test_an_accepted_answer_to_one_topic_is_encoded_once(monkeypatch):
    from coordinator.protocol import fast_codec

    monkeypatch.setattr(fast_codec, "BODIES_KEPT", 2)
    monkeypatch.setattr(fast_codec, "_BODIES", {})
    accepted = response(v9, 0, [("orders", [(p, ErrorCode.none) for p in range(4)])])
    first = encode_body(accepted)
    assert first == kio_bytes(accepted) and encode_body(accepted) is first
    equal = response(v9, 0, [("orders", [(p, ErrorCode.none) for p in range(4)])])
    assert encode_body(equal) == first and encode_body(equal) is not first   # by identity, not by value
    # Built anew per request, so not kept: a refused partition, two topics, more partitions
    # than the group shares an answer for (each such commit would add an entry never hit).
    refused = response(v9, 0, [("orders", [(0, ErrorCode.none), (1, ErrorCode.unknown_topic_or_partition)])])
    two = response(v10, 0, [(None, [(0, ErrorCode.none)]), (None, [(1, ErrorCode.none)])])
    wide = response(v9, 0, [("o", [(p, ErrorCode.none) for p in range(fast_codec.SHARED_ANSWER_PARTITIONS + 1)])])
    assert len(encode_body(wide)) <= fast_codec.BODY_KEPT_MAX_BYTES   # refused for its width alone
    for msg in (refused, two, wide):
        assert encode_body(msg) == kio_bytes(msg) and id(msg) not in fast_codec._BODIES
    for p in range(3):
        msg = response(v8, 0, [("t", [(p, ErrorCode.none)])])
        assert encode_body(msg) == kio_bytes(msg) and id(msg) in fast_codec._BODIES
        assert len(fast_codec._BODIES) <= 2
    fast_codec._BODIES.clear()
    long = response(v9, 0, [("t" * 2000, [(0, ErrorCode.none)])])
    assert encode_body(long) == kio_bytes(long) and not fast_codec._BODIES
