"""SASL termination (`sasl.termination=true`) in front of Tansu, which has no SASL: kcoord
authenticates clients itself against a credential file (PLAIN and SCRAM-SHA-512), serves their
groups under their principal, and forwards the rest to the PLAINTEXT upstream."""
from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sasl_kcoord import InProcessKcoord, RawConnection, plain_login, scram_login

from coordinator.protocol import apis
from coordinator.security import auth_metrics
from coordinator.security.sasl_server import scram_entry
from support.tansu import TansuBroker

pytestmark = pytest.mark.timeout(240)
RECORDS = 12
USER, PASSWORD = "carol", "carol-secret"


@pytest.fixture(scope="module")
def terminating(tansu: TansuBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessKcoord]:
    creds: Path = tmp_path_factory.mktemp("sasl-creds") / "credentials"
    creds.write_text("# kcoord SASL credentials\n"
                     + scram_entry(USER, PASSWORD, "SCRAM-SHA-512", 4096) + "\n"
                     + scram_entry(USER, PASSWORD, "SCRAM-SHA-256", 4096) + "\n")
    running = InProcessKcoord(own_bootstrap=tansu.bootstrap, forward_bootstrap=tansu.bootstrap,
                              state_topic=f"__kcoord_term_{uuid.uuid4().hex[:8]}",
                              settings={"sasl.termination": "true", "sasl.credentials.file": str(creds),
                                        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512"}).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def topic(tansu: TansuBroker) -> str:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"term-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": tansu.bootstrap})
    admin.create_topics([NewTopic(name, 2, 1)])[name].result(30)
    producer = Producer({"bootstrap.servers": tansu.bootstrap})
    for i in range(RECORDS):
        producer.produce(name, value=f"t{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    return name


def conf(bootstrap: str, mechanism: str, password: str = PASSWORD) -> dict[str, str]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": USER, "sasl.password": password}


@pytest.mark.parametrize("mechanism, protocol", [("PLAIN", "classic"), ("SCRAM-SHA-512", "consumer")])
def test_librdkafka_consumes_a_group_through_terminated_sasl(terminating: InProcessKcoord, topic: str,
                                                             mechanism: str, protocol: str) -> None:
    from confluent_kafka import Consumer

    before = auth_metrics.count(mechanism, auth_metrics.SUCCESS)
    served_before = len(terminating.principals)
    consumer = Consumer({**conf(terminating.bootstrap, mechanism), "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, "group.protocol": protocol})
    consumer.subscribe([topic])
    seen: set[bytes] = set()
    try:
        deadline = time.monotonic() + 90
        while len(seen) < RECORDS:
            assert time.monotonic() < deadline, f"consumed {len(seen)} of {RECORDS}"
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                seen.add(message.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    principals = terminating.principals[served_before:]
    assert principals and set(principals) == {f"User:{USER}"}
    assert auth_metrics.count(mechanism, auth_metrics.SUCCESS) > before


def test_wrong_passwords_get_kafkas_answers_and_the_connection_closes(terminating: InProcessKcoord) -> None:
    conn = RawConnection(terminating.bootstrap)
    answer = plain_login(conn, USER, "nope")[-1]
    assert (int(answer.error_code), answer.error_message) == (58, "Authentication failed: Invalid username or password")
    assert conn.closed_by_peer()
    conn.close()
    conn = RawConnection(terminating.bootstrap)
    answer = scram_login(conn, USER, "nope")[-1]
    assert (int(answer.error_code), answer.error_message) == (
        58, "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512")
    assert conn.closed_by_peer()
    conn.close()
    conn = RawConnection(terminating.bootstrap)   # not enabled here
    answer = conn.call(apis.SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-256")
    assert int(answer.error_code) == 33 and answer.mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert conn.closed_by_peer()
    conn.close()


def test_wrong_password_librdkafka_fails_authentication(terminating: InProcessKcoord) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    errors: list[KafkaError] = []
    admin = AdminClient({**conf(terminating.bootstrap, "SCRAM-SHA-512", "wrong"), "error_cb": errors.append})
    with pytest.raises(Exception):   # noqa: B017 (librdkafka's metadata error; the reason is in error_cb)
        admin.list_topics(timeout=5)
    admin.poll(0)
    auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert auth and "due to invalid credentials with SASL mechanism SCRAM-SHA-512" in auth[0].str(), errors


def test_unauthenticated_connection_gets_no_group_api_and_nothing_forwarded(terminating: InProcessKcoord) -> None:
    served_before = len(terminating.principals)
    conn = RawConnection(terminating.bootstrap)
    assert conn.call(apis.METADATA, 12, topics=None, allow_auto_topic_creation=False,
                     include_topic_authorized_operations=False) is None
    conn.close()
    conn = RawConnection(terminating.bootstrap)
    assert conn.call(apis.LIST_GROUPS, 4, states_filter=()) is None
    conn.close()
    assert len(terminating.principals) == served_before
    conn = RawConnection(terminating.bootstrap)     # and once authenticated, it is served
    assert plain_login(conn, USER, PASSWORD)[-1].error_code == 0
    assert conn.call(apis.LIST_GROUPS, 4, states_filter=()).error_code == 0
    assert terminating.principals[-1] == f"User:{USER}"
    conn.close()
