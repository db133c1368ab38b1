"""The topics this process created a moment ago, and when: the service writes, the gateway reads.

Why (docs/measurements/streams-rebalance.md, "2026-11-30, twelfth: the start, step by step"):
kcoord creates a streams group's internal topics and validates its topology as soon as the
upstream's Metadata lists them, before the broker has created every partition's log, so a
Streams instance's ListOffsets of such a partition can get NOT_LEADER_OR_FOLLOWER and wait out
its admin client's backoff. The gateway holds such answers (list_offsets_hold.py) for the topics
named here only: what kcoord did not just create passes as it always did.

Rules:
- Process state, like the gateway's: one registry per process, made by the service's wiring
  (service/wiring.py) and handed to its internal-topic creator and, through the service, to the
  gateway's connections. No module-level instance; shards never touch it.
- Per process only: under ``--processes N``, or with several kcoord hosts, a ListOffsets that
  reaches a process other than the one that created the topic is not held (it is answered as
  Kafka gives it, and the client retries after its backoff, as without the hold).
- Each topic is kept with its partition count (what the creator asked, or the CreateTopics
  answer's count): the gateway holds only partition indexes the topic has.
- Bounded: at most ``max_entries`` names (the oldest dropped first), each forgotten
  ``window_s`` after its creation (30 s: the broker creates a partition's log within seconds of
  its CreateTopics answer, 10 s in the slowest measured start).
- ``bool(registry)`` is the one check a ListOffsets pays when nothing is fresh: O(1), and it
  forgets expired names as it goes (oldest first; names are kept in creation order).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import NamedTuple

WINDOW_S = 30.0
MAX_ENTRIES = 10_000


class _Created(NamedTuple):
    at: float              # monotonic seconds
    partitions: int


class FreshTopics:
    """Topic name -> when this process created it (monotonic seconds) and its partition count,
    oldest first."""

    __slots__ = ("_created", "_window", "_max", "_clock")

    def __init__(self, window_s: float = WINDOW_S, max_entries: int = MAX_ENTRIES,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._created: dict[str, _Created] = {}
        self._window = window_s
        self._max = max_entries
        self._clock = clock

    def add(self, topics: Iterable[tuple[str, int]]) -> None:
        """``topics`` (name, partition count) were created just now (a successful CreateTopics);
        a count under 1 (not known) is not kept."""
        now = self._clock()
        created = self._created
        for name, partitions in topics:
            created.pop(name, None)        # to the end: the order stays the creation order
            if partitions < 1:
                continue
            created[name] = _Created(now, partitions)
            if len(created) > self._max:
                del created[next(iter(created))]

    def _expire(self) -> None:
        created = self._created
        horizon = self._clock() - self._window
        while created:
            oldest = next(iter(created))
            if created[oldest].at > horizon:
                return
            del created[oldest]

    def __bool__(self) -> bool:
        created = self._created
        if not created:
            return False
        self._expire()
        return bool(created)

    def __len__(self) -> int:
        return len(self._created)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.partitions(name) > 0

    def partitions(self, name: str) -> int:
        """The partition count of ``name`` while it is fresh; 0 when it is not."""
        found = self._created.get(name)
        return found.partitions if found is not None and found.at > self._clock() - self._window else 0
