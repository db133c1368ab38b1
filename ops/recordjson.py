"""`__consumer_offsets` keys and values as plain JSON-able dicts, and back.

Dumps (JSON lines and Avro) carry decoded records so people can read them; reading a
dump back rebuilds the very dataclasses `records/` decodes, which re-encode to the
same bytes (the codec round-trips unknown tagged fields), so a dump replays exactly
like the log it came from.

Conventions: field names are the dataclass names (snake_case); UUIDs are strings;
bytes are base64 strings in JSON (raw bytes in Avro, see `ops.avro`); unknown tagged
fields are lists of {"tag": n, "data": bytes}. The streams group records (17, 19-23) are
the classes generated from Kafka's jar (records/streams_records.py): their kio integer
types are integers and a `timedelta_i32` is its milliseconds.
"""
from __future__ import annotations

import base64
import dataclasses
import datetime
import functools
import sys
import types
import typing
import uuid
from typing import Any

from records import RecordType
from records import connect_records as CR
from records import schemas as S
from records import streams_records as SR
from records.group_config_records import GROUP_CONFIG
from records.partitioner_records import PARTITIONER_MARKER

# Record type id -> (key class, value class).
RECORD_CLASSES: dict[int, tuple[type, type]] = {
    RecordType.LEGACY_OFFSET_COMMIT: (S.LegacyOffsetCommitKey, S.LegacyOffsetCommitValue),
    RecordType.OFFSET_COMMIT: (S.OffsetCommitKey, S.OffsetCommitValue),
    RecordType.GROUP_METADATA: (S.GroupMetadataKey, S.GroupMetadataValue),
    RecordType.CONSUMER_GROUP_METADATA: (S.ConsumerGroupMetadataKey, S.ConsumerGroupMetadataValue),
    RecordType.CONSUMER_GROUP_PARTITION_METADATA: (S.ConsumerGroupPartitionMetadataKey,
                                                   S.ConsumerGroupPartitionMetadataValue),
    RecordType.CONSUMER_GROUP_MEMBER_METADATA: (S.ConsumerGroupMemberMetadataKey,
                                                S.ConsumerGroupMemberMetadataValue),
    RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: (
        S.ConsumerGroupTargetAssignmentMetadataKey, S.ConsumerGroupTargetAssignmentMetadataValue),
    RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: (
        S.ConsumerGroupTargetAssignmentMemberKey, S.ConsumerGroupTargetAssignmentMemberValue),
    RecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: (
        S.ConsumerGroupCurrentMemberAssignmentKey, S.ConsumerGroupCurrentMemberAssignmentValue),
    RecordType.CONSUMER_GROUP_REGULAR_EXPRESSION: (S.ConsumerGroupRegularExpressionKey,
                                                   S.ConsumerGroupRegularExpressionValue),
    # Kafka 4.4's streams group types (KIP-1071).
    **{rtype: classes for rtype, classes in SR.TYPES.items()},
    # kcoord's private connect-group types (docs/design/connect-groups-spec.md): decoded like the
    # others, not as unknown.
    CR.CONNECT_GROUP_METADATA: (CR.ConnectGroupMetadataKey, CR.ConnectGroupMetadataValue),
    CR.CONNECT_GROUP_MEMBER_METADATA: (CR.ConnectGroupMemberMetadataKey, CR.ConnectGroupMemberMetadataValue),
    CR.CONNECT_GROUP_TARGET_ASSIGNMENT_METADATA: (CR.ConnectGroupTargetAssignmentMetadataKey,
                                                  CR.ConnectGroupTargetAssignmentMetadataValue),
    CR.CONNECT_GROUP_TARGET_ASSIGNMENT_MEMBER: (CR.ConnectGroupTargetAssignmentMemberKey,
                                                CR.ConnectGroupTargetAssignmentMemberValue),
    CR.CONNECT_GROUP_CURRENT_MEMBER_ASSIGNMENT: (CR.ConnectGroupCurrentMemberAssignmentKey,
                                                 CR.ConnectGroupCurrentMemberAssignmentValue),
}
# Names of the private types, which records.RecordType (Kafka's types) does not list.
PRIVATE_TYPE_NAMES: dict[int, str] = {
    CR.CONNECT_GROUP_METADATA: "CONNECT_GROUP_METADATA",
    CR.CONNECT_GROUP_MEMBER_METADATA: "CONNECT_GROUP_MEMBER_METADATA",
    CR.CONNECT_GROUP_TARGET_ASSIGNMENT_METADATA: "CONNECT_GROUP_TARGET_ASSIGNMENT_METADATA",
    CR.CONNECT_GROUP_TARGET_ASSIGNMENT_MEMBER: "CONNECT_GROUP_TARGET_ASSIGNMENT_MEMBER",
    CR.CONNECT_GROUP_CURRENT_MEMBER_ASSIGNMENT: "CONNECT_GROUP_CURRENT_MEMBER_ASSIGNMENT",
    GROUP_CONFIG: "GROUP_CONFIG",      # per-group configuration (docs/user/group-configs.md)
    PARTITIONER_MARKER: "PARTITIONER_MARKER",   # the topic's group placement (records/partitioner_records.py)
}


