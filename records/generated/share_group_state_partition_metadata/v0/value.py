# ruff: noqa: E501
"""Generated from ``common/message/ShareGroupStatePartitionMetadataValue.json`` in Kafka's jar by coordinator.protocol.messagegen."""

import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16, i32


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartitionsInfo:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    """The topic identifier."""
    topic_name: str = field(metadata={"kafka_type": "string"})
    """The topic name."""
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    """The partitions."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicInfo:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    """The topic identifier."""
    topic_name: str = field(metadata={"kafka_type": "string"})
    """The topic name."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupStatePartitionMetadataValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    initializing_topics: tuple[TopicPartitionsInfo, ...]
    """The topic-partitions whose share-group state is being initialized."""
    initialized_topics: tuple[TopicPartitionsInfo, ...]
    """The topics with initialized share-group state."""
    deleting_topics: tuple[TopicInfo, ...]
    """The topics whose share-group state is being deleted."""
