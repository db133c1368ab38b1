"""group.protocol=consumer (KIP-848) against plain Tansu, which lacks ConsumerGroupHeartbeat (API 68).

These pin the baseline the kcoord gateway changes, and prove the drivers surface both
failure modes: librdkafka loops silently (no assignment, no error through poll or
error_cb; only its cgrp debug log says why), the Java client fails fast with
UnsupportedVersionException (shared/reference/environment.md sections 4 and 5.2).
"""
from __future__ import annotations

import time

import pytest

from support.admin import create_topic
from support.java import TANSU_BASELINE_JARS, JavaConsumer
from support.rdkafka import RdkafkaConsumer
from support.wait import WaitTimeout


def test_rdkafka_consumer_protocol_gets_no_assignment_from_tansu(tansu, names, ledger, drivers) -> None:
    topic = names.topic()
    create_topic(tansu.bootstrap, topic, 2)
    consumer = drivers.add(RdkafkaConsumer(tansu.bootstrap, topic, names.group(), ledger=ledger,
                                           group_protocol="consumer", debug="cgrp"))
    consumer.start()
    assert consumer.incremental
    with pytest.raises(WaitTimeout):
        consumer.wait_for_assignment(bool, timeout=5)
    assert consumer.events("assigned") == [] and ledger.events() == []
    assert consumer.is_running(), "librdkafka keeps retrying rather than failing"
    unsupported = [line for line in consumer.logs() if "ConsumerGroupHeartbeat" in line and "not supported" in line]
    assert unsupported, f"expected the cgrp log to name the missing API; last logs: {consumer.logs()[-5:]}"
    consumer.close(timeout=15)


def test_rdkafka_consumer_protocol_rejects_classic_only_settings(tansu) -> None:
    for kwargs in ({"session_timeout_ms": 6000}, {"heartbeat_interval_ms": 1000},
                   {"assignment_strategy": "range"}, {"extra_config": {"session.timeout.ms": 6000}}):
        with pytest.raises(ValueError, match="group.protocol=consumer"):
            RdkafkaConsumer(tansu.bootstrap, "t", "g", group_protocol="consumer", **kwargs)


@pytest.mark.java
def test_java_consumer_protocol_fails_fast_with_unsupported_version(tansu, names, drivers, java_classes) -> None:
    topic = names.topic()
    create_topic(tansu.bootstrap, topic, 2)
    started = time.monotonic()
    consumer = drivers.add(JavaConsumer(tansu.bootstrap, topic, names.group(), group_protocol="consumer",
                                        jars=TANSU_BASELINE_JARS))
    consumer.start()
    error = consumer.wait_for_event("error", 15)
    assert error["error"] == "UnsupportedVersionException"
    assert error["fatal"] is True
    assert "CONSUMER group protocol" in error["message"]
    assert consumer.wait_exit(15) == 2
    assert consumer.events("assigned") == [] and not consumer.events("closed")
    assert time.monotonic() - started < 15
