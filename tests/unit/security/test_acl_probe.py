"""`authorizer=probe` (coordinator/security/acl_probe.py) against a fake upstream link: what
each probe asks, how Kafka's answers become verdicts, the TTL and the size bound of the cache,
failing closed, and the service awaiting `prepare` before its checks."""
from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from coordinator.authz import ALLOW_ALL, Action
from coordinator.config import CoordinatorConfig
from coordinator.group.image import MetadataImage
from coordinator.group.kio_util import schema
from coordinator.protocol import apis
from coordinator.protocol.apis import response_class
from coordinator.protocol.service import ClientInfo
from coordinator.security.acl_probe import ProbeAuthorizer
from coordinator.security.acl_sources import build_authorizer
from coordinator.security.settings import SecurityConfigError
from coordinator.service import GroupCoordinatorService

from ..group.context import topic as topic_image
from ..runtime.fakes import FakeStateTopic

ALICE = ClientInfo("app", "10.0.0.7", 2, "test", principal="User:alice")
ALICE_ELSEWHERE = ClientInfo("app", "10.9.9.9", 3, "test", principal="User:alice")
READ, DESCRIBE, DELETE, WRITE = 3, 8, 6, 4
NOT_ASKED = -2147483648


def _mod(api_key: int, version: int) -> Any:
    return __import__(response_class(api_key, version).__module__, fromlist=["x"])


class FakeUpstream:
    """The client's link as the probe sees it: answers from tables of Kafka-like verdicts."""

    def __init__(self, topics: dict[str, int | None], groups: dict[str, int | None], cluster: int = 0,
                 fail: bool = False) -> None:
        self.topics, self.groups, self.cluster, self.fail = topics, groups, cluster, fail
        self.requests: list[tuple[int, int, Any]] = []

    async def probe_upstream(self, api_key: int, api_version: int, request: Any) -> Any:
        self.requests.append((api_key, api_version, request))
        if self.fail:
            raise ConnectionError("link closed")
        if api_key == apis.METADATA:
            m = _mod(api_key, api_version)
            out = []
            for t in request.topics:
                ops = self.topics.get(t.name, "missing")
                if ops == "missing":
                    code, ops = ErrorCode.unknown_topic_or_partition, NOT_ASKED
                elif ops is None:
                    code, ops = ErrorCode.topic_authorization_failed, NOT_ASKED
                else:
                    code = ErrorCode.none
                out.append(m.MetadataResponseTopic(error_code=code, name=t.name, topic_id=None, is_internal=False,
                                                   partitions=(), topic_authorized_operations=ops))
            return m.MetadataResponse(throttle_time=timedelta(0), brokers=(), cluster_id="c", controller_id=1,
                                      topics=tuple(out), cluster_authorized_operations=self.cluster
                                      if request.include_cluster_authorized_operations else NOT_ASKED)
        m = _mod(api_key, api_version)
        groups = []
        for g in request.groups:
            ops = self.groups.get(g)
            groups.append(m.DescribedGroup(
                error_code=ErrorCode.group_authorization_failed if ops is None else ErrorCode.none, group_id=g,
                group_state="Dead", protocol_type="", protocol_data="", members=(),
                authorized_operations=NOT_ASKED if ops is None else ops))
        return m.DescribeGroupsResponse(throttle_time=timedelta(0), groups=tuple(groups))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def bits(*codes: int) -> int:
    return sum(1 << c for c in codes)


def probe_with(upstream: FakeUpstream, **kw: Any) -> tuple[ProbeAuthorizer, Clock]:
    clock = Clock()
    probe = ProbeAuthorizer(clock=clock, **kw)
    probe.attach_channels(lambda client: upstream)
    return probe, clock


