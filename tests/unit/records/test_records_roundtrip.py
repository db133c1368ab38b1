"""Round-trip properties over every record type and value version (hypothesis).

- decode(encode(x)) == x for values valid at the version (fields the version
  lacks keep their defaults), including unknown tagged fields at every level;
- encode(decode(b)) == b for those bytes;
- decode_record recovers keys and values from encoded records.
"""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from records import _classic
from records import (
    ClassicMemberMetadata, ClassicProtocol, ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue, ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue, ConsumerGroupMetadataKey, ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey, ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey, ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue,
    CoordinatorRecord, GroupMetadataKey, GroupMetadataValue, LegacyOffsetCommitKey,
    LegacyOffsetCommitValue, MemberMetadata, OffsetCommitKey, OffsetCommitValue,
    PartitionMetadata, TopicMetadata, TopicPartitions, ZERO_UUID, decode_key, decode_record,
    decode_value, encode_key, encode_value, latest_value_version,
)

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
ntext = st.none() | text
blob = st.binary(max_size=12)
i8 = st.integers(-(2**7), 2**7 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
uuids = st.just(ZERO_UUID) | st.uuids()
small = {"max_size": 4}


def tags(min_tag: int = 0, known: range = range(0)):
    """Unknown tagged fields as Kafka writes them: unique tags, ascending. `known`: tags the
    type does know (kcoord's client-assignor tags >= 1000 on types 5-8), never drawn."""
    tag = st.integers(min_tag, 20000).filter(lambda t: t not in known)
    return st.lists(st.tuples(tag, st.binary(max_size=6)), max_size=3,
                    unique_by=lambda t: t[0]).map(lambda xs: tuple(sorted(xs)))


KCOORD_TAGS = range(1000, 1010)   # records/_client_assignor.py


def tuples(strategy):
    return st.lists(strategy, **small).map(tuple)


# --- keys ----------------------------------------------------------------------

keys = st.one_of(
    st.builds(LegacyOffsetCommitKey, text, text, i32),
    st.builds(OffsetCommitKey, text, text, i32),
    st.builds(GroupMetadataKey, text),
    st.builds(ConsumerGroupMetadataKey, text),
    st.builds(ConsumerGroupPartitionMetadataKey, text),
    st.builds(ConsumerGroupMemberMetadataKey, text, text),
    st.builds(ConsumerGroupTargetAssignmentMetadataKey, text),
    st.builds(ConsumerGroupTargetAssignmentMemberKey, text, text),
    st.builds(ConsumerGroupCurrentMemberAssignmentKey, text, text),
    st.builds(ConsumerGroupRegularExpressionKey, text, text),
)


@settings(deadline=None)
@given(keys)
def test_keys_round_trip(key):
    data = encode_key(key)
    assert data[:2] == key.record_type.to_bytes(2, "big")
    assert decode_key(data) == key
    assert {decode_key(data): 1}[key] == 1  # hashable, equal hash


# --- values, per version -------------------------------------------------------

@st.composite
def offset_commit_values(draw, version: int):
    return OffsetCommitValue(
        offset=draw(i64),
        leader_epoch=draw(i32) if version >= 3 else -1,
        metadata=draw(text),
        commit_timestamp=draw(i64),
        expire_timestamp=draw(i64) if version == 1 else -1,
        topic_id=draw(uuids) if version >= 4 else ZERO_UUID,
        unknown_tagged_fields=draw(tags(1)) if version >= 4 else ())


@st.composite
def group_metadata_values(draw, version: int):
    flexible = version >= 4

    def member():
        return st.builds(
            MemberMetadata, text, ntext if version >= 3 else st.none(), text, text,
            i32 if version >= 1 else st.just(-1), i32, blob, blob,
            tags() if flexible else st.just(()))
    return GroupMetadataValue(
        draw(text), draw(i32), draw(ntext), draw(ntext), draw(i64) if version >= 2 else -1,
        draw(tuples(member())), draw(tags()) if flexible else ())


classic_members = st.builds(
    ClassicMemberMetadata, i32, tuples(st.builds(ClassicProtocol, text, blob, tags())), tags())

member_metadata_values = st.builds(
    ConsumerGroupMemberMetadataValue, ntext, ntext, text, text, tuples(text), ntext, i32, ntext,
    st.none() | classic_members, tags(1, KCOORD_TAGS))

topic_partitions_with_epochs = st.builds(
    TopicPartitions, uuids, tuples(i32), st.none() | tuples(i32), tags(1))
topic_partitions_no_epochs = st.builds(TopicPartitions, uuids, tuples(i32), st.just(()), tags())

VALUE_STRATEGIES = {
    (0, 0): st.builds(LegacyOffsetCommitValue, i64, text, i64),
    **{(1, v): offset_commit_values(v) for v in range(5)},
    **{(2, v): group_metadata_values(v) for v in range(5)},
    (3, 0): st.builds(ConsumerGroupMetadataValue, i32, i64, tags(1)),
    (4, 0): st.builds(ConsumerGroupPartitionMetadataValue, tuples(st.builds(
        TopicMetadata, uuids, text, i32,
        tuples(st.builds(PartitionMetadata, i32, tuples(text), tags())), tags())), tags()),
    (5, 0): member_metadata_values,
    (6, 0): st.builds(ConsumerGroupTargetAssignmentMetadataValue, i32, i64, tags(1, KCOORD_TAGS)),
    (7, 0): st.builds(ConsumerGroupTargetAssignmentMemberValue,
                      tuples(topic_partitions_no_epochs), tags(known=KCOORD_TAGS)),
    (8, 0): st.builds(ConsumerGroupCurrentMemberAssignmentValue, i32, i32, i8,
                      tuples(topic_partitions_with_epochs), tuples(topic_partitions_with_epochs),
                      tags(known=KCOORD_TAGS)),
    (16, 0): st.builds(ConsumerGroupRegularExpressionValue, tuples(text), i64, i64, tags()),
}

typed_values = st.sampled_from(sorted(VALUE_STRATEGIES)).flatmap(
    lambda tv: st.tuples(st.just(tv[0]), st.just(tv[1]), VALUE_STRATEGIES[tv]))


@settings(max_examples=600, deadline=None)
@given(typed_values)
def test_values_round_trip_every_type_and_version(typed):
    record_type, version, value = typed
    data = encode_value(value, version)
    assert data[:2] == version.to_bytes(2, "big")
    decoded, decoded_version = decode_value(record_type, data)
    assert decoded_version == version
    assert decoded == value
    assert encode_value(decoded, version) == data


@settings(max_examples=300, deadline=None)
@given(keys, st.data())
def test_records_round_trip_through_decode_record(key, data):
    versions = [v for (t, v) in VALUE_STRATEGIES if t == key.record_type]
    version = data.draw(st.sampled_from(versions))
    value = data.draw(VALUE_STRATEGIES[(key.record_type, version)])
    record = decode_record(encode_key(key), encode_value(value, version), topic="t",
                           partition=0, offset=1)
    assert record == CoordinatorRecord(key, value, version)


@settings(deadline=None)
@given(st.builds(OffsetCommitValue, i64, i32, st.just("") | text, i64, st.just(-1), uuids))
def test_offset_commit_fast_paths_agree_with_the_generic_codec(value):
    data = encode_value(value, 4)                       # fast path when metadata == ""
    assert data == _classic.encode_offset_commit(value, 4)  # the generic encoder
    key = encode_key(OffsetCommitKey("g", "t", 0))
    assert decode_record(key, data).value == value      # fast decoder
    # An unknown tag sends the decoder down the generic path.
    tagged = OffsetCommitValue(value.offset, value.leader_epoch, value.metadata,
                               value.commit_timestamp, -1, value.topic_id, ((9, b""),))
    assert decode_record(key, encode_value(tagged, 4)).value == tagged


def test_classic_member_metadata_empty_struct_is_omitted_like_an_absent_tag():
    value = ConsumerGroupMemberMetadataValue(classic_member_metadata=ClassicMemberMetadata())
    data = encode_value(value)
    assert data.endswith(b"\x00\x00")  # null ServerAssignor, then an empty tag section
    assert decode_value(5, data)[0].classic_member_metadata == ClassicMemberMetadata()


def test_latest_value_version():
    assert latest_value_version(OffsetCommitValue()) == 4
    assert latest_value_version(OffsetCommitValue(expire_timestamp=5)) == 1
    assert latest_value_version(GroupMetadataValue()) == 3
    assert latest_value_version(LegacyOffsetCommitValue()) == 0
    for (record_type, version) in VALUE_STRATEGIES:
        if record_type >= 3:
            assert version == 0
    record = CoordinatorRecord(OffsetCommitKey("g", "t", 0), OffsetCommitValue())
    assert record.value_version == 4
    assert CoordinatorRecord(GroupMetadataKey("g"), None).value_version == 0


def test_memoryview_and_bytearray_inputs_decode():
    key = encode_key(OffsetCommitKey("g", "t", 3))
    value = encode_value(OffsetCommitValue(offset=1, topic_id=uuid.UUID(int=5)))
    expected = decode_record(key, value)
    assert decode_record(memoryview(key), bytearray(value)) == expected


def test_keys_are_frozen_and_values_are_slotted():
    import dataclasses
    key = OffsetCommitKey("g", "t", 0)
    try:
        key.partition = 1
    except dataclasses.FrozenInstanceError:
        pass
    else:
        raise AssertionError("keys must be frozen")
    value_classes = [LegacyOffsetCommitValue, OffsetCommitValue, GroupMetadataValue,
                     MemberMetadata, ConsumerGroupMetadataValue,
                     ConsumerGroupPartitionMetadataValue, TopicMetadata, PartitionMetadata,
                     ConsumerGroupMemberMetadataValue, ClassicMemberMetadata, ClassicProtocol,
                     ConsumerGroupTargetAssignmentMetadataValue,
                     ConsumerGroupTargetAssignmentMemberValue,
                     ConsumerGroupCurrentMemberAssignmentValue, TopicPartitions,
                     ConsumerGroupRegularExpressionValue]
    for cls in value_classes:
        assert "__slots__" in vars(cls) and not hasattr(cls(), "__dict__")
