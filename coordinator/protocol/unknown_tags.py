"""Unknown tagged fields: skipped, as Kafka's readers skip them (KIP-482).

Rules of this module:
- A flexible version's reader must accept a tag it does not know in any tagged section (the
  request header's, a body's top level, any nested struct's): a newer client sends fields
  that kcoord's schemas (kio's) do not have yet, and Kafka's generated readers keep such a
  field aside (``_unknownTaggedFields``) and read the rest. kio's native reader instead
  raises ``KeyError: 'Unknown tagged field tag: N'``. So codec.py reads with kio first (the
  common case, no unknown tag, costs nothing more) and, only when kio raises, rewrites the
  body here without the unknown tags and reads the copy: the known fields decode exactly as
  kio decodes them, so the answer is Kafka's for the known fields.
- The request header's tagged fields are skipped, not read (framing.skip_tagged_fields), so
  an unknown tag there needs nothing here.
- Only called on bytes the bounded walk (checked.py) has accepted, and bounded like it:
  every length, count and size is checked against the end before anything past it is read,
  and the copy is never longer than the body (a dropped field is a tag, a size and its
  bytes; a rewritten size varint is never longer than the one it replaces, the content it
  measures having only shrunk).
- The unknown fields are dropped, not kept: kio's classes have no room for them, so a body
  kcoord decodes and re-encodes (a rewritten Metadata response, a filtered Produce)
  loses them, while a frame forwarded untouched keeps them byte for byte.
- ``rewrite_tags`` takes what each tagged section is written with as a function, so the
  tests add unknown tags to every section of valid bodies with the same code.
- Only the known fields of a section are held (the last of a repeated tag, as Kafka's
  readers keep the last value): a body of a million unknown tags allocates nothing per tag.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from records.kio_fields import PRIMITIVE, PRIMITIVE_ARRAY, STRUCT, SchemaField, schema_fields

from .checked import Malformed, field_step, read_uvarint, struct_marker_refused, struct_step, tag_size_mismatch
from .framing import write_uvarint

# (the tags the section's struct knows, the section's known fields: tag -> value, in wire
# order) -> the fields to write in their place. Unknown fields never reach it.
Section = Callable[[frozenset[int], dict[int, bytes]], list[tuple[int, bytes]]]
# (buffer, position, end, output parts, section) -> position after the value.
Rewrite = Callable[[bytes, int, int, list[bytes], Section], int]


def only_known(known: frozenset[int], fields: dict[int, bytes]) -> list[tuple[int, bytes]]:
    """The `Section` of Kafka's readers: the known fields, unknown ones left out."""
    return list(fields.items())


def strip_unknown_tags(cls: type, data: bytes, offset: int, end: int | None = None) -> tuple[bytes, int] | None:
    """(the ``cls`` body at ``offset`` without unknown tagged fields, where the body ends in
    ``data``), or None when it has none. Raises Malformed as the walk does."""
    stop = len(data) if end is None else end
    body, body_end = rewrite_tags(cls, data, offset, stop, only_known)
    if len(body) == body_end - offset:
        return None
    return body, body_end


def rewrite_tags(cls: type, data: bytes, offset: int, end: int, section: Section) -> tuple[bytes, int]:
    """(the ``cls`` body at ``offset`` with each tagged section replaced by what ``section``
    returns for it, where the body ends in ``data``)."""
    out: list[bytes] = []
    pos = _struct_rewrite(cls)(data, offset, end, out, section)
    return b"".join(out), pos


@functools.cache
def _struct_rewrite(cls: Any) -> Rewrite:
    """The compiled rewrite of one kio message or nested struct class (cached)."""
    if not cls.__flexible__:
        return _verbatim(struct_step(cls))     # no tagged section anywhere below
    plan: list[tuple[str, Rewrite]] = []
    tags: dict[int, tuple[str, Rewrite]] = {}
    for field in schema_fields(cls):
        rewrite = _field_rewrite(field)
        if field.tag is None:
            plan.append((field.name, rewrite))
        else:
            tags[field.tag] = (field.name, rewrite)
    known = frozenset(tags)

    def rewrite_struct(buf: bytes, pos: int, end: int, out: list[bytes], section: Section) -> int:
        for name, each in plan:
            try:
                pos = each(buf, pos, end, out, section)
            except Malformed as e:
                raise e.within(name) from None
        return _tagged_section(buf, pos, end, out, section, known, tags)
    return rewrite_struct


