"""kcoord's client-assignor fields: tags >= 1000 on Kafka's own value types 5-8.

Rules of this module (seed 000; seed-drafts.md §1.6):
- Kafka never shipped client-side assignors (apache/kafka#14469), so their state rides in
  tagged fields of the types Kafka has, numbered from 1000 (coordinator/protocol/
  private_apis.py, PRIVATE_TAG_BASE) far above Kafka's tag 0. Kafka reads them as unknown
  tags and ignores them, so a log moved to Kafka loads there in server mode.
- A field at its default (empty, 0, -1, null) is never written: a group that uses no
  client assignors writes exactly Kafka's bytes (X3).
- Decoding is bounds-checked like every other field here: a tag's content must fill
  exactly the size its header declares (`expect_end`).

| type | 1000 | 1001 | 1002 |
| 5 | ClientAssignors []{Name, Min i16, Max i16, Reason i8, Version i16, Metadata bytes} | | |
| 6 | AssignmentError i8 | ClientAssignorName string? | |
| 7 | MetadataVersion i16 | MetadataBytes bytes? | |
| 8 | Error i8 | MetadataVersion i16 | MetadataBytes bytes? |
"""

from __future__ import annotations

from records._wire import (
    array_len,
    cbytes,
    cnstring,
    cstring,
    expect_end,
    pack_b,
    pack_h,
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


# --- type 5: ClientAssignors ---------------------------------------------------
def encode_client_assignors(assignors: tuple[ClientAssignor, ...]) -> Tags:
    if not assignors:
        return []
    out = bytearray()
    w_array_len(out, len(assignors), True)
    for a in assignors:
        w_cstring(out, a.name)
        out += pack_h(a.minimum_version)
        out += pack_h(a.maximum_version)
        out += pack_b(a.reason)
        out += pack_h(a.version)
        w_cbytes(out, a.metadata)
        w_tags(out, [], a.unknown_tagged_fields)
    return [(TAG_BASE, bytes(out))]


def decode_client_assignors(b: bytes, start: int, end: int) -> tuple[ClientAssignor, ...]:
    n, pos = array_len(b, start, True, min_item=8)
    out = []
    for _ in range(n):
        name, pos = cstring(b, pos)
        lo, hi = unpack_h(b, pos)[0], unpack_h(b, pos + 2)[0]
        reason = unpack_b(b, pos + 4)[0]
        version = unpack_h(b, pos + 5)[0]
        metadata, pos = cbytes(b, pos + 7)
        tags, pos = unknown_tags(b, pos)
        out.append(ClientAssignor(name, lo, hi, reason, version, metadata, tags))
    expect_end(pos, end, "tagged field ClientAssignors")
    return tuple(out)


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
