"""A fence write is only as durable as the state topic (docs/design/fencing.md, "The safety
argument", point 3): at start, fencing=epoch (the default with --instance-id) reads the
topic's replication factor, min.insync.replicas and unclean leader election from a real
three-broker Kafka 4.4, and names each weak setting; a topic that keeps its fence gets no
warning."""
from __future__ import annotations

import asyncio

import pytest
from confluent_kafka.admin import NewTopic

from coordinator.runtime.fenced_state_log import FencedStateLog
from support.admin import admin_client
from support.wait import wait_until

pytestmark = pytest.mark.integration


def _create(bootstrap: str, topic: str, replicas: int, config: dict[str, str]) -> None:
    admin = admin_client(bootstrap)
    admin.create_topics([NewTopic(topic, 1, replicas, config=config)], operation_timeout=30,
                        request_timeout=30)[topic].result(30)

    def listed() -> bool:
        found = admin.list_topics(topic, timeout=10).topics.get(topic)
        partition = found.partitions.get(0) if found is not None else None
        return partition is not None and len(partition.replicas) == replicas

    wait_until(listed, 30, message=f"{topic} listed with {replicas} replicas")


async def _warnings(bootstrap: str, topic: str) -> list[str]:
    log = FencedStateLog(bootstrap, topic, 1, fencing="epoch")
    try:
        await log.start()
        assert log.fence_upkeep is not None
        return log.fence_upkeep.warnings
    finally:
        await log.stop()


def test_each_weak_setting_of_the_state_topic_is_named_at_start_and_a_durable_one_passes(kafka44_3node, names):
    bootstrap = kafka44_3node.bootstrap
    weak, durable = f"__kcoord_{names.topic()}", f"__kcoord_{names.topic()}"
    _create(bootstrap, weak, 2, {"min.insync.replicas": "1", "unclean.leader.election.enable": "true"})
    _create(bootstrap, durable, 3, {"min.insync.replicas": "2", "unclean.leader.election.enable": "false"})
    warnings = asyncio.run(_warnings(bootstrap, weak))
    assert len(warnings) == 3, warnings
    assert f"state topic {weak}: replication factor 2 < 3" in warnings[0], warnings
    assert "min.insync.replicas=1 < 2" in warnings[1] and "unclean.leader.election.enable=true" in warnings[2]
    assert asyncio.run(_warnings(bootstrap, durable)) == []
