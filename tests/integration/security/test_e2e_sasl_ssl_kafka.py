"""The deployment issue 13 is for, end to end: `kcoord serve` with a SASL_SSL listener in front
of a real Apache Kafka 4.3 that requires SASL_SSL (SCRAM-SHA-512) and runs Kafka's
StandardAuthorizer; kcoord's own connections authenticate as its own principal
(`upstream.*`), clients keep their credentials (SASL passthrough), and groups are
authorized by kcoord from the upstream's ACLs (`authorizer=upstream`).

librdkafka consumes as alice on the consumer (KIP-848) and the classic protocol; a group
alice has no ACL for is refused with GROUP_AUTHORIZATION_FAILED; a wrong password fails
as against the broker."""
from __future__ import annotations

import uuid

import pytest

from support.kafka_broker import USER, USER_PASSWORD
from support.kcoord import KcoordProcess
from support.wait import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

# The `secured` fixture (Kafka 4.3 SASL_SSL + StandardAuthorizer, kcoord SASL_SSL in front,
# authorizer=upstream) is in conftest.py, shared with test_e2e_java_sasl_ssl.py; it holds
# this topic with these records.
TOPIC = "e2e-topic"
RECORDS = 20


def _consumer_config(kc: KcoordProcess, ca_path, group: str, protocol: str, password: str = USER_PASSWORD):
    conf = {"bootstrap.servers": kc.bootstrap_of("SASL_SSL"), "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": USER, "sasl.password": password,
            "ssl.ca.location": str(ca_path), "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "group.protocol": protocol}
    if protocol == "classic":
        conf["session.timeout.ms"] = 6000
    return conf


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_alice_consumes_and_commits_through_sasl_ssl(secured, protocol):
    from confluent_kafka import Consumer, TopicPartition

    _, kc, ca_path = secured
    group = f"e2e-ok-{protocol}-{uuid.uuid4().hex[:6]}"
    consumer = Consumer(_consumer_config(kc, ca_path, group, protocol))
    try:
        consumer.subscribe([TOPIC])
        seen: list[bytes] = []

        def all_read() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                seen.append(msg.value())
            return len(seen) >= RECORDS

        wait_until(all_read, 90, interval=0, message=lambda: f"{len(seen)} of {RECORDS} records read")
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)], timeout=30)
        assert sum(tp.offset for tp in committed) == RECORDS
    finally:
        consumer.close()


def test_a_group_without_acls_is_refused(secured):
    from confluent_kafka import Consumer, KafkaError

    _, kc, ca_path = secured
    consumer = Consumer(_consumer_config(kc, ca_path, f"e2e-denied-{uuid.uuid4().hex[:6]}", "consumer"))
    try:
        consumer.subscribe([TOPIC])
        errors: list = []

        def refused() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is not None:
                errors.append(msg.error())
            # librdkafka raises it as fatal for the consumer protocol, naming the broker's error.
            return any(e.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
                       or (e.code() == KafkaError._FATAL and "Group authorization failed" in e.str()) for e in errors)

        wait_until(refused, 60, interval=0, message=lambda: f"errors seen: {errors}")
    finally:
        consumer.close()


def test_a_wrong_password_fails_as_against_the_broker(secured):
    from confluent_kafka import Consumer, KafkaError

    cluster, kc, ca_path = secured

    def auth_error(conf) -> str:
        errors: list = []
        consumer = Consumer({**conf, "error_cb": errors.append})
        try:
            consumer.subscribe([TOPIC])
            wait_until(lambda: consumer.poll(0.2) is None and any(
                e.code() == KafkaError._AUTHENTICATION for e in errors), 30, interval=0,
                message=lambda: f"errors seen: {errors}")
        finally:
            consumer.close()
        return next(e for e in errors if e.code() == KafkaError._AUTHENTICATION).str()

    through = auth_error(_consumer_config(kc, ca_path, "e2e-ok-pw", "consumer", password="wrong"))
    direct = auth_error({**cluster.client_config(USER, "wrong"), "group.id": "e2e-ok-pw"})
    assert "SASL authentication error" in through and "SASL authentication error" in direct
    # The broker's own message reaches the client unchanged (librdkafka appends its timing).
    def message(text: str) -> str:
        return text.split(": ", 2)[-1].split(" (after ")[0]
    assert message(through) == message(direct) and "invalid credentials" in message(direct)
