"""Byte vectors worked out by hand from Kafka's schemas (kafka-coordinator.md §2).

Each vector is written field by field, with the field boundaries in comments;
none is produced by the encoder under test. Every vector is checked both ways:
decode(bytes) == expected object, and encode(object) == bytes.

Encodings used below:
  classic:  string = int16 len + UTF-8 (-1 = null); bytes = int32 len; array = int32 count
  flexible: string/bytes/array = uvarint (len + 1) (0 = null); struct ends with a tag
            section: uvarint count, then per field uvarint tag, uvarint size, data
"""

from __future__ import annotations

import re
import uuid

import pytest

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
    PartitionMetadata, TopicMetadata, TopicPartitions, UnknownRecord, ZERO_UUID, decode_key,
    decode_record, decode_value, encode_key, encode_value,
)


def hx(*parts: str) -> bytes:
    """Hex with spaces allowed; each part is usually one field."""
    return bytes.fromhex(re.sub(r"\s+", "", "".join(parts)))


U1 = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
U1_HEX = "00112233445566778899aabbccddeeff"
U2 = uuid.UUID("0f0e0d0c-0b0a-0908-0706-050403020100")
U2_HEX = "0f0e0d0c0b0a09080706050403020100"

# --- keys: int16 record type, then the key struct (classic encoding) ---------

KEYS = [
    (LegacyOffsetCommitKey("g", "t", 1),
     hx("0000",            # type 0
        "0001 67",         # group "g"
        "0001 74",         # topic "t"
        "00000001")),      # partition 1
    (OffsetCommitKey("g", "t", 0),
     hx("0001", "0001 67", "0001 74", "00000000")),
    (GroupMetadataKey("grp"),
     hx("0002", "0003 677270")),                         # group "grp"
    (ConsumerGroupMetadataKey("g"), hx("0003", "0001 67")),
    (ConsumerGroupPartitionMetadataKey("g"), hx("0004", "0001 67")),
    (ConsumerGroupMemberMetadataKey("g", "m"),
     hx("0005", "0001 67", "0001 6d")),                  # GroupId "g", MemberId "m"
    (ConsumerGroupTargetAssignmentMetadataKey("g"), hx("0006", "0001 67")),
    (ConsumerGroupTargetAssignmentMemberKey("g", "m"), hx("0007", "0001 67", "0001 6d")),
    (ConsumerGroupCurrentMemberAssignmentKey("g", "m"), hx("0008", "0001 67", "0001 6d")),
    (ConsumerGroupRegularExpressionKey("g", "t.*"),
     hx("0010",            # type 16
        "0001 67",         # GroupId "g"
        "0003 742e2a")),   # RegularExpression "t.*"
]


@pytest.mark.parametrize("key,data", KEYS, ids=[type(k).__name__ for k, _ in KEYS])
def test_key_vectors(key, data):
    assert encode_key(key) == data
    assert decode_key(data) == key
    assert hash(decode_key(data)) == hash(key)


# --- values: int16 version, then the value struct ----------------------------

