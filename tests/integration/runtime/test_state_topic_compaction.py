"""What Tansu could not show (issue 11, section 6): kcoord's state topic on a real Apache Kafka is
compacted by Kafka's log cleaner, and a kcoord that reloads the compacted log serves the same
state. kcoord creates its state topic as Kafka creates __consumer_offsets (coordinator/runtime/
state_topic.py TOPIC_CONFIGS): cleanup.policy=compact, compression.type=producer and 100 MiB
segments; segment time and the dirty ratio are the cluster's defaults, so this test lowers them
on the topic itself (the broker's cleaner settings are the fixture's, support.kafka_broker.SETTINGS)."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from coordinator.runtime.state_topic import TOPIC_CONFIGS
from support.admin import committed_offsets, create_topic
from support.kcoord import KcoordProcess
from support.wait import wait_until

GROUPS, PARTITIONS, ROUNDS = 3, 4, 40


def count_records(bootstrap: str, topic: str, timeout: float = 30.0) -> int:
    """Records in partition 0 of ``topic`` from its log start to its end, read straight from Kafka."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-assign-only",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        count, deadline = 0, time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None and message.error().code() == KafkaError._PARTITION_EOF:
                return count
            assert message.error() is None, f"reading {topic}: {message.error()}"
            count += 1
        raise AssertionError(f"reading {topic}: no end of partition within {timeout}s after {count} records")
    finally:
        consumer.close()


class Committer:
    """One simple (unsubscribed) group member per group, committing offsets through kcoord."""

    def __init__(self, bootstrap: str, groups: list[str], topic: str) -> None:
        self.topic = topic
        self.consumers = {g: Consumer({"bootstrap.servers": bootstrap, "group.id": g, "enable.auto.commit": False})
                          for g in groups}

    def commit_all(self, offsets: dict[int, int]) -> None:
        for consumer in self.consumers.values():
            consumer.commit(offsets=[TopicPartition(self.topic, p, o) for p, o in offsets.items()],
                            asynchronous=False)

    def close(self) -> None:
        for consumer in self.consumers.values():
            consumer.close()


def topic_configs(bootstrap: str, topic: str) -> dict[str, str]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return {k: e.value for k, e in admin.describe_configs([resource])[resource].result(20).items()}


def set_topic_configs(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    admin = AdminClient({"bootstrap.servers": bootstrap})      # kept alive until the result is in
    admin.incremental_alter_configs([resource])[resource].result(20)


@pytest.mark.parametrize("upstream", ["kafka44"], indirect=True)
def test_compacted_state_topic_reloads_to_the_same_state(upstream, names) -> None:
    state_topic = f"__kcoord_{names.topic()}"
    kcoord = KcoordProcess(upstream=upstream.bootstrap, state_topic=state_topic, state_partitions=1).start()
    try:
        topic = names.topic()
        create_topic(kcoord.bootstrap, topic, PARTITIONS)
        configs = topic_configs(upstream.bootstrap, state_topic)
        assert {k: configs[k] for k in TOPIC_CONFIGS} == TOPIC_CONFIGS, configs
        assert configs["segment.bytes"] == str(100 * 1024 * 1024)      # Kafka's offsets.topic.segment.bytes
        groups = [names.group(f"g{i}") for i in range(GROUPS)]
        committer = Committer(kcoord.bootstrap, groups, topic)
        for round_ in range(1, ROUNDS + 1):          # the same keys over and over: compaction fodder
            committer.commit_all({p: round_ * 10 + p for p in range(PARTITIONS)})
        before = {g: committed_offsets(kcoord.bootstrap, g, topic, PARTITIONS) for g in groups}
        assert all(offsets == {p: ROUNDS * 10 + p for p in range(PARTITIONS)} for offsets in before.values()), before
        written = count_records(upstream.bootstrap, state_topic)
        assert written >= GROUPS * PARTITIONS * ROUNDS, f"{written} records in {state_topic}"

        # Roll segments after 100 ms and clean at any dirty ratio; one more commit per group lands
        # in a new segment, so everything before it may be cleaned (the active one never is).
        set_topic_configs(upstream.bootstrap, state_topic,
                          {"segment.ms": "100", "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"})

        def compacted() -> int | None:
            committer.commit_all({p: ROUNDS * 10 + p for p in range(PARTITIONS)})   # rolls on append
            left = count_records(upstream.bootstrap, state_topic)
            return left if left < written // 4 else None

        left = wait_until(compacted, 60, 0.5, f"Kafka's cleaner compacts {state_topic} below {written // 4} records")
        assert left >= GROUPS * PARTITIONS, f"compaction kept {left} records, fewer than the live keys"
        committer.close()

        kcoord.stop()
        kcoord.restart()                              # reloads the compacted log
        after = {g: committed_offsets(kcoord.bootstrap, g, topic, PARTITIONS) for g in groups}
        assert after == before, f"state after reloading the compacted log ({left} of {written} records)"
    finally:
        if kcoord.process is not None and kcoord.process.poll() is None:
            kcoord.stop()
