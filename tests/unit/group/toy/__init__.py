"""A toy group type, added the way a real one is: this folder plus its rows, with no edit to
the classic or consumer folders (coordinator/group/__init__.py, "A new group type").

A toy member heartbeats with `ToyHeartbeat`; the first heartbeat writes the group's record.
Each heartbeat writes the member's record, and replay is the only way a `ToyGroup` changes.
A member that stops heartbeating is removed by its session timer; the empty group stays
until DeleteGroups writes its tombstones (through its `GroupType`). The toy also takes over
JoinGroup for its groups (a per-type row on an API the classic folder serves).

`register()` adds the rows to the core's tables (group type, replay rule, operations, timer
kind); `unregister()` takes them out again, so the rest of the suite never sees the toy.
"""
from __future__ import annotations

from coordinator.group import group_types, operations, replay, shard

from .group import ToyGroup, ToyGroupKey, ToyGroupType, ToyMemberKey, replay_group, replay_member
from .heartbeat import TIMER_KIND, heartbeat, join_group, on_session_timeout

OPERATION = "toy_heartbeat"


def register() -> None:
    group_types.register(ToyGroup, ToyGroupType())
    replay.register_replay(ToyGroupKey, replay_group)
    replay.register_replay(ToyMemberKey, replay_member)
    operations.register_operation(OPERATION, heartbeat)              # a new group id
    operations.register_operation(OPERATION, heartbeat, ToyGroup)
    operations.register_operation("join_group", join_group, ToyGroup)
    shard.register_timer(TIMER_KIND, on_session_timeout)


def unregister() -> None:
    del group_types._BY_CLASS[ToyGroup]
    del replay._HANDLERS[ToyGroupKey]
    del replay._HANDLERS[ToyMemberKey]
    del operations._ROWS[OPERATION]
    del operations._ROWS["join_group"][ToyGroup]
    del shard._TIMER_HANDLERS[TIMER_KIND]
