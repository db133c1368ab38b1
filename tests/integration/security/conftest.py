"""Fixtures shared by the security end-to-end tests (issue 13).

``secured``: the deployment issue 13 is for. A real Apache Kafka 4.4 that requires SASL_SSL
(SCRAM-SHA-512) and runs Kafka's StandardAuthorizer, holding topic ``E2E_TOPIC`` (2
partitions, ``E2E_RECORDS`` records) and the ACLs: alice may READ the topic and READ groups
prefixed ``e2e-ok-`` (no other group). In front of it `kcoord serve` with one SASL_SSL
listener (its certificate from a test CA whose file is ``ca_path``), its own connections as
the admin principal (``upstream.*``), and ``authorizer=upstream``.

Used by test_e2e_sasl_ssl_kafka.py (librdkafka) and test_e2e_java_sasl_ssl.py (the Java 4.4
client), one broker for both (package scope).
"""
from __future__ import annotations

import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

E2E_TOPIC = "e2e-topic"
E2E_RECORDS = 20
E2E_GROUP_PREFIX = "e2e-ok-"


@dataclass
class Secured:
    cluster: object          # support.kafka_broker.KafkaCluster
    kcoord: object           # support.kcoord.KcoordProcess
    ca_path: Path            # the CA that signed kcoord's certificate

    def __iter__(self):      # `cluster, kc, ca_path = secured`
        return iter((self.cluster, self.kcoord, self.ca_path))


@pytest.fixture(scope="package")
def secured(tmp_path_factory):
    if shutil.which("java") is None:
        pytest.skip("java not on PATH: a JDK >= 17 runs the Apache Kafka broker")
    from confluent_kafka import Producer
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    from support.kafka_broker import ADMIN_PASSWORD, ADMIN_USER, KAFKA_44, USER, start_kafka
    from support.kcoord import KcoordProcess
    from support.tls_certs import TestCA

    work = tmp_path_factory.mktemp("e2e-sasl-ssl")
    cluster = start_kafka(KAFKA_44, work, sasl=True, tls=True, authorizer=True)
    try:
        admin = AdminClient(cluster.client_config())
        admin.create_topics([NewTopic(E2E_TOPIC, 2, 1)])[E2E_TOPIC].result(30)
        alice = f"User:{USER}"
        bindings = [
            AclBinding(ResourceType.TOPIC, E2E_TOPIC, ResourcePatternType.LITERAL, alice, "*",
                       AclOperation.READ, AclPermissionType.ALLOW),
            AclBinding(ResourceType.GROUP, E2E_GROUP_PREFIX, ResourcePatternType.PREFIXED, alice, "*",
                       AclOperation.READ, AclPermissionType.ALLOW),
        ]
        for future in admin.create_acls(bindings).values():
            future.result(30)
        producer = Producer(cluster.client_config())
        for i in range(E2E_RECORDS):
            producer.produce(E2E_TOPIC, value=f"v{i}".encode(), partition=i % 2)
        assert producer.flush(30) == 0
        ca = TestCA()
        ca_path = ca.write_ca(work / "kcoord-ca.pem")
        keystore = work / "kcoord.pem"
        ca.keystore(keystore, "localhost")
        kc = KcoordProcess(
            upstream=f"SASL_SSL://{cluster.bootstrap}", state_topic=f"__kcoord_e2e_{uuid.uuid4().hex[:6]}",
            state_partitions=4, listeners=("SASL_SSL",),
            config=("consumer_heartbeat_interval_ms=500", "consumer_session_timeout_ms=10000",
                    "ssl.keystore.type=PEM", f"ssl.keystore.location={keystore}",
                    "upstream.sasl.mechanism=SCRAM-SHA-512", f"upstream.sasl.username={ADMIN_USER}",
                    f"upstream.sasl.password={ADMIN_PASSWORD}", f"upstream.ssl.ca.location={cluster.ca_path}",
                    "authorizer=upstream", "authorizer.refresh.ms=2000"))
        kc.start(timeout=90)
        try:
            yield Secured(cluster, kc, ca_path)
        finally:
            kc.stop()
    finally:
        cluster.stop()
