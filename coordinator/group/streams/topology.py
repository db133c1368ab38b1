"""A streams topology configured against the metadata image (Kafka: `InternalTopicManager.configureTopics`,
`RepartitionTopics`, `CopartitionedTopicsEnforcer`, `ChangelogTopics`).

Rules:
- source topics must all exist, else MISSING_SOURCE_TOPICS ("Source topics a, b are missing.");
- a repartition topic without a fixed partition count gets the largest count of the source
  topics of the subtopologies that write to it, repeated until nothing changes (a chain of
  repartitions); if no count can be decided the topology is not ready (MISSING_SOURCE_TOPICS);
- copartitioned source topics must have one count (INCORRECTLY_PARTITIONED_TOPICS), and the
  repartition topics of their group that have no fixed count take it;
- a changelog topic has one partition per task of its subtopology, and a subtopology has as
  many tasks as its largest source or repartition-source topic has partitions;
- an internal topic that exists with another partition count is INCORRECTLY_PARTITIONED_TOPICS,
  one that does not exist yet is MISSING_INTERNAL_TOPICS ("Internal topics are missing: ...");
  creating them is the caller's work (`ConfiguredTopology.to_create`);
- the result is a value: the group keeps it as soft state for (topology epoch, metadata hash).
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from ..hashing import group_metadata_hash, java_string_hash
from ..image import MetadataImage, cached_topic_hash
from .model import Topology

# StreamsGroupHeartbeatResponse.Status codes (KIP-1071; 5 and 6 from Kafka 4.3/4.4)
STALE_TOPOLOGY = 0
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3
SHUTDOWN_APPLICATION = 4
ASSIGNMENT_DELAYED = 5
MISSING_CLIENT_TAGS = 6


class TopicConfigurationError(Exception):
    """Kafka's `TopicConfigurationException`: a heartbeat status code and its detail."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass(frozen=True)
class ConfiguredTopology:
    topology_epoch: int
    metadata_hash: int
    # subtopology id -> number of tasks; None when the topics could not be configured at all
    task_counts: dict[str, int] | None
    # internal topic -> partitions it must be created with
    to_create: dict[str, int] = field(default_factory=dict)
    status: tuple[int, str] | None = None
    # internal topic (repartition or changelog) -> its decided partition count (the describe shows it)
    internal_partitions: dict[str, int] = field(default_factory=dict)

    def is_ready(self) -> bool:
        return self.status is None and self.task_counts is not None

    def all_tasks(self) -> list[tuple[str, int]]:
        return [(sub, p) for sub, n in sorted((self.task_counts or {}).items()) for p in range(n)]


def metadata_hash(topology: Topology, image: MetadataImage) -> int:
    """Kafka's group metadata hash (KIP-1101) over the topology's topics that exist."""
    topics = image.topics_by_name
    return group_metadata_hash((name, cached_topic_hash(topics[name]))
                               for name in topology.required_topics() if name in topics)


def summarize(topics) -> str:
    """Topic names as Kafka joins them: in the iteration order of a Java HashMap/HashSet of
    them (default capacity 16, doubled past 0.75 load; bucket = spread String.hashCode),
    insertion order within a bucket. Kafka's status details list them so."""
    names = list(dict.fromkeys(topics))
    capacity = 16
    while len(names) > capacity * 3 // 4:
        capacity *= 2

    def bucket(name: str) -> int:
        h = java_string_hash(name) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)
    return ", ".join(sorted(names, key=bucket))      # sorted() is stable: insertion order kept


def configure(topology: Topology, image: MetadataImage, hash_: int) -> ConfiguredTopology:
    try:
        missing = [t for s in topology.subtopologies for t in s.source_topics if t not in image.topics_by_name]
        if missing:
            raise TopicConfigurationError(MISSING_SOURCE_TOPICS, f"Source topics {summarize(missing)} are missing.")
        decided = _decide_partition_counts(topology, image)
        counts = {s.subtopology_id: max((_count(t, image, decided) for t in
                                         (*s.source_topics, *(r.name for r in s.repartition_source_topics))),
                                        default=0)
                  for s in topology.subtopologies}
        for s in topology.subtopologies:
            for c in s.state_changelog_topics:
                decided[c.name] = counts[s.subtopology_id]
        to_create: dict[str, int] = {}
        for s in topology.subtopologies:
            for t in (*s.repartition_source_topics, *s.state_changelog_topics):
                expected = decided[t.name]
                existing = image.topics_by_name.get(t.name)
                if existing is None:
                    to_create[t.name] = expected
                elif existing.num_partitions != expected:
                    raise TopicConfigurationError(
                        INCORRECTLY_PARTITIONED_TOPICS, f"Existing topic {t.name} has different number of "
                        f"partitions: expected {expected}, found {existing.num_partitions}")
        status = None if not to_create else (
            MISSING_INTERNAL_TOPICS, f"Internal topics are missing: {summarize(to_create)}")
        internal = {t.name: decided[t.name] for s in topology.subtopologies
                    for t in (*s.repartition_source_topics, *s.state_changelog_topics)}
        return ConfiguredTopology(topology.epoch, hash_, counts, to_create, status, internal)
    except TopicConfigurationError as e:
        return ConfiguredTopology(topology.epoch, hash_, None, {}, (e.status, e.detail))


