# ruff: noqa: E501
"""Generated from ``common/message/OffsetCommitKey.json`` in Kafka's jar by coordinator.protocol.messagegen."""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16, i32


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitKey:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    group: str = field(metadata={"kafka_type": "string"})
    """The consumer group id."""
    topic: str = field(metadata={"kafka_type": "string"})
    """The topic name."""
    partition: i32 = field(metadata={"kafka_type": "int32"})
    """The topic partition index."""
