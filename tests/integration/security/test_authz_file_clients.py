"""`authorizer=file` with real clients (issue 13, point 6): a real kcoord (state topic,
GroupCoordinatorService, Gateway) in this process in front of a real Apache Kafka 4.4, and
librdkafka (confluent-kafka) consumers and admin going through it.

Clients are User:ANONYMOUS (no SASL on this listener) at 127.0.0.1, so the ACL file grants by
host. Shown: a group the file allows consumes and commits; after the file changes (reloaded
while serving) a group it denies gets GROUP_AUTHORIZATION_FAILED and ListGroups hides it; a
consumer-protocol member subscribed to a topic it may not describe gets
TOPIC_AUTHORIZATION_FAILED; every group mutation is in the audit log with its outcome.
"""
from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import orjson
import pytest

from coordinator.config import CoordinatorConfig
from coordinator.gateway import Gateway
from coordinator.runtime.state_topic import TOPIC_CONFIGS, StateTopic
from coordinator.security.acl_sources import FileAclSource, build_authorizer
from coordinator.security.audit import AuditLog
from coordinator.security.forward_acl import ForwardAclGate
from coordinator.service import GroupCoordinatorService
from support import ports
from support.wait import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
T = TypeVar("T")
PARTITIONS = 3


class LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="authz-kcoord-loop", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 90.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class KcoordWithAcls:
    """kcoord as `kcoord serve` builds it, with `authorizer=file` and `audit.log` (the wiring
    the lead adds to cli.py: build_authorizer, start before serving, stop at exit)."""

    def __init__(self, upstream: str, state_topic: str, settings: dict[str, str], gate: bool = False) -> None:
        self.upstream, self.state_topic, self.settings, self.gate = upstream, state_topic, settings, gate
        self.loop = LoopThread()
        self.port = ports.free_block(ports.pool(), 4)
        self.bootstrap = f"127.0.0.1:{self.port}"

    def start(self) -> KcoordWithAcls:
        self.loop.run(self._start())
        return self

    async def _start(self) -> None:
        self.authorizer = build_authorizer(self.settings, self.upstream)
        assert self.authorizer is not None
        await self.authorizer.start()
        self.audit = AuditLog.from_settings(self.settings)
        self.topic = StateTopic(self.upstream, self.state_topic, PARTITIONS, replication_factor=1)
        await self.topic.start()
        config = CoordinatorConfig(state_topic=self.state_topic, state_topic_partitions=PARTITIONS,
                                   consumer_heartbeat_interval_ms=500, consumer_session_timeout_ms=10000)
        self.service = GroupCoordinatorService(config, self.topic, authorizer=self.authorizer, audit=self.audit)
        self.gateway = Gateway(self.service, self.upstream, self.bootstrap, self.state_topic, config=config)
        if self.gate:       # kcoord authorizes forwarded requests itself (issue 13, point 4)
            cluster = self.gateway.cluster

            def topic_name_of(topic_id):
                found = cluster.image.topics_by_id.get(topic_id)
                return found.name if found is not None else None
            self.gateway.forward_gate = ForwardAclGate(self.authorizer, topic_name_of)
        await self.gateway.start()
        self.service.on_metadata_update(self.gateway.cluster.image)
        self.gateway.cluster.subscribe(self.service.on_metadata_update)
        self.gateway.cluster.manage_state_topic(self.service, self.topic, PARTITIONS, TOPIC_CONFIGS)
        await self.service.start(missing_topic_wait_s=30)

    def stop(self) -> None:
        async def stop() -> None:
            await self.gateway.close()
            self.service.close()
            await self.topic.stop()
            await self.authorizer.stop()
            if self.audit is not None:
                self.audit.close()
        try:
            self.loop.run(stop(), 30)
        finally:
            self.loop.stop()
            ports.release(self.port)


