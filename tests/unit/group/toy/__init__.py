"""A toy group type, added the way a real one is: this folder plus its rows, with no edit to
the classic or consumer folders (coordinator/group/__init__.py, "A new group type").

A toy member heartbeats with `ToyHeartbeat`; the first heartbeat writes the group's record.
Each heartbeat writes the member's record, and replay is the only way a `ToyGroup` changes.
A member that stops heartbeating is removed by its session timer; the empty group stays
until DeleteGroups writes its tombstones (through its `GroupType`). The toy also takes over
JoinGroup for its groups (a per-type row on an API the classic folder serves).

`CONTRIBUTION` is all the toy hands the core (group_types.Contribution: group type, replay
rules, operations rows, timer kind); a test builds a registry with it
(`builtin.registry_with(CONTRIBUTION)`) and gives that to its shard, so the rest of the suite
never sees the toy. Nothing registers at import.
"""
from __future__ import annotations

from coordinator.group.group_types import Contribution

from .group import ToyGroup, ToyGroupKey, ToyGroupType, ToyMemberKey, replay_group, replay_member
from .heartbeat import TIMER_KIND, heartbeat, join_group, on_session_timeout

OPERATION = "toy_heartbeat"

CONTRIBUTION = Contribution(
    name="toy",
    group_class=ToyGroup,
    group_type=ToyGroupType(),
    replay_rules={ToyGroupKey: replay_group, ToyMemberKey: replay_member},
    operations=((OPERATION, None, heartbeat),            # a new group id
                (OPERATION, ToyGroup, heartbeat),
                ("join_group", ToyGroup, join_group)),   # a per-type row on an API classic/ serves
    timers={TIMER_KIND: on_session_timeout},
)
