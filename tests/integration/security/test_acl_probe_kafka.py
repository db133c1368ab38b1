"""`authorizer=probe` against a real Apache Kafka 4.4 with SASL (SCRAM-SHA-512) and Kafka's
StandardAuthorizer (issue 13, point 6).

kcoord runs in this process (sasl_kcoord.InProcessKcoord) with SASL passthrough and
`build_authorizer({"authorizer": "probe"})`, wired exactly as `kcoord serve` wires it (nothing
attaches the authorizer to the gateway by hand: the first FindCoordinator does). A raw client
logs in as alice through kcoord; kcoord probes the broker on alice's own link. Its verdicts for a
table of topics and groups must equal the AuthorizedOperations Kafka reports to alice directly,
and a group without ACL answers GROUP_AUTHORIZATION_FAILED to FindCoordinator and to the group
APIs.
"""
from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from sasl_kcoord import PARTITIONS, InProcessKcoord, RawConnection, scram_login

from coordinator.authz import Action
from coordinator.config import CoordinatorConfig
from coordinator.gateway import Gateway
from coordinator.gateway.listeners import parse_addresses
from coordinator.gateway.sasl import SaslSettings, enable_sasl
from coordinator.protocol import apis
from coordinator.protocol.service import ClientInfo
from coordinator.runtime.state_topic import TOPIC_CONFIGS, StateTopic
from coordinator.security.acl import OPERATION_CODES, SUPPORTED_OPERATIONS
from coordinator.security.acl_probe import ProbeAuthorizer
from coordinator.security.acl_sources import build_authorizer
from coordinator.service import GroupCoordinatorService
from support.kafka_broker import ADMIN_PASSWORD, ADMIN_USER, KAFKA_44, USER, USER_PASSWORD, KafkaCluster
from support.wait import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

ALICE = f"User:{USER}"
TOPICS = ["probe-t-read", "probe-t-pre-a", "probe-t-denied", "probe-t-all", "probe-t-none"]
GROUPS = ["probe-g-a", "probe-g-denied", "probe-g-del", "plain-g-none"]
ACLS = [
    ("TOPIC", "LITERAL", "probe-t-read", ALICE, "*", "READ", "ALLOW"),
    ("TOPIC", "PREFIXED", "probe-t-pre-", ALICE, "*", "WRITE", "ALLOW"),
    ("TOPIC", "LITERAL", "probe-t-denied", ALICE, "*", "ALL", "DENY"),
    ("TOPIC", "PREFIXED", "probe-t-", ALICE, "*", "DESCRIBE", "ALLOW"),
    ("TOPIC", "LITERAL", "probe-t-all", ALICE, "*", "ALL", "ALLOW"),
    ("GROUP", "PREFIXED", "probe-g-", ALICE, "*", "READ", "ALLOW"),
    ("GROUP", "LITERAL", "probe-g-denied", ALICE, "*", "ALL", "DENY"),
    ("GROUP", "LITERAL", "probe-g-del", ALICE, "*", "DELETE", "ALLOW"),
    ("CLUSTER", "LITERAL", "kafka-cluster", ALICE, "*", "DESCRIBE", "ALLOW"),
]


def client_conf(bootstrap: str, user: str, password: str) -> dict[str, str]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password}


class ProbingKcoord(InProcessKcoord):
    """InProcessKcoord whose service authorizes with `authorizer=probe`, as `kcoord serve` builds it."""

    async def _start(self) -> None:
        self.topic = StateTopic(self.own_bootstrap, self.state_topic, PARTITIONS, replication_factor=1)
        await self.topic.start()
        config = CoordinatorConfig(state_topic=self.state_topic, state_topic_partitions=PARTITIONS,
                                   consumer_heartbeat_interval_ms=500, consumer_session_timeout_ms=10000)
        self.authorizer = build_authorizer({"authorizer": "probe", "authorizer.probe.ttl.ms": "60000"},
                                           self.forward_bootstrap)
        assert isinstance(self.authorizer, ProbeAuthorizer)
        await self.authorizer.start()
        self.service = service = GroupCoordinatorService(config, self.topic, authorizer=self.authorizer)
        from sasl_kcoord import MappedClusterView
        self.cluster = MappedClusterView(parse_addresses(self.own_bootstrap), self.state_topic,
                                         port_map=self.port_map)
        self.gateway = gateway = Gateway(service, self.forward_bootstrap, f"SASL_PLAINTEXT://127.0.0.1:{self.port}",
                                         self.state_topic, config=config, cluster=self.cluster)
        await gateway.start()
        enable_sasl(gateway, SaslSettings.from_settings(self.settings, default_on=True))
        service.on_metadata_update(self.cluster.image)
        self.cluster.subscribe(service.on_metadata_update)
        self.cluster.manage_state_topic(service, self.topic, PARTITIONS, TOPIC_CONFIGS)
        await service.start(missing_topic_wait_s=30)


