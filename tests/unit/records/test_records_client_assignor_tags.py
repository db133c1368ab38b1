"""kcoord's client-assignor fields, tags >= 1000 on value types 5-8 (seed-drafts.md §1.6;
records/_client_assignor.py): they round-trip byte for byte, they are purely additive (the
same value without them encodes to Kafka's bytes, and Kafka's reader sees them only as
unknown tags), and mutated encodings decode or raise a decode error, nothing else."""
from __future__ import annotations

import dataclasses
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_records_fuzz import _mutate

from records import (
    DECODE_ERRORS,
    ClientAssignor,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    TopicPartitions,
    decode_record,
    encode_key,
    encode_value,
)
from records import _client_assignor as ca
from records._wire import FieldError

TID = uuid.UUID(int=7)
CASES = [
    (ConsumerGroupMemberMetadataKey("g", "A"),
     ConsumerGroupMemberMetadataValue(client_id="c", client_host="h", subscribed_topic_names=("foo",),
                                      rebalance_timeout_ms=300_000, client_assignors=(
                                          ClientAssignor("s", 0, 1, 1, 1, b"m"), ClientAssignor("t", 2, 5, 0, 3, b""))),
     {"client_assignors": ()}),
    (ConsumerGroupTargetAssignmentMetadataKey("g"),
     ConsumerGroupTargetAssignmentMetadataValue(3, 1_700_000_000_000, (), 7, "s"),
     {"assignment_error": 0, "client_assignor_name": None}),
    (ConsumerGroupTargetAssignmentMemberKey("g", "A"),
     ConsumerGroupTargetAssignmentMemberValue((TopicPartitions(TID, (0, 1), ()),), (), 1, b"x"),
     {"metadata_version": -1, "metadata_bytes": None}),
    (ConsumerGroupCurrentMemberAssignmentKey("g", "A"),
     ConsumerGroupCurrentMemberAssignmentValue(3, 2, 0, (TopicPartitions(TID, (0, 1), (3, 3)),), (), (), 7, 1, b""),
     {"error": 0, "metadata_version": -1, "metadata_bytes": None}),
]


def _kcoord_tags(value) -> list[tuple[int, bytes]]:
    """The tags >= 1000 kcoord writes for this value, as raw (tag, bytes) pairs."""
    if isinstance(value, ConsumerGroupMemberMetadataValue):
        return ca.encode_client_assignors(value.client_assignors)
    if isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        return ca.encode_target_metadata_tags(value.assignment_error, value.client_assignor_name)
    if isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        return ca.encode_metadata_tags(None, value.metadata_version, value.metadata_bytes)
    return ca.encode_metadata_tags(value.error, value.metadata_version, value.metadata_bytes)


@pytest.mark.parametrize("key,value,defaults", CASES, ids=lambda x: type(x).__name__)
def test_round_trip_and_additive(key, value, defaults):
    data = encode_value(value, 0)
    back = decode_record(encode_key(key), data, topic="t", partition=0, offset=0).value
    assert back == value
    assert encode_value(back, 0) == data
    tags = _kcoord_tags(value)
    assert tags and all(t >= 1000 for t, _ in tags)
    plain = dataclasses.replace(value, **defaults)
    kafka = encode_value(plain, 0)
    assert _kcoord_tags(plain) == [] and len(kafka) < len(data)
    # Kafka's view: the kcoord fields are unknown tags and the rest is unchanged. The plain
    # value carrying them as raw unknown tags encodes to exactly what kcoord wrote, and
    # decoding Kafka's bytes gives the plain value back.
    assert encode_value(dataclasses.replace(plain, unknown_tagged_fields=tuple(tags)), 0) == data
    assert decode_record(encode_key(key), kafka, topic="t", partition=0, offset=0).value == plain


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(CASES), st.data())
def test_mutated_tag_sections_decode_or_raise_a_decode_error(case, data):
    key, value, _ = case
    b = _mutate(data, encode_value(value, 0))
    try:
        decode_record(encode_key(key), b, topic="t", partition=0, offset=0)
    except DECODE_ERRORS:
        pass


def test_a_tag_whose_content_overruns_its_size_names_the_field():
    key, value, _ = CASES[2]
    data = bytearray(encode_value(value, 0))
    i = data.rindex(b"\xe8\x07")        # tag 1000 (uvarint), then its size 2: MetadataVersion int16
    assert data[i + 2] == 2
    data[i + 2] = 1                     # one byte short of an int16
    with pytest.raises(DECODE_ERRORS) as e:
        decode_record(encode_key(key), bytes(data), topic="t", partition=0, offset=0)
    assert "MetadataVersion" in str(e.value) or "tagged" in str(e.value)


SMALLEST = (ClientAssignor("", 0, 0, 0, 0, b""), ClientAssignor("", -1, -1, -1, -1, b""))


def test_the_smallest_entries_decode_in_both_records_that_carry_client_assignors():
    # MIN_ENTRY_SIZE is the size of an entry with an empty name and metadata: a larger bound
    # would refuse these, a smaller one lets a count claim more entries than the bytes hold.
    from records import connect_records as cr
    out = bytearray()
    ca.write_client_assignors(out, SMALLEST)
    assert len(out) == 1 + len(SMALLEST) * ca.MIN_ENTRY_SIZE
    member = ConsumerGroupMemberMetadataValue(client_id="c", client_host="h", client_assignors=SMALLEST)
    assert decode_record(encode_key(ConsumerGroupMemberMetadataKey("g", "A")), encode_value(member, 0),
                         topic="t", partition=0, offset=0).value.client_assignors == SMALLEST
    worker = cr.ConnectGroupMemberMetadataValue(
        "i", "c", "/h", 60_000, tuple(cr.ConnectAssignor(*dataclasses.astuple(a)) for a in SMALLEST))
    assert cr.decode_member_metadata(cr.encode_member_metadata(worker, 0)) == worker


def test_a_count_the_bytes_cannot_hold_is_refused_before_reading_the_entries():
    from records import connect_records as cr
    worker = cr.ConnectGroupMemberMetadataValue("i", "c", "/h", 60_000, (cr.ConnectAssignor("s", 0, 1, 0, 1, b""),))
    data = bytearray(cr.encode_member_metadata(worker, 0))
    i = data.index(b"\x02\x02s")        # the array's count (1 entry: compact 2), then the name "s"
    data[i] = 3                         # two entries claimed, bytes for one
    with pytest.raises(FieldError) as e:      # codec.py wraps it in a RecordDecodeError
        cr.decode_member_metadata(bytes(data))
    assert e.value.field == "Assignors" and "cannot fit" in e.value.reason
