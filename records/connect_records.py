"""Records of the `connect` group type (docs/design/connect-groups-spec.md §3): types 1000-1004.

Rules of this module:
- These are kcoord-private record types, in the block docs/design/client-assignors-spec.md §0 allocates
  (1000+, far above Kafka 4.3's 0-23). Kafka, and a kcoord older than this module, decode
  them to `UnknownRecord` and skip them (KIP-915), so a log moved to Kafka loads, and
  `kcoord offsets downgrade-check` should report them (Kafka never deletes them).
- Keys are version 0, classic encoding, like Kafka's group keys: int16 type, then strings.
- Values are version 0, flexible from 0 (compact strings, tagged fields). Every struct
  keeps the tagged fields it does not know and writes them back (KIP-915: later fields
  are added as tags only).
- The layout mirrors Kafka's consumer-group types 3 and 5-8, the seed's own layout
  (001:L607-700) being one record for the whole target and consumer fields in the member
  record (docs/design/connect-groups-spec.md §3 says why neither is kept).
- A *unit* is a connector (task -1, Connect's `CONNECTOR_TASK`) or one of its tasks.
  Units are stored per connector: `ConnectorUnits(connector, tasks, epochs)`, the shape
  of Kafka's TopicPartitions with KIP-1251 AssignmentEpochs (`epochs` empty in targets).
- Decoding is bounded like the rest of records/ (records/_wire.py) and raises only
  FieldError/TrailingBytes, which codec.py turns into RecordDecodeError with context.

codec.py registers these types from `KEY_LAYOUTS`, `VALUE_DECODERS` and `VALUE_ENCODERS`.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from records._classic import check_end
from records._client_assignor import read_client_assignors, write_client_assignors
from records._wire import (
    LOW_LEVEL,
    FieldError,
    Malformed,
    array_len,
    cbytes,
    cnstring,
    cstring,
    int32_array,
    pack_h,
    pack_i,
    pack_q,
    reason_of,
    unknown_tags,
    unpack_b,
    unpack_h,
    unpack_i,
    unpack_q,
    w_array_len,
    w_cbytes,
    w_cnstring,
    w_cstring,
    w_int32s,
    w_tags,
)

TaggedFields = tuple[tuple[int, bytes], ...]

CONNECT_GROUP_METADATA = 1000
CONNECT_GROUP_MEMBER_METADATA = 1001
CONNECT_GROUP_TARGET_ASSIGNMENT_METADATA = 1002
CONNECT_GROUP_TARGET_ASSIGNMENT_MEMBER = 1003
CONNECT_GROUP_CURRENT_MEMBER_ASSIGNMENT = 1004
CONNECT_RECORD_TYPES = frozenset(range(1000, 1005))
CONNECTOR_TASK = -1     # Connect's own encoding of "the connector itself" (ConnectorTaskId)


# --- keys ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ConnectGroupMetadataKey:
    record_type: ClassVar[int] = CONNECT_GROUP_METADATA
    group_id: str


@dataclass(frozen=True, slots=True)
class ConnectGroupMemberMetadataKey:
    record_type: ClassVar[int] = CONNECT_GROUP_MEMBER_METADATA
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConnectGroupTargetAssignmentMetadataKey:
    record_type: ClassVar[int] = CONNECT_GROUP_TARGET_ASSIGNMENT_METADATA
    group_id: str


@dataclass(frozen=True, slots=True)
class ConnectGroupTargetAssignmentMemberKey:
    record_type: ClassVar[int] = CONNECT_GROUP_TARGET_ASSIGNMENT_MEMBER
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConnectGroupCurrentMemberAssignmentKey:
    record_type: ClassVar[int] = CONNECT_GROUP_CURRENT_MEMBER_ASSIGNMENT
    group_id: str
    member_id: str


# --- values -------------------------------------------------------------------------
@dataclass(slots=True)
class ConnectGroupMetadataValue:
    record_type: ClassVar[int] = CONNECT_GROUP_METADATA
    epoch: int = 0
    unknown_tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class ConnectAssignor:
    """One entry of a worker's ClientAssignors (001:L282-297; int16 versions, int8 reason)."""
    name: str
    minimum_version: int
    maximum_version: int
    reason: int
    version: int
    metadata: bytes
    unknown_tagged_fields: TaggedFields = ()


@dataclass(slots=True)
class ConnectGroupMemberMetadataValue:
    record_type: ClassVar[int] = CONNECT_GROUP_MEMBER_METADATA
    instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    assignors: tuple[ConnectAssignor, ...] = ()
    unknown_tagged_fields: TaggedFields = ()


@dataclass(slots=True)
class ConnectGroupTargetAssignmentMetadataValue:
    record_type: ClassVar[int] = CONNECT_GROUP_TARGET_ASSIGNMENT_METADATA
    assignment_epoch: int = 0
    assignment_error: int = 0
    assignor_name: str | None = None
    assignment_timestamp: int = 0
    unknown_tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class ConnectorUnits:
    """A connector's units: `tasks` holds -1 for the connector itself; `epochs`, when not
    empty, the epoch each unit was assigned at (aligned with `tasks`)."""
    connector: str
    tasks: tuple[int, ...] = ()
    epochs: tuple[int, ...] = ()
    unknown_tagged_fields: TaggedFields = ()