@pytest.fixture(scope="module")
def secured_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    if shutil.which("java") is None:
        pytest.skip("java not on PATH: a JDK >= 17 runs the Apache Kafka broker")
    from support.kafka_broker import start_kafka

    # one __consumer_offsets partition: created quickly on a loaded machine
    cluster = start_kafka(KAFKA_44, tmp_path_factory.mktemp("acl-probe"), sasl=True, authorizer=True,
                          overrides={"offsets.topic.num.partitions": "1"})
    try:
        _setup_broker(cluster)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def kcoord(secured_kafka: KafkaCluster) -> Iterator[ProbingKcoord]:
    node = secured_kafka.nodes[0]
    running = ProbingKcoord(own_bootstrap=f"127.0.0.1:{node.internal_port}",
                            forward_bootstrap=secured_kafka.bootstrap,
                            state_topic=f"__kcoord_probe_{uuid.uuid4().hex[:8]}", settings={},
                            port_map={node.internal_port: node.port}).start()
    yield running
    running.stop()


def _setup_broker(cluster: KafkaCluster) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient(client_conf(cluster.bootstrap, ADMIN_USER, ADMIN_PASSWORD))
    for f in admin.create_topics([NewTopic(t, 1, 1) for t in TOPICS]).values():
        f.result(30)
    bindings = [AclBinding(ResourceType.BROKER if rt == "CLUSTER" else ResourceType[rt], name,
                           ResourcePatternType[pattern], principal, host, AclOperation[op], AclPermissionType[perm])
                for rt, pattern, name, principal, host, op, perm in ACLS]
    for f in admin.create_acls(bindings).values():
        f.result(30)


def _kafka_view(cluster: KafkaCluster) -> dict[tuple[str, str], set[str] | None]:
    """AuthorizedOperations Kafka reports to alice itself (None: refused to describe)."""
    from confluent_kafka import KafkaException, TopicCollection
    from confluent_kafka.admin import AdminClient

    client = AdminClient(client_conf(cluster.bootstrap, USER, USER_PASSWORD))
    out: dict[tuple[str, str], set[str] | None] = {}
    for name, future in zip(TOPICS, client.describe_topics(TopicCollection(TOPICS),
                                                           include_authorized_operations=True).values()):
        try:
            out[("TOPIC", name)] = {op.name for op in future.result(30).authorized_operations}
        except KafkaException as e:
            assert "AUTHORIZATION" in str(e).upper(), e
            out[("TOPIC", name)] = None
    # Groups: DescribeGroups v5 as alice straight to the broker. None of them exists there (as
    # for every group kcoord holds); Kafka describes such a group as Dead and still fills
    # AuthorizedOperations once its __consumer_offsets exists (a FindCoordinator creates it).
    conn = RawConnection(cluster.bootstrap)
    try:
        assert [a.error_code for a in scram_login(conn, USER, USER_PASSWORD)] == [0, 0, 0]
        conn.call(apis.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=("probe-g-a",))
        answered = wait_until(lambda: (d := conn.call(apis.DESCRIBE_GROUPS, 5, groups=tuple(GROUPS),
                                                      include_authorized_operations=True))
                              and all(g.error_code in (0, 30) for g in d.groups) and d,
                              60, 0.5, "the broker's group coordinator answers")
    finally:
        conn.close()
    for g in answered.groups:
        out[("GROUP", g.group_id)] = None if g.error_code == 30 else {
            op for op, code in OPERATION_CODES.items() if g.authorized_operations & (1 << code)}
    cluster_desc = client.describe_cluster(include_authorized_operations=True).result(30)
    out[("CLUSTER", "kafka-cluster")] = {op.name for op in cluster_desc.authorized_operations}
    return out


def _kcoord_view(kcoord: ProbingKcoord, info: ClientInfo, keys: Any) -> dict[tuple[str, str], set[str] | None]:
    actions = [Action(op, rt, name) for rt, name in keys for op in SUPPORTED_OPERATIONS[rt]]
    kcoord.loop.run(kcoord.authorizer.prepare(info, actions))
    verdicts = iter(kcoord.loop.call(lambda: kcoord.authorizer.authorize(info, actions)))
    out: dict[tuple[str, str], set[str] | None] = {}
    for rt, name in keys:
        allowed = {op for op in SUPPORTED_OPERATIONS[rt] if next(verdicts)}
        out[(rt, name)] = allowed if rt == "CLUSTER" or "DESCRIBE" in allowed else None
    return out


