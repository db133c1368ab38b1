"""Bad input: unknown versions, malformed bytes, values that cannot be encoded."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from records import (
    ConsumerGroupTargetAssignmentMemberValue, CoordinatorRecord, GroupMetadataKey,
    GroupMetadataValue, OffsetCommitKey, OffsetCommitValue, RecordDecodeError, RecordEncodeError,
    TopicPartitions, UnknownRecord, UnknownRecordTypeError, UnknownRecordVersionError,
    decode_key, decode_record, decode_value, encode_key, encode_record, encode_value,
)
from records.schemas import ZERO_UUID

from test_records_vectors import KEYS, VALUES, hx

OFFSET_KEY = hx("0001", "0001 67", "0001 74", "00000000")


def test_unknown_value_version_names_type_version_and_location():
    value = hx("0005", "000000000000000a", "00000003", "01", "00000000000003e8", "00")
    with pytest.raises(UnknownRecordVersionError) as err:
        decode_record(OFFSET_KEY, value, topic="__consumer_offsets", partition=7, offset=1234)
    message = str(err.value)
    for part in ("version 5", "record type 1", "OFFSET_COMMIT", "__consumer_offsets",
                 "partition 7", "offset 1234"):
        assert part in message
    assert (err.value.record_type, err.value.version, err.value.offset) == (1, 5, 1234)


@pytest.mark.parametrize("record_type,key,version", [
    (5, hx("0005", "0001 67", "0001 6d"), 1),
    (2, hx("0002", "0001 67"), 5),
    (0, hx("0000", "0001 67", "0001 74", "00000000"), 1),
    (16, hx("0010", "0001 67", "0001 67"), -1),
])
def test_unknown_value_version_for_each_type(record_type, key, version):
    with pytest.raises(UnknownRecordVersionError) as err:
        decode_record(key, version.to_bytes(2, "big", signed=True) + b"\x00" * 8)
    assert f"version {version}" in str(err.value)
    assert f"record type {record_type}" in str(err.value)
    assert "at " not in str(err.value)  # no location was given


def test_truncated_value_names_type_field_and_position():
    value = hx("0004", "000000000000000a", "00000003", "03 6869", "00000000000003e8", "00")
    with pytest.raises(RecordDecodeError) as err:
        decode_record(OFFSET_KEY, value[:16], topic="__consumer_offsets", partition=1,
                      offset=42)
    e = err.value
    assert (e.record_type, e.field, e.position, e.version) == (1, "metadata", 14, 4)
    assert "OffsetCommitValue" in str(e) and "offset 42" in str(e) and "byte 14" in str(e)


def test_nested_field_path_in_error():
    # ConsumerGroupCurrentMemberAssignmentValue whose first TopicPartitions claims 5 partitions
    # but holds one.
    value = hx("0000", "00000001", "00000000", "00", "02", "00" * 16, "06 00000001", "00", "01",
               "00")
    with pytest.raises(RecordDecodeError) as err:
        decode_value(8, value)
    assert err.value.field == "AssignedPartitions[0].Partitions"
    assert err.value.position == 28


def test_tagged_field_size_mismatch_is_an_error():
    # MetadataHash declared with size 4 instead of 8
    with pytest.raises(RecordDecodeError, match="MetadataHash"):
        decode_value(3, hx("0000", "00000005", "01 00 04 01020304"))
    # topicId declared with size 17 (one extra byte)
    value = hx("0004", "000000000000000a", "00000003", "01", "00000000000003e8",
               "01", "00 11", "00" * 17)
    with pytest.raises(RecordDecodeError, match="topicId"):
        decode_value(1, value)


@pytest.mark.parametrize("data,field", [
    (hx("0004", "000000000000000a", "00000003", "00", "00000000000003e8", "00"), "metadata"),
    (hx("0003", "000000000000000a", "00000003", "ffff", "00000000000003e8"), "metadata"),
    (hx("0003", "000000000000000a", "00000003", "0001 ff", "00000000000003e8"), "metadata"),
    (hx("0004", "000000000000000a", "00000003", "01", "00000000000003e8", "ffffffffff7f"),
     "(tagged fields)"),
])
def test_malformed_offset_commit_values(data, field):
    with pytest.raises(RecordDecodeError) as err:
        decode_value(1, data)
    assert err.value.field == field


def test_huge_array_count_is_rejected_before_allocation():
    value = hx("0000", "ffffffff0f")  # Topics: 2**32 - 2 elements in a 7-byte value
    with pytest.raises(RecordDecodeError, match="cannot fit"):
        decode_value(4, value)


def test_every_truncation_of_every_vector_is_a_decode_error():
    for _, data in KEYS:
        for cut in range(len(data)):
            if cut < 2:
                continue  # shorter than the type prefix; see test_short_keys
            with pytest.raises(RecordDecodeError) as err:
                decode_key(data[:cut])
            assert err.value.part == "key"
    for _, record_type, _, _, data in VALUES:
        for cut in range(len(data)):
            with pytest.raises(RecordDecodeError):
                decode_value(record_type, data[:cut])


def test_short_keys_and_values():
    with pytest.raises(RecordDecodeError, match="2-byte record type"):
        decode_record(b"\x00", None)
    with pytest.raises(RecordDecodeError, match="no key"):
        decode_record(None, b"\x00\x00")
    with pytest.raises(RecordDecodeError, match="2-byte version"):
        decode_record(OFFSET_KEY, b"\x00")


@settings(max_examples=400, deadline=None)
@given(st.sampled_from([k for _, k in KEYS]), st.sampled_from([v[4] for v in VALUES]),
       st.data())
def test_fuzzed_bytes_never_leak_low_level_exceptions(key, value, data):
    # Flip, insert or drop bytes anywhere; only the codec's own errors may come out.
    def mutate(b: bytes) -> bytes:
        b = bytearray(b)
        for _ in range(data.draw(st.integers(1, 3))):
            op = data.draw(st.sampled_from(["flip", "insert", "drop"]))
            i = data.draw(st.integers(0, max(len(b) - 1, 0)))
            if op == "flip" and b:
                b[i] = data.draw(st.integers(0, 255))
            elif op == "insert":
                b.insert(i, data.draw(st.integers(0, 255)))
            elif b:
                del b[i]
        return bytes(b)
    try:
        result = decode_record(mutate(key), mutate(value))
    except (RecordDecodeError, UnknownRecordVersionError):
        return
    assert isinstance(result, (CoordinatorRecord, UnknownRecord))


def test_decode_key_and_value_reject_unknown_types():
    with pytest.raises(UnknownRecordTypeError):
        decode_key(hx("000b", "0001 67"))
    with pytest.raises(UnknownRecordTypeError):
        decode_value(11, hx("0000"))


def test_encode_errors():
    with pytest.raises(RecordEncodeError, match="no version 5"):
        encode_value(OffsetCommitValue(), 5)
    with pytest.raises(RecordEncodeError, match="not flexible"):
        encode_value(OffsetCommitValue(unknown_tagged_fields=((1, b""),)), 3)
    with pytest.raises(RecordEncodeError, match="AssignmentEpochs"):
        encode_value(ConsumerGroupTargetAssignmentMemberValue(
            (TopicPartitions(ZERO_UUID, (1,), (1,)),)))
    with pytest.raises(RecordEncodeError, match="exceeds"):
        encode_key(GroupMetadataKey("x" * 40000))
    with pytest.raises(RecordEncodeError, match="not a record value"):
        encode_value(object())
    with pytest.raises(RecordEncodeError, match="not a record key"):
        encode_key(object())
    with pytest.raises(RecordEncodeError, match="collides"):
        encode_value(OffsetCommitValue(topic_id=uuid.UUID(int=1),
                                       unknown_tagged_fields=((0, b"x"),)))
    with pytest.raises(RecordEncodeError, match="OffsetCommitKey"):
        encode_key(OffsetCommitKey("g", "t", 2**31))
    with pytest.raises(RecordEncodeError, match="OffsetCommitValue version 4"):
        encode_value(OffsetCommitValue(offset=2**63))
    with pytest.raises(RecordEncodeError, match="GroupMetadataValue version 3"):
        encode_value(GroupMetadataValue(generation="1"))
    with pytest.raises(RecordEncodeError, match="cannot carry"):
        encode_record(CoordinatorRecord(OffsetCommitKey("g", "t", 0), GroupMetadataValue()))


def test_fields_a_version_lacks_are_dropped_like_kafka_ignorable_fields():
    value = OffsetCommitValue(offset=1, leader_epoch=5, commit_timestamp=2, expire_timestamp=3)
    decoded, _ = decode_value(1, encode_value(value, 0))
    assert (decoded.leader_epoch, decoded.expire_timestamp) == (-1, -1)
    assert decode_value(2, encode_value(GroupMetadataValue(current_state_timestamp=9), 1))[0] \
        .current_state_timestamp == -1
