"""kio-shaped classes of wire shapes no message has yet, for the walk's tests.

No ``from __future__ import annotations`` here: kio reads the field types from the
annotations, which must be types, not strings.
"""
import dataclasses
from typing import ClassVar

from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Inner:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(32767)
    __header_schema__: ClassVar[type] = ResponseHeader
    x: i32 = dataclasses.field(metadata={"kafka_type": "int32"})


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TaggedNullableStruct:
    """A tagged struct field that defaults to null (coordinator/protocol/messagegen can
    render one from a Kafka message definition; none has one yet)."""
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(32767)
    __header_schema__: ClassVar[type] = ResponseHeader
    a: i32 = dataclasses.field(metadata={"kafka_type": "int32"})
    inner: Inner | None = dataclasses.field(metadata={"tag": 0}, default=None)