def acl_text(prefix: str, topic: str, hidden_topic: str, deny: str | None) -> str:
    lines = [f"ALLOW User:ANONYMOUS 127.0.0.1 ALL GROUP PREFIXED {prefix}",
             f"ALLOW User:ANONYMOUS 127.0.0.1 READ TOPIC LITERAL {topic}",
             f"ALLOW User:ANONYMOUS 10.99.0.1 ALL TOPIC LITERAL {hidden_topic}     # another host only"]
    if deny:
        lines.append(f"DENY User:ANONYMOUS * ALL GROUP LITERAL {deny}")
    return "\n".join(lines) + "\n"


def consumer(bootstrap: str, group: str, **extra: Any):
    from confluent_kafka import Consumer

    config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000, **extra}
    if config.get("group.protocol") != "consumer":     # the broker sets these for the consumer protocol
        config.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    return Consumer(config)


def poll_error(c, code: int, timeout: float, what: str) -> None:
    import time

    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is not None and msg.error() is not None:
            seen.append(msg.error())
            if msg.error().code() == code:
                return
    raise AssertionError(f"{what}: no error {code} within {timeout}s; saw {seen}")


def test_file_acls_refuse_a_group_hide_it_and_audit(kafka44, names, tmp_path: Path):
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, hidden_topic = names.topic("orders"), names.topic("hidden")
    prefix = names.group("app")
    ok_group, secret_group = f"{prefix}-ok", f"{prefix}-secret"
    admin = AdminClient({"bootstrap.servers": kafka44.bootstrap})
    for f in admin.create_topics([NewTopic(t, 1, 1) for t in (topic, hidden_topic)]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": kafka44.bootstrap})
    producer.produce(topic, b"m0")
    assert producer.flush(30) == 0

    acls = tmp_path / "acls"
    acls.write_text(acl_text(prefix, topic, hidden_topic, deny=None))
    audit_path = tmp_path / "audit.log"
    kcoord = KcoordWithAcls(kafka44.bootstrap, names.topic("state"), {
        "authorizer": "file", "authorizer.file": str(acls), "authorizer.file.reload.ms": "100",
        "audit.log": str(audit_path)}).start()
    try:
        # both groups are allowed at first: each consumes and commits through kcoord
        for group in (ok_group, secret_group):
            c = consumer(kcoord.bootstrap, group)
            try:
                c.subscribe([topic])
                msg = wait_until(lambda c=c: (m := c.poll(0.5)) is not None and m.error() is None and m, 60, 0,
                                 f"{group} consumes through kcoord")
                assert msg.value() == b"m0"
                committed = c.commit(message=msg, asynchronous=False)
                assert committed is not None and committed[0].error is None
            finally:
                c.close()
        through = AdminClient({"bootstrap.servers": kcoord.bootstrap})    # kept alive until its futures end
        listed = {g.group_id for g in through.list_consumer_groups().result(30).valid}
        assert {ok_group, secret_group} <= listed

        # the file changes while kcoord serves: secret_group is denied from now on
        source = kcoord.authorizer.source
        assert isinstance(source, FileAclSource)
        generation = kcoord.authorizer.generation
        acls.write_text(acl_text(prefix, topic, hidden_topic, deny=secret_group))
        wait_until(lambda: kcoord.authorizer.generation > generation, 20, 0.05, "the ACL file is reloaded")
        audited_before_denial = len(audit_path.read_bytes().splitlines())   # the audit file is unbuffered

        listing = through.list_consumer_groups().result(30)
        listed = {g.group_id for g in listing.valid}
        assert not listing.errors and ok_group in listed and secret_group not in listed, (listed, listing.errors)

        refused = consumer(kcoord.bootstrap, secret_group)
        try:
            refused.subscribe([topic])
            poll_error(refused, KafkaError.GROUP_AUTHORIZATION_FAILED, 60, f"{secret_group} is refused")
        finally:
            refused.close()

        # the consumer protocol (KIP-848): DESCRIBE is needed on every subscribed topic
        member = consumer(kcoord.bootstrap, f"{prefix}-848", **{"group.protocol": "consumer"})
        try:
            member.subscribe([hidden_topic])
            poll_error(member, KafkaError.TOPIC_AUTHORIZATION_FAILED, 60,
                       "a consumer-protocol member subscribed to an undescribable topic")
        finally:
            member.close()
    finally:
        kcoord.stop()

    entries = [orjson.loads(line) for line in audit_path.read_bytes().splitlines()]
    commits = [(e["group"], e["outcome"]) for e in entries if e["action"] == "commit"]
    assert (ok_group, "NONE") in commits and (secret_group, "NONE") in commits
    # After the denial nothing of secret_group was mutated: librdkafka is refused at
    # FindCoordinator (Group DESCRIBE, as Kafka refuses it), which is not a mutation, or at
    # JoinGroup, which the audit log records as refused.
    after = [e for e in entries[audited_before_denial:] if e["group"] == secret_group]
    assert all(e["outcome"] == "GROUP_AUTHORIZATION_FAILED" for e in after), \
        [(e["api"], e["group"], e["outcome"]) for e in after]
    assert {e["principal"] for e in entries} == {"User:ANONYMOUS"}
    assert all(e["client"].startswith("127.0.0.1:") for e in entries)


def test_forwarded_produce_and_fetch_are_authorized_by_kcoord(kafka44, names, tmp_path: Path):
    """The forward gate with a real producer and consumer: Topic WRITE for Produce, Topic READ
    for Fetch, answered with TOPIC_AUTHORIZATION_FAILED (the client's own error, not a closed
    connection) when the request names only refused topics."""
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    writable, readonly = names.topic("writable"), names.topic("readonly")
    admin = AdminClient({"bootstrap.servers": kafka44.bootstrap})
    for f in admin.create_topics([NewTopic(t, 1, 1) for t in (writable, readonly)]).values():
        f.result(30)
    direct = Producer({"bootstrap.servers": kafka44.bootstrap})
    direct.produce(readonly, b"r0")
    direct.produce(writable, b"w0")
    assert direct.flush(30) == 0
    prefix = names.group("fwd")
    acls = tmp_path / "acls"
    acls.write_text(f"ALLOW User:ANONYMOUS 127.0.0.1 WRITE TOPIC LITERAL {writable}\n"
                    f"ALLOW User:ANONYMOUS 127.0.0.1 READ TOPIC LITERAL {readonly}\n"
                    f"ALLOW User:ANONYMOUS 127.0.0.1 ALL GROUP PREFIXED {prefix}\n")
    kcoord = KcoordWithAcls(kafka44.bootstrap, names.topic("state"), {
        "authorizer": "file", "authorizer.file": str(acls)}, gate=True).start()
    try:
        reports: list = []
        producer = Producer({"bootstrap.servers": kcoord.bootstrap, "message.send.max.retries": 0,
                             "on_delivery": lambda err, msg: reports.append((msg.topic(), err))})
        producer.produce(writable, b"w1")
        assert producer.flush(30) == 0
        producer.produce(readonly, b"r1")
        assert producer.flush(30) == 0
        outcome = dict(reports)
        assert outcome[writable] is None, reports
        assert outcome[readonly] is not None and outcome[readonly].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, \
            reports

        allowed = consumer(kcoord.bootstrap, f"{prefix}-r")
        try:
            allowed.subscribe([readonly])
            msg = wait_until(lambda: (m := allowed.poll(0.5)) is not None and m.error() is None and m, 60, 0,
                             "the readable topic is fetched through the gate")
            assert msg.value() == b"r0"
        finally:
            allowed.close()
        refused = consumer(kcoord.bootstrap, f"{prefix}-w")
        try:
            refused.subscribe([writable])
            poll_error(refused, KafkaError.TOPIC_AUTHORIZATION_FAILED, 60, "fetching a topic without READ")
        finally:
            refused.close()
    finally:
        kcoord.stop()
