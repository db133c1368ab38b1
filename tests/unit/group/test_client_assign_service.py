"""The private client-assignor APIs 32700-32702 in the service and the gateway's tables
(issue 17 point 1; seed-drafts.md X1, X4): advertised and routed only when enabled, Group
READ for all three, and a member's whole round (join, Prepare, Install, reconcile) served
through `GroupCoordinatorService.handle` on a state log."""
from __future__ import annotations

import asyncio
import datetime

from kio.schema.errors import ErrorCode

from coordinator.authz import Action
from coordinator.config import CoordinatorConfig
from coordinator.gateway.routes import build_routes, route_key
from coordinator.group.image import MetadataImage
from coordinator.protocol import apis
from coordinator.protocol import private_messages as pm
from coordinator.protocol.api_versions import advertised_versions
from coordinator.protocol.private_apis import COMPUTE_ASSIGNMENT
from coordinator.service import GroupCoordinatorService

from ..runtime.fakes import FakeStateTopic
from ..runtime.test_shard_failures import CLIENT
from ..service.test_authz import DenyGroups
from .context import topic

PRIVATE = (32700, 32701, 32702)


def service(**kw) -> GroupCoordinatorService:
    return GroupCoordinatorService(CoordinatorConfig(state_topic_partitions=2, **kw), FakeStateTopic(2))  # type: ignore[arg-type]


def test_x1_enabled_by_default_advertised_at_v0_and_key_68_unchanged():
    svc = service()
    assert {k: svc.api_versions[k] for k in PRIVATE} == {k: (0, 0) for k in PRIVATE}
    assert svc.api_versions[apis.CONSUMER_GROUP_HEARTBEAT] == (0, 1)
    advertised = advertised_versions({}, svc.api_versions)
    assert {k: advertised[k] for k in PRIVATE} == {k: (0, 0) for k in PRIVATE}
    routes = build_routes(advertised, set(svc.api_versions))
    for k in PRIVATE:      # answered here, decoded with the private schemas
        route = routes[route_key(k, 0)]
        assert route.request_class is pm.REQUESTS[k] and route.flexible
    # never forwarded upstream, even if an upstream advertised them
    assert all(k in apis.GROUP_APIS for k in PRIVATE)
    assert all(k not in advertised_versions({k: (0, 0) for k in PRIVATE}, {}) for k in PRIVATE)


def test_x4_disabled_neither_advertised_nor_routed():
    svc = service(consumer_client_assignors_enabled=False)
    for registry in (svc.api_versions, svc.answered_versions, svc.apis):
        assert not set(PRIVATE) & set(registry)
    routes = build_routes(advertised_versions({}, svc.api_versions), set(svc.api_versions))
    assert not any(r.api_key in PRIVATE for r in routes.values())


async def _started(authorizer=None) -> GroupCoordinatorService:
    kw = {} if authorizer is None else {"authorizer": authorizer}
    svc = GroupCoordinatorService(CoordinatorConfig(state_topic_partitions=2, consumer_assignment_interval_ms=0),
                                  FakeStateTopic(2), **kw)  # type: ignore[arg-type]
    svc.on_metadata_update(MetadataImage.of([topic("foo", 6)]))
    await svc.start()
    return svc


def _join(group: str, member: str = "A") -> pm.CsaHeartbeatRequest:
    return pm.CsaHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=0, rebalance_timeout=datetime.timedelta(seconds=30),
        subscribed_topic_names=("foo",), topic_partitions=(),
        client_assignors=(pm.ClientAssignor(name="s", minimum_version=0, maximum_version=1, version=1),))


def test_group_read_is_required_for_all_three():
    async def main():
        authz = DenyGroups("secret")
        svc = await _started(authz)
        requests = {32700: _join("secret"),
                    32701: pm.PrepareAssignmentRequest(group_id="secret", member_id="A", member_epoch=1),
                    32702: pm.InstallAssignmentRequest(group_id="secret", member_id="A", member_epoch=1,
                                                       group_epoch=2)}
        for key, req in requests.items():
            resp = await svc.handle(key, 0, req, CLIENT)
            assert resp.error_code == ErrorCode.group_authorization_failed.value, (key, resp)
            assert Action("READ", "GROUP", "secret") in authz.asked
        assert all(not log for log in svc.state_topic.logs.values()), "a refused request wrote records"
    asyncio.run(main())


def test_a_round_through_the_service():
    async def main():
        svc = await _started()
        r = await svc.handle(32700, 0, _join("g"), CLIENT)
        assert (r.error_code, r.member_epoch) == (COMPUTE_ASSIGNMENT, 1)
        p = await svc.handle(32701, 0, pm.PrepareAssignmentRequest(group_id="g", member_id="A", member_epoch=1),
                             CLIENT)
        assert p.error_code == 0 and p.client_assignor_name == "s"
        foo = p.partition_metadata[0].topic_id
        i = await svc.handle(32702, 0, pm.InstallAssignmentRequest(
            group_id="g", member_id="A", member_epoch=1, group_epoch=p.group_epoch, members=(
                pm.InstalledMember(member_id="A", partitions=(pm.TopicPartitions(topic_id=foo,
                                                                                 partitions=tuple(range(6))),),
                                   metadata_version=1, metadata_bytes=b"x"),)), CLIENT)
        assert i.error_code == 0
        r = await svc.handle(32700, 0, pm.CsaHeartbeatRequest(group_id="g", member_id="A", member_epoch=1), CLIENT)
        assert r.error_code == 0 and r.member_epoch == 2
        assert r.assignment.topic_partitions[0].partitions == tuple(range(6)) and r.assignment.metadata_bytes == b"x"
    asyncio.run(main())
