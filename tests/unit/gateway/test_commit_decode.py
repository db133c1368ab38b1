"""The OffsetCommit fast decoder (coordinator/gateway/commit_decode.py) gives kio's values for
random valid requests of v8-v10, and for any byte mutation of them either kio's values or
None (the general path then decides): fuzz/commit_decode.py's differential check. The
connection takes it only with the service's starters."""
from __future__ import annotations

import random
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.static.primitive import i32, i64

from coordinator.gateway import commit_decode
from coordinator.group.offsets.requests import offset_commit_shape
from coordinator.protocol.apis import OFFSET_COMMIT, request_class
from coordinator.protocol.codec import encode_body
from coordinator.protocol.framing import RequestHeader, frame
from fuzz.commit_decode import VERSIONS, check, fields, general
from fuzz.mutations import MUTATIONS

INT32 = st.integers(-2**31, 2**31 - 1)
TEXT = st.text(max_size=200)   # any code point: multi-byte UTF-8 and lengths past one varint byte


@st.composite
def requests(draw, version: int):
    mod = __import__(f"kio.schema.offset_commit.v{version}.request", fromlist=["x"])
    topics = []
    for _ in range(draw(st.integers(0, 3))):
        parts = tuple(mod.OffsetCommitRequestPartition(
            partition_index=i32(draw(INT32)), committed_offset=i64(draw(st.integers(-2**63, 2**63 - 1))),
            committed_leader_epoch=i32(draw(INT32)), committed_metadata=draw(st.one_of(st.none(), st.just(""), TEXT)))
            for _ in range(draw(st.integers(0, 12))))
        key = {"topic_id": draw(st.one_of(st.none(), st.uuids()))} if version >= 10 else {"name": draw(TEXT)}
        topics.append(mod.OffsetCommitRequestTopic(**key, partitions=parts))
    return mod.OffsetCommitRequest(group_id=draw(TEXT), generation_id_or_member_epoch=i32(draw(INT32)),
                                   member_id=draw(TEXT), group_instance_id=draw(st.one_of(st.none(), TEXT)),
                                   topics=tuple(topics))


def framed(version: int, request, client_id: str | None = "c") -> bytes:
    header = RequestHeader(OFFSET_COMMIT, version, 7, client_id)
    return frame(header.encode(2) + encode_body(request))


@settings(max_examples=200, deadline=None)
@given(data=st.data(), version=st.sampled_from(VERSIONS), client_id=st.one_of(st.none(), TEXT))
def test_random_valid_requests_decode_to_kios_values(data, version, client_id):
    request = data.draw(requests(version))
    data_frame = framed(version, request, client_id)
    took = check(data_frame, version)
    # The common shape (no tagged fields, nothing null where it may not be) is always taken.
    assert took
    assert fields(commit_decode.decode(data_frame, 2, version)[1]) == fields(request)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), version=st.sampled_from(VERSIONS), seed=st.integers(0, 2**32))
def test_mutated_requests_decode_to_kios_values_or_fall_back(data, version, seed):
    request = data.draw(requests(version))
    valid = framed(version, request)
    body = len(valid) - len(encode_body(request))
    rng = random.Random(seed)
    for name, mutate in MUTATIONS.items():
        mutated = mutate(valid, body, rng)
        check(mutated, version)
        if name == "valid":
            assert check(mutated, version)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_truncation_and_every_byte_flip_of_a_commit(version):
    mod = __import__(f"kio.schema.offset_commit.v{version}.request", fromlist=["x"])
    key = {"topic_id": uuid.uuid4()} if version >= 10 else {"name": "orders"}
    request = mod.OffsetCommitRequest(
        group_id="g", generation_id_or_member_epoch=i32(3), member_id="m-1", group_instance_id="i",
        topics=(mod.OffsetCommitRequestTopic(**key, partitions=tuple(
            mod.OffsetCommitRequestPartition(partition_index=i32(p), committed_offset=i64(10 * p),
                                             committed_leader_epoch=i32(-1), committed_metadata=m)
            for p, m in enumerate(("", None, "md")))),))
    valid = framed(version, request)
    taken = 0
    for cut in range(12, len(valid)):
        short = valid[:cut]
        taken += check(frame(short[4:]), version)
    assert taken == 0      # a truncated body never decodes
    for i in range(12, len(valid)):
        for value in (0x00, 0x01, 0x7F, 0x80, 0xFF, valid[i] ^ 0x01):
            check(valid[:i] + bytes([value]) + valid[i + 1:], version)


