"""KIP-1263 assignment pacing: how often a consumer group's target assignment may be
computed.

Rule: a new target is computed at once when the group never had one, when pacing is off
(`consumer_assignment_interval_ms` = 0), or once the interval since the last computation
has passed (Kafka's `canComputeNextTargetAssignment`). Otherwise the group epoch still
moves, and an assignment timer computes the target when the interval ends (the
`assignment` timer kind, timers.py). The interval is the group's own
`consumer.assignment.interval.ms` when set (coordinator/group/configs/), else the broker's.
"""
from __future__ import annotations

from typing import Any

from ...result import ScheduleTimer
from ...timers import assignment_key
from .group import ConsumerGroup
from .heartbeat_policy import group_value


def interval_ms(shard: Any, group: ConsumerGroup) -> int:
    return group_value(shard, group.group_id, "consumer.assignment.interval.ms",
                       shard.config.consumer_assignment_interval_ms)


def can_compute_assignment(shard: Any, group: ConsumerGroup, now_ms: int) -> bool:
    interval = interval_ms(shard, group)
    ts = group.assignment_timestamp_ms
    return ts == 0 or interval == 0 or now_ms >= ts + interval


def assignment_timer(shard: Any, group: ConsumerGroup) -> ScheduleTimer:
    """The timer that computes the paced target when the interval ends."""
    return ScheduleTimer(assignment_key(group.group_id), group.assignment_timestamp_ms + interval_ms(shard, group))