def _count(topic: str, image: MetadataImage, decided: dict[str, int]) -> int:
    t = image.topics_by_name.get(topic)
    if t is not None:
        return t.num_partitions
    return decided.get(topic, 0)


def _decide_partition_counts(topology: Topology, image: MetadataImage) -> dict[str, int]:
    """Kafka's `RepartitionTopics.setRepartitionSourceTopicPartitionCount`: passes over the
    undecided repartition topics (here in name order) until none is left, each taking the
    largest count known at that moment among the inputs of the subtopologies that write it.
    Run as events, not passes: a topic is decided at the first (pass, place) where one input
    of one of its writers is known, so a chain of n repartitions costs O(n log n) where
    passes cost O(n^2) (a 2,000-link chain in one heartbeat took 5 s of the event loop, and a
    request may be 100 MB). The decisions and their order are the passes'.
    A name given a fixed count in one subtopology is fixed, even where another leaves it open
    (Kafka keeps one definition per name)."""
    decided: dict[str, int] = {}
    named: set[str] = set()
    for s in topology.subtopologies:
        for r in s.repartition_source_topics:
            named.add(r.name)
            if r.partitions > 0:
                decided[r.name] = r.partitions
    flexible = named - decided.keys()
    place = {name: i for i, name in enumerate(sorted(flexible))}
    writers: dict[str, list[int]] = {}
    readers: dict[str, list[int]] = {}
    for i, s in enumerate(topology.subtopologies):
        for sink in s.repartition_sink_topics:
            writers.setdefault(sink, []).append(i)
        for t in (*s.source_topics, *(r.name for r in s.repartition_source_topics)):
            readers.setdefault(t, []).append(i)
    largest: list[int | None] = [None] * len(topology.subtopologies)   # per writer: its largest known input
    due: list[tuple[int, int, str]] = []                                 # (pass, place, topic)

    def known(topic: str, count: int, when: tuple[int, int]) -> None:
        for i in readers.get(topic, ()):
            before = largest[i]
            largest[i] = count if before is None else max(before, count)
            if before is None:      # the writer's first known input: its sinks can be decided
                for sink in topology.subtopologies[i].repartition_sink_topics:
                    if sink in place and sink not in decided:
                        at = place[sink]
                        heapq.heappush(due, (when[0] if at > when[1] else when[0] + 1, at, sink))

    start = (0, len(place))
    for topic in readers:
        found = image.topics_by_name.get(topic)
        count = found.num_partitions if found is not None else (decided.get(topic) if topic not in flexible else None)
        if count is not None:
            known(topic, count, start)
    while due:
        when_pass, at, name = heapq.heappop(due)
        if name in decided:
            continue
        decided[name] = max(c for i in writers[name] if (c := largest[i]) is not None)
        if name not in image.topics_by_name:      # an existing topic's own count was known from the start
            known(name, decided[name], (when_pass, at))
    if flexible - decided.keys():
        raise TopicConfigurationError(
            MISSING_SOURCE_TOPICS, "Failed to compute number of partitions for all repartition topics, make "
            "sure all user input topics are created and all Pattern subscriptions match at least one topic "
            "in the cluster")
    for s in topology.subtopologies:
        for group in s.copartitioned_topic_sets():
            _enforce_copartitioning(group, image, decided, flexible)
    return decided


def _known(topic: str, image: MetadataImage, decided: dict[str, int]) -> int | None:
    t = image.topics_by_name.get(topic)
    return t.num_partitions if t is not None else decided.get(topic)


def _enforce_copartitioning(group: set[str], image: MetadataImage, decided: dict[str, int],
                            flexible: set[str]) -> None:
    """`CopartitionedTopicsEnforcer.enforce`: one partition count for the whole group."""
    sources = {t: image.topics_by_name[t].num_partitions for t in group
               if t not in decided and t not in flexible and t in image.topics_by_name}
    if len(set(sources.values())) > 1:
        listed = ", ".join(f"{t}={n}" for t, n in sorted(sources.items()))
        raise TopicConfigurationError(INCORRECTLY_PARTITIONED_TOPICS,
                                      f"Following topics do not have the same number of partitions: [{listed}]")
    fixed = {t: decided[t] for t in group if t in decided and t not in flexible}
    if sources:
        count = next(iter(sources.values()))
        for t, n in sorted(fixed.items()):
            if n != count:
                raise TopicConfigurationError(
                    INCORRECTLY_PARTITIONED_TOPICS, f"Number of partitions [{n}] of repartition topic [{t}] "
                    f"doesn't match number of partitions [{count}] of the source topic.")
    elif fixed:
        count = max(fixed.values())
    else:
        count = max((decided.get(t, 0) for t in group), default=0)
    for t in group:
        if t in flexible:
            decided[t] = count
