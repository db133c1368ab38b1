"""The shard's rows for migration (operations.py): the classic APIs on a consumer group, and
the consumer group heartbeat, which may convert a group on the way.

Rules:
- migration sits above classic/ and modern/consumer/: it imports both, neither imports it;
  the shard reaches it only through these rows, never through an object on the view;
- a JoinGroup, SyncGroup, Heartbeat or LeaveGroup for a consumer group comes here (Kafka's
  `classicGroupJoinToConsumerGroup` and its siblings); an empty consumer group goes back to
  classic/join.py, which converts it offline;
- the consumer group heartbeat runs with migration's two conversions: the online upgrade of
  a classic group its first member joins, and the downgrade when the last consumer-protocol
  member is fenced (Kafka: `consumerGroupFenceMembers`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, cast

from ..classic import join as classic_join
from ..modern.consumer import heartbeat as consumer_heartbeat
from ..modern.consumer.group import ConsumerGroup
from . import conversion, mixed

if TYPE_CHECKING:
    from ..context import RequestContext, ShardView
    from ..result import Result


def _group(shard: ShardView, req) -> ConsumerGroup:
    """The consumer group the request names: the shard picked this row by its type."""
    return cast(ConsumerGroup, shard.groups[req.group_id])


def join_group(shard: ShardView, ctx: RequestContext, req, now_ms: int) -> Result:
    group = _group(shard, req)
    invalid = classic_join.invalid_join(shard, ctx, req)
    if invalid is not None:
        return invalid
    if group.is_empty():
        return classic_join.join_group(shard, ctx, req, now_ms)
    return mixed.classic_join(shard, ctx, req, group, now_ms)


def sync_group(shard: ShardView, ctx: RequestContext, req, now_ms: int) -> Result:
    return mixed.classic_sync(shard, ctx, req, _group(shard, req), now_ms)


def heartbeat(shard: ShardView, ctx: RequestContext, req, now_ms: int) -> Result:
    return mixed.classic_heartbeat(shard, ctx, req, _group(shard, req), now_ms)


def leave_group(shard: ShardView, ctx: RequestContext, req, now_ms: int) -> Result:
    identities = req.members
    return mixed.classic_leave(shard, ctx, req, identities, _group(shard, req), now_ms)


def consumer_group_heartbeat(shard: ShardView, ctx: RequestContext, req, now_ms: int) -> Result:
    # Positional arguments: the steady heartbeat is the hottest request, and a call with
    # keywords (or a functools.partial with them) costs more than this frame (callgrind).
    return consumer_heartbeat.heartbeat(shard, ctx, req, now_ms, False, conversion.upgrade,
                                        conversion.fence_or_downgrade)


def consumer_group_csa_heartbeat(shard: ShardView, ctx: RequestContext, req, now_ms: int) -> Result:
    """32700, the heartbeat with ClientAssignors (docs/design/client-assignors-spec.md)."""
    return consumer_heartbeat.heartbeat(shard, ctx, req, now_ms, True, conversion.upgrade,
                                        conversion.fence_or_downgrade)
