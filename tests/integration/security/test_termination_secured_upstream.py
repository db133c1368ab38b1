"""SASL terminated at kcoord in front of an upstream that itself requires SASL, and per-listener
SASL settings (issue 13, points 4 and 5; Kafka's `listener.name.<listener>.<setting>`).

One real Apache Kafka 4.4 (SASL_PLAINTEXT, SCRAM-SHA-512, StandardAuthorizer; support.kafka_broker)
holding topic TOPIC and the ACLs: tess may WRITE and READ TOPIC and READ groups prefixed `ok-`;
alice (a Kafka user) may READ TOPIC and READ groups prefixed `ok-`; nora has no ACL. In front of
it one `kcoord serve` (the real CLI) with two listeners:

- INTERNAL (SASL_PLAINTEXT) terminates SASL (`listener.name.internal.sasl.termination=true`)
  against a credential file holding tess and nora (users Kafka does not know): their forward
  links authenticate upstream as kcoord (`upstream.sasl.*`, the admin principal) and kcoord
  authorizes each forwarded request for tess or nora (`authorizer=upstream`, the ACLs above);
- EXTERNAL (SASL_PLAINTEXT) passes SASL through to Kafka, which authenticates alice itself.

Shown: tess produces and consumes with a group through INTERNAL (both group protocols); nora
gets TOPIC_AUTHORIZATION_FAILED for her produce and nothing reaches Kafka; alice consumes through
EXTERNAL; each listener refuses the other's users (INTERNAL does not know alice, Kafka does not
know tess).
"""
from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from coordinator.security.sasl_server import scram_entry
from support import kafka_broker
from support.kafka_broker import ADMIN_PASSWORD, ADMIN_USER, KAFKA_44, SCRAM_MECHANISM, USER, USER_PASSWORD
from support.kcoord import FAST, KcoordProcess
from support.wait import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(360)]
TOPIC, SEEDED = "term-up-topic", 10
TESS, TESS_PW, NORA, NORA_PW = "tess", "tess-secret", "nora", "nora-secret"


@dataclass
class Setup:
    cluster: kafka_broker.KafkaCluster
    kcoord: KcoordProcess

    def client(self, listener: str, user: str, password: str) -> dict[str, str]:
        return {"bootstrap.servers": self.kcoord.bootstrap_of(listener), "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": SCRAM_MECHANISM, "sasl.username": user, "sasl.password": password}


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
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

    work: Path = tmp_path_factory.mktemp("term-upstream")
    cluster = kafka_broker.start_kafka(KAFKA_44, work / "kafka", sasl=True, authorizer=True)
    try:
        admin = AdminClient(cluster.client_config())
        admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)

        def allow(resource: ResourceType, name: str, pattern: ResourcePatternType, who: str,
                  operation: AclOperation) -> AclBinding:
            return AclBinding(resource, name, pattern, f"User:{who}", "*", operation, AclPermissionType.ALLOW)

        literal, prefixed = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
        bindings = [allow(ResourceType.TOPIC, TOPIC, literal, TESS, AclOperation.WRITE),
                    allow(ResourceType.TOPIC, TOPIC, literal, TESS, AclOperation.READ),
                    allow(ResourceType.GROUP, "ok-", prefixed, TESS, AclOperation.READ),
                    allow(ResourceType.TOPIC, TOPIC, literal, USER, AclOperation.READ),
                    allow(ResourceType.GROUP, "ok-", prefixed, USER, AclOperation.READ)]
        for future in admin.create_acls(bindings).values():
            future.result(30)
        producer = Producer(cluster.client_config())
        for i in range(SEEDED):
            producer.produce(TOPIC, value=f"seed{i}".encode(), partition=i % 2)
        assert producer.flush(30) == 0
        credentials = work / "credentials"
        credentials.write_text("".join(scram_entry(user, password, SCRAM_MECHANISM, 4096) + "\n"
                                       for user, password in ((TESS, TESS_PW), (NORA, NORA_PW))))
        kc = KcoordProcess(
            upstream=f"SASL_PLAINTEXT://{cluster.bootstrap}", state_topic=f"__kcoord_tu_{uuid.uuid4().hex[:6]}",
            state_partitions=4, listeners=("INTERNAL:SASL_PLAINTEXT", "EXTERNAL:SASL_PLAINTEXT"),
            config=(*FAST, "listener.name.internal.sasl.termination=true",
                    f"listener.name.internal.sasl.credentials.file={credentials}",
                    f"listener.name.internal.sasl.enabled.mechanisms={SCRAM_MECHANISM}",
                    f"upstream.sasl.mechanism={SCRAM_MECHANISM}", f"upstream.sasl.username={ADMIN_USER}",
                    f"upstream.sasl.password={ADMIN_PASSWORD}",
                    "authorizer=upstream", "authorizer.refresh.ms=2000"))
        kc.start(timeout=90)
        try:
            yield Setup(cluster, kc)
        finally:
            kc.stop()
    finally:
        cluster.stop()


