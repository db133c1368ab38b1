"""Bounded reader of the value classes generated from Kafka's jar (records/generated/).

Rules of this module:
- The generated classes are kio dataclasses; kio's own (native) reader trusts the lengths it
  reads and allocates whatever a hostile length claims (docs/design/messages.md), so values of
  these classes are read here, field by field, with records/_wire.py's bounded primitives:
  every length and count is checked against the bytes left before anything is allocated.
- Flexible versions only (every record value Kafka added since KIP-848 is flexible from v0):
  compact strings and arrays, a nullable struct behind an int8 marker (negative: null, as
  Kafka's generated readers test it), and a tag section per struct. A known tagged field must
  fill exactly the size its header declares; unknown tags are skipped (kio's classes have no
  room to keep them).
- A value is built exactly as kio's reader builds it (ints, str, tuples, `timedelta` for
  `timedelta_i32`), so a value decoded here equals the one kio decodes from the same bytes
  (tests/unit/records/test_generated_records.py checks both ways).
- Errors are `FieldError` with the dotted field path and the byte where the field starts;
  codec.py adds the record type and the log position.
"""
from __future__ import annotations

import datetime
import functools
import struct
from collections.abc import Callable
from typing import Any

from records._wire import (
    LOW_LEVEL,
    FieldError,
    Malformed,
    cnstring,
    cstring,
    expect_end,
    reason_of,
    tag_count,
    tagged_field,
    unpack_b,
    unpack_h,
    unpack_i,
    unpack_q,
    uvarint,
)
from records.kio_fields import PRIMITIVE, PRIMITIVE_ARRAY, STRUCT, SchemaField, schema_fields

# (buffer, position) -> (value, position after it); raises LOW_LEVEL errors or FieldError.
Read = Callable[[bytes, int], tuple[Any, int]]

_unpack_u16 = struct.Struct(">H").unpack_from


def _within(name: str, e: FieldError) -> FieldError:
    """`e` one level down: `name.field`, or `name[i]...` for an array element."""
    sep = "" if e.field.startswith("[") else "."
    return FieldError(f"{name}{sep}{e.field}", e.position, e.reason)


def _fixed(unpack: Callable[[bytes, int], tuple[int, ...]], size: int) -> Read:
    def read(b: bytes, pos: int) -> tuple[Any, int]:
        return unpack(b, pos)[0], pos + size
    return read


def _timedelta_i32(b: bytes, pos: int) -> tuple[Any, int]:
    return datetime.timedelta(milliseconds=unpack_i(b, pos)[0]), pos + 4


_PRIMITIVES: dict[str, tuple[Read, int]] = {   # kafka type -> (reader, smallest encoding)
    "int8": (_fixed(unpack_b, 1), 1),
    "int16": (_fixed(unpack_h, 2), 2),
    "int32": (_fixed(unpack_i, 4), 4),
    "int64": (_fixed(unpack_q, 8), 8),
    "uint16": (_fixed(_unpack_u16, 2), 2),
    "timedelta_i32": (_timedelta_i32, 4),
    "string": (cstring, 1),
}


def _count(b: bytes, pos: int, nullable: bool, min_item: int) -> tuple[int | None, int]:
    """A compact array's element count (None: null), bounded by the bytes left."""
    n, pos = uvarint(b, pos)
    if n == 0:
        if nullable:
            return None, pos
        raise Malformed("non-nullable array is null")
    n -= 1
    if n * min_item > len(b) - pos:
        raise Malformed(f"array of {n} elements cannot fit in the {len(b) - pos} bytes left")
    return n, pos


def _array(element: Read, min_item: int, nullable: bool) -> Read:
    def read(b: bytes, pos: int) -> tuple[Any, int]:
        n, pos = _count(b, pos, nullable, min_item)
        if n is None:
            return None, pos
        out = []
        for i in range(n):
            try:
                v, pos = element(b, pos)
            except FieldError as e:
                raise _within(f"[{i}]", e) from None
            out.append(v)
        return tuple(out), pos
    return read


def _fixed_array(code: str, size: int, nullable: bool) -> Read:
    """An array of fixed-size integers, unpacked at once (partition lists are most of a record)."""
    structs: dict[int, struct.Struct] = {}

    def read(b: bytes, pos: int) -> tuple[Any, int]:
        n, pos = _count(b, pos, nullable, size)
        if n is None:
            return None, pos
        unpack = structs.get(n)
        if unpack is None:
            unpack = struct.Struct(f">{n}{code}")
            if len(structs) < 64:
                structs[n] = unpack
        return unpack.unpack_from(b, pos), pos + size * n
    return read


_FIXED_ARRAYS = {"int8": ("b", 1), "int16": ("h", 2), "int32": ("i", 4), "int64": ("q", 8), "uint16": ("H", 2)}


def _nullable_struct(inner: Read) -> Read:
    def read(b: bytes, pos: int) -> tuple[Any, int]:
        if unpack_b(b, pos)[0] < 0:
            return None, pos + 1
        return inner(b, pos + 1)
    return read


def _field_reader(field: SchemaField) -> Read:
    if field.kind == PRIMITIVE:
        if field.kafka_type == "string":
            return cnstring if field.nullable else cstring
        return _PRIMITIVES[field.kafka_type][0]
    if field.kind == PRIMITIVE_ARRAY:
        if field.kafka_type in _FIXED_ARRAYS:
            return _fixed_array(*_FIXED_ARRAYS[field.kafka_type], field.nullable)
        element, size = _PRIMITIVES[field.kafka_type]
        return _array(element, size, field.nullable)
    inner = struct_reader(field.struct)
    if field.kind == STRUCT:
        return _nullable_struct(inner) if field.nullable and field.tag is None else inner
    return _array(inner, 1, field.nullable)   # a struct takes its tag section at least


@functools.cache
def struct_reader(cls: type) -> Read:
    """The compiled bounded reader of one generated class (cached)."""
    return _compile(cls)


def _compile(cls: Any) -> Read:
    if not cls.__flexible__:
        raise TypeError(f"{cls.__name__}: only flexible versions are read here")
    plan: list[tuple[str, Read]] = []
    tags: dict[int, tuple[str, Read]] = {}
    for field in schema_fields(cls):
        if field.tag is None:
            plan.append((field.name, _field_reader(field)))
        else:
            tags[field.tag] = (field.name, _field_reader(field))

    def read(b: bytes, pos: int) -> tuple[Any, int]:
        values: dict[str, Any] = {}
        for name, reader in plan:
            try:
                values[name], pos = reader(b, pos)
            except FieldError as e:
                raise _within(name, e) from None
            except LOW_LEVEL as e:
                raise FieldError(name, pos, reason_of(e, b)) from None
        if pos < len(b) and b[pos] == 0:       # no tagged field: the usual case
            return cls(**values), pos + 1
        start = pos
        try:
            n, pos = tag_count(b, pos)
            for _ in range(n):
                start = pos
                tag, data, end = tagged_field(b, pos)
                pos = end
                known = tags.get(tag)
                if known is None:
                    continue        # a later version's field: Kafka keeps it raw, kio cannot
                name, reader = known
                try:
                    # Read within the declared size: the prefix up to its end bounds the reader.
                    values[name], at = reader(b[:end], data)
                    expect_end(at, end, f"tagged field {tag}")
                except FieldError as e:
                    raise _within(name, e) from None
                except LOW_LEVEL as e:
                    raise FieldError(name, data, reason_of(e, b)) from None
        except LOW_LEVEL as e:
            raise FieldError("(tagged fields)", start, reason_of(e, b)) from None
        return cls(**values), pos
    return read