def _tagged_section(buf: bytes, pos: int, end: int, out: list[bytes], section: Section, known: frozenset[int],
                    tags: dict[int, tuple[str, Rewrite]]) -> int:
    start = pos
    count, pos = read_uvarint(buf, pos, end)
    if count * 2 > end - pos:                 # a tag and a size, at least a byte each
        raise Malformed(f"{count} tagged fields, but only {end - pos} bytes remain", start)
    # Only known fields are held, one per tag (a repeated tag: the last one, as Kafka's
    # readers overwrite the field), so a section of a million tags allocates nothing per tag.
    fields: dict[int, bytes] = {}
    for _ in range(count):
        if pos + 2 <= end and buf[pos] < 0x80 and buf[pos + 1] < 0x80:   # one-byte tag and size
            tag, size = buf[pos], buf[pos + 1]
            pos += 2
        else:
            tag, pos = read_uvarint(buf, pos, end)
            size, pos = read_uvarint(buf, pos, end)
        if size > end - pos:
            raise Malformed(f"tagged field {tag} of {size} bytes, but only {end - pos} remain", pos)
        entry = tags.get(tag)
        if entry is not None:                 # a known struct may hold sections of its own
            name, rewrite = entry
            inner: list[bytes] = []
            try:
                stop = rewrite(buf, pos, pos + size, inner, section)
            except Malformed as e:
                raise e.within(name) from None
            if stop != pos + size:            # refused as checked.py's walk refuses it
                raise Malformed(tag_size_mismatch(tag, size, stop - pos), pos).within(name)
            fields[tag] = b"".join(inner)
        pos += size
    kept = section(known, fields)
    out.append(write_uvarint(len(kept)))
    for tag, value in kept:
        out += (write_uvarint(tag), write_uvarint(len(value)), value)
    return pos


def _verbatim(step: Callable[[bytes, int, int], int]) -> Rewrite:
    def copy(buf: bytes, pos: int, end: int, out: list[bytes], section: Section) -> int:
        stop = step(buf, pos, end)
        out.append(buf[pos:stop])
        return stop
    return copy


def _fixed(size: int) -> Rewrite:
    def copy(buf: bytes, pos: int, end: int, out: list[bytes], section: Section) -> int:
        if pos + size > end:
            raise Malformed(f"needs {size} bytes, {end - pos} left", pos)
        out.append(buf[pos:pos + size])
        return pos + size
    return copy


def _field_rewrite(field: SchemaField) -> Rewrite:
    if field.kind in (PRIMITIVE, PRIMITIVE_ARRAY):     # no tagged section inside: copied
        step, size = field_step(field, True)
        return _verbatim(step) if step is not None else _fixed(size)
    inner = _struct_rewrite(field.struct)
    if field.kind == STRUCT:
        return _nullable_struct(inner) if field.nullable else inner    # tagged too, as checked.py
    return _struct_array(inner)


def _nullable_struct(inner: Rewrite) -> Rewrite:
    # KIP-893: an int8 marker, -1 for null, then the struct; any other negative marker is
    # refused, as checked.py's walk refuses it (kio would read a struct after it).
    def rewrite(buf: bytes, pos: int, end: int, out: list[bytes], section: Section) -> int:
        if pos >= end:
            raise Malformed("truncated before the null marker of a struct", pos)
        out.append(buf[pos:pos + 1])
        if buf[pos] == 0xFF:
            return pos + 1
        if buf[pos] >= 0x80:
            raise Malformed(struct_marker_refused(buf[pos]), pos)
        return inner(buf, pos + 1, end, out, section)
    return rewrite


def _struct_array(inner: Rewrite) -> Rewrite:
    """A compact array of structs (flexible versions only reach here); its count is copied."""
    def rewrite(buf: bytes, pos: int, end: int, out: list[bytes], section: Section) -> int:
        start = pos
        n, pos = read_uvarint(buf, pos, end)
        out.append(buf[start:pos])
        n -= 1                                 # compact: 0 = null
        if n > end - pos:                      # a struct takes its tag count at least
            raise Malformed(f"tried to allocate a collection of size {n}, but there are only "
                            f"{end - pos} bytes remaining", start)
        i = 0
        try:
            while i < n:
                pos = inner(buf, pos, end, out, section)
                i += 1
        except Malformed as e:
            raise e.within(f"[{i}]") from None
        return pos
    return rewrite
