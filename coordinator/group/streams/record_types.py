"""The streams group's `__consumer_offsets` records (types 17, 19-23), as Kafka 4.4 writes them,
and their bounded codec.

The classes are the ones generated from Kafka's jar (records/generated/, docs/design/messages.md):
the keys here only add the record type, which the kernel's `CoordinatorRecord` reads. records/
does not decode these types yet (they load as `UnknownRecord`, KIP-915); `decode` below is the
strict decoder records/ should use for them: a value that does not parse fails the load, as
Kafka's `CoordinatorLoaderImpl` fails on a record it cannot read.

Rules:
- value version 0 everywhere (Kafka 4.4 writes only v0 of these records); any other version
  is `UnknownRecordVersionError`;
- a tagged field equal to its default is not written (Kafka's writer omits it), and an
  active task's AssignmentEpochs is the only array written that may be absent (None).
"""
from __future__ import annotations

import struct
from typing import Any

from coordinator.protocol.codec import BodyError, decode_body, encode_body
from records import CoordinatorRecord, RecordDecodeError, UnknownRecordVersionError
from records.generated.streams_group_current_member_assignment.v0 import key as _cur_k
from records.generated.streams_group_current_member_assignment.v0 import value as _cur_v
from records.generated.streams_group_member_metadata.v0 import key as _mem_k
from records.generated.streams_group_member_metadata.v0 import value as _mem_v
from records.generated.streams_group_metadata.v0 import key as _grp_k
from records.generated.streams_group_metadata.v0 import value as _grp_v
from records.generated.streams_group_target_assignment_member.v0 import key as _tam_k
from records.generated.streams_group_target_assignment_member.v0 import value as _tam_v
from records.generated.streams_group_target_assignment_metadata.v0 import key as _tmd_k
from records.generated.streams_group_target_assignment_metadata.v0 import value as _tmd_v
from records.generated.streams_group_topology.v0 import key as _top_k
from records.generated.streams_group_topology.v0 import value as _top_v


class StreamsGroupMetadataKey(_grp_k.StreamsGroupMetadataKey):
    __slots__ = ()
    record_type = 17


class StreamsGroupMemberMetadataKey(_mem_k.StreamsGroupMemberMetadataKey):
    __slots__ = ()
    record_type = 19


class StreamsGroupTargetAssignmentMetadataKey(_tmd_k.StreamsGroupTargetAssignmentMetadataKey):
    __slots__ = ()
    record_type = 20


class StreamsGroupTargetAssignmentMemberKey(_tam_k.StreamsGroupTargetAssignmentMemberKey):
    __slots__ = ()
    record_type = 21


class StreamsGroupCurrentMemberAssignmentKey(_cur_k.StreamsGroupCurrentMemberAssignmentKey):
    __slots__ = ()
    record_type = 22


class StreamsGroupTopologyKey(_top_k.StreamsGroupTopologyKey):
    __slots__ = ()
    record_type = 23


StreamsGroupMetadataValue = _grp_v.StreamsGroupMetadataValue
LastAssignmentConfig = _grp_v.LastAssignmentConfig
StreamsGroupMemberMetadataValue = _mem_v.StreamsGroupMemberMetadataValue
Endpoint = _mem_v.Endpoint
KeyValue = _mem_v.KeyValue
StreamsGroupTargetAssignmentMetadataValue = _tmd_v.StreamsGroupTargetAssignmentMetadataValue
StreamsGroupTargetAssignmentMemberValue = _tam_v.StreamsGroupTargetAssignmentMemberValue
TargetTaskIds = _tam_v.TaskIds
StreamsGroupCurrentMemberAssignmentValue = _cur_v.StreamsGroupCurrentMemberAssignmentValue
CurrentTaskIds = _cur_v.TaskIds
StreamsGroupTopologyValue = _top_v.StreamsGroupTopologyValue
TopologySubtopology = _top_v.Subtopology
TopologyTopicInfo = _top_v.TopicInfo
TopologyTopicConfig = _top_v.TopicConfig
TopologyCopartitionGroup = _top_v.CopartitionGroup

# record type -> (key class, value class)
TYPES: dict[int, tuple[type, type]] = {
    17: (StreamsGroupMetadataKey, StreamsGroupMetadataValue),
    19: (StreamsGroupMemberMetadataKey, StreamsGroupMemberMetadataValue),
    20: (StreamsGroupTargetAssignmentMetadataKey, StreamsGroupTargetAssignmentMetadataValue),
    21: (StreamsGroupTargetAssignmentMemberKey, StreamsGroupTargetAssignmentMemberValue),
    22: (StreamsGroupCurrentMemberAssignmentKey, StreamsGroupCurrentMemberAssignmentValue),
    23: (StreamsGroupTopologyKey, StreamsGroupTopologyValue),
}
KEY_CLASSES = tuple(k for k, _ in TYPES.values())


def record(key: Any, value: Any) -> CoordinatorRecord:
    """A streams record (value None: its tombstone); every value is written at version 0."""
    return CoordinatorRecord(key, value, value_version=0)


def encode(rec: CoordinatorRecord) -> tuple[bytes, bytes | None]:
    """(key bytes, value bytes or None for a tombstone), framed as kafka-coordinator.md §2.1."""
    key = struct.pack(">h", rec.key.record_type) + encode_body(rec.key)
    if rec.value is None:
        return key, None
    return key, struct.pack(">h", 0) + encode_body(rec.value)


def decode(key: bytes, value: bytes | None) -> CoordinatorRecord:
    """The record of streams type `key` names; RecordDecodeError for bytes that do not parse
    (the load fails, as Kafka's does), UnknownRecordVersionError for a value version other than 0.
    Bytes after a struct are ignored, as Kafka ignores them."""
    if len(key) < 2:
        raise RecordDecodeError(None, "record key", "type", 0, "key shorter than its 2-byte type", part="key")
    rtype = struct.unpack_from(">h", key)[0]
    if rtype not in TYPES:
        raise ValueError(f"record type {rtype} is not a streams group record")
    key_cls, value_cls = TYPES[rtype]
    try:
        k = decode_body(key_cls, key, 2, exact=False)
    except BodyError as e:
        raise RecordDecodeError(rtype, key_cls.__name__, "key", 2, str(e), part="key") from None
    if value is None:
        return record(k, None)
    if len(value) < 2:
        raise RecordDecodeError(rtype, value_cls.__name__, "version", 0, "value shorter than its 2-byte version")
    version = struct.unpack_from(">h", value)[0]
    if version != 0:
        raise UnknownRecordVersionError(rtype, version)
    try:
        v = decode_body(value_cls, value, 2, exact=False)
    except BodyError as e:
        raise RecordDecodeError(rtype, value_cls.__name__, "value", 2, str(e), version=0) from None
    return record(k, v)
