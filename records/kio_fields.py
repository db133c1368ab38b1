"""The fields of a kio schema class, classified once, for the code that compiles readers from them.

Rules of this module:
- The one place kcoord reads kio's private introspection (`kio.serial._introspect`): the
  protocol layer's bounded walk (coordinator/protocol/checked.py), the bounded reader of the
  generated record classes (records/_generated_reader.py) and the fuzzers (fuzz/samples.py,
  fuzz/structured.py) all start from `schema_fields(cls)`, so a kio release that moves those
  helpers is met here alone.
- It sits in records/, the bottom floor of pyproject.toml's import-linter layers, so that
  records/ and every floor of coordinator/ above it may import it.
- Classification only, done when a reader is compiled, never per message: each field's kind
  (a primitive of a Kafka type, an array of primitives, a struct, an array of structs), its
  Kafka type, its struct class, whether it is nullable, its tag. How a field is walked, read or
  built stays with the caller (the walk and the reader differ: the walk only moves an offset
  before kio's native reader runs, the reader builds values and keeps unknown tags out).
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

PRIMITIVE = "primitive"
PRIMITIVE_ARRAY = "primitive array"
STRUCT = "struct"
STRUCT_ARRAY = "struct array"


@dataclasses.dataclass(frozen=True, slots=True)
class SchemaField:
    """One field of a kio class, as its `dataclasses.Field` and kio's metadata describe it."""

    name: str
    kind: str                 # PRIMITIVE, PRIMITIVE_ARRAY, STRUCT or STRUCT_ARRAY
    kafka_type: str           # a primitive's or an array element's Kafka type; "" for structs
    struct: Any               # the class of a struct or of an array's elements; None otherwise
    nullable: bool            # the type admits None (a tagged field is optional by its absence too)
    tag: int | None           # the tag of a tagged field; None for a field of the fixed layout
    has_default: bool         # the class gives the field a default (kio's tagged fields do)


@functools.cache
def schema_fields(cls: type) -> tuple[SchemaField, ...]:
    """The fields of the kio class ``cls`` in their wire order (cached per class)."""
    return tuple(_schema_field(field) for field in dataclasses.fields(cls))


def _schema_field(field: dataclasses.Field[Any]) -> SchemaField:
    kind = classify_field(field)
    if isinstance(kind, PrimitiveField | PrimitiveTupleField):
        name = PRIMITIVE if isinstance(kind, PrimitiveField) else PRIMITIVE_ARRAY
        kafka_type, struct = get_schema_field_type(field), None
    else:
        assert isinstance(kind, EntityField | EntityTupleField)
        name = STRUCT if isinstance(kind, EntityField) else STRUCT_ARRAY
        kafka_type, struct = "", kind.type_
    tag = get_field_tag(field)
    has_default = field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
    return SchemaField(field.name, name, kafka_type, struct, is_optional(field), None if tag is None else int(tag),
                       has_default)