# (record type, version, value, bytes)
VALUES = [
    ("legacy-v0", 0, 0, LegacyOffsetCommitValue(offset=5, metadata="m", commit_timestamp=1000),
     hx("0000",                   # version 0
        "0000000000000005",       # offset 5
        "0001 6d",                # metadata "m"
        "00000000000003e8")),     # commitTimestamp 1000
    ("offset-v0", 1, 0, OffsetCommitValue(offset=10, metadata="", commit_timestamp=1000),
     hx("0000", "000000000000000a",  # offset 10
        "0000",                      # metadata ""
        "00000000000003e8")),        # commitTimestamp
    ("offset-v1-expire", 1, 1,
     OffsetCommitValue(offset=10, metadata="", commit_timestamp=1000, expire_timestamp=2000),
     hx("0001", "000000000000000a", "0000", "00000000000003e8",
        "00000000000007d0")),        # expireTimestamp 2000 (v1 only)
    ("offset-v2", 1, 2, OffsetCommitValue(offset=10, metadata="x", commit_timestamp=1000),
     hx("0002", "000000000000000a", "0001 78", "00000000000003e8")),
    ("offset-v3", 1, 3,
     OffsetCommitValue(offset=10, leader_epoch=3, metadata="", commit_timestamp=1000),
     hx("0003", "000000000000000a",
        "00000003",                  # leaderEpoch 3 (v3+)
        "0000", "00000000000003e8")),
    ("offset-v4-no-topic-id", 1, 4,
     OffsetCommitValue(offset=10, leader_epoch=3, metadata="", commit_timestamp=1000),
     hx("0004", "000000000000000a", "00000003",
        "01",                        # metadata "" (compact: len + 1)
        "00000000000003e8",
        "00")),                      # no tagged fields (zero topicId is the default)
    ("offset-v4-topic-id", 1, 4,
     OffsetCommitValue(offset=10, leader_epoch=3, metadata="hi", commit_timestamp=1000,
                       topic_id=U1),
     hx("0004", "000000000000000a", "00000003",
        "03 6869",                   # metadata "hi"
        "00000000000003e8",
        "01",                        # 1 tagged field
        "00 10", U1_HEX)),           # tag 0 topicId, size 16, uuid
    ("group-v0", 2, 0,
     GroupMetadataValue("consumer", 1, "range", "m", members=(
         MemberMetadata("m", None, "c", "h", -1, 100, b"\x01\x02", b""),)),
     hx("0000",
        "0008 636f6e73756d6572",     # protocolType "consumer"
        "00000001",                  # generation 1
        "0005 72616e6765",           # protocol "range"
        "0001 6d",                   # leader "m"
        "00000001",                  # members: 1
        "0001 6d", "0001 63", "0001 68",  # memberId, clientId, clientHost
        "00000064",                  # sessionTimeout 100
        "00000002 0102",             # subscription
        "00000000")),                # assignment (empty)
    ("group-v1", 2, 1,
     GroupMetadataValue("consumer", 1, "range", "m", members=(
         MemberMetadata("m", None, "c", "h", 300, 100, b"\x01\x02", b""),)),
     hx("0001", "0008 636f6e73756d6572", "00000001", "0005 72616e6765", "0001 6d",
        "00000001", "0001 6d", "0001 63", "0001 68",
        "0000012c",                  # rebalanceTimeout 300 (v1+)
        "00000064", "00000002 0102", "00000000")),
    ("group-v2", 2, 2,
     GroupMetadataValue("consumer", 1, "range", "m", 16, members=(
         MemberMetadata("m", None, "c", "h", 300, 100, b"\x01\x02", b""),)),
     hx("0002", "0008 636f6e73756d6572", "00000001", "0005 72616e6765", "0001 6d",
        "0000000000000010",          # currentStateTimestamp 16 (v2+)
        "00000001", "0001 6d", "0001 63", "0001 68", "0000012c", "00000064",
        "00000002 0102", "00000000")),
    ("group-v3", 2, 3,
     GroupMetadataValue("consumer", 1, "range", "m", 16, members=(
         MemberMetadata("m", "i", "c", "h", 300, 100, b"\x01\x02", b""),)),
     hx("0003", "0008 636f6e73756d6572", "00000001", "0005 72616e6765", "0001 6d",
        "0000000000000010", "00000001",
        "0001 6d",                   # memberId
        "0001 69",                   # groupInstanceId "i" (v3+)
        "0001 63", "0001 68", "0000012c", "00000064", "00000002 0102", "00000000")),
    ("group-v3-new-empty", 2, 3,
     # newEmptyGroupMetadataRecord: protocolType "", generation 0, protocol/leader null
     GroupMetadataValue("", 0, None, None, -1, ()),
     hx("0003", "0000", "00000000",
        "ffff", "ffff",              # protocol null, leader null
        "ffffffffffffffff",          # currentStateTimestamp -1
        "00000000")),                # no members
    ("group-v4", 2, 4,
     GroupMetadataValue("consumer", 1, "range", "m", 16, members=(
         MemberMetadata("m", "i", "c", "h", 300, 100, b"\x01\x02", b""),)),
     hx("0004",
        "09 636f6e73756d6572",       # compact protocolType
        "00000001", "06 72616e6765", "02 6d", "0000000000000010",
        "02",                        # members: 1 (compact)
        "02 6d", "02 69", "02 63", "02 68", "0000012c", "00000064",
        "03 0102",                   # subscription (compact bytes)
        "01",                        # assignment: empty
        "00",                        # member tag section
        "00")),                      # value tag section
    ("cg-metadata", 3, 0, ConsumerGroupMetadataValue(epoch=5),
     hx("0000", "00000005",          # Epoch 5
        "00")),                      # MetadataHash 0 is the default: omitted
    ("cg-metadata-hash", 3, 0,
     ConsumerGroupMetadataValue(epoch=5, metadata_hash=0x0102030405060708),
     hx("0000", "00000005",
        "01 00 08 0102030405060708")),  # 1 tag: tag 0, size 8, MetadataHash
    ("cg-partition-metadata", 4, 0,
     ConsumerGroupPartitionMetadataValue((
         TopicMetadata(U1, "t", 2, (PartitionMetadata(0, ("r1",)),)),)),
     hx("0000",
        "02",                        # Topics: 1
        U1_HEX,                      # TopicId
        "02 74",                     # TopicName "t"
        "00000002",                  # NumPartitions 2
        "02",                        # PartitionMetadata: 1
        "00000000",                  # Partition 0
        "02 03 7231",                # Racks: ["r1"]
        "00",                        # PartitionMetadata tags
        "00",                        # TopicMetadata tags
        "00")),                      # value tags
    ("cg-member-consumer-protocol", 5, 0,
     ConsumerGroupMemberMetadataValue(
         instance_id=None, rack_id="r", client_id="c", client_host="h",
         subscribed_topic_names=("a", "b"), subscribed_topic_regex=None,
         rebalance_timeout_ms=5000, server_assignor="uniform", classic_member_metadata=None),
     hx("0000",
        "00",                        # InstanceId null
        "02 72",                     # RackId "r"
        "02 63", "02 68",            # ClientId, ClientHost
        "03 0261 0262",              # SubscribedTopicNames ["a", "b"]
        "00",                        # SubscribedTopicRegex null
        "00001388",                  # RebalanceTimeoutMs 5000
        "08 756e69666f726d",         # ServerAssignor "uniform"
        "01 00 01 00")),             # 1 tag: tag 0 size 1, ClassicMemberMetadata = null
    ("cg-member-classic-protocol", 5, 0,
     ConsumerGroupMemberMetadataValue(
         rack_id="r", client_id="c", client_host="h", subscribed_topic_names=("a", "b"),
         rebalance_timeout_ms=5000, server_assignor="uniform",
         classic_member_metadata=ClassicMemberMetadata(
             45000, (ClassicProtocol("range", b"\x00\x01"),))),
     hx("0000", "00", "02 72", "02 63", "02 68", "03 0261 0262", "00", "00001388",
        "08 756e69666f726d",
        "01",                        # 1 tag
        "00 11",                     # tag 0, size 17 = struct (16) + presence (1)
        "01",                        # presence: non-null
        "0000afc8",                  # SessionTimeoutMs 45000
        "02",                        # SupportedProtocols: 1
        "06 72616e6765",             # Name "range"
        "03 0001",                   # Metadata 00 01
        "00",                        # ClassicProtocol tags
        "00")),                      # ClassicMemberMetadata tags
    ("cg-member-classic-tag-absent", 5, 0,
     # No tag 0 at all: Kafka reads the empty struct (a classic member, no protocols).
     ConsumerGroupMemberMetadataValue(
         rack_id="r", client_id="c", client_host="h", subscribed_topic_names=("a", "b"),
         rebalance_timeout_ms=5000, server_assignor="uniform",
         classic_member_metadata=ClassicMemberMetadata(0, ())),
     hx("0000", "00", "02 72", "02 63", "02 68", "03 0261 0262", "00", "00001388",
        "08 756e69666f726d",
        "00")),                      # no tagged fields
    ("cg-target-metadata", 6, 0, ConsumerGroupTargetAssignmentMetadataValue(7),
     hx("0000", "00000007",          # AssignmentEpoch 7
        "00")),                      # AssignmentTimestamp 0: omitted
    ("cg-target-metadata-ts", 6, 0,
     ConsumerGroupTargetAssignmentMetadataValue(7, 0x0000019A2B3C4D5E),
     hx("0000", "00000007",
        "01 00 08 0000019a2b3c4d5e")),  # tag 0, size 8, AssignmentTimestamp
    ("cg-target-member", 7, 0,
     ConsumerGroupTargetAssignmentMemberValue((TopicPartitions(U1, (0, 2)),)),
     hx("0000",
        "02",                        # TopicPartitions: 1
        U1_HEX,                      # TopicId
        "03 00000000 00000002",      # Partitions [0, 2]
        "00",                        # TopicPartition tags
        "00")),                      # value tags
    ("cg-current-assignment-epochs", 8, 0,
     ConsumerGroupCurrentMemberAssignmentValue(
         5, 4, 1, (TopicPartitions(U1, (0, 1), (3, 5)),), (TopicPartitions(U2, (7,), None),)),
     hx("0000",
        "00000005",                  # MemberEpoch 5
        "00000004",                  # PreviousMemberEpoch 4
        "01",                        # State 1 (UNREVOKED_PARTITIONS)
        "02",                        # AssignedPartitions: 1
        U1_HEX, "03 00000000 00000001",   # TopicId, Partitions [0, 1]
        "01 00 09",                  # 1 tag: tag 0, size 9
        "03 00000003 00000005",      # AssignmentEpochs [3, 5]
        "02",                        # PartitionsPendingRevocation: 1
        U2_HEX, "02 00000007",       # TopicId, Partitions [7]
        "01 00 01 00",               # tag 0, size 1: AssignmentEpochs = null
        "00")),                      # value tags
    ("cg-current-assignment-epochs-absent", 8, 0,
     # Written by Kafka <= 4.2: no AssignmentEpochs tag; reads as [] (not None).
     ConsumerGroupCurrentMemberAssignmentValue(5, 4, 0, (TopicPartitions(U1, (0, 1), ()),), ()),
     hx("0000", "00000005", "00000004", "00",
        "02", U1_HEX, "03 00000000 00000001",
        "00",                        # no tags
        "01",                        # PartitionsPendingRevocation: empty
        "00")),
    ("cg-regex", 16, 0, ConsumerGroupRegularExpressionValue(("t1",), 42, 1000),
     hx("0000",
        "02 03 7431",                # Topics ["t1"]
        "000000000000002a",          # Version 42
        "00000000000003e8",          # Timestamp 1000
        "00")),
]


