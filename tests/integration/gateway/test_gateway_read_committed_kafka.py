"""What Tansu could not show (issue 11, section 6): a read_committed consumer through kcoord in
front of a real Apache Kafka skips aborted records. Tansu's counterpart is the strict xfail
``test_read_committed_consumer_skips_aborted_records`` in test_gateway_clients.py."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from support.admin import create_topic

from test_gateway_clients import ALL_SIX, COMMITTED, _transactions


def consume_to_end(bootstrap: str, topic: str, isolation: str, timeout: float = 30.0) -> list[bytes]:
    """Partition 0 from offset 0 up to the end the consumer may read (the LSO for read_committed)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-assign-only",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "isolation.level": isolation})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None and message.error().code() == KafkaError._PARTITION_EOF:
                return values
            assert message.error() is None, f"{isolation} consumer of {topic} at {bootstrap}: {message.error()}"
            values.append(message.value())
        raise AssertionError(f"{isolation} consumer of {topic} at {bootstrap}: no end of partition "
                             f"within {timeout}s, read {values}")
    finally:
        consumer.close()


@pytest.mark.parametrize("upstream", ["kafka44", pytest.param("kafka39", marks=pytest.mark.kafka_subset)],
                         indirect=True)
def test_read_committed_through_kcoord_skips_aborted_records(upstream, kcoord, names) -> None:
    topic = names.topic()
    create_topic(kcoord.bootstrap, topic, 1)
    _transactions(kcoord.bootstrap, topic, names.group("txn"))
    received = consume_to_end(kcoord.bootstrap, topic, "read_committed")
    assert received == COMMITTED, f"read_committed through kcoord in front of {upstream}"
    # The aborted records were written (read_uncommitted sees all six); Kafka itself agrees.
    assert consume_to_end(kcoord.bootstrap, topic, "read_uncommitted") == ALL_SIX
    assert consume_to_end(upstream.bootstrap, topic, "read_committed") == COMMITTED
