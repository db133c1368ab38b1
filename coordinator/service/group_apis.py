"""The group APIs' handlers: each request becomes one operation on the shard that owns its
group (or one per shard for a multi-group request), and the answer goes back as the
response Kafka sends.

Rules of this module:
- A handler decides nothing about groups: the shard (coordinator/group/shard.py) does.
  It routes (routing.py), turns a shard-level failure into the API's error response, and
  for multi-group APIs assembles the answers in request order.
- A single-group API whose row names no handler is served by `one_group(row)`: the row's
  shard operation on the group's shard, its error response on a shard-level failure
  (coordinator/protocol/api_table.py).
- The steady ConsumerGroupHeartbeat and the classic Heartbeat are written out without the
  shared helper: the heartbeat is the hot path, one coroutine less.
- A classic Heartbeat to a loading shard answers NONE, as Kafka does ("The group is still
  loading, so blindly respond", GroupCoordinatorService.heartbeat).
- Before OffsetFetch answers, the markers of groups with open transactions are read
  (transactions.py `read_markers`).
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from typing import Any

from kio.schema.errors import ErrorCode

from ..group import group_admin
from ..group.admin_requests import ConsumerGroupDescribe, DescribeGroups
from ..group.errors import ApiError
from ..group.kio_util import build
from ..group.offsets import ops as offset_ops
from ..group.offsets.requests import fetch_answer
from ..group.shard import RequestContext
from ..group.timeutil import from_ms
from ..protocol import error_responses
from ..protocol.api_table import ApiSpec
from ..protocol.messages import schema
from ..runtime.shard_runtime import ShardRuntime
from .apis import Handler
from .routing import ShardRouter


class GroupApis:
    """The group APIs' handlers, bound once by the API registry: `one_group(row)`, and one
    method for each API that needs more (named after the shard's operation)."""

    def __init__(self, router: ShardRouter, read_markers: Callable[[Collection[str]], Awaitable[None]]) -> None:
        # Reached as self.router.method(...): on CPython 3.11 a bound method kept as an
        # attribute costs more per call than this hop (the heartbeat path counts).
        self.router = router
        self.read_markers = read_markers

    async def consumer_group_heartbeat(self, ctx: RequestContext, req):
        # one_group written out: the steady heartbeat is the hot path, one coroutine less.
        try:
            return await self.router.runtime_for(req.group_id).run(
                lambda shard, now: shard.consumer_group_heartbeat(ctx, req, now))
        except ApiError as e:
            return error_responses.consumer_group_heartbeat(ctx.api_version, e, req)

    def one_group(self, spec: ApiSpec) -> Handler:
        """The handler of a single-group API: ``spec``'s shard operation on the group's
        shard, or its error response when the shard cannot serve it."""
        operation, respond, router = spec.shard_operation, spec.error_response, self.router
        if operation is None:
            raise ValueError(f"API {spec.name} ({spec.api_key}) names neither a handler nor a shard operation")

        async def handle(ctx: RequestContext, req):
            return await router.one_group(respond, ctx, req,
                                          lambda shard, now: getattr(shard, operation)(ctx, req, now))
        return handle

    async def heartbeat(self, ctx: RequestContext, req):
        try:
            return await self.router.runtime_for(req.group_id).run(lambda shard, now: shard.heartbeat(ctx, req, now))
        except ApiError as e:
            if e.code == ErrorCode.coordinator_load_in_progress:
                # Kafka answers a classic Heartbeat NONE while the group's partition loads
                # ("The group is still loading, so blindly respond", GroupCoordinatorService
                # .heartbeat): the load re-arms every member's session timer anyway, and
                # aiokafka treats COORDINATOR_LOAD_IN_PROGRESS in a Heartbeat as fatal (its
                # heartbeat task dies; the member is expired or leaves after a restart).
                e = ApiError(ErrorCode.none)
            return error_responses.heartbeat(ctx.api_version, e, req)

    # ------------------------------------------------------------ multi-group
    async def consumer_group_describe(self, ctx: RequestContext, req):
        shape = ConsumerGroupDescribe(req)
        mod, include = shape.response_schema, shape.include_authorized_operations
        described = await self.router.per_group(
            shape.group_ids, lambda shard, gid: group_admin.describe_consumer_group(shard, mod, gid, include),
            lambda gid, e: error_responses.described_consumer_group_error(mod, gid, e), ctx.denied_groups)
        return mod.ConsumerGroupDescribeResponse(throttle_time=from_ms(0), groups=tuple(described))

    async def describe_groups(self, ctx: RequestContext, req):
        shape = DescribeGroups(req)
        mod, include, not_found = shape.response_schema, shape.include_authorized_operations, shape.not_found_error
        described = await self.router.per_group(
            shape.groups, lambda shard, gid: group_admin.describe_group(shard, mod, gid, include, not_found),
            lambda gid, e: error_responses.described_group_error(mod, gid, e), ctx.denied_groups)
        return build(mod.DescribeGroupsResponse, throttle_time=from_ms(0), groups=tuple(described))

    async def list_groups(self, ctx: RequestContext, req):
        mod = schema("list_groups", ctx.api_version)
        answers, error = await self.router.every_shard(lambda shard, now: shard.list_groups(ctx, req, now))
        groups = tuple(g for resp in answers for g in resp.groups)
        return build(mod.ListGroupsResponse, throttle_time=from_ms(0), error_code=error, groups=groups)

    async def delete_groups(self, ctx: RequestContext, req):
        mod = schema("delete_groups", ctx.api_version)
        results: dict[str, Any] = {}

        async def delete(rt: ShardRuntime, gids: list[str]) -> None:
            sub = type(req)(groups_names=tuple(g for g in gids if g))
            resp = await rt.run(lambda shard, now: shard.delete_groups(ctx, sub, now))
            results.update((r.group_id, r) for r in resp.results)

        for g in ctx.denied_groups:
            results[g] = error_responses.deletable_group_error(mod, g, ErrorCode.group_authorization_failed)
        allowed = [g for g in req.groups_names if g not in ctx.denied_groups]
        await self.router.per_shard(allowed, delete, lambda gids, e: results.update(
            (g, error_responses.deletable_group_error(mod, g, e.code)) for g in gids))
        out = [results.get(g) or error_responses.deletable_group_error(mod, g, ErrorCode.invalid_group_id)
               for g in req.groups_names]
        return build(mod.DeleteGroupsResponse, throttle_time=from_ms(0), results=tuple(out))

    async def offset_fetch(self, ctx: RequestContext, req):
        answer = fetch_answer(ctx.api_version)
        mod = answer.response_schema
        await self.read_markers([req.group_id] if ctx.api_version < 8 else [g.group_id for g in req.groups])
        if ctx.api_version < 8:
            return await self.router.one_group(error_responses.offset_fetch, ctx, req,
                                               lambda shard, now: shard.offset_fetch(ctx, req, now))

        # MemberId and MemberEpoch exist from v9 (KIP-848); v8 is multi-group without them:
        # their defaults, no member id and epoch -1, as Kafka reads a v8 request.
        by_member = ctx.api_version >= 9

        def one(shard, g):
            try:
                topics = offset_ops.fetch_offsets(shard, answer, g.group_id, g.topics, req.require_stable,
                                                  g.member_id if by_member else None,
                                                  g.member_epoch if by_member else -1)
                return build(mod.OffsetFetchResponseGroup, group_id=g.group_id, topics=tuple(topics),
                             error_code=ErrorCode.none)
            except ApiError as e:
                return error_responses.fetch_group_error(mod, g.group_id, e.code)

        by_id = {g.group_id: g for g in req.groups}
        groups = await self.router.per_group(
            [g.group_id for g in req.groups], lambda shard, gid: one(shard, by_id[gid]),
            lambda gid, e: error_responses.fetch_group_error(mod, gid, e.code), ctx.denied_groups)
        return build(mod.OffsetFetchResponse, throttle_time=from_ms(0), groups=tuple(groups))
