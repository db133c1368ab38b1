"""`authorizer=upstream` against a real Apache Kafka 4.4 with SASL (SCRAM-SHA-512) and Kafka's
StandardAuthorizer (issue 13, point 6).

ACLs for User:alice are created on the broker with the admin client (literal, prefixed and
wildcard-principal patterns, a DENY over an ALLOW, ALL with a DENY of DESCRIBE, host-bound
entries for this host and another). kcoord mirrors them through DescribeAcls, as kcoord's own
upstream principal (admin, over SASL), and its verdicts are compared with Kafka's own: the
AuthorizedOperations Kafka reports to alice for each topic, group and the cluster (the
broker sees alice at 127.0.0.1). Then a new ACL reaches the mirror on its next refresh.
"""
from __future__ import annotations

import asyncio
import logging
import shutil
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from coordinator.authz import Action
from coordinator.protocol.service import ClientInfo
from coordinator.security.acl import SUPPORTED_OPERATIONS
from coordinator.security.acl_sources import UpstreamAclSource, build_authorizer
from coordinator.upstream.client import opener
from support.wait import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
T = TypeVar("T")

ALICE = "User:alice"
HERE = "127.0.0.1"
TOPICS = ["acl-t-lit", "acl-t-pre-a", "acl-t-pre-denied", "acl-t-anyone", "acl-t-otherhost", "acl-t-thishost",
          "acl-t-all", "acl-t-none"]
GROUPS = ["acl-g-a", "acl-g-denied", "acl-g-del", "plain-g-none"]
# (resource type, pattern, name, principal, host, operation, permission)
ACLS = [
    ("TOPIC", "LITERAL", "acl-t-lit", ALICE, "*", "READ", "ALLOW"),
    ("TOPIC", "PREFIXED", "acl-t-pre-", ALICE, "*", "WRITE", "ALLOW"),
    ("TOPIC", "LITERAL", "acl-t-pre-denied", ALICE, "*", "WRITE", "DENY"),
    ("TOPIC", "LITERAL", "acl-t-anyone", "User:*", "*", "ALTER_CONFIGS", "ALLOW"),
    ("TOPIC", "LITERAL", "acl-t-anyone", ALICE, "*", "DESCRIBE", "ALLOW"),
    ("TOPIC", "LITERAL", "acl-t-otherhost", ALICE, "10.20.30.40", "ALL", "ALLOW"),
    ("TOPIC", "LITERAL", "acl-t-thishost", ALICE, HERE, "DELETE", "ALLOW"),
    ("TOPIC", "LITERAL", "acl-t-all", ALICE, "*", "ALL", "ALLOW"),
    ("TOPIC", "LITERAL", "acl-t-all", ALICE, "*", "DESCRIBE", "DENY"),
    ("GROUP", "PREFIXED", "acl-g-", ALICE, "*", "READ", "ALLOW"),
    ("GROUP", "LITERAL", "acl-g-denied", ALICE, "*", "ALL", "DENY"),
    ("GROUP", "LITERAL", "acl-g-del", ALICE, "*", "DELETE", "ALLOW"),
    ("CLUSTER", "LITERAL", "kafka-cluster", ALICE, "*", "DESCRIBE", "ALLOW"),
]


class LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="acl-mirror-loop", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def secured_kafka(tmp_path_factory):
    if shutil.which("java") is None:
        pytest.skip("java not on PATH: a JDK >= 17 runs the Apache Kafka broker")
    from support.kafka_broker import KAFKA_44, start_kafka

    cluster = start_kafka(KAFKA_44, tmp_path_factory.mktemp("acl-mirror"), sasl=True, authorizer=True)
    try:
        yield cluster
    finally:
        cluster.stop()


def _binding(row):
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    rt, pattern, name, principal, host, op, perm = row
    restype = ResourceType.BROKER if rt == "CLUSTER" else ResourceType[rt]   # confluent-kafka's name for it
    return AclBinding(restype, name, ResourcePatternType[pattern], principal, host, AclOperation[op],
                      AclPermissionType[perm])


# Kafka creates __consumer_offsets (50 partitions) on the first offsets write; under a CI
# run's load (load average 40 on 2 cores) that took more than 30 s once, and more than
# librdkafka's default request timeout (socket.timeout.ms, 60 s) once on three xdist
# workers: librdkafka's own timeouts are raised to the same bound as the wait, the admin
# request's and the broker connection's (socket.timeout.ms: a landing-sized run here saw "Failed
# while waiting for response from broker: Local: Timed out" on the first offsets write).
ADMIN_TIMEOUT_S = 120


