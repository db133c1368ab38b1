"""What a shard operation returns: records to write, a response, timer changes.

Timers are plain data (a key and a deadline); the runtime owns the clock and calls
`shard.on_timer(key, payload, now_ms)` when one expires. Scheduling a key replaces
any timer with the same key (Kafka's `CoordinatorTimer.schedule`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from records import CoordinatorRecord

TimerKey = tuple


@dataclass(frozen=True, slots=True)
class ScheduleTimer:
    key: TimerKey
    deadline_ms: int
    payload: Any = None


@dataclass(frozen=True, slots=True)
class CancelTimer:
    key: TimerKey


TimerOp = ScheduleTimer | CancelTimer


@dataclass(slots=True)
class Result:
    response: Any = None
    records: list[CoordinatorRecord] = field(default_factory=list)
    timers: list[TimerOp] = field(default_factory=list)
    # Kafka's `replayRecords`: classic-group handlers change the group in memory themselves
    # and only write GroupMetadata for durability, so those records are not replayed now
    # (a reload replays them).
    replay: bool = True
    # This request's response is held until a later operation completes the token
    # (a parked JoinGroup/SyncGroup).
    parked: int | None = None
    # Responses for earlier parked requests, released once this result is durable.
    completions: list[tuple[int, Any]] = field(default_factory=list)
