"""The coordinator's view of upstream topics (Kafka: the metadata image).

Topic ids and partition counts come from the upstream cluster; the gateway's
cluster view publishes a new image whenever they change.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from .hashing import topic_hash


@dataclass(frozen=True, slots=True)
class TopicImage:
    topic_id: uuid.UUID
    name: str
    num_partitions: int
    # Sorted racks of each partition's replicas; part of Kafka's topic hash (KIP-1101).
    partition_racks: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class MetadataImage:
    version: int = 0
    topics_by_name: Mapping[str, TopicImage] = field(default_factory=lambda: MappingProxyType({}))
    topics_by_id: Mapping[uuid.UUID, TopicImage] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def of(cls, topics: Iterable[TopicImage], version: int = 1) -> MetadataImage:
        topics = list(topics)
        return cls(version=version,
                   topics_by_name=MappingProxyType({t.name: t for t in topics}),
                   topics_by_id=MappingProxyType({t.topic_id: t for t in topics}))

    def num_partitions(self, topic_id: uuid.UUID) -> int:
        t = self.topics_by_id.get(topic_id)
        return t.num_partitions if t is not None else -1


EMPTY_IMAGE = MetadataImage()

_hash_cache: dict[TopicImage, int] = {}


def cached_topic_hash(t: TopicImage) -> int:
    """Kafka keeps a `topicHashCache`; topic images are immutable values, so cache by value."""
    h = _hash_cache.get(t)
    if h is None:
        if len(_hash_cache) > 100_000:
            _hash_cache.clear()
        h = _hash_cache[t] = topic_hash(t.topic_id, t.name, t.num_partitions, t.partition_racks)
    return h


def changed_topic_names(old: MetadataImage, new: MetadataImage) -> set[str]:
    """Topics created, deleted or changed (id, partition count, racks) between two images."""
    changed = {n for n in old.topics_by_name.keys() ^ new.topics_by_name.keys()}
    for name, t in new.topics_by_name.items():
        o = old.topics_by_name.get(name)
        if o is not None and o != t:
            changed.add(name)
    return changed