def _setup_broker(cluster) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({**cluster.client_config(), "socket.timeout.ms": ADMIN_TIMEOUT_S * 1000})
    bound = {"request_timeout": ADMIN_TIMEOUT_S}
    for f in admin.create_topics([NewTopic(t, 1, 1) for t in TOPICS], operation_timeout=ADMIN_TIMEOUT_S,
                                 **bound).values():
        f.result(ADMIN_TIMEOUT_S + 10)
    for g in GROUPS:     # a group exists once offsets are stored for it (one group per request)
        for f in admin.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(g, [TopicPartition("acl-t-lit", 0, 0)])], **bound).values():
            f.result(ADMIN_TIMEOUT_S + 10)
    bindings = [_binding(r) for r in ACLS]
    for f in admin.create_acls(bindings, **bound).values():
        f.result(ADMIN_TIMEOUT_S + 10)


def _kafka_view(cluster, user: str, password: str) -> dict[tuple[str, str], set[str] | None]:
    """What Kafka tells ``user`` it may do: AuthorizedOperations per topic, group and the
    cluster; None where Kafka refuses to describe the resource at all."""
    from confluent_kafka import KafkaException, TopicCollection
    from confluent_kafka.admin import AdminClient

    client = AdminClient(cluster.client_config(user, password))
    out: dict[tuple[str, str], set[str] | None] = {}
    for name, future in zip(TOPICS, client.describe_topics(TopicCollection(TOPICS),
                                                           include_authorized_operations=True).values()):
        try:
            out[("TOPIC", name)] = {op.name for op in future.result(30).authorized_operations}
        except KafkaException as e:
            assert "AUTHORIZATION" in str(e).upper(), e
            out[("TOPIC", name)] = None
    for name, future in client.describe_consumer_groups(GROUPS, include_authorized_operations=True).items():
        try:
            out[("GROUP", name)] = {op.name for op in future.result(30).authorized_operations}
        except KafkaException as e:
            assert "AUTHORIZATION" in str(e).upper(), e
            out[("GROUP", name)] = None
    cluster_desc = client.describe_cluster(include_authorized_operations=True).result(30)
    out[("CLUSTER", "kafka-cluster")] = {op.name for op in cluster_desc.authorized_operations}
    return out


def _view_once(cluster, password: str, needed: tuple[str, str]):
    """Kafka's view for alice once ``needed`` is describable (ACLs reach the authorizer late)."""
    view = _kafka_view(cluster, "alice", password)
    return view if view[needed] is not None else None


def _kcoord_view(authorizer, principal: str, keys) -> dict[tuple[str, str], set[str] | None]:
    client = ClientInfo("test", HERE, 1, "test", principal=principal)
    out: dict[tuple[str, str], set[str] | None] = {}
    for rt, name in keys:
        ops = SUPPORTED_OPERATIONS[rt]
        verdicts = authorizer.authorize(client, [Action(op, rt, name) for op in ops])
        allowed = {op for op, ok in zip(ops, verdicts) if ok}
        # Kafka answers nothing about a topic or group the client may not describe
        out[(rt, name)] = allowed if rt == "CLUSTER" or "DESCRIBE" in allowed else None
    return out


