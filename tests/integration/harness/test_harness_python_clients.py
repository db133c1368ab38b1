"""aiokafka and kafka-python classic consumers: consume, commit, close, against a real Tansu."""
from __future__ import annotations

import pytest

from support.admin import committed_offsets, create_topic
from support.aiokafka_driver import AiokafkaConsumer
from support.kafka_python_driver import KafkaPythonConsumer
from support.produce import produce_records


@pytest.mark.parametrize("driver_class", [AiokafkaConsumer, KafkaPythonConsumer], ids=["aiokafka", "kafka-python"])
def test_quick_consume_commit_close(driver_class, tansu, names, ledger, drivers) -> None:
    topic, group = names.topic(), names.group()
    create_topic(tansu.bootstrap, topic, 2)
    produced = produce_records(tansu.bootstrap, topic, 40)
    consumer = drivers.add(driver_class(tansu.bootstrap, topic, group, ledger=ledger, session_timeout_ms=6000))
    consumer.start()
    consumer.wait_for_assignment(lambda a: a == {(topic, 0), (topic, 1)}, 20)
    consumer.wait_for(lambda: len(consumer.consumed()) >= len(produced), 20, "all records")
    consumer.close()

    assert sorted(consumer.consumed_values()) == sorted(r.value for r in produced)
    assert consumer.events("closed") and consumer.assignment() == frozenset()
    assert consumer.events("committed")
    assert not consumer.errors()
    ledger.assert_no_double_ownership(allow_anomalies=False)
    assert ledger.records_outside_ownership(consumer.consumed()) == []
    end = {p: 1 + max(r.offset for r in produced if r.partition == p) for p in {r.partition for r in produced}}
    assert committed_offsets(tansu.bootstrap, group, topic, 2) == {p: end.get(p, -1001) for p in range(2)}
