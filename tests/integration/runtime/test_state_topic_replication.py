"""kcoord's state topic on a three-node Apache Kafka: ``state_topic_replication_factor`` defaults to
-1, documented as "the cluster default" (coordinator/config.py), as Kafka replicates
``__consumer_offsets`` (offsets.topic.replication.factor, 3 by default)."""
from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from support.kcoord import KcoordProcess


@pytest.mark.kafka_subset
def test_state_topic_gets_the_cluster_default_replication_factor(kafka44_3node, names) -> None:
    state_topic = f"__kcoord_{names.topic()}"
    kcoord = KcoordProcess(upstream=kafka44_3node.bootstrap, state_topic=state_topic, state_partitions=2).start()
    try:
        md = AdminClient(kafka44_3node.client_config()).list_topics(state_topic, timeout=20).topics[state_topic]
        replicas = {p: len(m.replicas) for p, m in md.partitions.items()}
        assert replicas == {0: 3, 1: 3}, f"replicas per partition of {state_topic} on {kafka44_3node}"
    finally:
        kcoord.stop()
