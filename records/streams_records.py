"""Records of the streams group type (KIP-1071): types 17 and 19-23, as Kafka 4.4 writes them.

Rules of this module:
- The classes are the ones generated from Kafka 4.4's jar (records/generated/,
  docs/design/messages.md); the keys and the top-level values here only add the record type,
  which `CoordinatorRecord` and codec.py read. Nested structs are the generated ones.
- Type 18 (StreamsGroupPartitionMetadata) was removed by KIP-1101 and stays unknown
  (`UnknownRecord`, skipped as KIP-915 asks).
- Keys are version 0, classic encoding (int16 type, then strings), like every group key.
- Values are version 0, flexible (Kafka 4.4 writes only v0 of these records); another
  version is `UnknownRecordVersionError` and a value that does not parse is
  `RecordDecodeError`: both fail the load, as Kafka's `CoordinatorLoaderImpl` fails on a
  record it cannot read (only an unknown *type* is skipped).
- Decoding is bounded (records/_generated_reader.py); bytes after the struct are ignored,
  counted and logged as for every record (records/_trailing.py). Encoding is kio's writer,
  which omits a tagged field equal to its default, as Kafka's writer does.

codec.py registers these types from `KEY_LAYOUTS`, `VALUE_DECODERS` and `VALUE_ENCODERS`.
"""
from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from kio.serial import entity_writer

from records._classic import check_end
from records._generated_reader import struct_reader
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
from records.types import RecordType

# The ids are RecordType's (records/types.py), named here for the classes below and their users.
STREAMS_GROUP_METADATA = RecordType.STREAMS_GROUP_METADATA
STREAMS_GROUP_MEMBER_METADATA = RecordType.STREAMS_GROUP_MEMBER_METADATA
STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA = RecordType.STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA
STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER = RecordType.STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER
STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT = RecordType.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT
STREAMS_GROUP_TOPOLOGY = RecordType.STREAMS_GROUP_TOPOLOGY
STREAMS_RECORD_TYPES = frozenset({17, 19, 20, 21, 22, 23})


# --- keys -------------------------------------------------------------------------------
class StreamsGroupMetadataKey(_grp_k.StreamsGroupMetadataKey):
    __slots__ = ()
    record_type = STREAMS_GROUP_METADATA


class StreamsGroupMemberMetadataKey(_mem_k.StreamsGroupMemberMetadataKey):
    __slots__ = ()
    record_type = STREAMS_GROUP_MEMBER_METADATA


class StreamsGroupTargetAssignmentMetadataKey(_tmd_k.StreamsGroupTargetAssignmentMetadataKey):
    __slots__ = ()
    record_type = STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA


class StreamsGroupTargetAssignmentMemberKey(_tam_k.StreamsGroupTargetAssignmentMemberKey):
    __slots__ = ()
    record_type = STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER


class StreamsGroupCurrentMemberAssignmentKey(_cur_k.StreamsGroupCurrentMemberAssignmentKey):
    __slots__ = ()
    record_type = STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT


class StreamsGroupTopologyKey(_top_k.StreamsGroupTopologyKey):
    __slots__ = ()
    record_type = STREAMS_GROUP_TOPOLOGY


# --- values -----------------------------------------------------------------------------
class StreamsGroupMetadataValue(_grp_v.StreamsGroupMetadataValue):
    __slots__ = ()
    record_type = STREAMS_GROUP_METADATA


class StreamsGroupMemberMetadataValue(_mem_v.StreamsGroupMemberMetadataValue):
    __slots__ = ()
    record_type = STREAMS_GROUP_MEMBER_METADATA


class StreamsGroupTargetAssignmentMetadataValue(_tmd_v.StreamsGroupTargetAssignmentMetadataValue):
    __slots__ = ()
    record_type = STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA


class StreamsGroupTargetAssignmentMemberValue(_tam_v.StreamsGroupTargetAssignmentMemberValue):
    __slots__ = ()
    record_type = STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER


class StreamsGroupCurrentMemberAssignmentValue(_cur_v.StreamsGroupCurrentMemberAssignmentValue):
    __slots__ = ()
    record_type = STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT


class StreamsGroupTopologyValue(_top_v.StreamsGroupTopologyValue):
    __slots__ = ()
    record_type = STREAMS_GROUP_TOPOLOGY


# The nested structs, under the names the streams group core uses.
LastAssignmentConfig = _grp_v.LastAssignmentConfig
Endpoint = _mem_v.Endpoint
KeyValue = _mem_v.KeyValue
TargetTaskIds = _tam_v.TaskIds
CurrentTaskIds = _cur_v.TaskIds
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


# --- codec ------------------------------------------------------------------------------
def _value_decoder(cls: type) -> Callable[[bytes], Any]:
    read = struct_reader(cls)

    def decode(b: bytes) -> Any:
        value, pos = read(b, 2)          # after the 2-byte version
        check_end(b, pos)
        return value
    return decode


def _encode_value(value: Any, version: int) -> bytes:
    out = io.BytesIO()
    out.write(b"\x00\x00")
    entity_writer(type(value))(out, value)
    return out.getvalue()


# --- registration (read by codec.py) ------------------------------------------------------
_GROUP_KEY = (("GroupId",), "s")
_MEMBER_KEY = (("GroupId", "MemberId"), "ss")
KEY_LAYOUTS: dict[int, tuple[type, tuple[str, ...], str]] = {
    rtype: (key_cls, *(_GROUP_KEY if rtype in (17, 20, 23) else _MEMBER_KEY))
    for rtype, (key_cls, _) in TYPES.items()
}
VALUE_DECODERS: dict[int, dict[int, Callable[[bytes], Any]]] = {
    rtype: {0: _value_decoder(value_cls)} for rtype, (_, value_cls) in TYPES.items()
}
VALUE_ENCODERS: dict[type, tuple[Callable[[Any, int], bytes], range]] = {
    value_cls: (_encode_value, range(0, 1)) for _, value_cls in TYPES.values()
}