def test_verdicts_are_kafkas_authorized_operations() -> None:
    upstream = FakeUpstream(topics={"t-read": bits(READ, DESCRIBE), "t-none": None, "t-write": bits(WRITE, DESCRIBE)},
                            groups={"g-read": bits(READ, DESCRIBE), "g-del": bits(DELETE, DESCRIBE)},
                            cluster=bits(DESCRIBE))
    probe, _ = probe_with(upstream)
    actions = [Action("READ", "TOPIC", "t-read"), Action("DESCRIBE", "TOPIC", "t-none"),
               Action("READ", "TOPIC", "t-write"), Action("DESCRIBE", "TOPIC", "t-missing"),
               Action("READ", "TOPIC", "t-missing"), Action("READ", "GROUP", "g-read"),
               Action("DELETE", "GROUP", "g-read"), Action("DELETE", "GROUP", "g-del"),
               Action("READ", "GROUP", "g-unknown"), Action("DESCRIBE", "CLUSTER", "kafka-cluster"),
               Action("ALTER", "CLUSTER", "kafka-cluster"), Action("WRITE", "TRANSACTIONAL_ID", "x")]
    assert probe.authorize(ALICE, actions) == [False] * len(actions)      # nothing probed yet: refused
    asyncio.run(probe.prepare(ALICE, actions))
    assert probe.authorize(ALICE, actions) == [True, False, False, True, False, True, False, True, False, True,
                                               False, False]
    # one Metadata (topics and cluster) and one DescribeGroups, each resource once
    (md_key, md_v, md), (dg_key, dg_v, dg) = upstream.requests
    assert (md_key, md_v, dg_key, dg_v) == (apis.METADATA, 10, apis.DESCRIBE_GROUPS, 5)
    assert [t.name for t in md.topics] == ["t-read", "t-none", "t-write", "t-missing"]
    assert md.include_topic_authorized_operations and md.include_cluster_authorized_operations
    assert not md.allow_auto_topic_creation          # a probe never creates a topic
    assert dg.groups == ("g-read", "g-del", "g-unknown") and dg.include_authorized_operations
    assert probe.probes == 2
    # cached: nothing asked again; another host is another verdict
    asyncio.run(probe.prepare(ALICE, actions))
    assert len(upstream.requests) == 2
    assert probe.authorize(ALICE_ELSEWHERE, actions[:1]) == [False]


def test_verdicts_expire_after_the_ttl_and_are_probed_again() -> None:
    upstream = FakeUpstream(topics={"t": bits(DESCRIBE)}, groups={})
    probe, clock = probe_with(upstream, ttl_ms=30_000)
    action = [Action("DESCRIBE", "TOPIC", "t")]
    asyncio.run(probe.prepare(ALICE, action))
    clock.now += 29.9
    assert probe.authorize(ALICE, action) == [True]
    clock.now += 0.2
    assert probe.authorize(ALICE, action) == [False]       # expired: refused until probed again
    upstream.topics["t"] = None                            # the ACL was removed upstream
    asyncio.run(probe.prepare(ALICE, action))
    assert probe.authorize(ALICE, action) == [False] and len(upstream.requests) == 2


def test_the_cache_is_bounded_oldest_first() -> None:
    upstream = FakeUpstream(topics={f"t{i}": bits(DESCRIBE) for i in range(5)}, groups={})
    probe, _ = probe_with(upstream, max_entries=3)
    for i in range(5):
        asyncio.run(probe.prepare(ALICE, [Action("DESCRIBE", "TOPIC", f"t{i}")]))
    assert len(probe._cache) == 3
    assert probe.authorize(ALICE, [Action("DESCRIBE", "TOPIC", f"t{i}") for i in range(5)]) == [
        False, False, True, True, True]


def test_a_failed_probe_fails_closed_and_super_users_need_none() -> None:
    upstream = FakeUpstream(topics={"t": bits(DESCRIBE)}, groups={}, fail=True)
    probe, _ = probe_with(upstream, super_users=frozenset({"User:admin"}))
    action = [Action("DESCRIBE", "TOPIC", "t")]
    asyncio.run(probe.prepare(ALICE, action))
    assert probe.authorize(ALICE, action) == [False] and probe.failures == 1
    admin = ClientInfo("a", "10.0.0.1", 1, "test", principal="User:admin")
    asyncio.run(probe.prepare(admin, action))
    assert probe.authorize(admin, action) == [True] and len(upstream.requests) == 1
    unattached = ProbeAuthorizer()
    asyncio.run(unattached.prepare(ALICE, action))
    assert unattached.authorize(ALICE, action) == [False] and unattached.failures == 1


def test_a_probe_that_never_answers_times_out_closed() -> None:
    class Silent:
        async def probe_upstream(self, *args: Any) -> Any:
            await asyncio.Event().wait()
    probe = ProbeAuthorizer(timeout_ms=50)
    probe.attach_channels(lambda client: Silent())
    asyncio.run(probe.prepare(ALICE, [Action("READ", "GROUP", "g")]))
    assert probe.authorize(ALICE, [Action("READ", "GROUP", "g")]) == [False] and probe.failures == 1


def test_build_authorizer_makes_the_probe_with_its_settings() -> None:
    probe = build_authorizer({"authorizer": "probe", "authorizer.probe.ttl.ms": "5000",
                              "authorizer.probe.max.entries": "10", "super.users": "User:admin"}, "b:9092")
    assert isinstance(probe, ProbeAuthorizer)
    assert (probe.ttl_s, probe.max_entries, probe.super_users) == (5.0, 10, frozenset({"User:admin"}))
    with pytest.raises(SecurityConfigError, match="SASL termination"):
        build_authorizer({"authorizer": "probe", "sasl.termination": "true"}, "b:9092")
    with pytest.raises(SecurityConfigError, match="authorizer.probe.ttl.ms"):
        build_authorizer({"authorizer": "probe", "authorizer.probe.ttl.ms": "soon"}, "b:9092")


