"""One shard's timers: a table and a lazy heap with one loop timer (Kafka: `CoordinatorTimerImpl`).

Rules:
- A timer is data until it fires: the shard returns `ScheduleTimer`/`CancelTimer` in a
  `Result` and the runtime hands them to `apply`; nothing else schedules or cancels.
- The table (key -> [deadline_ms, payload, queued deadline_ms]) is the truth; the heap holds
  (deadline_ms, seq, key) entries that may be stale and are pruned lazily when they come due.
- A heartbeat that pushes a member's session deadline later is a store into the table, not
  a cancel and a new loop timer: the heap entry already queued comes due first and requeues
  the key at its current deadline (Kafka's timer wheel does the same job).
- ONE loop timer is armed, for the earliest heap entry.
- A due timer is handed to `on_due(key, payload)` once and leaves the table first, so the
  operation it submits may schedule the same key again.
- `cancel_all` empties the table in place (the dict keeps its identity: callers may hold it).
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Iterable
from typing import Any

from ..group.result import CancelTimer, ScheduleTimer


class TimerTable:
    __slots__ = ("table", "heap", "wakeup", "_seq", "_clock", "_on_due")

    def __init__(self, clock: Callable[[], int], on_due: Callable[[tuple, Any], None]) -> None:
        self.table: dict[tuple, list] = {}           # key -> [deadline_ms, payload, queued deadline_ms]
        self.heap: list[tuple[int, int, tuple]] = []  # (deadline_ms, seq, key), lazily pruned
        self.wakeup: asyncio.TimerHandle | None = None
        self._seq = itertools.count()
        self._clock = clock
        self._on_due = on_due

    def apply(self, ops: Iterable) -> None:
        """Schedule, push later or cancel, in the order the result lists them."""
        table, heap = self.table, self.heap
        for t in ops:
            key = t.key
            if t.__class__ is ScheduleTimer:
                deadline = t.deadline_ms
                entry = table.get(key)
                if entry is None:
                    entry = table[key] = [deadline, t.payload, None]
                else:
                    entry[0], entry[1] = deadline, t.payload
                queued = entry[2]
                if queued is None or deadline < queued:
                    entry[2] = deadline
                    heapq.heappush(heap, (deadline, next(self._seq), key))
                    if heap[0][2] is key:
                        self._arm()
            elif t.__class__ is CancelTimer:
                table.pop(key, None)
            else:
                raise TypeError(f"unknown timer operation {t!r}")

    def _arm(self) -> None:
        if self.wakeup is not None:
            self.wakeup.cancel()
            self.wakeup = None
        if self.heap:
            delay = max(0.0, (self.heap[0][0] - self._clock()) / 1000)
            self.wakeup = asyncio.get_running_loop().call_later(delay, self.fire_due)

    def fire_due(self) -> None:
        self.wakeup = None
        now = self._clock()
        table, heap = self.table, self.heap
        while heap and heap[0][0] <= now:
            queued, _, key = heapq.heappop(heap)
            entry = table.get(key)
            if entry is None or entry[2] != queued:
                continue                        # cancelled, or an older entry of a requeued key
            deadline, payload, _ = entry
            if deadline > now:                  # pushed later meanwhile: requeue at the new deadline
                entry[2] = deadline
                heapq.heappush(heap, (deadline, next(self._seq), key))
                continue
            del table[key]
            self._on_due(key, payload)
        self._arm()

    def cancel_all(self) -> None:
        if self.wakeup is not None:
            self.wakeup.cancel()
            self.wakeup = None
        self.table.clear()
        self.heap.clear()
