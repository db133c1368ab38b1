"""Client SASL passthrough with inspection, against a real Apache Kafka 4.4 whose client
listener is SASL_PLAINTEXT with SCRAM-SHA-512 (support.kafka_broker ``sasl=True``), and
``connections.max.reauth.ms`` set so that sessions expire (KIP-368).

kcoord listens SASL_PLAINTEXT in front of it (sasl_kcoord.InProcessKcoord); the broker stays
the authenticator. librdkafka and aiokafka consume a group as ``alice`` through kcoord, kcoord
serves the group under ``User:alice``; a wrong password fails exactly as against the broker;
an unauthenticated connection gets no group API; an expired session loses its group APIs.
"""
from __future__ import annotations

import asyncio
import re
import shutil
import time
import uuid
from collections.abc import Iterator

import pytest
from sasl_kcoord import InProcessKcoord, RawConnection, scram_login

from coordinator.protocol import apis
from coordinator.security import auth_metrics
from support.kafka_broker import ADMIN_PASSWORD, ADMIN_USER, KAFKA_44, USER, USER_PASSWORD, KafkaCluster
from support.wait import wait_until

pytestmark = pytest.mark.timeout(300)
REAUTH_MS = 6000
RECORDS = 20


@pytest.fixture(scope="module")
def sasl_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    if shutil.which("java") is None:
        pytest.skip("java not on PATH: a JDK >= 17 runs the Apache Kafka broker with SASL")
    from support.kafka_broker import start_kafka

    cluster = start_kafka(KAFKA_44, tmp_path_factory.mktemp("kafka44-sasl"), sasl=True,
                          overrides={"connections.max.reauth.ms": str(REAUTH_MS)})
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def kcoord(sasl_kafka: KafkaCluster) -> Iterator[InProcessKcoord]:
    node = sasl_kafka.nodes[0]
    running = InProcessKcoord(own_bootstrap=f"127.0.0.1:{node.internal_port}",
                              forward_bootstrap=sasl_kafka.bootstrap,
                              state_topic=f"__kcoord_sasl_{uuid.uuid4().hex[:8]}", settings={},
                              port_map={node.internal_port: node.port}).start()
    yield running
    running.stop()


def client_conf(bootstrap: str, user: str = USER, password: str = USER_PASSWORD) -> dict[str, str]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password}


