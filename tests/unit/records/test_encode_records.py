"""`encode_records` gives, for any records, exactly what `encode_key` and `encode_value` at
each record's version give (its inline path: a commit's offset record), and fails as they
fail."""
from __future__ import annotations

import dataclasses
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from records import (
    ZERO_UUID,
    CoordinatorRecord,
    GroupMetadataKey,
    LegacyOffsetCommitKey,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordEncodeError,
    decode_record,
    encode_key,
    encode_records,
    encode_value,
)
from records.codec import offset_commit_key

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
uuids = st.just(ZERO_UUID) | st.uuids()


@st.composite
def offset_records(draw) -> CoordinatorRecord:
    group, topic, partition = draw(text), draw(text), draw(i32)
    # a shared key (what a commit builds) or one built by its class (a tool, a test)
    key = offset_commit_key(group, topic, partition) if draw(st.booleans()) \
        else OffsetCommitKey(group, topic, partition)
    if draw(st.integers(0, 9)) == 0:
        return CoordinatorRecord(key, None, 0)                       # a tombstone
    offset, metadata, timestamp = draw(i64), draw(st.just("") | text), draw(i64)
    if draw(st.booleans()):     # version 1: an expire time, no leader epoch, topic id or tags
        return CoordinatorRecord(key, OffsetCommitValue(offset, -1, metadata, timestamp, draw(i64)), 1)
    # Version 4 has no expire time: a value built with one (a tool's) encodes without it.
    value = OffsetCommitValue(offset, draw(i32), metadata, timestamp, draw(st.just(-1) | i64), draw(uuids),
                              draw(st.just(()) | st.just(((7, b"x"),))))
    return CoordinatorRecord(key, value, 4)


records = st.lists(offset_records() | st.builds(lambda g: CoordinatorRecord(GroupMetadataKey(g), None, 0), text),
                   max_size=12)


@settings(deadline=None)
@given(records)
def test_the_same_bytes_as_each_record_encoded_alone(batch):
    encoded = encode_records(batch)
    assert encoded == [(encode_key(r.key), encode_value(r.value, r.value_version)) for r in batch]
    for r, (key, value) in zip(batch, encoded):
        decoded = decode_record(key, value)
        if r.value_version == 4:    # the one field version 4 lacks
            assert decoded.value.expire_timestamp == -1
            decoded = CoordinatorRecord(decoded.key, dataclasses.replace(
                decoded.value, expire_timestamp=r.value.expire_timestamp), 4)
        assert decoded == r


def test_a_value_out_of_range_fails_as_encode_value_fails():
    tid = uuid.uuid4()
    bad = CoordinatorRecord(offset_commit_key("g", "t", 0), OffsetCommitValue(2**63, -1, "", 1, -1, tid), 4)
    with pytest.raises(RecordEncodeError) as alone:
        encode_value(bad.value, 4)
    with pytest.raises(RecordEncodeError) as together:
        encode_records([bad])
    assert str(together.value) == str(alone.value)



@pytest.mark.parametrize("expire", [-1, 0, 123456789])
def test_a_null_metadata_encodes_or_fails_as_alone(expire):
    """A version-4 value with a null metadata (no commit makes one) gets the same bytes or the
    same refusal together as alone."""
    bad = CoordinatorRecord(offset_commit_key("g", "t", 0), OffsetCommitValue(1, -1, None, 1, expire, uuid.uuid4()), 4)
    try:
        alone: object = [(encode_key(bad.key), encode_value(bad.value, 4))]
    except RecordEncodeError as e:
        alone = str(e)
    try:
        together: object = encode_records([bad])
    except RecordEncodeError as e:
        together = str(e)
    assert together == alone


def test_runs_of_one_topic_id_and_alternating_ids_encode_their_own_ids():
    """The tags are looked up once per run of one topic id object: an id that changes back
    and forth, an equal id in another object and the zero id each encode as alone."""
    a, b = uuid.uuid4(), uuid.uuid4()
    ids = [a, a, b, a, ZERO_UUID, ZERO_UUID, uuid.UUID(int=a.int), b, b]
    batch = [CoordinatorRecord(offset_commit_key("g", "t", i), OffsetCommitValue(i, 0, "", 1, -1, tid), 4)
             for i, tid in enumerate(ids)]
    batch.insert(3, CoordinatorRecord(GroupMetadataKey("g"), None, 0))
    encoded = encode_records(batch)
    assert encoded == [(encode_key(r.key), encode_value(r.value, r.value_version)) for r in batch]
    assert [decode_record(k, v).value.topic_id for k, v in encoded if v is not None] == ids


def test_a_commit_value_under_any_key_encodes_as_alone():
    """The inline path reads the shared key's own bytes, and encodes any other key with
    `encode_key`: a key built by its class, a legacy key, a key of another type."""
    tid = uuid.uuid4()
    keys = [offset_commit_key("g", "t", 0), OffsetCommitKey("g", "t", 0), LegacyOffsetCommitKey("g", "t", 0),
            GroupMetadataKey("g")]
    batch = [CoordinatorRecord(k, OffsetCommitValue(3, 1, "", 9, -1, tid), 4) for k in keys]
    assert encode_records(batch) == [(encode_key(r.key), encode_value(r.value, 4)) for r in batch]
    with pytest.raises(RecordEncodeError) as alone:
        encode_key(b"not a key")
    with pytest.raises(RecordEncodeError) as together:
        encode_records([CoordinatorRecord(b"not a key", OffsetCommitValue(3), 4)])  # type: ignore[arg-type]
    assert str(together.value) == str(alone.value)
