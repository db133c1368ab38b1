"""The per-group configuration record (docs/user/group-configs.md): type 1200, kcoord-private.

Rules of this module:
- Kafka keeps a group's dynamic configs (`kafka-configs --entity-type groups`) as ConfigRecords
  in the cluster metadata; kcoord keeps them in its state topic, one record per group holding
  the whole set, so compaction keeps exactly the latest set. A set emptied by the last
  DELETE is written as a tombstone.
- The type is in kcoord's private block (docs/design/client-assignors-spec.md §0: 1000+, far
  above Kafka 4.4's 0-23; the connect types are 1000-1004, the fence record 1100). Kafka, and
  a kcoord older than this module, decode it to `UnknownRecord` and skip it (KIP-915);
  `kcoord offsets downgrade-check` should report it (Kafka never deletes it).
- The key is version 0, classic encoding, like Kafka's group keys: int16 type, group id.
- The value is version 0, flexible: a compact array of (name, nullable value) entries, then
  tagged fields, kept and written back when unknown (KIP-915: later fields are tags only).
- Decoding is bounded like the rest of records/ (records/_wire.py).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from records._classic import check_end
from records._wire import (
    LOW_LEVEL,
    FieldError,
    array_len,
    cnstring,
    cstring,
    reason_of,
    unknown_tags,
    w_array_len,
    w_cnstring,
    w_cstring,
    w_tags,
)

GROUP_CONFIG = 1200

TaggedFields = tuple[tuple[int, bytes], ...]


@dataclass(frozen=True, slots=True)
class GroupConfigKey:
    record_type: ClassVar[int] = GROUP_CONFIG
    group_id: str


@dataclass(frozen=True, slots=True)
class GroupConfigEntry:
    """One key set on the group; kcoord never writes a null value (a deleted key is left out)."""
    name: str
    value: str | None = None
    unknown_tagged_fields: TaggedFields = ()


@dataclass(slots=True)
class GroupConfigValue:
    record_type: ClassVar[int] = GROUP_CONFIG
    configs: tuple[GroupConfigEntry, ...] = ()      # in the order they were first set
    unknown_tagged_fields: TaggedFields = ()


def decode_group_config(b: bytes) -> GroupConfigValue:
    pos, field = 2, "Configs"
    try:
        n, pos = array_len(b, pos, True, 2)
        entries = []
        for i in range(n):
            field = f"Configs[{i}].Name"
            name, pos = cstring(b, pos)
            field = f"Configs[{i}].Value"
            value, pos = cnstring(b, pos)
            field = f"Configs[{i}].(tagged fields)"
            entry_tags, pos = unknown_tags(b, pos)
            entries.append(GroupConfigEntry(name, value, entry_tags))
        field = "(tagged fields)"
        tags, pos = unknown_tags(b, pos)
    except LOW_LEVEL as e:
        raise FieldError(field, pos, reason_of(e, b)) from None
    check_end(b, pos)
    return GroupConfigValue(tuple(entries), tags)


def encode_group_config(v: GroupConfigValue, version: int) -> bytes:
    out = bytearray(b"\x00\x00")
    w_array_len(out, len(v.configs), True)
    for entry in v.configs:
        w_cstring(out, entry.name)
        w_cnstring(out, entry.value)
        w_tags(out, [], entry.unknown_tagged_fields)
    w_tags(out, [], v.unknown_tagged_fields)
    return bytes(out)


# --- registration (read by codec.py) ------------------------------------------------------
KEY_LAYOUTS: dict[int, tuple[type, tuple[str, ...], str]] = {
    GROUP_CONFIG: (GroupConfigKey, ("GroupId",), "s"),
}
VALUE_DECODERS: dict[int, dict[int, Callable[[bytes], Any]]] = {GROUP_CONFIG: {0: decode_group_config}}
VALUE_ENCODERS: dict[type, tuple[Callable[[Any, int], bytes], range]] = {
    GroupConfigValue: (encode_group_config, range(0, 1)),
}
