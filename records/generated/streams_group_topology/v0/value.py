# ruff: noqa: E501
"""Generated from ``common/message/StreamsGroupTopologyValue.json`` in Kafka's jar by coordinator.protocol.messagegen."""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16, i32


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicConfig:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    key: str = field(metadata={"kafka_type": "string"})
    """The key of the topic-level configuration."""
    value: str = field(metadata={"kafka_type": "string"})
    """The value of the topic-level configuration."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicInfo:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    name: str = field(metadata={"kafka_type": "string"})
    """The name of the topic."""
    partitions: i32 = field(metadata={"kafka_type": "int32"})
    """The number of partitions in the topic. Can be 0 if no specific number of partitions is enforced. Always 0 for changelog topics."""
    replication_factor: i16 = field(metadata={"kafka_type": "int16"})
    """The replication factor of the topic. Can be 0 if the default replication factor should be used."""
    topic_configs: tuple[TopicConfig, ...]
    """Topic-level configurations as key-value pairs."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CopartitionGroup:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    source_topics: tuple[i16, ...] = field(metadata={"kafka_type": "int16"}, default=())
    """The topics the topology reads from. Index into the array on the subtopology level."""
    source_topic_regex: tuple[i16, ...] = field(metadata={"kafka_type": "int16"}, default=())
    """Regular expressions identifying topics the subtopology reads from. Index into the array on the subtopology level."""
    repartition_source_topics: tuple[i16, ...] = field(metadata={"kafka_type": "int16"}, default=())
    """The set of source topics that are internally created repartition topics. Index into the array on the subtopology level."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Subtopology:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    subtopology_id: str = field(metadata={"kafka_type": "string"})
    """String to uniquely identify the subtopology."""
    source_topics: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    """The topics the topology reads from."""
    source_topic_regex: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    """Regular expressions identifying topics the subtopology reads from."""
    state_changelog_topics: tuple[TopicInfo, ...]
    """The set of state changelog topics associated with this subtopology."""
    repartition_sink_topics: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    """The repartition topics the subtopology writes to."""
    repartition_source_topics: tuple[TopicInfo, ...]
    """The set of source topics that are internally created repartition topics."""
    copartition_groups: tuple[CopartitionGroup, ...]
    """A subset of source topics that must be copartitioned."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupTopologyValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The epoch of the topology."""
    subtopologies: tuple[Subtopology, ...]
    """The sub-topologies of the streams application."""