def test_the_upstream_mirror_gives_kafkas_verdicts(secured_kafka, caplog):
    from support.kafka_broker import ADMIN_PASSWORD, ADMIN_USER, USER_PASSWORD

    # kcoord's upstream principal without DESCRIBE on the CLUSTER (alice, before her ACLs
    # exist): DescribeAcls is refused, and kcoord denies everyone but super users
    weak = build_authorizer({"authorizer": "upstream", "upstream.security.protocol": secured_kafka.security_protocol,
                             "upstream.sasl.mechanism": "SCRAM-SHA-512", "upstream.sasl.username": "alice",
                             "upstream.sasl.password": USER_PASSWORD, "super.users": "User:admin"},
                            secured_kafka.bootstrap, opener)
    assert weak is not None and isinstance(weak.source, UpstreamAclSource)

    async def weak_start() -> None:
        await weak.start()
        await weak.stop()
    with caplog.at_level(logging.ERROR, logger="kcoord.security.acl"):
        asyncio.run(weak_start())
    assert "needs DESCRIBE on the CLUSTER" in caplog.text, caplog.text     # Kafka's CLUSTER_AUTHORIZATION_FAILED
    assert weak.source.failures == 1 and weak.source.loads == 0 and not weak.ready
    assert not weak.allows(ALICE, HERE, "READ", "GROUP", "acl-g-a") and weak.allows("User:admin", HERE, "READ",
                                                                                     "GROUP", "acl-g-a")

    _setup_broker(secured_kafka)
    settings = {
        "authorizer": "upstream", "authorizer.refresh.ms": "300",
        "upstream.security.protocol": secured_kafka.security_protocol,
        "upstream.sasl.mechanism": "SCRAM-SHA-512", "upstream.sasl.username": ADMIN_USER,
        "upstream.sasl.password": ADMIN_PASSWORD,
        # the broker's own settings (support.kafka_broker): kcoord has settings of the same names
        "super.users": f"User:ANONYMOUS;User:{ADMIN_USER}", "allow.everyone.if.no.acl.found": "false",
    }
    authorizer = build_authorizer(settings, secured_kafka.bootstrap, opener)
    assert authorizer is not None and not authorizer.ready
    source = authorizer.source
    assert isinstance(source, UpstreamAclSource)
    loop = LoopThread()
    try:
        loop.run(authorizer.start())
        # ACLs reach the broker's authorizer (and its DescribeAcls) asynchronously
        wait_until(lambda: len(authorizer.acls) >= len(ACLS), 30, 0.1,
                   lambda: f"the mirror holds {len(authorizer.acls)} of {len(ACLS)} ACLs (loads {source.loads}, "
                           f"failures {source.failures})")
        assert authorizer.ready and source.failures == 0

        kafka = wait_until(lambda: _view_once(secured_kafka, USER_PASSWORD, ("GROUP", "acl-g-a")), 30, 0.5,
                           "Kafka's authorizer has alice's group ACLs")
        ours = _kcoord_view(authorizer, ALICE, kafka.keys())
        mismatches = {k: (kafka[k], ours[k]) for k in kafka if kafka[k] != ours[k]}
        assert not mismatches, f"(Kafka, kcoord) differ: {mismatches}"
        # the table exercises what it claims to: allowed, refused and partial answers all occur
        assert kafka[("TOPIC", "acl-t-none")] is None and kafka[("TOPIC", "acl-t-otherhost")] is None
        assert kafka[("TOPIC", "acl-t-thishost")] == {"DELETE", "DESCRIBE"}
        # DENY WRITE takes WRITE away, but the prefixed ALLOW WRITE still implies DESCRIBE
        assert kafka[("TOPIC", "acl-t-pre-denied")] == {"DESCRIBE"}
        assert kafka[("TOPIC", "acl-t-pre-a")] == {"WRITE", "DESCRIBE"}
        assert kafka[("TOPIC", "acl-t-all")] is None
        assert kafka[("GROUP", "acl-g-denied")] is None and kafka[("GROUP", "acl-g-a")] == {"READ", "DESCRIBE"}
        assert kafka[("GROUP", "acl-g-del")] == {"READ", "DELETE", "DESCRIBE"}
        assert kafka[("GROUP", "plain-g-none")] is None
        assert "DESCRIBE" in kafka[("CLUSTER", "kafka-cluster")]      # type: ignore[operator]

        # the super user (kcoord's own settings) and a user without ACLs
        admin_view = _kcoord_view(authorizer, f"User:{ADMIN_USER}", kafka.keys())
        assert all(v is not None for v in admin_view.values())
        assert all(v is None for (rt, _), v in _kcoord_view(authorizer, "User:bob", kafka.keys()).items()
                   if rt != "CLUSTER")

        # a new ACL on the broker reaches the mirror on a later refresh
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(secured_kafka.client_config())
        new = _binding(("GROUP", "LITERAL", "plain-g-none", ALICE, "*", "DESCRIBE", "ALLOW"))
        admin.create_acls([new])[new].result(30)
        wait_until(lambda: authorizer.allows(ALICE, HERE, "DESCRIBE", "GROUP", "plain-g-none"), 30, 0.1,
                   "the refreshed mirror allows alice to describe plain-g-none")
        kafka_after = wait_until(lambda: _view_once(secured_kafka, USER_PASSWORD, ("GROUP", "plain-g-none")), 30,
                                 0.5, "Kafka allows it too")
        assert kafka_after[("GROUP", "plain-g-none")] == {"DESCRIBE"}
        assert _kcoord_view(authorizer, ALICE, [("GROUP", "plain-g-none")])[("GROUP", "plain-g-none")] == {"DESCRIBE"}
    finally:
        loop.run(authorizer.stop())
        loop.stop()
