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


# --- the template decode (coordinator/gateway/commit_fast_path.py) --------------------------

from kio.schema.offset_commit.v8 import request as q8  # noqa: E402
from kio.schema.offset_commit.v9 import request as q9  # noqa: E402
from kio.schema.offset_commit.v10 import request as q10  # noqa: E402

from coordinator.gateway.commit_fast_path import decode_offset_commit  # noqa: E402
from coordinator.protocol.codec import BodyError, decode_body  # noqa: E402

short_text = st.text(max_size=70)
any_text = st.one_of(short_text, st.text(max_size=200))
request_partitions = st.lists(st.tuples(st.integers(-2**31, 2**31 - 1), st.integers(-2**63, 2**63 - 1),
                                        st.integers(-2**31, 2**31 - 1), st.one_of(st.none(), any_text)),
                              max_size=140)


@st.composite
def commit_requests(draw, mod):
    topics = draw(st.lists(st.tuples(any_text, request_partitions), max_size=4))
    return mod.OffsetCommitRequest(
        group_id=draw(any_text), generation_id_or_member_epoch=draw(st.integers(-2**31, 2**31 - 1)),
        member_id=draw(any_text), group_instance_id=draw(st.one_of(st.none(), any_text)),
        topics=tuple(mod.OffsetCommitRequestTopic(name=name, partitions=tuple(
            mod.OffsetCommitRequestPartition(partition_index=i, committed_offset=o, committed_leader_epoch=e,
                                             committed_metadata=m) for i, o, e, m in parts))
            for name, parts in topics))


def slow(cls, data: bytes):
    try:
        return decode_body(cls, data, 0)
    except BodyError:
        return BodyError


def check_same(cls, data: bytes) -> bool:
    """The template decode gives decode_body's request, or leaves the bytes to it."""
    fast = decode_offset_commit(cls, data, 0)
    if fast is not None:
        assert fast == slow(cls, data)
    return fast is not None


@settings(max_examples=300, deadline=None)
@given(data=st.data(), mod=st.sampled_from([q8, q9]))
def test_template_decode_reads_valid_commits_as_decode_body_does(data, mod):
    request = data.draw(commit_requests(mod))
    body = encode_body(request)
    taken = check_same(mod.OffsetCommitRequest, body)
    assert decode_body(mod.OffsetCommitRequest, body, 0) == request
    common = all(len(s.encode()) < 127 for s in (request.group_id, request.member_id,
                                                  request.group_instance_id or "")) and len(request.topics) < 127
    common = common and all(len(t.name.encode()) < 127 and len(t.partitions) < 127 and all(
        len((p.committed_metadata or "").encode()) < 127 for p in t.partitions) for t in request.topics)
    assert taken == common


@settings(max_examples=500, deadline=None)
@given(data=st.data(), mod=st.sampled_from([q8, q9]))
def test_template_decode_never_accepts_what_decode_body_refuses(data, mod):
    """Random damage to a valid body: a byte changed, bytes cut or added, a tag set."""
    request = data.draw(commit_requests(mod))
    body = bytearray(encode_body(request))
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["flip", "cut", "add"]))
        if kind == "flip" and body:
            body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
        elif kind == "cut" and body:
            del body[data.draw(st.integers(0, len(body) - 1)):]
        else:
            body += data.draw(st.binary(min_size=1, max_size=8))
    check_same(mod.OffsetCommitRequest, bytes(body))


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=300))
def test_template_decode_on_random_bytes_agrees_or_abstains(raw):
    check_same(q9.OffsetCommitRequest, raw)


def test_other_versions_and_shapes_are_left_to_the_slow_path():
    request = q10.OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=1, member_id="m",
                                      group_instance_id=None, topics=())
    assert decode_offset_commit(q10.OffsetCommitRequest, encode_body(request), 0) is None
    big = q9.OffsetCommitRequest(group_id="g" * 200, generation_id_or_member_epoch=1, member_id="m",
                                 group_instance_id=None, topics=())
    assert decode_offset_commit(q9.OffsetCommitRequest, encode_body(big), 0) is None
    common = q9.OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=1, member_id="m",
                                    group_instance_id=None, topics=(q9.OffsetCommitRequestTopic(
                                        name="t", partitions=(q9.OffsetCommitRequestPartition(
                                            partition_index=0, committed_offset=5, committed_leader_epoch=-1,
                                            committed_metadata=""),)),))
    assert decode_offset_commit(q9.OffsetCommitRequest, encode_body(common), 0) == common