@dataclass(slots=True)
class ConnectGroupTargetAssignmentMemberValue:
    record_type: ClassVar[int] = CONNECT_GROUP_TARGET_ASSIGNMENT_MEMBER
    units: tuple[ConnectorUnits, ...] = ()
    version: int = -1
    metadata: bytes = b""
    unknown_tagged_fields: TaggedFields = ()


@dataclass(slots=True)
class ConnectGroupCurrentMemberAssignmentValue:
    record_type: ClassVar[int] = CONNECT_GROUP_CURRENT_MEMBER_ASSIGNMENT
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = 0
    error: int = 0
    assigned: tuple[ConnectorUnits, ...] = ()
    pending_revocation: tuple[ConnectorUnits, ...] = ()
    version: int = -1
    metadata: bytes = b""
    unknown_tagged_fields: TaggedFields = ()


# --- decoding helpers -----------------------------------------------------------------
class _Reader:
    """Walks one value, remembering the field being read for the error message."""

    __slots__ = ("b", "pos", "field")

    def __init__(self, b: bytes) -> None:
        self.b, self.pos, self.field = b, 2, ""

    def at(self, field: str) -> _Reader:
        self.field = field
        return self

    def i8(self) -> int:
        v = unpack_b(self.b, self.pos)[0]
        self.pos += 1
        return v

    def i16(self) -> int:
        v = unpack_h(self.b, self.pos)[0]
        self.pos += 2
        return v

    def i32(self) -> int:
        v = unpack_i(self.b, self.pos)[0]
        self.pos += 4
        return v

    def i64(self) -> int:
        v = unpack_q(self.b, self.pos)[0]
        self.pos += 8
        return v

    def string(self) -> str:
        v, self.pos = cstring(self.b, self.pos)
        return v

    def nstring(self) -> str | None:
        v, self.pos = cnstring(self.b, self.pos)
        return v

    def bytes_(self) -> bytes:
        v, self.pos = cbytes(self.b, self.pos)
        return v

    def int32s(self) -> tuple[int, ...]:
        v, self.pos = int32_array(self.b, self.pos, True)
        return v

    def count(self, min_item: int) -> int:
        n, self.pos = array_len(self.b, self.pos, True, min_item)
        return n

    def tags(self) -> TaggedFields:
        v, self.pos = unknown_tags(self.b, self.pos)
        return v


def _decode(b: bytes, body: Callable[[_Reader], Any]) -> Any:
    r = _Reader(b)
    try:
        value = body(r)
    except LOW_LEVEL as e:
        raise FieldError(r.field, r.pos, reason_of(e, b)) from None
    check_end(b, r.pos)
    return value


def _units(r: _Reader, name: str) -> tuple[ConnectorUnits, ...]:
    # Each entry takes at least 4 bytes: its name, two arrays and a tag section.
    out = []
    for i in range(r.at(name).count(4)):
        where = f"{name}[{i}]"
        connector = r.at(f"{where}.Connector").string()
        tasks = r.at(f"{where}.Tasks").int32s()
        epochs = r.at(f"{where}.AssignmentEpochs").int32s()
        if epochs and len(epochs) != len(tasks):
            raise Malformed(f"{len(epochs)} assignment epochs for {len(tasks)} tasks")
        out.append(ConnectorUnits(connector, tasks, epochs, r.at(f"{where}.(tagged fields)").tags()))
    return tuple(out)


def _w_units(out: bytearray, units: tuple[ConnectorUnits, ...]) -> None:
    w_array_len(out, len(units), True)
    for u in units:
        w_cstring(out, u.connector)
        w_array_len(out, len(u.tasks), True)
        w_int32s(out, u.tasks)
        w_array_len(out, len(u.epochs), True)
        w_int32s(out, u.epochs)
        w_tags(out, [], u.unknown_tagged_fields)


# --- 1000 -------------------------------------------------------------------------------
def decode_group_metadata(b: bytes) -> ConnectGroupMetadataValue:
    return _decode(b, lambda r: ConnectGroupMetadataValue(r.at("Epoch").i32(), r.at("(tagged fields)").tags()))


def encode_group_metadata(v: ConnectGroupMetadataValue, version: int) -> bytes:
    out = bytearray(b"\x00\x00")
    out += pack_i(v.epoch)
    w_tags(out, [], v.unknown_tagged_fields)
    return bytes(out)


# --- 1001 -------------------------------------------------------------------------------
def _member_metadata(r: _Reader) -> ConnectGroupMemberMetadataValue:
    instance_id = r.at("InstanceId").nstring()
    client_id = r.at("ClientId").string()
    client_host = r.at("ClientHost").string()
    timeout = r.at("RebalanceTimeoutMs").i32()
    # The consumer records' ClientAssignors codec (records/_client_assignor.py): same entry layout.
    assignors, r.pos = read_client_assignors(r.b, r.pos, "Assignors", ConnectAssignor)
    return ConnectGroupMemberMetadataValue(instance_id, client_id, client_host, timeout, assignors,
                                           r.at("(tagged fields)").tags())


