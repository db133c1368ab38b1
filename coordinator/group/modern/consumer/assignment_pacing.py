"""KIP-1263 assignment pacing: how often a consumer group's target assignment may be
computed.

Rule: a new target is computed at once when the group never had one, when pacing is off
(`consumer_assignment_interval_ms` = 0), or once the interval since the last computation
has passed (Kafka's `canComputeNextTargetAssignment`). Otherwise the group epoch still
moves, and an assignment timer computes the target when the interval ends (the
`assignment` timer kind, timers.py).
"""
from __future__ import annotations

from ....config import CoordinatorConfig
from ...result import ScheduleTimer
from ...timers import assignment_key
from .group import ConsumerGroup


def can_compute_assignment(config: CoordinatorConfig, group: ConsumerGroup, now_ms: int) -> bool:
    interval = config.consumer_assignment_interval_ms
    ts = group.assignment_timestamp_ms
    return ts == 0 or interval == 0 or now_ms >= ts + interval


def assignment_timer(config: CoordinatorConfig, group: ConsumerGroup) -> ScheduleTimer:
    """The timer that computes the paced target when the interval ends."""
    return ScheduleTimer(assignment_key(group.group_id),
                         group.assignment_timestamp_ms + config.consumer_assignment_interval_ms)
