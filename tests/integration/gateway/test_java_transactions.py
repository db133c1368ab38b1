"""A Java 4.3 transactional producer through kcoord in front of Kafka 4.3 and Tansu.

Kafka 4.x finalizes `transaction.version=2`, with which Java >= 4.0 producers rely on
Produce v12's implicit AddPartitionsToTxn (KIP-890). kcoord forwards Produce v10+ (it rewrites
their KIP-951 NodeEndpoints, coordinator/gateway/leader_endpoints.py) and serves TxnOffsetCommit
v5, so it forwards level 2 (coordinator/group/offsets/txn_features.py) and the producer adds its
partitions implicitly; Tansu finalizes no level 2 and the producer adds them explicitly."""
from __future__ import annotations

import pytest
from confluent_kafka import Consumer

from support.admin import create_topic
from support.kafka_tools import run_tool
from support.wait import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.java]
RECORDS = 500


def test_java_transactional_producer_commits_through_kcoord(kcoord, upstream, names, java_classes):
    topic = names.topic()
    create_topic(upstream.bootstrap, topic, 2)
    result = run_tool("org.apache.kafka.tools.ProducerPerformance", [
        "--topic", topic, "--num-records", str(RECORDS), "--record-size", "20", "--throughput", "-1",
        "--transactional-id", f"tx-{topic}", "--transaction-duration-ms", "100",
        "--producer-props", f"bootstrap.servers={kcoord.bootstrap}", "acks=all"], timeout=120)
    assert result.rc == 0, result.describe()
    consumer = Consumer({"bootstrap.servers": kcoord.bootstrap, "group.id": names.group(),
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    seen = 0
    try:
        consumer.subscribe([topic])

        def read() -> bool:
            nonlocal seen
            for m in consumer.consume(500, 0.5):
                if m.error() is None:
                    seen += 1
            return seen >= RECORDS

        wait_until(read, 60, message="every committed record is read with read_committed")
    finally:
        consumer.close()
    assert seen == RECORDS
