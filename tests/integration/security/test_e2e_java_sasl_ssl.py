"""The Java 4.3 client through the deployment issue 13 is for (point 8): `kcoord serve` with a
SASL_SSL listener in front of a real Apache Kafka 4.3 that requires SASL_SSL (SCRAM-SHA-512)
and runs Kafka's StandardAuthorizer, groups authorized by kcoord from the upstream's ACLs
(`authorizer=upstream`). The setup is conftest.py's ``secured`` (shared with the librdkafka
test, test_e2e_sasl_ssl_kafka.py).

The Java consumer (migration/rehearse/java/ConsumerDriver.java) logs in as alice with her own
SCRAM credentials, trusts kcoord's CA (PEM truststore, KIP-651) with hostname verification on,
consumes every record and commits on the consumer (KIP-848) and the classic protocol; a group
alice has no ACL for ends the Java consumer with GroupAuthorizationException."""
from __future__ import annotations

import uuid

import pytest

from support.kafka_broker import USER, USER_PASSWORD
from support.wait import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400), pytest.mark.usefixtures("java_classes")]

# conftest.py's `secured` holds this topic (2 partitions) with these records; alice may READ
# it and READ the groups prefixed "e2e-ok-".
TOPIC = "e2e-topic"
RECORDS = 20


def java_security_props(ca_path) -> dict[str, str]:
    """What a Java client sets to reach kcoord's SASL_SSL listener as alice."""
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": ("org.apache.kafka.common.security.scram.ScramLoginModule required "
                             f'username="{USER}" password="{USER_PASSWORD}";'),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca_path),
        # Java's default ("https"): the certificate's SANs must cover the advertised host.
        "ssl.endpoint.identification.algorithm": "https",
    }


def java_consumer(kc, ca_path, group: str, protocol: str):
    from support.java import JavaConsumer

    return JavaConsumer(kc.bootstrap_of("SASL_SSL", "localhost"), TOPIC, group, group_protocol=protocol,
                        extra_props=java_security_props(ca_path))


def committed_through_kcoord(kc, ca_path, group: str) -> int:
    """Sum of the group's committed offsets, read through kcoord as alice (librdkafka)."""
    from confluent_kafka import Consumer, TopicPartition

    reader = Consumer({"bootstrap.servers": kc.bootstrap_of("SASL_SSL", "localhost"),
                       "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                       "sasl.username": USER, "sasl.password": USER_PASSWORD, "ssl.ca.location": str(ca_path),
                       "group.id": group, "enable.auto.commit": False})
    try:
        committed = reader.committed([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)], timeout=30)
        return sum(tp.offset for tp in committed if tp.offset >= 0)
    finally:
        reader.close()


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_java_consumes_and_commits_through_sasl_ssl(secured, protocol):
    _, kc, ca_path = secured
    group = f"e2e-ok-java-{protocol}-{uuid.uuid4().hex[:6]}"
    consumer = java_consumer(kc, ca_path, group, protocol)
    try:
        consumer.start(timeout=60)
        consumer.wait_for(lambda: len({(r.partition, r.offset) for r in consumer.consumed()}) >= RECORDS
                          or consumer.returncode is not None, 120,
                          f"{RECORDS} records consumed by the Java client")
        assert not consumer.errors(), f"{consumer.errors()}\nstderr:\n{consumer.stderr_text()[-3000:]}"
        values = {r.value for r in consumer.consumed()}
        assert values == {f"v{i}" for i in range(RECORDS)}
        # The driver commits each batch (commitSync through kcoord's coordinator): the last
        # commit per partition reaches the end of both partitions.
        def committed_in_events() -> int:
            last: dict[int, int] = {}
            for event in consumer.events("committed"):
                for _topic, partition, offset in event["offsets"]:
                    last[int(partition)] = max(last.get(int(partition), 0), int(offset))
            return sum(last.values())
        consumer.wait_for(lambda: committed_in_events() >= RECORDS, 30, "commits covering every record")
        assert consumer.close(timeout=60) == 0, consumer.stderr_text()[-3000:]
        assert consumer.events("closed")
    finally:
        consumer.shutdown()
    # What kcoord stored for the group, read back through kcoord.
    assert committed_through_kcoord(kc, ca_path, group) == RECORDS


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_java_gets_group_authorization_failed_for_a_group_without_acls(secured, protocol):
    _, kc, ca_path = secured
    consumer = java_consumer(kc, ca_path, f"e2e-denied-java-{protocol}-{uuid.uuid4().hex[:6]}", protocol)
    try:
        consumer.start(timeout=60)
        errors = consumer.wait_for(lambda: consumer.errors(), 90, "the Java consumer's error")
        assert errors[0]["error"] == "GroupAuthorizationException", f"{errors}\n{consumer.stderr_text()[-3000:]}"
        assert errors[0]["fatal"] is True
        assert not consumer.consumed()
        # The driver exits 2 on a fatal error.
        wait_until(lambda: consumer.returncode is not None, 30, message="the Java consumer to exit")
        assert consumer.returncode == 2
    finally:
        consumer.shutdown()
