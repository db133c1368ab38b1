"""What migration/ adds to the shard (group_types.Contribution): the rows of the classic APIs
on a consumer group and of the consumer group heartbeat (rows.py says why they are here),
and the consumer-group timers that fence a member, since fencing the last consumer-protocol
member of a mixed group downgrades it (conversion.fence_or_downgrade).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..group_types import Contribution
from ..modern.consumer.group import ConsumerGroup
from ..modern.consumer.requests import ConsumerGroupHeartbeat, csa_heartbeat
from ..result import Result
from ..timers import TimerKind
from . import rows
from .conversion import fence_or_downgrade

if TYPE_CHECKING:
    from ..context import ShardView


def _on_session_timeout(shard: ShardView, key: tuple, payload: Any, now_ms: int) -> Result:
    group, member_id = shard.groups.get(key[1]), key[2]
    if not isinstance(group, ConsumerGroup) or member_id not in group.members:
        return Result()
    shard.log.info("[GroupId %s] Member %s fenced from the group because its session expired.",
                   group.group_id, member_id)
    return fence_or_downgrade(shard, group, [member_id], now_ms)


def _on_classic_member_timeout(shard: ShardView, key: tuple, payload: Any, now_ms: int) -> Result:
    """A classic member of a consumer group that did not rejoin / sync in time."""
    group, member_id = shard.groups.get(key[1]), key[2]
    if not isinstance(group, ConsumerGroup) or member_id not in group.members:
        return Result()
    return fence_or_downgrade(shard, group, [member_id], now_ms)


def _on_rebalance_timeout(shard: ShardView, key: tuple, payload: Any, now_ms: int) -> Result:
    group = shard.groups.get(key[1])
    if not isinstance(group, ConsumerGroup):
        return Result()
    member = group.members.get(key[2])
    if member is None or member.member_epoch != payload:
        return Result()
    shard.log.info("[GroupId %s] Member %s fenced from the group because it failed to transition "
                   "from epoch %d within %dms.", group.group_id, member.member_id, payload,
                   member.rebalance_timeout_ms)
    return fence_or_downgrade(shard, group, [member.member_id], now_ms)


CONTRIBUTION = Contribution(
    name="migration",
    operations=(("join_group", ConsumerGroup, rows.join_group),
                ("sync_group", ConsumerGroup, rows.sync_group),
                ("heartbeat", ConsumerGroup, rows.heartbeat),
                ("leave_group", ConsumerGroup, rows.leave_group),
                ("consumer_group_heartbeat", None, rows.consumer_group_heartbeat),
                ("consumer_group_csa_heartbeat", None, rows.consumer_group_csa_heartbeat)),
    request_shapes={"consumer_group_heartbeat": ConsumerGroupHeartbeat,
                    "consumer_group_csa_heartbeat": csa_heartbeat},
    timers={TimerKind.SESSION.value: _on_session_timeout,
            TimerKind.JOIN.value: _on_classic_member_timeout,
            TimerKind.SYNC.value: _on_classic_member_timeout,
            TimerKind.REBALANCE.value: _on_rebalance_timeout},
)