class DumpFormatError(ValueError):
    """A dump entry that does not describe a record (names the field that is wrong)."""


# ----------------------------------------------------------------- field kinds
# A kind is a small tree: ("int",) ("str",) ("bytes",) ("uuid",) ("ms",) ("opt", kind)
# ("tuple", kind) ("struct", cls) ("tags",); ("ms",) is a timedelta written as milliseconds.
Kind = tuple


def _kind_of(hint: Any) -> Kind:
    if hint is S.TaggedFields or hint == S.TaggedFields:
        return ("tags",)
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"unsupported union {hint}")
        return ("opt", _kind_of(args[0]))
    if origin is tuple:
        return ("tuple", _kind_of(typing.get_args(hint)[0]))
    if hint is int or (isinstance(hint, type) and issubclass(hint, int)):   # kio's i8 ... i64, u16
        return ("int",)
    if isinstance(hint, type) and issubclass(hint, datetime.timedelta):     # kio's i32Timedelta
        return ("ms",)
    if hint is str:
        return ("str",)
    if hint is bytes:
        return ("bytes",)
    if hint is uuid.UUID:
        return ("uuid",)
    if dataclasses.is_dataclass(hint):
        return ("struct", hint)
    raise TypeError(f"unsupported field type {hint!r}")


@functools.cache
def fields_of(cls: type) -> tuple[tuple[str, Kind], ...]:
    """(name, kind) of each instance field of a records dataclass, in schema order."""
    # The class's own module first (connect_records defines its own structs), then schemas.
    hints = typing.get_type_hints(cls, {**vars(S), **vars(sys.modules[cls.__module__])})
    return tuple((f.name, _kind_of(hints[f.name])) for f in dataclasses.fields(cls))


# ------------------------------------------------------------------ to JSON
_MS = datetime.timedelta(milliseconds=1)


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def _out(kind: Kind, v: Any, raw_bytes: bool) -> Any:
    k = kind[0]
    if v is None:
        return None
    if k in ("int", "str"):
        return v
    if k == "uuid":
        return str(v)
    if k == "ms":
        return v // _MS
    if k == "bytes":
        return v if raw_bytes else _b64(v)
    if k == "opt":
        return _out(kind[1], v, raw_bytes)
    if k == "tuple":
        return [_out(kind[1], x, raw_bytes) for x in v]
    if k == "tags":
        return [{"tag": t, "data": d if raw_bytes else _b64(d)} for t, d in v]
    return to_dict(v, raw_bytes)


def to_dict(obj: Any, raw_bytes: bool = False) -> dict:
    """A records dataclass as a dict of JSON-able values (bytes stay bytes if raw_bytes)."""
    return {name: _out(kind, getattr(obj, name), raw_bytes) for name, kind in fields_of(type(obj))}


# ---------------------------------------------------------------- from JSON
def _in(kind: Kind, v: Any, where: str) -> Any:
    k = kind[0]
    if type(v) is tuple and len(v) == 2 and type(v[0]) is str:
        v = v[1]    # an Avro union branch read with its record name: (name, record)
    if k == "opt":
        return None if v is None else _in(kind[1], v, where)
    if v is None:
        raise DumpFormatError(f"{where} is null")
    try:
        if k == "int":
            if type(v) is not int:
                raise DumpFormatError(f"{where} is not an integer: {v!r}")
            return v
        if k == "str":
            if type(v) is not str:
                raise DumpFormatError(f"{where} is not a string: {v!r}")
            return v
        if k == "uuid":
            return uuid.UUID(v) if isinstance(v, str) else uuid.UUID(bytes=bytes(v))
        if k == "ms":
            if type(v) is not int:
                raise DumpFormatError(f"{where} is not an integer of milliseconds: {v!r}")
            return datetime.timedelta(milliseconds=v)
        if k == "bytes":
            return base64.b64decode(v, validate=True) if isinstance(v, str) else bytes(v)
        if k == "tuple":
            return tuple(_in(kind[1], x, f"{where}[{i}]") for i, x in enumerate(v))
        if k == "tags":
            return tuple((int(t["tag"]), _in(("bytes",), t["data"], f"{where}.data")) for t in v)
        return from_dict(kind[1], v, where)
    except DumpFormatError:
        raise
    except (ValueError, TypeError, KeyError) as e:
        raise DumpFormatError(f"{where}: {e}") from None


def from_dict(cls: type, d: Any, where: str = "") -> Any:
    """Rebuild a records dataclass from `to_dict` output; fields absent take their defaults."""
    if not isinstance(d, dict):
        raise DumpFormatError(f"{where or cls.__name__} is not an object")
    kwargs = {}
    for name, kind in fields_of(cls):
        if name in d:
            kwargs[name] = _in(kind, d[name], f"{where}.{name}" if where else name)
    unknown = d.keys() - {name for name, _ in fields_of(cls)}
    if unknown:
        raise DumpFormatError(f"{where or cls.__name__} has unknown fields {sorted(unknown)}")
    return cls(**kwargs)


def type_name(record_type: int) -> str:
    if record_type in PRIVATE_TYPE_NAMES:
        return PRIVATE_TYPE_NAMES[record_type]
    try:
        return RecordType(record_type).name
    except ValueError:
        return "unknown"