def test_irregular_shapes_fall_back_to_the_general_path():
    mod = __import__("kio.schema.offset_commit.v9.request", fromlist=["x"])
    request = mod.OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=i32(1), member_id="m",
                                      group_instance_id=None, topics=())
    valid = framed(9, request)
    assert commit_decode.decode(valid, 2, 9) is not None
    tagged = frame(valid[4:-1] + b"\x01\x05\x01\x00")     # an unknown tagged field (5) ends the body
    assert commit_decode.decode(tagged, 2, 9) is None
    check(tagged, 9)
    null_group = frame(valid[4:].replace(b"\x02g", b"\x00", 1))   # a non-nullable group id as null
    assert commit_decode.decode(null_group, 2, 9) is None
    assert general(null_group, 9) is None
    bad_utf8 = frame(valid[4:].replace(b"\x02g", b"\x02\xff", 1))
    assert commit_decode.decode(bad_utf8, 2, 9) is None
    assert general(bad_utf8, 9) is None
    assert commit_decode.decode(frame(valid[4:] + b"\x00"), 2, 9) is None   # a byte after the body


@pytest.mark.parametrize("version", VERSIONS)
def test_counts_and_lengths_past_one_varint_byte(version):
    mod = __import__(f"kio.schema.offset_commit.v{version}.request", fromlist=["x"])
    key = {"topic_id": None} if version >= 10 else {"name": "t" * 249}
    request = mod.OffsetCommitRequest(
        group_id="g" * 300, generation_id_or_member_epoch=i32(-1), member_id="", group_instance_id=None,
        topics=(mod.OffsetCommitRequestTopic(**key, partitions=tuple(
            mod.OffsetCommitRequestPartition(partition_index=i32(p), committed_offset=i64(p),
                                             committed_leader_epoch=i32(p), committed_metadata="x" * p)
            for p in range(300))),))
    assert check(framed(version, request), version)


def test_the_decoders_are_keyed_by_the_routes_request_class():
    assert set(commit_decode.decoders()) == {request_class(OFFSET_COMMIT, v) for v in VERSIONS}


# The connection's decoder keeps the head of its last one-topic request (commit_decode.
# CommitDecoder): for any run of frames its answers are the stateless decode's, which the
# tests above hold to kio's.

def _same(decoder: commit_decode.CommitDecoder, data_frame: bytes, version: int, header_version: int = 2) -> Any:
    got = decoder.decode(data_frame, header_version)
    want = commit_decode.decode(data_frame, header_version, version)
    assert (got is None) == (want is None), (data_frame, got, want)
    if got is not None:
        assert got[0] == want[0]
        assert fields(got[1]) == fields(want[1])
        assert isinstance(got[1], commit_decode.OffsetCommitRequest) and got[1].__version__ == version
    return got


def _one_topic(version: int, group: str = "g", member: str = "m-1", epoch: int = 3, offset: int = 10,
               metadata: str | None = "", partitions: int = 4, topic: str = "orders"):
    mod = __import__(f"kio.schema.offset_commit.v{version}.request", fromlist=["x"])
    key = {"topic_id": uuid.UUID(int=7)} if version >= 10 else {"name": topic}
    return mod.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=i32(epoch), member_id=member, group_instance_id=None,
        topics=(mod.OffsetCommitRequestTopic(**key, partitions=tuple(
            mod.OffsetCommitRequestPartition(partition_index=i32(p), committed_offset=i64(offset + p),
                                             committed_leader_epoch=i32(-1), committed_metadata=metadata)
            for p in range(partitions))),))