@pytest.fixture(scope="module")
def topic(sasl_kafka: KafkaCluster) -> str:
    """A topic with RECORDS records, made directly on the broker as the admin."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"sasl-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(client_conf(sasl_kafka.bootstrap, ADMIN_USER, ADMIN_PASSWORD))
    admin.create_topics([NewTopic(name, 2, 1)])[name].result(30)
    producer = Producer(client_conf(sasl_kafka.bootstrap, ADMIN_USER, ADMIN_PASSWORD))
    for i in range(RECORDS):
        producer.produce(name, value=f"r{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    return name


def test_sasl_apis_are_advertised_with_handshake_v1_only(kcoord: InProcessKcoord) -> None:
    conn = RawConnection(kcoord.bootstrap)
    versions = conn.call(apis.API_VERSIONS, 3, client_software_name="t", client_software_version="1")
    by_key = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
    assert by_key[apis.SASL_HANDSHAKE] == (1, 1) and by_key[apis.SASL_AUTHENTICATE][1] >= 1
    conn.close()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_librdkafka_consumes_a_group_as_alice_through_kcoord(kcoord: InProcessKcoord, topic: str,
                                                            protocol: str) -> None:
    from confluent_kafka import Consumer

    before = auth_metrics.count("SCRAM-SHA-512", auth_metrics.SUCCESS)
    served_before = len(kcoord.principals)
    group = f"g-rd-{protocol}-{uuid.uuid4().hex[:6]}"
    conf = {**client_conf(kcoord.bootstrap), "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "group.protocol": protocol}
    if protocol == "classic":
        conf["session.timeout.ms"] = 6000
    consumer = Consumer(conf)
    consumer.subscribe([topic])
    seen: set[bytes] = set()
    try:
        deadline = time.monotonic() + 90
        while len(seen) < RECORDS:
            assert time.monotonic() < deadline, f"consumed {len(seen)} of {RECORDS} through kcoord"
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            seen.add(message.value())
        consumer.commit(asynchronous=False)
        committed = consumer.committed(consumer.assignment(), timeout=15)
        assert sum(tp.offset for tp in committed) == RECORDS
    finally:
        consumer.close()
    principals = kcoord.principals[served_before:]
    assert principals and set(principals) == {f"User:{USER}"}, set(principals)
    assert auth_metrics.count("SCRAM-SHA-512", auth_metrics.SUCCESS) > before


def test_aiokafka_consumes_a_group_as_alice_through_kcoord(kcoord: InProcessKcoord, topic: str) -> None:
    from aiokafka import AIOKafkaConsumer

    served_before = len(kcoord.principals)
    group = f"g-aio-{uuid.uuid4().hex[:6]}"

    async def consume() -> int:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=kcoord.bootstrap, group_id=group,
                                    security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512",
                                    sasl_plain_username=USER, sasl_plain_password=USER_PASSWORD,
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        try:
            seen: set[bytes] = set()
            async with asyncio.timeout(90):
                while len(seen) < RECORDS:
                    for records in (await consumer.getmany(timeout_ms=500)).values():
                        seen.update(r.value for r in records)
            await consumer.commit()
            return len(seen)
        finally:
            await consumer.stop()

    assert asyncio.run(consume()) == RECORDS
    principals = kcoord.principals[served_before:]
    assert principals and set(principals) == {f"User:{USER}"}


def test_wrong_password_fails_exactly_as_against_the_broker(sasl_kafka: KafkaCluster,
                                                            kcoord: InProcessKcoord) -> None:
    before = auth_metrics.count("SCRAM-SHA-512", auth_metrics.FAILURE)
    outcomes = []
    for address in (sasl_kafka.bootstrap, kcoord.bootstrap):
        conn = RawConnection(address)
        answers = scram_login(conn, USER, "not-the-password")
        last = answers[-1]
        outcomes.append((len(answers), int(last.error_code), last.error_message, conn.closed_by_peer()))
        conn.close()
    assert outcomes[0] == outcomes[1], outcomes
    assert outcomes[0][1] == 58 and outcomes[0][3]   # SASL_AUTHENTICATION_FAILED, then closed
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in outcomes[0][2]
    assert auth_metrics.count("SCRAM-SHA-512", auth_metrics.FAILURE) == before + 1


def test_wrong_password_librdkafka_sees_the_same_error(sasl_kafka: KafkaCluster, kcoord: InProcessKcoord) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    reasons = []
    for address in (sasl_kafka.bootstrap, kcoord.bootstrap):
        errors: list[KafkaError] = []
        admin = AdminClient({**client_conf(address, USER, "wrong"), "error_cb": errors.append})
        with pytest.raises(Exception):   # noqa: B017 (librdkafka's metadata error; the reason is in error_cb)
            admin.list_topics(timeout=5)
        admin.poll(0)
        auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
        assert auth, (address, errors)
        # "<address>: SASL authentication error: <the broker's message> (after N ms in state AUTH_REQ)"
        text = auth[0].str()
        reasons.append(re.sub(r" \(after \d+ms.*", "", text[text.index("SASL authentication error"):]))
    assert reasons[0] == reasons[1] and "invalid credentials with SASL mechanism SCRAM-SHA-512" in reasons[0], reasons


def test_unauthenticated_connection_gets_no_group_api(sasl_kafka: KafkaCluster, kcoord: InProcessKcoord) -> None:
    served_before = len(kcoord.principals)
    for address in (sasl_kafka.bootstrap, kcoord.bootstrap):
        conn = RawConnection(address)
        assert conn.call(apis.API_VERSIONS, 3, client_software_name="t", client_software_version="1").error_code == 0
        assert conn.call(apis.LIST_GROUPS, 4, states_filter=()) is None, address   # closed, no answer
        conn.close()
        # After the handshake, before the exchange completed: the request's error answer
        # (ILLEGAL_SASL_STATE), then the connection closes.
        conn = RawConnection(address)
        assert conn.call(apis.SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-512").error_code == 0
        answer = conn.call(apis.LIST_GROUPS, 4, states_filter=())
        assert answer is not None and answer.error_code == 34 and answer.groups == (), address
        assert conn.closed_by_peer(), address
        conn.close()
    assert len(kcoord.principals) == served_before


def test_expired_session_loses_its_group_apis(sasl_kafka: KafkaCluster, kcoord: InProcessKcoord) -> None:
    lifetimes = {}
    for address in (sasl_kafka.bootstrap, kcoord.bootstrap):
        conn = RawConnection(address)
        answers = scram_login(conn, USER, USER_PASSWORD)
        assert answers[-1].error_code == 0 and answers[-1].auth_bytes.startswith(b"v=")
        lifetime = answers[-1].session_lifetime.total_seconds()
        lifetimes[address] = lifetime
        assert 0 < lifetime <= REAUTH_MS / 1000
        started = time.monotonic()
        assert conn.call(apis.LIST_GROUPS, 4, states_filter=()).error_code == 0   # served while valid
        expires = started + lifetime + 0.2
        wait_until(lambda: time.monotonic() > expires, lifetime + 5,  # noqa: B023 (called at once)
                   message="the SASL session to run out")
        assert conn.call(apis.LIST_GROUPS, 4, states_filter=()) is None, f"{address} kept serving"
        conn.close()
    assert kcoord.principals[-1] == f"User:{USER}"


def test_principal_metric_and_log_name_the_user(kcoord: InProcessKcoord) -> None:
    before = auth_metrics.count("SCRAM-SHA-512", auth_metrics.SUCCESS)
    conn = RawConnection(kcoord.bootstrap)
    assert scram_login(conn, ADMIN_USER, ADMIN_PASSWORD)[-1].error_code == 0
    principals = kcoord.loop.call(lambda: sorted(c.sasl_principal or "" for c in kcoord.gateway.connections))
    assert f"User:{ADMIN_USER}" in principals
    assert auth_metrics.count("SCRAM-SHA-512", auth_metrics.SUCCESS) == before + 1
    conn.close()


