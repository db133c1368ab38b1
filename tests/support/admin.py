"""Topic administration through confluent-kafka's AdminClient (works fully against Tansu)."""
from __future__ import annotations

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .wait import wait_until


def admin_client(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, topic: str, partitions: int, *, config: dict[str, str] | None = None,
                 timeout: float = 10.0) -> None:
    """Create ``topic`` and wait until metadata shows all its partitions.

    Create explicitly: producing to a missing topic makes Tansu auto-create it with 4 partitions.
    """
    admin = admin_client(bootstrap)
    futures = admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})],
                                  operation_timeout=timeout, request_timeout=timeout)
    futures[topic].result(timeout)

    def visible() -> bool:
        md = admin.list_topics(topic, timeout=timeout).topics.get(topic)
        return md is not None and md.error is None and len(md.partitions) == partitions

    wait_until(visible, timeout, 0.05, f"topic {topic} with {partitions} partitions in metadata")


def delete_topic(bootstrap: str, topic: str, timeout: float = 10.0) -> None:
    try:
        admin_client(bootstrap).delete_topics([topic], operation_timeout=timeout)[topic].result(timeout)
    except KafkaException as exc:
        raise RuntimeError(f"deleting topic {topic} failed: {exc}") from exc


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int,
                      timeout: float = 10.0) -> dict[int, int]:
    """The group's committed offset per partition (-1001 = none), read with OffsetFetch."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=timeout)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in tps}
