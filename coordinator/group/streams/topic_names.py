"""The checks Kafka's KafkaApis makes on a streams topology's topic names before the group
coordinator sees a StreamsGroupHeartbeat (Kafka 4.4 `handleStreamsGroupHeartbeat`, with
`Topic.isInternal` and `Topic.isValid`), and the internal topics a heartbeat asks to create.

Rules:
- the names are the topology's required topics in Kafka's order: per subtopology its source
  topics, repartition sink topics, repartition source topics, changelog topics; each name once;
- a Kafka internal topic (`__consumer_offsets`, `__transaction_state`, `__share_group_state`),
  or kcoord's own state topic, which the gateway shows as internal, is STREAMS_INVALID_TOPOLOGY
  "Use of Kafka internal topics a,b in a Kafka Streams topology is prohibited."; then an
  invalid name (empty, "." or "..", longer than 249, a character outside [a-zA-Z0-9._-]) is
  STREAMS_INVALID_TOPOLOGY "Topic names a,b are not valid topic names.";
- `internal_topics_to_create` reads what the last heartbeat configured (the soft state, no
  write): the internal topics missing from the metadata image, with their partition counts,
  and the replication factor and configs the topology gives them (0: the cluster's default,
  -1 sent for it; any other factor as given).
"""
from __future__ import annotations

import re
from typing import Any, NamedTuple

from .membership import soft_of
from .model import Topology

KAFKA_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def required_topics(topology: Any) -> list[str]:
    """A request's topology's topic names, each once, in Kafka's order."""
    seen: dict[str, None] = {}
    for s in topology.subtopologies or ():
        for name in (*(s.source_topics or ()), *(s.repartition_sink_topics or ()),
                     *(t.name for t in s.repartition_source_topics or ()),
                     *(t.name for t in s.state_changelog_topics or ())):
            seen.setdefault(name, None)
    return list(seen)


def is_valid(name: str) -> bool:
    return (0 < len(name) <= MAX_NAME_LENGTH and name not in (".", "..")
            and _LEGAL.fullmatch(name) is not None)


def invalid_topology(names: list[str], state_topic: str | None = None) -> str | None:
    """Kafka's message for a topology naming internal or invalid topics, or None."""
    internal = [n for n in names if n in KAFKA_INTERNAL_TOPICS or n == state_topic]
    if internal:
        return f"Use of Kafka internal topics {','.join(internal)} in a Kafka Streams topology is prohibited."
    invalid = [n for n in names if not is_valid(n)]
    if invalid:
        return f"Topic names {','.join(invalid)} are not valid topic names."
    return None


class CreatableTopic(NamedTuple):
    name: str
    partitions: int
    replication_factor: int           # -1: the cluster's default
    configs: tuple[tuple[str, str], ...]


def internal_topics_to_create(shard: Any, group_id: str, topology: Topology | None) -> list[CreatableTopic]:
    """The internal topics the group's configured topology still misses (module rules);
    ``topology`` is the group's, or the joining member's before its record is replayed."""
    configured = soft_of(shard, group_id).configured
    if topology is None or configured is None or configured.topology_epoch != topology.epoch \
            or not configured.to_create:
        return []
    infos = {t.name: t for s in topology.subtopologies
             for t in (*s.repartition_source_topics, *s.state_changelog_topics)}
    out = []
    for name, partitions in sorted(configured.to_create.items()):
        info = infos.get(name)
        # Kafka's `toCreatableTopic`: 0 (unset) is the cluster's default (-1), any other factor
        # is sent as given: -2 is refused by kcoord's copy of the controller's rules (streams_topics.py),
        # 32767 by the upstream's controller, which knows its brokers
        factor = info.replication_factor if info is not None and info.replication_factor != 0 else -1
        out.append(CreatableTopic(name, partitions, factor, info.configs if info is not None else ()))
    return out
