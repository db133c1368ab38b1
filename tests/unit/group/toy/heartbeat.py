"""The toy group's handlers: its heartbeat, its JoinGroup row, its session timer."""
from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from coordinator.group.classic.rebalance import join_response
from coordinator.group.result import Result, ScheduleTimer

from .group import ToyGroup, group_record, member_record

TIMER_KIND = "toy-session"
SESSION_MS = 10_000


@dataclass(frozen=True)
class ToyHeartbeat:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class ToyAnswer:
    error_code: ErrorCode
    heartbeats: int = 0


def heartbeat(shard, ctx, req: ToyHeartbeat, now_ms: int) -> Result:
    group = shard.groups.get(req.group_id)
    if group is not None and not isinstance(group, ToyGroup):
        return Result(response=ToyAnswer(ErrorCode.inconsistent_group_protocol))
    count = (group.members.get(req.member_id, 0) if group is not None else 0) + 1
    records = [group_record(req.group_id)] if group is None else []
    records.append(member_record(req.group_id, req.member_id, count))
    return Result(records=records,
                  response=ToyAnswer(ErrorCode.none, count),
                  timers=[ScheduleTimer((TIMER_KIND, req.group_id, req.member_id), now_ms + SESSION_MS, count)])


def join_group(shard, ctx, req, now_ms: int) -> Result:
    """A classic member may not join a toy group, not even an empty one (the classic folder's
    JoinGroup would replace an empty group of another type)."""
    return Result(response=join_response(req.answer, error=ErrorCode.inconsistent_group_protocol,
                                         member_id=req.member_id), replay=False)


def on_session_timeout(shard, key: tuple, payload: int, now_ms: int) -> Result:
    _, group_id, member_id = key
    group = shard.groups.get(group_id)
    if not isinstance(group, ToyGroup) or group.members.get(member_id) != payload:
        return Result()   # gone, or it heartbeated since: a later timer stands
    return Result(records=[member_record(group_id, member_id, None)])
