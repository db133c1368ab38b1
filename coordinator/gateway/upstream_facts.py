"""What the admin rules read of the upstream: kcoord's metadata view as a ``ClusterFacts``
(admin_limits.py), and what kind of broker it is.

Rules: no I/O; everything comes from the gateway's ClusterView as its last refresh left it
(the view may lag the upstream by one refresh). The upstream is told apart by the API keys
its ApiVersions lists, as produce_check.py and cluster/upstream.py tell it: every Apache
Kafka since 0.11 lists OffsetForLeaderEpoch; Tansu 0.6, which has no replication, does not.
"""
from __future__ import annotations

from collections.abc import Collection
from typing import Any

from .admin_limits import ClusterFacts
from .produce_check import OFFSET_FOR_LEADER_EPOCH

TANSU_NUM_PARTITIONS = 3    # what Tansu 0.6 creates for num_partitions=-1 (measured)


def is_kafka(upstream_api_keys: Collection[int]) -> bool:
    return OFFSET_FOR_LEADER_EPOCH in upstream_api_keys


def default_partitions(config: Any, upstream_api_keys: Collection[int]) -> int:
    """The upstream's num.partitions: the configured one, else 3 in front of Tansu and
    Kafka's default 1 in front of Kafka."""
    configured = getattr(config, "num_partitions", 0)
    if configured > 0:
        return int(configured)
    return 1 if is_kafka(upstream_api_keys) else TANSU_NUM_PARTITIONS


def cluster_facts(gateway: Any) -> ClusterFacts:
    """What the size rules read of the gateway's metadata view: its brokers, each topic's
    partition count and name by id, and the upstream's num.partitions."""
    cluster = gateway.cluster
    topics = cluster.image.topics_by_name
    by_id = cluster.image.topics_by_id

    def partitions(name: str) -> int | None:
        topic = topics.get(name)
        return None if topic is None else topic.num_partitions

    def topic_name(topic_id: Any) -> str | None:
        topic = by_id.get(topic_id)
        return None if topic is None else topic.name
    brokers = cluster.brokers
    return ClusterFacts(len(brokers), partitions,
                        default_partitions(getattr(gateway, "config", None), cluster.upstream_api_versions),
                        topic_name, frozenset(brokers))
