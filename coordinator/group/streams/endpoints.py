"""Interactive-query metadata (KIP-1071 `UserEndpoint`, `EndpointInformationEpoch`,
`PartitionsByUserEndpoint`; Kafka: `EndpointToPartitionsManager`): which input partitions each
application instance serves, so `KafkaStreams.metadataForAllStreamsClients()` can route queries.

Rules:
- the group's endpoint-information epoch is soft state (model.Soft) and moves when a member
  joins or leaves with an endpoint, changes its endpoint, or a member with an endpoint gets
  other tasks (membership.endpoint_changed; a group without endpoints stays at 0, as Kafka 4.4);
- a heartbeat whose EndpointInformationEpoch differs from the group's gets the map (differs,
  not only lower: a new coordinator starts again at 0, and the member adopts the epoch it is
  sent, so it is refreshed once);
- for each member with an endpoint: the partitions of its active (and standby) tasks on the
  source and repartition-source topics of each task's subtopology, limited to the partitions
  the topic has (a topic with fewer partitions than the subtopology has tasks);
- only for a ready topology (the topics' partition counts are known).
"""
from __future__ import annotations

from collections.abc import Iterable

from ..image import MetadataImage
from .model import StreamsMember, TaskSet, Topology, by_subtopology


def _topic_partitions(mod, tasks: TaskSet, topology: Topology, image: MetadataImage) -> tuple:
    subs = topology.by_id()
    out: dict[str, set[int]] = {}
    for sid, partitions in by_subtopology(tasks):
        s = subs.get(sid)
        if s is None:
            continue
        for topic in (*s.source_topics, *(r.name for r in s.repartition_source_topics)):
            t = image.topics_by_name.get(topic)
            count = t.num_partitions if t is not None else 0
            out.setdefault(topic, set()).update(p for p in partitions if p < count)
    return tuple(mod.TopicPartition(topic=topic, partitions=tuple(sorted(ps)))
                 for topic, ps in sorted(out.items()) if ps)


def partitions_by_endpoint(mod, members: Iterable[StreamsMember], topology: Topology, image: MetadataImage) -> tuple:
    """The response's PartitionsByUserEndpoint (`mod`: the response schema of the version)."""
    return tuple(
        mod.EndpointToPartitions(
            user_endpoint=mod.Endpoint(host=m.user_endpoint[0], port=m.user_endpoint[1]),
            active_partitions=_topic_partitions(mod, m.assigned.active, topology, image),
            standby_partitions=_topic_partitions(mod, m.assigned.standby, topology, image))
        for m in sorted(members, key=lambda m: m.member_id) if m.user_endpoint is not None)
