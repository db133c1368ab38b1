"""Keys and values of `__consumer_offsets`, named and ordered as Kafka's schemas.

Source: `group-coordinator/src/main/resources/common/message/*.json` (trunk,
see docs/../kafka-coordinator.md §2.3). Field defaults are Kafka's defaults,
so a field absent from an older version decodes to the value Kafka would give.

Conventions:
- Keys are frozen and hashable (they are compaction keys). Values are mutable.
- Arrays are tuples; topic ids are `uuid.UUID`, the zero UUID meaning "none".
- Every struct of a flexible version carries `unknown_tagged_fields`: the
  (tag, raw bytes) pairs this codec does not know, written back unchanged
  (KIP-915: new fields in these records are only ever added as tagged fields).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import ClassVar

from records.types import RecordType

ZERO_UUID = uuid.UUID(int=0)
TaggedFields = tuple[tuple[int, bytes], ...]


# --- type 0 / 1: offset commits ---------------------------------------------

@dataclass(frozen=True, slots=True)
class LegacyOffsetCommitKey:
    record_type: ClassVar[int] = RecordType.LEGACY_OFFSET_COMMIT
    group: str
    topic: str
    partition: int


@dataclass(slots=True)
class LegacyOffsetCommitValue:
    """Read only: Kafka replays type 0 as an OffsetCommitKey/Value pair."""
    record_type: ClassVar[int] = RecordType.LEGACY_OFFSET_COMMIT
    offset: int = 0
    metadata: str = ""
    commit_timestamp: int = 0


class _EncodedKey:
    """A slot for the key's own bytes, outside the dataclass's fields (not compared, hashed,
    shown or copied): `records.codec.offset_commit_key` fills it on the keys it shares, so
    encoding one of those is an attribute read. A key is frozen, so its bytes cannot go
    stale; a key built any other way leaves the slot empty and is encoded as before."""
    __slots__ = ("encoded",)
    encoded: bytes


@dataclass(frozen=True, slots=True)
class OffsetCommitKey(_EncodedKey):
    record_type: ClassVar[int] = RecordType.OFFSET_COMMIT
    group: str
    topic: str
    partition: int


@dataclass(slots=True)
class OffsetCommitValue:
    """Versions 0-4; flexible from 4.

    leader_epoch exists from v3, expire_timestamp only in v1, topic_id (tagged,
    tag 0) from v4. All are "ignorable": Kafka drops them silently when the
    chosen version lacks them, and so does `encode_value`.
    """
    record_type: ClassVar[int] = RecordType.OFFSET_COMMIT
    offset: int = 0
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = 0
    expire_timestamp: int = -1
    topic_id: uuid.UUID = ZERO_UUID
    unknown_tagged_fields: TaggedFields = ()


# --- type 2: classic group metadata -----------------------------------------

@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    record_type: ClassVar[int] = RecordType.GROUP_METADATA
    group: str


@dataclass(slots=True)
class MemberMetadata:
    """rebalance_timeout from v1, group_instance_id from v3 (both ignorable)."""
    member_id: str = ""
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout: int = -1
    session_timeout: int = 0
    subscription: bytes = b""
    assignment: bytes = b""
    unknown_tagged_fields: TaggedFields = ()


@dataclass(slots=True)
class GroupMetadataValue:
    """Versions 0-4, flexible from 4; Kafka writes 3. current_state_timestamp from v2."""
    record_type: ClassVar[int] = RecordType.GROUP_METADATA
    protocol_type: str = ""
    generation: int = 0
    protocol: str | None = None
    leader: str | None = None
    current_state_timestamp: int = -1
    members: tuple[MemberMetadata, ...] = ()
    unknown_tagged_fields: TaggedFields = ()


# --- type 3: consumer group metadata ----------------------------------------

@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataKey:
    record_type: ClassVar[int] = RecordType.CONSUMER_GROUP_METADATA
    group_id: str


@dataclass(slots=True)
class ConsumerGroupMetadataValue:
    """metadata_hash: tagged (tag 0), KIP-1101 (4.1); omitted when 0."""
    record_type: ClassVar[int] = RecordType.CONSUMER_GROUP_METADATA
    epoch: int = 0
    metadata_hash: int = 0
    unknown_tagged_fields: TaggedFields = ()


# --- type 4: consumer group partition metadata (tombstone-only since 4.1) ---

@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataKey:
    record_type: ClassVar[int] = RecordType.CONSUMER_GROUP_PARTITION_METADATA
    group_id: str


@dataclass(slots=True)
class PartitionMetadata:
    partition: int = 0
    racks: tuple[str, ...] = ()
    unknown_tagged_fields: TaggedFields = ()


@dataclass(slots=True)
class TopicMetadata:
    topic_id: uuid.UUID = ZERO_UUID
    topic_name: str = ""
    num_partitions: int = 0
    partition_metadata: tuple[PartitionMetadata, ...] = ()
    unknown_tagged_fields: TaggedFields = ()


@dataclass(slots=True)
class ConsumerGroupPartitionMetadataValue:
    record_type: ClassVar[int] = RecordType.CONSUMER_GROUP_PARTITION_METADATA
    topics: tuple[TopicMetadata, ...] = ()
    unknown_tagged_fields: TaggedFields = ()


# --- type 5: consumer group member metadata ---------------------------------

@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataKey:
    record_type: ClassVar[int] = RecordType.CONSUMER_GROUP_MEMBER_METADATA
    group_id: str
    member_id: str


@dataclass(slots=True)
class ClassicProtocol:
    name: str = ""
    metadata: bytes = b""
    unknown_tagged_fields: TaggedFields = ()


@dataclass(slots=True)
class ClassicMemberMetadata:
    session_timeout_ms: int = 0
    supported_protocols: tuple[ClassicProtocol, ...] = ()
    unknown_tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class ClientAssignor:
    """kcoord's tag 1000 of type 5 (client-side assignors, docs/design/client-assignors-spec.md §6).
    Kafka never shipped it: Kafka reads the tag as unknown and ignores it."""
    name: str = ""
    minimum_version: int = 0
    maximum_version: int = 0
    reason: int = 0
    version: int = 0
    metadata: bytes = b""
    unknown_tagged_fields: TaggedFields = ()


@dataclass(slots=True)
class ConsumerGroupMemberMetadataValue:
    """classic_member_metadata (tagged, tag 0, nullable):

    - None: a consumer-protocol member. Written explicitly as null (`00 01 00`),
      as Kafka does; this is also the constructor default here.
    - ClassicMemberMetadata(...): a classic-protocol member (KIP-848 migration).
    - An ABSENT tag decodes to the empty `ClassicMemberMetadata()` (which Kafka
      reads as a classic member), and the empty struct is omitted on encode,
      exactly as Kafka's generated code does, so bytes round-trip unchanged.
    """
    record_type: ClassVar[int] = RecordType.CONSUMER_GROUP_MEMBER_METADATA
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic_member_metadata: ClassicMemberMetadata | None = None
    unknown_tagged_fields: TaggedFields = ()
    # kcoord tag 1000 (docs/design/client-assignors-spec.md): empty = absent, as every group without client assignors.
    client_assignors: tuple[ClientAssignor, ...] = ()


# --- type 6: target assignment metadata -------------------------------------

@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    record_type: ClassVar[int] = RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA
    group_id: str


@dataclass(slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    """assignment_timestamp: tagged (tag 0), KIP-1263 (4.3); omitted when 0."""
    record_type: ClassVar[int] = RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA
    assignment_epoch: int = 0
    assignment_timestamp: int = 0
    unknown_tagged_fields: TaggedFields = ()
    # kcoord tags 1000/1001 (docs/design/client-assignors-spec.md): the assigner's Error, and the client assignor that
    # computed this target (None: the server assignor did). Defaults are omitted.
    assignment_error: int = 0
    client_assignor_name: str | None = None


# --- types 7 / 8: assignments ------------------------------------------------

@dataclass(slots=True)
class TopicPartitions:
    """Partitions of one topic inside an assignment.

    assignment_epochs (type 8 only; tagged tag 0, nullable; KIP-1251, 4.3) is
    aligned index by index with partitions. None is written explicitly as null
    (`00 01 00`); an absent tag decodes to () and () is omitted on encode, as in
    Kafka. Type 7 (Kafka's `TopicPartition`) has no such field: encoding a
    type-7 value whose entries carry epochs is an error.
    """
    topic_id: uuid.UUID = ZERO_UUID
    partitions: tuple[int, ...] = ()
    assignment_epochs: tuple[int, ...] | None = ()
    unknown_tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberKey:
    record_type: ClassVar[int] = RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER
    group_id: str
    member_id: str


@dataclass(slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    record_type: ClassVar[int] = RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER
    topic_partitions: tuple[TopicPartitions, ...] = ()
    unknown_tagged_fields: TaggedFields = ()
    # kcoord tags 1000/1001 (docs/design/client-assignors-spec.md): the client assignor's metadata for this member.
    metadata_version: int = -1
    metadata_bytes: bytes | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    record_type: ClassVar[int] = RecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT
    group_id: str
    member_id: str


@dataclass(slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    """state: MemberState byte (0 STABLE, 1 UNREVOKED_PARTITIONS, 2 UNRELEASED_PARTITIONS)."""
    record_type: ClassVar[int] = RecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = 0
    assigned_partitions: tuple[TopicPartitions, ...] = ()
    partitions_pending_revocation: tuple[TopicPartitions, ...] = ()
    unknown_tagged_fields: TaggedFields = ()
    # kcoord tags 1000-1002 (docs/design/client-assignors-spec.md): the Assignment.Error and metadata of the target
    # this member reached, as its heartbeat hands them out.
    error: int = 0
    metadata_version: int = -1
    metadata_bytes: bytes | None = None


# --- type 16: resolved regular expression -----------------------------------

@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionKey:
    record_type: ClassVar[int] = RecordType.CONSUMER_GROUP_REGULAR_EXPRESSION
    group_id: str
    regular_expression: str


@dataclass(slots=True)
class ConsumerGroupRegularExpressionValue:
    """version: metadata image version (offset); timestamp: resolution start time."""
    record_type: ClassVar[int] = RecordType.CONSUMER_GROUP_REGULAR_EXPRESSION
    topics: tuple[str, ...] = ()
    version: int = 0
    timestamp: int = 0
    unknown_tagged_fields: TaggedFields = ()
