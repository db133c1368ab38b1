"""PKCS#12 stores end to end (issue 13): `kcoord serve` with an SSL listener whose keystore
and truststore are PKCS12 (ssl.client.auth=required, passwords from files), in front of a real
Apache Kafka 4.4 whose SSL listener requires client certificates, reached with kcoord's own
PKCS12 client keystore (librdkafka's names: upstream.ssl.keystore.location/.password).

The broker fixture (support.kafka_broker) has no client certificate of its own, so this module
points the broker's truststore at its test CA (an override) and gives the fixture's admin client
a PKCS12 keystore from that CA (librdkafka reads PKCS12 itself), by patching
``KafkaCluster.client_config`` for the module.

Shown: a librdkafka consumer with its own PKCS12 client keystore consumes a topic through
kcoord with a group and commits; a client without a certificate is refused at the handshake;
a wrong upstream keystore password stops kcoord at start, naming the setting.
"""
from __future__ import annotations

import shutil
import socket
import ssl
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from support import kafka_broker
from support.kafka_broker import KAFKA_44
from support.kcoord import FAST, KcoordProcess
from support.tls_certs import TestCA

pytestmark = pytest.mark.timeout(300)
TOPIC, RECORDS = "p12-topic", 16
STORE_PASSWORD = "p12-secret"


@dataclass
class Deployment:
    cluster: kafka_broker.KafkaCluster
    kcoord: KcoordProcess
    ca: TestCA                 # signed kcoord's listener certificate and every client certificate
    ca_pem: Path
    work: Path

    def client_store(self, subject: str) -> Path:
        path = self.work / f"{subject}.p12"
        self.ca.pkcs12_keystore(path, subject, server=False, password=STORE_PASSWORD.encode())
        return path


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    if shutil.which("java") is None:
        pytest.skip("java not on PATH: a JDK >= 17 runs the Apache Kafka broker")
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    work = tmp_path_factory.mktemp("pkcs12")
    ca = TestCA("kcoord pkcs12 test CA")
    ca_pem = ca.write_ca(work / "ca.pem")
    admin_store = work / "admin.p12"
    ca.pkcs12_keystore(admin_store, "test-admin", server=False, password=STORE_PASSWORD.encode())
    original = kafka_broker.KafkaCluster.client_config

    def with_certificate(self: kafka_broker.KafkaCluster, *args: str) -> dict[str, str]:
        return {**original(self, *args), "ssl.keystore.location": str(admin_store),
                "ssl.keystore.password": STORE_PASSWORD}

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kafka_broker.KafkaCluster, "client_config", with_certificate)
        cluster = kafka_broker.start_kafka(KAFKA_44, work / "kafka", tls=True, overrides={
            "listener.name.client.ssl.client.auth": "required",
            "listener.name.client.ssl.truststore.location": str(ca_pem)})
        try:
            admin = AdminClient(cluster.client_config())
            admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
            producer = Producer(cluster.client_config())
            for i in range(RECORDS):
                producer.produce(TOPIC, value=f"r{i}".encode(), partition=i % 2)
            assert producer.flush(30) == 0
            listener_store, trust = work / "kcoord.p12", ca.pkcs12_truststore(work / "trust.p12", b"trust-pw")
            ca.pkcs12_keystore(listener_store, "localhost", password=STORE_PASSWORD.encode())
            upstream_store = work / "kcoord-client.p12"
            ca.pkcs12_keystore(upstream_store, "kcoord", server=False, password=b"upstream-pw")
            (work / "store-pw").write_text(STORE_PASSWORD + "\n")
            (work / "trust-pw").write_text("trust-pw\n")
            (work / "upstream-pw").write_text("upstream-pw\n")
            kc = KcoordProcess(
                upstream=f"SSL://{cluster.bootstrap}", state_topic=f"__kcoord_p12_{uuid.uuid4().hex[:6]}",
                state_partitions=4, listeners=("SSL",),
                config=(*FAST, "ssl.keystore.type=PKCS12", f"ssl.keystore.location={listener_store}",
                        f"ssl.keystore.password.file={work / 'store-pw'}", "ssl.truststore.type=PKCS12",
                        f"ssl.truststore.location={trust}", f"ssl.truststore.password.file={work / 'trust-pw'}",
                        "ssl.client.auth=required", "authorizer=none",
                        f"upstream.ssl.ca.location={cluster.ca_path}",
                        f"upstream.ssl.keystore.location={upstream_store}",
                        f"upstream.ssl.keystore.password.file={work / 'upstream-pw'}"))
            kc.start(timeout=90)
            try:
                yield Deployment(cluster, kc, ca, ca_pem, work)
            finally:
                kc.stop()
        finally:
            cluster.stop()


def test_librdkafka_consumes_through_a_pkcs12_listener_over_an_mtls_upstream(deployment: Deployment) -> None:
    from confluent_kafka import Consumer, TopicPartition

    group = f"p12-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({
        "bootstrap.servers": deployment.kcoord.bootstrap_of("SSL", "localhost"), "security.protocol": "SSL",
        "ssl.ca.location": str(deployment.ca_pem), "ssl.keystore.location": str(deployment.client_store("alice")),
        "ssl.keystore.password": STORE_PASSWORD, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "group.protocol": "consumer"})
    seen: set[bytes] = set()
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 90
        while len(seen) < RECORDS:
            assert time.monotonic() < deadline, f"consumed {len(seen)} of {RECORDS}"
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                seen.add(message.value())
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)], timeout=30)
    finally:
        consumer.close()
    assert seen == {f"r{i}".encode() for i in range(RECORDS)}
    assert sorted(tp.offset for tp in committed) == [RECORDS // 2, RECORDS // 2]


def test_a_client_without_a_certificate_is_refused(deployment: Deployment) -> None:
    context = ssl.create_default_context(cadata=deployment.ca_pem.read_text())
    with socket.create_connection(("127.0.0.1", deployment.kcoord.port_of("SSL")), timeout=10) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            with context.wrap_socket(raw, server_hostname="localhost") as tls:
                tls.sendall(b"\x00\x00\x00\x00")     # TLS 1.3: the refusal arrives after the handshake
                tls.settimeout(10)
                if tls.recv(1) == b"":
                    raise ConnectionResetError("closed without an alert")


def test_a_wrong_upstream_keystore_password_stops_the_start(deployment: Deployment) -> None:
    wrong = deployment.work / "wrong-pw"
    wrong.write_text("not-it\n")
    kc = KcoordProcess(upstream=f"SSL://{deployment.cluster.bootstrap}", state_topic="__unused",
                       listeners=("PLAINTEXT",),
                       config=(f"upstream.ssl.ca.location={deployment.cluster.ca_path}",
                               f"upstream.ssl.keystore.location={deployment.work / 'kcoord-client.p12'}",
                               f"upstream.ssl.keystore.password.file={wrong}"))
    result = kc.run_to_exit(timeout=60)
    assert result.returncode != 0
    assert "upstream.ssl.keystore.password does not open the store" in result.stdout + result.stderr