def _client_info(kcoord: ProbingKcoord, conn: RawConnection) -> ClientInfo:
    """alice's connection as kcoord sees it."""
    port = conn.sock.getsockname()[1]
    assert kcoord.gateway is not None
    (found,) = [c for c in kcoord.gateway.connections if c.peer[1] == port]
    return ClientInfo("raw-test", found.peer[0], port, found.listener_name, principal=ALICE)


def login(kcoord: ProbingKcoord) -> RawConnection:
    conn = RawConnection(kcoord.bootstrap)
    answers = scram_login(conn, USER, USER_PASSWORD)
    assert [a.error_code for a in answers] == [0, 0, 0], answers
    return conn


def find_coordinators(conn: RawConnection, *keys: str) -> list[tuple[str, int]]:
    """FindCoordinator v4 for ``keys``, retried while any key answers COORDINATOR_NOT_AVAILABLE
    (kcoord's shard still loading, or its view of the state topic's leader not yet in), as
    clients retry it; bounded."""
    def answer() -> list[tuple[str, int]] | None:
        found = conn.call(apis.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=keys)
        pairs = [(c.key, int(c.error_code)) for c in found.coordinators]
        return None if any(code == 15 for _, code in pairs) else pairs
    return wait_until(answer, 60, 0.2, f"FindCoordinator for {keys} stops answering COORDINATOR_NOT_AVAILABLE")


def test_probe_verdicts_equal_kafkas_for_alice(secured_kafka: KafkaCluster, kcoord: ProbingKcoord) -> None:
    # ACLs reach the broker's authorizer asynchronously: wait until Kafka itself applies them
    kafka = wait_until(lambda: (v := _kafka_view(secured_kafka))[("GROUP", "probe-g-a")] is not None and v,
                       30, 0.5, "Kafka's authorizer has alice's ACLs")
    conn = login(kcoord)
    try:
        # FindCoordinator attaches the authorizer to the gateway (nothing else wired it)
        assert find_coordinators(conn, "probe-g-a") == [("probe-g-a", 0)]
        assert kcoord.authorizer.attached
        ours = _kcoord_view(kcoord, _client_info(kcoord, conn), kafka.keys())
    finally:
        conn.close()
    mismatches = {k: (kafka[k], ours[k]) for k in kafka if kafka[k] != ours[k]}
    assert not mismatches, f"(Kafka, kcoord) differ: {mismatches}"
    # the table exercises allowed, refused and partial answers
    assert kafka[("TOPIC", "probe-t-denied")] is None and kafka[("GROUP", "probe-g-denied")] is None
    assert kafka[("TOPIC", "probe-t-read")] == {"READ", "DESCRIBE"}
    assert kcoord.authorizer.probes >= 2 and kcoord.authorizer.failures == 0


def test_a_group_without_acl_is_refused(secured_kafka: KafkaCluster, kcoord: ProbingKcoord) -> None:
    conn = login(kcoord)
    try:
        assert find_coordinators(conn, "plain-g-none", "probe-g-a") == [("plain-g-none", 30), ("probe-g-a", 0)]
        joined = conn.call(apis.JOIN_GROUP, 9, group_id="plain-g-none", session_timeout=timedelta(seconds=10),
                           rebalance_timeout=timedelta(seconds=10), member_id="", group_instance_id=None,
                           protocol_type="consumer", protocols=(), reason=None)
        assert joined.error_code == 30                  # GROUP_AUTHORIZATION_FAILED
        described = conn.call(apis.DESCRIBE_GROUPS, 5, groups=("plain-g-none", "probe-g-del", "probe-g-kcoord-only"),
                              include_authorized_operations=True)
        none, deletable, kcoord_only = described.groups
        assert none.error_code == 30
        # READ (the prefixed ACL), DELETE, and the DESCRIBE both imply, as Kafka reports them
        assert deletable.error_code == 0 and deletable.authorized_operations == sum(
            1 << OPERATION_CODES[op] for op in ("READ", "DELETE", "DESCRIBE"))
        # a group only kcoord holds (unknown upstream): Kafka still answers for its ACLs
        assert kcoord_only.error_code == 0 and kcoord_only.authorized_operations == sum(
            1 << OPERATION_CODES[op] for op in ("READ", "DESCRIBE"))
    finally:
        conn.close()