def produce(client: dict[str, str], count: int, tag: str) -> list:
    """``count`` records to TOPIC; the delivery errors (None: delivered)."""
    from confluent_kafka import Producer

    results: list = []
    producer = Producer({**client, "message.timeout.ms": 20000, "enable.idempotence": False})
    for i in range(count):
        producer.produce(TOPIC, value=f"{tag}{i}".encode(), partition=i % 2,
                         on_delivery=lambda err, _msg: results.append(err))
    assert producer.flush(30) == 0
    return results


def upstream_values(cluster: kafka_broker.KafkaCluster) -> list[bytes]:
    """Every record of TOPIC, read from Kafka directly as the admin."""
    return consume(cluster.client_config(), f"ok-admin-{uuid.uuid4().hex[:6]}", "classic", None)


def consume(client: dict[str, str], group: str, protocol: str, expected: int | None) -> list[bytes]:
    """Consume TOPIC from the start with ``group`` and commit; ``expected`` None: until the
    high watermarks."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**client, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "group.protocol": protocol})
    seen: list[bytes] = []
    try:
        if expected is None:
            expected = sum(consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in (0, 1))
        consumer.subscribe([TOPIC])

        def all_read() -> bool:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                seen.append(message.value())
            return len(seen) >= expected

        wait_until(all_read, 90, interval=0, message=lambda: f"{len(seen)} of {expected} records read")
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)], timeout=30)
        assert sum(tp.offset for tp in committed) == expected
    finally:
        consumer.close()
    return seen


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_terminated_client_produces_and_consumes_through_a_sasl_upstream(setup: Setup, protocol: str) -> None:
    tess = setup.client("INTERNAL", TESS, TESS_PW)
    tag = f"tess-{protocol}-"
    assert produce(tess, 4, tag) == [None] * 4
    assert sum(1 for v in upstream_values(setup.cluster) if v.startswith(tag.encode())) == 4
    seen = consume(tess, f"ok-{protocol}-{uuid.uuid4().hex[:6]}", protocol, None)
    assert sum(1 for v in seen if v.startswith(tag.encode())) == 4
    assert sum(1 for v in seen if v.startswith(b"seed")) == SEEDED


def test_terminated_client_without_the_topic_acl_is_refused(setup: Setup) -> None:
    from confluent_kafka import KafkaError

    before = upstream_values(setup.cluster)
    refused = produce(setup.client("INTERNAL", NORA, NORA_PW), 1, "nora-")
    assert refused[0] is not None and refused[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, refused
    assert not [v for v in upstream_values(setup.cluster) if v.startswith(b"nora-")] and before


def test_passthrough_listener_lets_kafka_authenticate(setup: Setup) -> None:
    seen = consume(setup.client("EXTERNAL", USER, USER_PASSWORD), f"ok-alice-{uuid.uuid4().hex[:6]}", "consumer",
                   None)
    assert sum(1 for v in seen if v.startswith(b"seed")) == SEEDED


@pytest.mark.parametrize(("listener", "user", "password"), [
    ("INTERNAL", USER, USER_PASSWORD),     # a Kafka user: INTERNAL's credential file does not hold her
    ("EXTERNAL", TESS, TESS_PW),           # a kcoord user: Kafka does not know her
])
def test_each_listener_refuses_the_others_users(setup: Setup, listener: str, user: str, password: str) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    errors: list = []
    admin = AdminClient({**setup.client(listener, user, password), "error_cb": errors.append})
    with pytest.raises(Exception):   # noqa: B017 (librdkafka's metadata error; the reason is in error_cb)
        admin.list_topics(timeout=5)
    admin.poll(0)
    auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert auth and "invalid credentials with SASL mechanism SCRAM-SHA-512" in auth[0].str(), errors