@pytest.mark.parametrize("record_type,version,value,data", [v[1:] for v in VALUES],
                         ids=[v[0] for v in VALUES])
def test_value_vectors(record_type, version, value, data):
    assert decode_value(record_type, data) == (value, version)
    assert encode_value(value, version) == data


def test_default_versions_are_what_kafka_writes():
    # GroupCoordinatorRecordHelpers: offsets v4 (v1 with an expire timestamp), groups v3.
    assert encode_value(OffsetCommitValue(offset=10, leader_epoch=3, commit_timestamp=1000)) \
        == hx("0004", "000000000000000a", "00000003", "01", "00000000000003e8", "00")
    assert encode_value(OffsetCommitValue(offset=10, commit_timestamp=1000,
                                          expire_timestamp=2000))[:2] == hx("0001")
    assert encode_value(GroupMetadataValue())[:2] == hx("0003")
    assert encode_value(ConsumerGroupMetadataValue())[:2] == hx("0000")


def test_member_metadata_null_classic_is_written_explicitly_by_default():
    value = ConsumerGroupMemberMetadataValue(client_id="c", client_host="h")
    assert encode_value(value).endswith(hx("ffffffff", "00", "01 00 01 00"))


def test_classic_tag_absent_round_trips_to_the_same_bytes():
    data = VALUES[[v[0] for v in VALUES].index("cg-member-classic-tag-absent")][4]
    value, version = decode_value(5, data)
    assert value.classic_member_metadata == ClassicMemberMetadata(0, ())
    assert encode_value(value, version) == data


