"""Regex resolution drops the topics the member may not DESCRIBE (KAFKA-18813, Kafka 4.0): every
regex of the group resolves with the rights of the member whose heartbeat scheduled the refresh
(`AuthorizedRequestContext.topic_filter`, coordinator/group/modern/consumer/regex_refresh.py). Sans-IO on a ShardContext,
then through the service with a real AclAuthorizer."""
from __future__ import annotations

import asyncio
from collections.abc import Collection
from datetime import timedelta

from kio.schema.errors import ErrorCode

from coordinator.config import CoordinatorConfig
from coordinator.group.context import AuthorizedRequestContext
from coordinator.group.image import MetadataImage
from coordinator.group.kio_util import schema
from coordinator.group.modern.consumer import regex_refresh
from coordinator.group.shard import RequestContext
from coordinator.protocol.service import ClientInfo
from coordinator.security.acl import AclAuthorizer
from coordinator.security.acl_sources import parse_acl_text
from coordinator.service import GroupCoordinatorService

from ..group.context import ShardContext, topic
from ..runtime.fakes import FakeStateTopic

TOPICS = (topic("orders-a", 2), topic("orders-b", 2), topic("orders-secret", 2), topic("other", 1))


class FilteredShard(ShardContext):
    """A ShardContext whose heartbeats carry a topic filter (as the service's, with an authorizer)."""

    def __init__(self, *topics, allowed: Collection[str] | None = None, **kw) -> None:
        super().__init__(*topics, **kw)
        self.allowed = None if allowed is None else frozenset(allowed)
        self.filtered: list[frozenset[str]] = []

    def _filter(self, names: Collection[str]) -> frozenset[str]:
        names = frozenset(names)
        self.filtered.append(names)
        return names & self.allowed if self.allowed is not None else names

    def ctx(self, version: int = 1) -> RequestContext:
        if self.allowed is None:
            return RequestContext(api_version=version, client_id="client", client_host="/127.0.0.1")
        return AuthorizedRequestContext(api_version=version, client_id="client", client_host="/127.0.0.1",
                                        topic_filter=self._filter)


def resolved(sc: ShardContext, group: str = "g") -> dict[str, frozenset[str]]:
    return {r: v.topics for r, v in sc.group(group).resolved_regexes.items()}


def test_resolution_keeps_only_what_the_member_may_describe() -> None:
    sc = FilteredShard(*TOPICS, allowed={"orders-a", "orders-b", "other"})
    regex_refresh.require_topic_filter(sc.shard)
    sc.heartbeat("g", "m1" * 11, 0, regex="orders-.*")
    sc.advance(0)
    assert resolved(sc) == {"orders-.*": frozenset({"orders-a", "orders-b"})}
    # asked once, with every topic the group's regexes matched
    assert sc.filtered == [frozenset({"orders-a", "orders-b", "orders-secret"})]
    # the member's assignment never names the refused topic
    hb = sc.heartbeat("g", "m1" * 11, sc.group("g").members["m1" * 11].member_epoch)
    assigned = {t.topic_id for t in hb.assignment.topic_partitions} if hb.assignment else set()
    assert sc.id_of("orders-secret") not in assigned and assigned == {sc.id_of("orders-a"), sc.id_of("orders-b")}


def test_all_regexes_resolve_with_the_rights_of_the_member_that_scheduled_the_refresh() -> None:
    sc = FilteredShard(*TOPICS, allowed={"orders-a", "orders-secret", "other"})
    regex_refresh.require_topic_filter(sc.shard)
    sc.heartbeat("g", "m1" * 11, 0, regex="orders-.*")
    sc.advance(0)
    assert resolved(sc) == {"orders-.*": frozenset({"orders-a", "orders-secret"})}
    # a second member, with other rights, brings a second regex: the refresh it schedules
    # resolves both regexes with its rights (Kafka's refreshRegularExpressions)
    sc.allowed = frozenset({"orders-b", "other"})
    sc.advance(sc.config.consumer_regex_batch_refresh_min_interval_ms)
    sc.heartbeat("g", "m2" * 11, 0, regex="oth.*")
    sc.advance(sc.config.consumer_regex_batch_refresh_min_interval_ms)
    assert resolved(sc) == {"orders-.*": frozenset({"orders-b"}), "oth.*": frozenset({"other"})}


def test_without_an_authorizer_nothing_is_filtered() -> None:
    sc = FilteredShard(*TOPICS, allowed=None)
    sc.heartbeat("g", "m1" * 11, 0, regex="orders-.*")
    sc.advance(0)
    assert resolved(sc) == {"orders-.*": frozenset({"orders-a", "orders-b", "orders-secret"})}
    assert sc.filtered == []


def test_an_authorizing_shard_never_resolves_without_a_members_rights() -> None:
    sc = FilteredShard(*TOPICS, allowed={"orders-a"})
    sc.heartbeat("g", "m1" * 11, 0, regex="orders-.*")
    sc.advance(0)
    # a restart: the log rebuilds the group, but no heartbeat has brought a filter yet
    fresh = sc.reload()
    regex_refresh.require_topic_filter(fresh)
    group = fresh.groups["g"]
    result = regex_refresh.refresh(fresh, group, sc.now_ms + 600_000)
    assert not result.records and not result.timers      # skipped: the next heartbeat schedules it
    # the same refresh on a shard whose service does not authorize resolves
    plain = sc.reload()
    assert regex_refresh.refresh(plain, plain.groups["g"], sc.now_ms + 600_000).records


# --- through the service, with Kafka's ACL model ----------------------------------------------

ALICE = ClientInfo("app", "10.0.0.7", 2, "test", principal="User:alice")
ACLS = """
ALLOW User:alice * READ     GROUP LITERAL regex-g
ALLOW User:alice * DESCRIBE TOPIC PREFIXED orders-
DENY  User:alice * DESCRIBE TOPIC LITERAL orders-secret
"""


def test_the_service_resolves_regexes_with_the_members_acls() -> None:
    async def main() -> None:
        authorizer = AclAuthorizer(parse_acl_text(ACLS))
        service = GroupCoordinatorService(CoordinatorConfig(state_topic_partitions=1), FakeStateTopic(1),  # type: ignore[arg-type]
                                          authorizer=authorizer)
        service.on_metadata_update(MetadataImage.of(TOPICS))
        await service.start()
        hb = schema("consumer_group_heartbeat", 1, "request")
        req = hb.ConsumerGroupHeartbeatRequest(
            group_id="regex-g", member_id="r" * 22, member_epoch=0, instance_id=None, rack_id=None,
            rebalance_timeout=timedelta(seconds=30), subscribed_topic_names=None, subscribed_topic_regex="orders-.*",
            server_assignor=None, topic_partitions=())
        joined = await service.handle(68, 1, req, ALICE)
        assert joined.error_code == ErrorCode.none
        group = service.runtime_for("regex-g").shard.groups["regex-g"]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while "orders-.*" not in group.resolved_regexes:     # the regex-refresh timer runs on the loop
            assert loop.time() < deadline, "the regex was never resolved"
            await asyncio.sleep(0.01)
        assert group.resolved_regexes["orders-.*"].topics == frozenset({"orders-a", "orders-b"})
        service.close()
    asyncio.run(main())
