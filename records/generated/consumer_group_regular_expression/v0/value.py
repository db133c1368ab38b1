# ruff: noqa: E501
"""Generated from ``common/message/ConsumerGroupRegularExpressionValue.json`` in Kafka's jar by coordinator.protocol.messagegen."""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16, i64


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupRegularExpressionValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topics: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    version: i64 = field(metadata={"kafka_type": "int64"})
    timestamp: i64 = field(metadata={"kafka_type": "int64"})
