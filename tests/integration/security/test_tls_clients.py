"""Real clients through the TLS listeners of a real `kcoord serve` process in front of Tansu
(issue 13): librdkafka and aiokafka consume a group through an SSL listener with hostname
verification on (the certificate's SANs cover the advertised host, localhost); mTLS with
ssl.client.auth=required; PLAINTEXT and SSL listeners in one process; the listener metrics;
and the fail-closed start rule."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException

from support.admin import create_topic
from support.kcoord import FAST, KcoordProcess
from support.metrics import kcoord_with_metrics, sample
from support.names import TestNames
from support.produce import produce_records
from support.tansu import TansuBroker
from support.tls_certs import TestCA
from support.wait import wait_until

PARTITIONS = 2
RECORDS = 20


@pytest.fixture
def certs(tmp_path: Path) -> dict[str, Path]:
    ca = TestCA()
    ca.keystore(tmp_path / "server.pem", "localhost")
    key, cert, _ = ca.client_files(tmp_path, "alice")
    return {"ca": ca.write_ca(tmp_path / "ca.pem"), "keystore": tmp_path / "server.pem", "client_key": key,
            "client_cert": cert}


@pytest.fixture
def topic_with_records(tansu: TansuBroker, names: TestNames) -> tuple[str, set[str]]:
    topic = names.topic()
    create_topic(tansu.bootstrap, topic, PARTITIONS)
    produced = produce_records(tansu.bootstrap, topic, RECORDS)
    return topic, {r.value for r in produced}


@pytest.fixture
def processes() -> Iterator[list[KcoordProcess]]:
    started: list[KcoordProcess] = []
    yield started
    for process in started:
        if process.process is not None and process.process.poll() is None:
            process.stop()


def consume_rdkafka(bootstrap: str, topic: str, group: str, want: set[str], extra: dict[str, str],
                    timeout: float = 60.0) -> set[str]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 10000, **extra})
    seen: set[str] = set()
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while seen < want and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            seen.add(msg.value().decode())
        assert seen >= want, f"consumed {len(seen)} of {len(want)} records through {bootstrap}"
        consumer.commit(asynchronous=False)   # OffsetCommit through the TLS coordinator connection
        committed = consumer.committed(consumer.assignment(), timeout=15)
        assert sum(tp.offset for tp in committed if tp.offset >= 0) == len(want)
    finally:
        consumer.close()
    return seen


def consume_aiokafka(bootstrap: str, topic: str, group: str, want: set[str], ca: Path,
                     timeout: float = 60.0) -> set[str]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.helpers import create_ssl_context

    async def run() -> set[str]:
        context = create_ssl_context(cafile=str(ca))
        assert context.check_hostname   # hostname verification on
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, security_protocol="SSL",
                                    ssl_context=context, auto_offset_reset="earliest", enable_auto_commit=False,
                                    session_timeout_ms=10000)
        await consumer.start()
        seen: set[str] = set()
        try:
            deadline = time.monotonic() + timeout
            while seen < want and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=200)
                for records in batches.values():
                    seen.update(r.value.decode() for r in records)
            assert seen >= want, f"aiokafka consumed {len(seen)} of {len(want)} through {bootstrap}"
            await consumer.commit()
            offsets = [await consumer.committed(tp) for tp in consumer.assignment()]
            assert sum(o for o in offsets if o is not None) == len(want)
        finally:
            await consumer.stop()
        return seen

    return asyncio.run(run())


def ssl_client(ca: Path) -> dict[str, str]:
    return {"security.protocol": "SSL", "ssl.ca.location": str(ca), "ssl.endpoint.identification.algorithm": "https"}


def test_librdkafka_and_aiokafka_consume_through_an_ssl_listener(
        tansu: TansuBroker, names: TestNames, certs: dict[str, Path], topic_with_records, processes) -> None:
    topic, values = topic_with_records
    kcoord = kcoord_with_metrics(tansu.bootstrap, f"__kcoord_{names.topic('state')}", listeners=("SSL",),
                                 advertised_host="localhost",
                                 config=(*FAST, "ssl.keystore.type=PEM", f"ssl.keystore.location={certs['keystore']}"))
    processes.append(kcoord.start())
    bootstrap = kcoord.bootstrap_of("SSL", "localhost")
    assert consume_rdkafka(bootstrap, topic, names.group("rdkafka"), values, ssl_client(certs["ca"])) == values
    assert consume_aiokafka(bootstrap, topic, names.group("aiokafka"), values, certs["ca"]) == values
    # Without the CA, hostname/chain verification fails: the client cannot even bootstrap.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": names.group("untrusted"),
                         "security.protocol": "SSL", "socket.timeout.ms": 2000})
    try:
        with pytest.raises(KafkaException):
            consumer.list_topics(timeout=3)
    finally:
        consumer.close()
    samples = kcoord.metrics()
    assert sample(samples, "kcoord_tls_handshake_failures_total", listener="SSL") >= 1
    assert 'kcoord_gateway_connections{listener="SSL",protocol="SSL"}' in samples


def test_mtls_required_refuses_a_client_without_certificate(
        tansu: TansuBroker, names: TestNames, certs: dict[str, Path], topic_with_records, processes) -> None:
    topic, values = topic_with_records
    kcoord = kcoord_with_metrics(tansu.bootstrap, f"__kcoord_{names.topic('state')}", listeners=("SSL",),
                                 advertised_host="localhost",
                                 config=(*FAST, f"ssl.keystore.location={certs['keystore']}",
                                         f"ssl.truststore.location={certs['ca']}", "ssl.client.auth=required",
                                         "ssl.principal.mapping.rules=RULE:^CN=(.*)$/$1/,DEFAULT",
                                         "authorizer=none"))
    processes.append(kcoord.start())
    bootstrap = kcoord.bootstrap_of("SSL", "localhost")
    with_cert = {**ssl_client(certs["ca"]), "ssl.key.location": str(certs["client_key"]),
                 "ssl.certificate.location": str(certs["client_cert"])}
    assert consume_rdkafka(bootstrap, topic, names.group("mtls"), values, with_cert) == values
    before = sample(kcoord.metrics(), "kcoord_tls_handshake_failures_total", listener="SSL")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": names.group("nocert"),
                         **ssl_client(certs["ca"]), "socket.timeout.ms": 2000})
    try:
        with pytest.raises(KafkaException):
            consumer.list_topics(timeout=3)
    finally:
        consumer.close()
    wait_until(lambda: sample(kcoord.metrics(), "kcoord_tls_handshake_failures_total", listener="SSL") > before,
               10, message="the refused client counted as a failed handshake")
    assert "authorizer=none" in kcoord.log_text()   # the opt-out is logged as a warning


def test_plaintext_and_ssl_listeners_in_one_process(
        tansu: TansuBroker, names: TestNames, certs: dict[str, Path], topic_with_records, processes) -> None:
    topic, values = topic_with_records
    kcoord = kcoord_with_metrics(tansu.bootstrap, f"__kcoord_{names.topic('state')}",
                                 listeners=("INTERNAL:PLAINTEXT", "EXTERNAL:SSL"), advertised_host="localhost",
                                 config=(*FAST, f"listener.name.external.ssl.keystore.location={certs['keystore']}"))
    processes.append(kcoord.start())
    assert consume_rdkafka(kcoord.bootstrap_of("INTERNAL", "localhost"), topic, names.group("in"), values, {}) \
        == values
    assert consume_rdkafka(kcoord.bootstrap_of("EXTERNAL", "localhost"), topic, names.group("out"), values,
                           ssl_client(certs["ca"])) == values
    out = "\n".join(kcoord.output())
    assert "EXTERNAL SSL://localhost" in out and "INTERNAL PLAINTEXT://localhost" in out


@pytest.mark.parametrize(("listener", "settings", "named"), [
    ("SASL_SSL", ("sasl.enabled.mechanisms=SCRAM-SHA-512",), "listener SASL_SSL is SASL_SSL"),
    ("SASL_PLAINTEXT", (), "listener SASL_PLAINTEXT is SASL_PLAINTEXT"),
    ("SSL", ("ssl.client.auth=required",), "listener SSL is SSL with ssl.client.auth=required"),
])
def test_fail_closed_without_an_authorizer(listener: str, settings: tuple[str, ...], named: str,
                                           names: TestNames, certs: dict[str, Path]) -> None:
    kcoord = KcoordProcess(upstream="127.0.0.1:1", state_topic="unused", listeners=(listener,),
                           config=(f"ssl.keystore.location={certs['keystore']}", *settings))
    result = kcoord.run_to_exit(timeout=60)
    assert result.returncode == 2, result.stderr[-2000:]
    assert named in result.stderr and "authorizer" in result.stderr


def test_a_broken_keystore_refuses_to_start(names: TestNames, tmp_path: Path) -> None:
    (tmp_path / "bad.pem").write_text("not a certificate\n")
    kcoord = KcoordProcess(upstream="127.0.0.1:1", state_topic="unused", listeners=("SSL",),
                           config=(f"ssl.keystore.location={tmp_path / 'bad.pem'}",))
    result = kcoord.run_to_exit(timeout=60)
    assert result.returncode == 2
    assert str(tmp_path / "bad.pem") in result.stderr and "ssl.keystore.location" in result.stderr


def _serial_seen(port: int, ca: Path) -> int:
    import socket
    import ssl

    from cryptography import x509
    context = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("localhost", port), timeout=15) as raw, \
            context.wrap_socket(raw, server_hostname="localhost") as sock:
        der = sock.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_certificate_reload_in_a_running_process(tansu: TansuBroker, names: TestNames, tmp_path: Path,
                                                 processes) -> None:
    """kcoord serve runs on uvloop: the reload and the TLS accept path are checked there too,
    on the bootstrap and a per-broker port."""
    import os

    ca = TestCA()
    ca_path = ca.write_ca(tmp_path / "ca.pem")
    keystore = tmp_path / "server.pem"
    first = ca.keystore(keystore)
    kcoord = kcoord_with_metrics(tansu.bootstrap, f"__kcoord_{names.topic('state')}", listeners=("SSL",),
                                 advertised_host="localhost",
                                 config=(*FAST, f"ssl.keystore.location={keystore}", "ssl.reload.interval.ms=200"))
    processes.append(kcoord.start())
    port = kcoord.port_of("SSL")
    assert _serial_seen(port, ca_path) == _serial_seen(port + 1, ca_path) == first.serial
    second = ca.keystore(tmp_path / "next.pem")
    os.replace(tmp_path / "next.pem", keystore)
    wait_until(lambda: _serial_seen(port, ca_path) == second.serial, 20, message="the new certificate served")
    assert _serial_seen(port + 1, ca_path) == second.serial
    wait_until(lambda: sample(kcoord.metrics(), "kcoord_tls_reloads_total", listener="SSL", outcome="ok") >= 1, 10,
               message="the reload counted")
    (tmp_path / "bad.pem").write_text("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
    os.replace(tmp_path / "bad.pem", keystore)
    wait_until(lambda: "TLS reload failed" in kcoord.log_text(), 20, message="the failed reload logged")
    assert str(keystore) in kcoord.log_text()
    assert _serial_seen(port, ca_path) == second.serial   # the previous certificate stays