def test_assignment_epochs_absent_round_trips_to_the_same_bytes():
    data = VALUES[[v[0] for v in VALUES].index("cg-current-assignment-epochs-absent")][4]
    value, _ = decode_value(8, data)
    assert value.assigned_partitions[0].assignment_epochs == ()
    assert encode_value(value) == data


def test_unknown_tagged_fields_survive_at_every_level():
    cases = [
        # OffsetCommitValue v4: topicId (tag 0) then unknown tag 5 = ab cd
        (1, hx("0004", "000000000000000a", "ffffffff", "01", "00000000000003e8",
               "02", "00 10", U1_HEX, "05 02 abcd"),
         lambda v: (v.topic_id, v.unknown_tagged_fields) == (U1, ((5, b"\xab\xcd"),))),
        # ConsumerGroupMetadataValue: unknown tag 1 before nothing known
        (3, hx("0000", "00000001", "01", "01 03 010203"),
         lambda v: v.metadata_hash == 0 and v.unknown_tagged_fields == ((1, b"\x01\x02\x03"),)),
        # GroupMetadataValue v4: unknown tag 7 inside the member struct
        (2, hx("0004", "01", "00000000", "00", "00", "ffffffffffffffff",
               "02", "02 6d", "00", "02 63", "02 68", "0000012c", "00000064", "01", "01",
               "01 07 01 ff",          # member tags: tag 7, size 1, ff
               "00"),
         lambda v: v.members[0].unknown_tagged_fields == ((7, b"\xff"),)),
        # ClassicProtocol inside ClassicMemberMetadata: unknown tag 3
        (5, hx("0000", "00", "00", "02 63", "02 68", "01", "00", "ffffffff", "00",
               "01", "00 13", "01", "00000010", "02", "06 72616e6765", "01",
               "01 03 02 beef",        # ClassicProtocol tags: tag 3, size 2
               "00"),
         lambda v: v.classic_member_metadata.supported_protocols[0].unknown_tagged_fields
         == ((3, b"\xbe\xef"),)),
        # TopicPartitions: AssignmentEpochs (tag 0) followed by unknown tag 2
        (8, hx("0000", "00000001", "00000000", "00", "02", U1_HEX, "02 00000003",
               "02", "00 05 02 00000001", "02 01 00", "01", "00"),
         lambda v: (v.assigned_partitions[0].assignment_epochs,
                    v.assigned_partitions[0].unknown_tagged_fields) == ((1,), ((2, b"\x00"),))),
    ]
    for record_type, data, check in cases:
        value, version = decode_value(record_type, data)
        assert check(value), value
        assert encode_value(value, version) == data


def test_tombstones():
    key = hx("0001", "0001 67", "0001 74", "00000000")
    assert decode_record(key, None) == CoordinatorRecord(OffsetCommitKey("g", "t", 0), None, 0)
    assert encode_value(None) is None
    for k, data in KEYS:
        record = decode_record(data, None)
        assert record.key == k and record.value is None


@pytest.mark.parametrize("record_type", [9, 10, 15, 18, 24, 1005, -1])   # 1000-1004: connect; 17, 19-23: streams
def test_unknown_record_types_decode_to_unknown_record(record_type):
    key = (record_type & 0xFFFF).to_bytes(2, "big") + hx("0001 67")
    value = hx("0000 01 00")
    assert decode_record(key, value) == UnknownRecord(record_type, key, value)
    assert decode_record(key, None) == UnknownRecord(record_type, key, None)


def test_zero_uuid_is_the_none_default():
    assert ZERO_UUID == uuid.UUID(int=0)
    assert OffsetCommitValue().topic_id == ZERO_UUID
