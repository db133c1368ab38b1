# ruff: noqa: E501
"""Generated from ``common/message/ConsumerGroupPartitionMetadataValue.json`` in Kafka's jar by coordinator.protocol.messagegen."""

import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16, i32


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionMetadata:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    partition: i32 = field(metadata={"kafka_type": "int32"})
    """The partition number."""
    racks: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    """The set of racks that the partition is mapped to."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicMetadata:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    """The topic id."""
    topic_name: str = field(metadata={"kafka_type": "string"})
    """The topic name."""
    num_partitions: i32 = field(metadata={"kafka_type": "int32"})
    """The number of partitions of the topic."""
    partition_metadata: tuple[PartitionMetadata, ...]
    """Deprecated: this field is not used after 4.0. Partitions mapped to a set of racks. If the rack information is unavailable for all the partitions, an empty list is stored."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupPartitionMetadataValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topics: tuple[TopicMetadata, ...]
    """The list of topic metadata."""
