"""What classic/ adds to the shard (group_types.Contribution): the classic group type, its
GroupMetadata replay rule, the default rows of JoinGroup, SyncGroup, Heartbeat and LeaveGroup
(migration/ adds their rows for a consumer group), the one shape of JoinGroup and SyncGroup
built at the shard's door (requests.py), its three timer kinds, and the heartbeat timers a
loaded shard arms. A classic group is also the "simple" group that only holds offsets.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..group_types import Contribution
from ..result import Result, ScheduleTimer, TimerOp
from ..timers import TimerKind, heartbeat_key
from . import join, ops, rebalance
from .group import ClassicGroup
from .group_type import ClassicGroupType
from .replay import REPLAY_RULES
from .requests import Heartbeat, JoinGroup, LeaveGroup, SyncGroup

if TYPE_CHECKING:
    from ..context import ClassicView


def _on_join(shard: ClassicView, key: tuple, payload: Any, now_ms: int) -> Result:
    group = shard.groups.get(key[1])
    if not isinstance(group, ClassicGroup):
        return Result()
    return rebalance.on_join_timer(shard, group, payload, now_ms)


def _on_sync(shard: ClassicView, key: tuple, payload: Any, now_ms: int) -> Result:
    group = shard.groups.get(key[1])
    if not isinstance(group, ClassicGroup):
        return Result()
    return rebalance.on_sync_timer(shard, group, payload, now_ms)


def _on_heartbeat(shard: ClassicView, key: tuple, payload: Any, now_ms: int) -> Result:
    group = shard.groups.get(key[1])
    if not isinstance(group, ClassicGroup):
        return Result()
    return rebalance.on_heartbeat_timer(shard, group, key[2], now_ms)


def on_loaded(shard: ClassicView, now_ms: int) -> list[TimerOp]:
    """A loaded classic group is STABLE with its members: they must keep heartbeating."""
    return [ScheduleTimer(heartbeat_key(group.group_id, m.member_id), now_ms + m.session_timeout_ms)
            for group in shard.groups.values() if group.__class__ is ClassicGroup
            for m in group.members.values()]


CONTRIBUTION = Contribution(
    name="classic",
    group_class=ClassicGroup,
    group_type=ClassicGroupType(),
    replay_rules=REPLAY_RULES,
    operations=(("join_group", None, join.join_group),
                ("sync_group", None, ops.sync_group),
                ("heartbeat", None, ops.heartbeat),
                ("leave_group", None, ops.leave_group)),
    request_shapes={"join_group": JoinGroup.of, "sync_group": SyncGroup.of, "heartbeat": Heartbeat.of,
                    "leave_group": LeaveGroup.of},
    timers={TimerKind.CLASSIC_JOIN.value: _on_join,
            TimerKind.CLASSIC_SYNC.value: _on_sync,
            TimerKind.CLASSIC_HEARTBEAT.value: _on_heartbeat},
    on_loaded=on_loaded,
    simple_group=True,
)
