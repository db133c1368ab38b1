"""The service's parts on their own (coordinator/service/): each is built from the few
collaborators it names, with plain fakes, without the whole service."""
from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from coordinator.authz import Action
from coordinator.config import CoordinatorConfig
from coordinator.group.errors import ApiError
from coordinator.group.hashing import partition_for
from coordinator.group.image import EMPTY_IMAGE
from coordinator.group.kio_util import schema
from coordinator.group.result import Result
from coordinator.protocol import apis
from coordinator.protocol.api_table import CORE_TABLE, ApiSpec
from coordinator.protocol.error_responses import heartbeat
from coordinator.service.apis import ApiRegistry
from coordinator.service.authorization import AuthorizationStage
from coordinator.service.routing import ShardRouter

from ..runtime.test_shard_failures import CLIENT
from .test_authz import DenyGroups


class FakeRuntime:
    """A shard runtime that runs an operation on a stand-in shard, or fails with ``error``."""

    def __init__(self, partition: int, error: ErrorCode | None = None) -> None:
        self.partition = partition
        self.error = error
        self.ran = 0

    async def run(self, op):
        if self.error is not None:
            raise ApiError(self.error)
        self.ran += 1
        result = op(self, 0)
        return result.response if isinstance(result, Result) else result


def router(*errors: ErrorCode | None) -> ShardRouter:
    return ShardRouter([FakeRuntime(p, e) for p, e in enumerate(errors)], len(errors))  # type: ignore[misc]


def test_the_router_maps_groups_as_kafka_and_remembers_the_answer():
    r = router(None, None, None, None)
    for gid in ("a", "orders-consumer", "", "x" * 300):
        assert r.partition_for(gid) == partition_for(gid, 4)
        assert r.runtime_for(gid) is r.runtimes[partition_for(gid, 4)]
    assert set(r._partitions) == {"a", "orders-consumer", "", "x" * 300}


def test_a_multi_group_read_answers_in_request_order_each_shard_for_its_own_groups():
    r = router(None, ErrorCode.coordinator_load_in_progress, None, None)
    gids = [f"g{i}" for i in range(12)] + ["denied"]
    loading = {g for g in gids if r.partition_for(g) == 1}
    assert loading and loading != set(gids)          # the fixture spans the failing shard and others

    answers = asyncio.run(r.per_group(gids, lambda rt, g: ("read", g, rt.partition),
                                      lambda g, e: ("error", g, e.code), frozenset({"denied"})))
    expected = [("error", g, ErrorCode.group_authorization_failed) if g == "denied"
                else ("error", g, ErrorCode.coordinator_load_in_progress) if g in loading
                else ("read", g, r.partition_for(g)) for g in gids]
    assert answers == expected


def test_every_shard_leaves_out_shards_that_are_not_the_coordinator_and_reports_a_loading_one():
    answers, error = asyncio.run(router(None, ErrorCode.not_coordinator, None).every_shard(
        lambda rt, now: rt.partition))
    assert (answers, error) == ([0, 2], ErrorCode.none)
    answers, error = asyncio.run(router(ErrorCode.coordinator_load_in_progress, None).every_shard(
        lambda rt, now: rt.partition))
    assert (answers, error) == ([1], ErrorCode.coordinator_load_in_progress)


def test_the_registry_binds_each_row_advertises_answers_and_refuses_a_second_row():
    async def handler(ctx, req):
        return req
    quiet = ApiSpec(10_000, "Quiet", (0, 0), heartbeat, "quiet", advertised=False)
    rows = (CORE_TABLE[apis.HEARTBEAT], CORE_TABLE[apis.TXN_OFFSET_COMMIT], quiet)
    bound: list = []
    registry = ApiRegistry(rows, lambda spec: bound.append(spec) or handler)
    assert bound == list(rows) and registry.apis == {s.api_key: s for s in rows}
    assert registry.api_versions == {apis.HEARTBEAT: (0, 4), apis.TXN_OFFSET_COMMIT: (0, 6)}
    assert set(registry.answered_versions) == set(registry.handlers) == {apis.HEARTBEAT, apis.TXN_OFFSET_COMMIT,
                                                                          10_000}
    assert registry.names == {apis.HEARTBEAT: "Heartbeat", apis.TXN_OFFSET_COMMIT: "TxnOffsetCommit", 10_000: "Quiet"}
    with pytest.raises(ValueError, match="registered twice"):
        registry.register(quiet)


def _stage(authorizer) -> AuthorizationStage:
    rows = {k: CORE_TABLE[k] for k in (apis.HEARTBEAT, apis.DESCRIBE_GROUPS)}
    return AuthorizationStage(authorizer, rows, CoordinatorConfig(), lambda: EMPTY_IMAGE,
                              lambda gid: None)  # type: ignore[arg-type,return-value]


def test_the_authorization_stage_wraps_any_handler():
    seen: list = []

    async def handler(ctx, req):
        seen.append(ctx.denied_groups)
        return "served"

    authorizer = DenyGroups("secret")
    stage = _stage(authorizer)
    refused = schema("heartbeat", 4, "request").HeartbeatRequest(group_id="secret", generation_id=1,
                                                                 member_id="m", group_instance_id=None)
    response = asyncio.run(stage.authorized(handler, apis.HEARTBEAT, 4, refused, CLIENT))
    assert response.error_code == ErrorCode.group_authorization_failed and seen == []
    assert Action("READ", "GROUP", "secret") in authorizer.asked

    describe = schema("describe_groups", 5, "request").DescribeGroupsRequest(
        groups=("open", "secret"), include_authorized_operations=False)
    assert asyncio.run(stage.authorized(handler, apis.DESCRIBE_GROUPS, 5, describe, CLIENT)) == "served"
    assert seen == [frozenset({"secret"})]           # a multi-group request runs, its denied groups named