@pytest.mark.parametrize("version", VERSIONS)
def test_the_memo_answers_a_repeated_head_as_a_full_decode(version):
    decoder = commit_decode.CommitDecoder(version)
    first = framed(version, _one_topic(version, offset=10))
    assert _same(decoder, first, version) is not None
    assert decoder.head is not None          # one topic: its head is kept
    for offset, partitions, metadata in ((11, 4, ""), (12, 1, None), (13, 0, ""), (14, 3, "md"), (15, 4, "")):
        again = framed(version, _one_topic(version, offset=offset, partitions=partitions, metadata=metadata))
        got = _same(decoder, again, version)
        assert got is not None and [p.committed_offset for p in got[1].topics[0].partitions] == \
            [offset + p for p in range(partitions)]
    # Another head (a new epoch, another member, another client id) is decoded in full, and kept.
    for other in (framed(version, _one_topic(version, epoch=4)), framed(version, _one_topic(version, member="m-2")),
                  framed(version, _one_topic(version), client_id="other")):
        assert _same(decoder, other, version) is not None
        assert decoder.head == other[12:decoder.start]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_memo_never_answers_for_a_broken_tail_nor_a_broken_head(version):
    valid = framed(version, _one_topic(version))
    for cut in range(12, len(valid)):
        decoder = commit_decode.CommitDecoder(version)
        _same(decoder, valid, version)
        assert _same(decoder, frame(valid[4:cut]), version) is None      # cut short: never decodes
    for i in range(12, len(valid)):
        for value in (0x00, 0x01, 0x7F, 0x80, 0xFF, valid[i] ^ 0x01):
            decoder = commit_decode.CommitDecoder(version)
            _same(decoder, valid, version)
            mutated = valid[:i] + bytes([value]) + valid[i + 1:]
            _same(decoder, mutated, version)
            _same(decoder, valid, version)        # and the memo still answers the valid head
    decoder = commit_decode.CommitDecoder(version)
    _same(decoder, valid, version)
    assert _same(decoder, frame(valid[4:] + b"\x00"), version) is None            # a byte after the body
    assert _same(decoder, frame(valid[4:-1] + b"\x01\x05\x01\x00"), version) is None   # a tagged field
    assert _same(decoder, valid, version, 1) is None    # read as header v1: the memo of v2 is not used


@settings(max_examples=100, deadline=None)
@given(data=st.data(), version=st.sampled_from(VERSIONS), seed=st.integers(0, 2**32))
def test_the_memo_on_runs_of_random_and_mutated_frames(data, version, seed):
    rng = random.Random(seed)
    decoder = commit_decode.CommitDecoder(version)
    heads = [data.draw(requests(version)) for _ in range(2)] + [_one_topic(version)]
    for _ in range(12):
        request = rng.choice(heads)
        valid = framed(version, request)
        body = len(valid) - len(encode_body(request))
        name, mutate = rng.choice(list(MUTATIONS.items()))
        _same(decoder, mutate(valid, body, rng), version)
        _same(decoder, valid, version)


def test_the_memo_keeps_no_head_of_several_topics_nor_a_long_one():
    mod = __import__("kio.schema.offset_commit.v9.request", fromlist=["x"])
    two = _one_topic(9)
    two = mod.OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=i32(1), member_id="m",
                                  group_instance_id=None, topics=two.topics * 2)
    decoder = commit_decode.CommitDecoder(9)
    assert _same(decoder, framed(9, two), 9) is not None and decoder.head is None
    long_head = _one_topic(9, group="g" * (commit_decode.MEMO_MAX_BYTES + 1))
    assert _same(decoder, framed(9, long_head), 9) is not None and decoder.head is None


SHAPE_FIELDS = ("group_id", "generation_id_or_member_epoch", "member_id", "group_instance_id", "retention_ms",
                "by_id", "leader_epochs", "group_id_not_found", "answer")


@pytest.mark.parametrize("version", VERSIONS)
def test_the_decoded_request_is_the_shards_shape_of_kios(version):
    """The shard takes the one-pass decoded request as its own shape (offset_commit_shape
    returns it): each field is what the shape of kio's request for the same bytes holds."""
    request = _one_topic(version)
    valid = framed(version, request)
    decoder = commit_decode.CommitDecoder(version)
    decoded = [commit_decode.decode(valid, 2, version)[1], decoder.decode(valid, 2)[1], decoder.decode(valid, 2)[1]]
    assert decoder.head is not None                     # the last one came from the memo
    want = offset_commit_shape(general(valid, version)[1])
    for got in decoded:
        assert offset_commit_shape(got) is got
        assert [(f, getattr(got, f)) for f in SHAPE_FIELDS] == [(f, getattr(want, f)) for f in SHAPE_FIELDS]
        assert fields(got) == fields(general(valid, version)[1])