def decode_member_metadata(b: bytes) -> ConnectGroupMemberMetadataValue:
    return _decode(b, _member_metadata)


def encode_member_metadata(v: ConnectGroupMemberMetadataValue, version: int) -> bytes:
    out = bytearray(b"\x00\x00")
    w_cnstring(out, v.instance_id)
    w_cstring(out, v.client_id)
    w_cstring(out, v.client_host)
    out += pack_i(v.rebalance_timeout_ms)
    write_client_assignors(out, v.assignors)
    w_tags(out, [], v.unknown_tagged_fields)
    return bytes(out)


# --- 1002 -------------------------------------------------------------------------------
def decode_target_metadata(b: bytes) -> ConnectGroupTargetAssignmentMetadataValue:
    return _decode(b, lambda r: ConnectGroupTargetAssignmentMetadataValue(
        r.at("AssignmentEpoch").i32(), r.at("AssignmentError").i8(), r.at("AssignorName").nstring(),
        r.at("AssignmentTimestamp").i64(), r.at("(tagged fields)").tags()))


def encode_target_metadata(v: ConnectGroupTargetAssignmentMetadataValue, version: int) -> bytes:
    out = bytearray(b"\x00\x00")
    out += pack_i(v.assignment_epoch)
    out.append(v.assignment_error & 0xFF)
    w_cnstring(out, v.assignor_name)
    out += pack_q(v.assignment_timestamp)
    w_tags(out, [], v.unknown_tagged_fields)
    return bytes(out)


# --- 1003 -------------------------------------------------------------------------------
def decode_target_member(b: bytes) -> ConnectGroupTargetAssignmentMemberValue:
    return _decode(b, lambda r: ConnectGroupTargetAssignmentMemberValue(
        _units(r, "Units"), r.at("Version").i16(), r.at("Metadata").bytes_(), r.at("(tagged fields)").tags()))


def encode_target_member(v: ConnectGroupTargetAssignmentMemberValue, version: int) -> bytes:
    out = bytearray(b"\x00\x00")
    _w_units(out, v.units)
    out += pack_h(v.version)
    w_cbytes(out, v.metadata)
    w_tags(out, [], v.unknown_tagged_fields)
    return bytes(out)


# --- 1004 -------------------------------------------------------------------------------
def decode_current_assignment(b: bytes) -> ConnectGroupCurrentMemberAssignmentValue:
    return _decode(b, lambda r: ConnectGroupCurrentMemberAssignmentValue(
        r.at("MemberEpoch").i32(), r.at("PreviousMemberEpoch").i32(), r.at("State").i8(), r.at("Error").i8(),
        _units(r, "Assigned"), _units(r, "PendingRevocation"), r.at("Version").i16(), r.at("Metadata").bytes_(),
        r.at("(tagged fields)").tags()))


def encode_current_assignment(v: ConnectGroupCurrentMemberAssignmentValue, version: int) -> bytes:
    out = bytearray(b"\x00\x00")
    out += pack_i(v.member_epoch) + pack_i(v.previous_member_epoch)
    out.append(v.state & 0xFF)
    out.append(v.error & 0xFF)
    _w_units(out, v.assigned)
    _w_units(out, v.pending_revocation)
    out += pack_h(v.version)
    w_cbytes(out, v.metadata)
    w_tags(out, [], v.unknown_tagged_fields)
    return bytes(out)


# --- registration (read by codec.py) ------------------------------------------------------
KEY_LAYOUTS: dict[int, tuple[type, tuple[str, ...], str]] = {
    1000: (ConnectGroupMetadataKey, ("GroupId",), "s"),
    1001: (ConnectGroupMemberMetadataKey, ("GroupId", "MemberId"), "ss"),
    1002: (ConnectGroupTargetAssignmentMetadataKey, ("GroupId",), "s"),
    1003: (ConnectGroupTargetAssignmentMemberKey, ("GroupId", "MemberId"), "ss"),
    1004: (ConnectGroupCurrentMemberAssignmentKey, ("GroupId", "MemberId"), "ss"),
}
VALUE_DECODERS: dict[int, dict[int, Callable[[bytes], Any]]] = {
    1000: {0: decode_group_metadata},
    1001: {0: decode_member_metadata},
    1002: {0: decode_target_metadata},
    1003: {0: decode_target_member},
    1004: {0: decode_current_assignment},
}
VALUE_ENCODERS: dict[type, tuple[Callable[[Any, int], bytes], range]] = {
    ConnectGroupMetadataValue: (encode_group_metadata, range(0, 1)),
    ConnectGroupMemberMetadataValue: (encode_member_metadata, range(0, 1)),
    ConnectGroupTargetAssignmentMetadataValue: (encode_target_metadata, range(0, 1)),
    ConnectGroupTargetAssignmentMemberValue: (encode_target_member, range(0, 1)),
    ConnectGroupCurrentMemberAssignmentValue: (encode_current_assignment, range(0, 1)),
}