# --- the service awaits prepare before its checks ------------------------------------------------

IMAGE = MetadataImage.of([topic_image("t", 2), topic_image("secret", 2)])


def service_with(authorizer: Any) -> GroupCoordinatorService:
    service = GroupCoordinatorService(CoordinatorConfig(state_topic_partitions=2), FakeStateTopic(2),  # type: ignore[arg-type]
                                      authorizer=authorizer)
    service.on_metadata_update(IMAGE)
    return service


def cghb(group: str, member: str, topics: tuple[str, ...]) -> Any:
    hb = schema("consumer_group_heartbeat", 1, "request")
    return hb.ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout=timedelta(seconds=30), subscribed_topic_names=topics, subscribed_topic_regex=None,
        server_assignor=None, topic_partitions=())


def test_the_service_probes_before_authorizing_group_apis() -> None:
    upstream = FakeUpstream(topics={"t": bits(READ, DESCRIBE), "secret": None},
                            groups={"ok": bits(READ, DESCRIBE)})

    async def main() -> None:
        probe, _ = probe_with(upstream)
        service = service_with(probe)
        await service.start()
        joined = await service.handle(68, 1, cghb("ok", "m" * 22, ("t",)), ALICE)
        assert joined.error_code == ErrorCode.none and joined.member_epoch > 0
        refused_group = await service.handle(68, 1, cghb("nope", "n" * 22, ("t",)), ALICE)
        assert refused_group.error_code == ErrorCode.group_authorization_failed
        refused_topic = await service.handle(68, 1, cghb("ok", "o" * 22, ("t", "secret")), ALICE)
        assert refused_topic.error_code == ErrorCode.topic_authorization_failed
        lg = schema("list_groups", 5, "request").ListGroupsRequest(states_filter=(), types_filter=())
        listed = await service.handle(16, 5, lg, ALICE)
        assert [g.group_id for g in listed.groups] == ["ok"]
        service.close()
    asyncio.run(main())
    asked = {(k, tuple(getattr(t, "name", t) for t in (r.topics if k == apis.METADATA else r.groups)))
             for k, _, r in upstream.requests}
    assert (apis.DESCRIBE_GROUPS, ("ok",)) in asked and (apis.DESCRIBE_GROUPS, ("nope",)) in asked
    assert (apis.METADATA, ("secret",)) in asked       # "t" was cached from the first heartbeat


def test_authorizers_without_prepare_keep_their_path() -> None:
    assert service_with(ALLOW_ALL)._authorization._prepare_hook is None
    from coordinator.security.acl import AclAuthorizer
    assert service_with(AclAuthorizer())._authorization._prepare_hook is None


def test_regex_resolution_uses_probed_verdicts_kept_fresh_by_heartbeats() -> None:
    upstream = FakeUpstream(topics={"t": bits(READ, DESCRIBE), "secret": None}, groups={"rg": bits(READ, DESCRIBE)})

    async def main() -> None:
        probe, clock = probe_with(upstream)
        service = service_with(probe)
        await service.start()
        hb = schema("consumer_group_heartbeat", 1, "request")
        join = hb.ConsumerGroupHeartbeatRequest(
            group_id="rg", member_id="r" * 22, member_epoch=0, instance_id=None, rack_id=None,
            rebalance_timeout=timedelta(seconds=30), subscribed_topic_names=None, subscribed_topic_regex="t|secret",
            server_assignor=None, topic_partitions=())
        joined = await service.handle(68, 1, join, ALICE)
        assert joined.error_code == ErrorCode.none
        metadata_asks = [r for k, _, r in upstream.requests if k == apis.METADATA]
        assert sorted(t.name for t in metadata_asks[0].topics) == ["secret", "t"]   # probed before resolution
        group = service.runtime_for("rg").shard.groups["rg"]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while "t|secret" not in group.resolved_regexes:
            assert loop.time() < deadline, "the regex was never resolved"
            await asyncio.sleep(0.01)
        assert group.resolved_regexes["t|secret"].topics == frozenset({"t"})
        # past the TTL, a heartbeat that no longer names the regex probes its topics again
        clock.now += 31
        steady = dataclasses.replace(join, member_epoch=joined.member_epoch, subscribed_topic_regex=None,
                                     rebalance_timeout=timedelta(milliseconds=-1), topic_partitions=None)
        assert (await service.handle(68, 1, steady, ALICE)).error_code == ErrorCode.none
        again = [r for k, _, r in upstream.requests if k == apis.METADATA][1:]
        assert again and sorted(t.name for t in again[0].topics) == ["secret", "t"]
        service.close()
    asyncio.run(main())
