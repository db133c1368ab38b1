"""kcoord's client-assignor fields: tags >= 1000 on Kafka's own value types 5-8.

Rules of this module (docs/design/client-assignors-spec.md §6):
- Kafka never shipped client-side assignors (apache/kafka#14469), so their state rides in
  tagged fields of the types Kafka has, numbered from 1000 (coordinator/protocol/
  private_apis.py, PRIVATE_TAG_BASE) far above Kafka's tag 0. Kafka reads them as unknown
  tags and ignores them, so a log moved to Kafka loads there in server mode.
- A field at its default (empty, 0, -1, null) is never written: a group that uses no
  client assignors writes exactly Kafka's bytes (X3).
- Decoding is bounds-checked like every other field here: a tag's content must fill
  exactly the size its header declares (`expect_end`). The ClientAssignors array codec is
  shared with the connect group's member record (records/connect_records.py, type 1001).

| type | 1000 | 1001 | 1002 |
| 5 | ClientAssignors []{Name, Min i16, Max i16, Reason i8, Version i16, Metadata bytes} | | |
| 6 | AssignmentError i8 | ClientAssignorName string? | |
| 7 | MetadataVersion i16 | MetadataBytes bytes? | |
| 8 | Error i8 | MetadataVersion i16 | MetadataBytes bytes? |
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from records._wire import (
    LOW_LEVEL,
    FieldError,
    Malformed,
    array_len,
    cbytes,
    cnstring,
    cstring,
    expect_end,
    pack_b,
    pack_h,
    reason_of,
    unknown_tags,
    unpack_b,
    unpack_h,
    uvarint,
    w_array_len,
    w_cbytes,
    w_cnstring,
    w_cstring,
    w_tags,
)
from records.schemas import ClientAssignor

TAG_BASE = 1000
Tags = list[tuple[int, bytes]]
T = TypeVar("T")


# --- the ClientAssignors array: type 5's tag 1000, and the connect group's type 1001 ---
# The smallest entry: Name and Metadata empty (1 byte each), Min, Max and Version (2 each),
# Reason (1), an empty tag section (1). The array's count is bounded by it before anything
# is allocated: a smaller bound lets a hostile count allocate, a larger one refuses valid data.
MIN_ENTRY_SIZE = 10


def write_client_assignors(out: bytearray, assignors: Sequence[Any]) -> None:
    """The array, entries of any class with ClientAssignor's fields (connect_records.py's too)."""
    w_array_len(out, len(assignors), True)
    for a in assignors:
        w_cstring(out, a.name)
        out += pack_h(a.minimum_version)
        out += pack_h(a.maximum_version)
        out += pack_b(a.reason)
        out += pack_h(a.version)
        w_cbytes(out, a.metadata)
        w_tags(out, [], a.unknown_tagged_fields)


def read_client_assignors(b: bytes, pos: int, what: str, make: Callable[..., T]) -> tuple[tuple[T, ...], int]:
    """The array at `pos`, each entry built by `make(name, min, max, reason, version,
    metadata, tags)`. A malformed entry raises FieldError naming it (`what[i].Field`) at its
    field's first byte."""
    f = what
    out = []
    try:
        n, pos = array_len(b, pos, True, MIN_ENTRY_SIZE)
        for i in range(n):
            f = f"{what}[{i}].Name"
            name, pos = cstring(b, pos)
            f = f"{what}[{i}].MinimumVersion"
            lo = unpack_h(b, pos)[0]
            pos += 2
            f = f"{what}[{i}].MaximumVersion"
            hi = unpack_h(b, pos)[0]
            pos += 2
            f = f"{what}[{i}].Reason"
            reason = unpack_b(b, pos)[0]
            pos += 1
            f = f"{what}[{i}].Version"
            version = unpack_h(b, pos)[0]
            pos += 2
            f = f"{what}[{i}].Metadata"
            metadata, pos = cbytes(b, pos)
            f = f"{what}[{i}].(tagged fields)"
            tags, pos = unknown_tags(b, pos)
            out.append(make(name, lo, hi, reason, version, metadata, tags))
    except LOW_LEVEL as e:
        raise FieldError(f, pos, reason_of(e, b)) from None
    return tuple(out), pos


# --- type 5: ClientAssignors ---------------------------------------------------
def encode_client_assignors(assignors: tuple[ClientAssignor, ...]) -> Tags:
    if not assignors:
        return []
    out = bytearray()
    write_client_assignors(out, assignors)
    return [(TAG_BASE, bytes(out))]


def decode_client_assignors(b: bytes, start: int, end: int) -> tuple[ClientAssignor, ...]:
    try:
        out, pos = read_client_assignors(b, start, "ClientAssignors", ClientAssignor)
    except FieldError as e:
        # Reported as the tag section's error, the way the value's other tags are.
        raise Malformed(e.reason) from None
    expect_end(pos, end, "tagged field ClientAssignors")
    return out


# --- nullable bytes ------------------------------------------------------------
def _w_nbytes(v: bytes) -> bytes:
    out = bytearray()
    w_cbytes(out, v)
    return bytes(out)


def _nbytes(b: bytes, start: int, end: int, what: str) -> bytes | None:
    n, pos = uvarint(b, start)
    if n == 0:
        expect_end(pos, end, what)
        return None
    value, pos = cbytes(b, start)
    expect_end(pos, end, what)
    return value


def _int(b: bytes, start: int, end: int, size: int, what: str) -> int:
    expect_end(start + size, end, what)
    return (unpack_b if size == 1 else unpack_h)(b, start)[0]


# --- type 6 --------------------------------------------------------------------
def encode_target_metadata_tags(error: int, name: str | None) -> Tags:
    tags: Tags = []
    if error:
        tags.append((TAG_BASE, pack_b(error)))
    if name is not None:
        out = bytearray()
        w_cnstring(out, name)
        tags.append((TAG_BASE + 1, bytes(out)))
    return tags


def decode_target_metadata_tag(b: bytes, tag: int, start: int, end: int, found: dict) -> bool:
    if tag == TAG_BASE:
        found["error"] = _int(b, start, end, 1, "tagged field AssignmentError")
    elif tag == TAG_BASE + 1:
        found["name"], pos = cnstring(b, start)
        expect_end(pos, end, "tagged field ClientAssignorName")
    else:
        return False
    return True


# --- types 7 and 8 -------------------------------------------------------------
def encode_metadata_tags(error: int | None, version: int, data: bytes | None) -> Tags:
    """Type 7 (`error` None: the type has no Error field) or type 8."""
    tags: Tags = []
    base = TAG_BASE
    if error is not None:
        if error:
            tags.append((base, pack_b(error)))
        base += 1
    if version != -1:
        tags.append((base, pack_h(version)))
    if data is not None:
        tags.append((base + 1, _w_nbytes(data)))
    return tags


def decode_metadata_tag(b: bytes, tag: int, start: int, end: int, found: dict, with_error: bool) -> bool:
    base = TAG_BASE
    if with_error:
        if tag == base:
            found["error"] = _int(b, start, end, 1, "tagged field Error")
            return True
        base += 1
    if tag == base:
        found["version"] = _int(b, start, end, 2, "tagged field MetadataVersion")
    elif tag == base + 1:
        found["bytes"] = _nbytes(b, start, end, "tagged field MetadataBytes")
    else:
        return False
    return True
