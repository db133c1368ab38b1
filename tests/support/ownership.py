"""OwnershipLedger: checks that no partition is ever owned by two group members at once.

Every consumer driver reports its rebalance callbacks here as
(timestamp_monotonic_ns, member, assigned|revoked|lost, partitions). Members may be
threads in this process or Java subprocesses: on Linux Java's System.nanoTime() and
Python's time.monotonic_ns() both read CLOCK_MONOTONIC, so their stamps share one
time line (checked by tests/integration/harness/test_harness_clock.py).

A member owns a partition from its "assigned" callback until its "revoked"/"lost"
callback (or until it is gone: killed, or stopped abruptly). Drivers stamp
"assigned" on entry to the callback and "revoked" on exit (after the commit), so
each ownership interval is as wide as the member could possibly have used it:
the check errs towards reporting overlap, never towards hiding it.

Why it matters: the group coordinator's cooperative protocol (KIP-429 for classic,
KIP-848 for the consumer protocol) promises that a partition is assigned to a new
member only after the previous owner has revoked it. Overlap means two members may
process the same records concurrently.
"""
from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

TopicPartition = tuple[str, int]
OWNERSHIP_EVENTS = frozenset({"assigned", "revoked", "lost", "gone"})


@dataclass(frozen=True, slots=True)
class OwnershipEvent:
    t_ns: int
    member: str
    event: str  # assigned | revoked | lost | gone
    partitions: tuple[TopicPartition, ...]
    seq: int  # arrival order; breaks ties between equal stamps of one member


@dataclass(frozen=True, slots=True)
class OwnershipInterval:
    """``member`` owned ``tp`` during [start_ns, end_ns); end_ns None = still owned."""

    member: str
    tp: TopicPartition
    start_ns: int
    end_ns: int | None
    end_event: str | None

    def contains(self, t_ns: int) -> bool:
        return self.start_ns <= t_ns and (self.end_ns is None or t_ns < self.end_ns)


@dataclass(frozen=True, slots=True)
class DoubleOwnership:
    tp: TopicPartition
    first: OwnershipInterval
    second: OwnershipInterval
    overlap_start_ns: int
    overlap_end_ns: int | None

    def describe(self, origin_ns: int = 0) -> str:
        def at(t: int | None) -> str:
            return "open" if t is None else f"+{(t - origin_ns) / 1e9:.3f}s"

        def span(iv: OwnershipInterval) -> str:
            how = f" by {iv.end_event}" if iv.end_event else ""
            return f"{iv.member} [{at(iv.start_ns)}, {at(iv.end_ns)}{how})"

        length = ("still open" if self.overlap_end_ns is None
                  else f"{(self.overlap_end_ns - self.overlap_start_ns) / 1e6:.1f} ms")
        return (f"{self.tp[0]}-{self.tp[1]} owned twice: {span(self.first)} and {span(self.second)}; "
                f"overlap from {at(self.overlap_start_ns)} ({length})")


@dataclass(frozen=True, slots=True)
class Anomaly:
    """A callback sequence a well-behaved client never produces (kept apart from overlap)."""

    t_ns: int
    member: str
    tp: TopicPartition
    what: str


class OwnershipLedger:
    """Thread-safe log of ownership changes from many members, with the overlap check."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[OwnershipEvent] = []

    # --- input --------------------------------------------------------------------------

    def record(self, t_ns: int, member: str, event: str, partitions: Iterable[TopicPartition]) -> None:
        if event not in OWNERSHIP_EVENTS:
            raise ValueError(f"unknown ownership event {event!r}; expected one of {sorted(OWNERSHIP_EVENTS)}")
        parts = tuple(sorted((str(t), int(p)) for t, p in partitions))
        with self._lock:
            self._events.append(OwnershipEvent(int(t_ns), member, event, parts, len(self._events)))

    def member_gone(self, t_ns: int, member: str) -> None:
        """The member stopped using everything it owned (killed, or stopped abruptly)."""
        self.record(t_ns, member, "gone", ())

    # --- views --------------------------------------------------------------------------

    def events(self) -> list[OwnershipEvent]:
        with self._lock:
            return sorted(self._events, key=lambda e: (e.t_ns, e.seq))

    def origin_ns(self) -> int:
        events = self.events()
        return events[0].t_ns if events else 0

    def _replay(self) -> tuple[dict[TopicPartition, list[OwnershipInterval]], list[Anomaly]]:
        intervals: dict[TopicPartition, list[OwnershipInterval]] = defaultdict(list)
        anomalies: list[Anomaly] = []
        open_since: dict[str, dict[TopicPartition, int]] = defaultdict(dict)

        def close(member: str, tp: TopicPartition, t: int, how: str) -> None:
            start = open_since[member].pop(tp)
            intervals[tp].append(OwnershipInterval(member, tp, start, t, how))

        for ev in self.events():
            owned = open_since[ev.member]
            if ev.event == "assigned":
                for tp in ev.partitions:
                    if tp in owned:
                        anomalies.append(Anomaly(ev.t_ns, ev.member, tp, "assigned while already owned"))
                    else:
                        owned[tp] = ev.t_ns
            elif ev.event == "gone":
                for tp in list(owned):
                    close(ev.member, tp, ev.t_ns, "gone")
            else:
                for tp in ev.partitions:
                    if tp in owned:
                        close(ev.member, tp, ev.t_ns, ev.event)
                    else:
                        anomalies.append(Anomaly(ev.t_ns, ev.member, tp, f"{ev.event} but not owned"))
        for member, owned in open_since.items():
            for tp, start in owned.items():
                intervals[tp].append(OwnershipInterval(member, tp, start, None, None))
        for ivs in intervals.values():
            ivs.sort(key=lambda iv: (iv.start_ns, iv.member))
        return dict(intervals), anomalies

    def intervals(self) -> dict[TopicPartition, list[OwnershipInterval]]:
        return self._replay()[0]

    def anomalies(self) -> list[Anomaly]:
        return self._replay()[1]

    def owners_at(self, t_ns: int) -> dict[TopicPartition, frozenset[str]]:
        return {tp: frozenset(iv.member for iv in ivs if iv.contains(t_ns))
                for tp, ivs in self.intervals().items()}

    def current_assignment(self) -> dict[str, frozenset[TopicPartition]]:
        """Partitions each member owns now (open intervals)."""
        out: dict[str, set[TopicPartition]] = defaultdict(set)
        for tp, ivs in self.intervals().items():
            for iv in ivs:
                if iv.end_ns is None:
                    out[iv.member].add(tp)
        return {m: frozenset(tps) for m, tps in out.items()}

    # --- checks -------------------------------------------------------------------------

    def violations(self) -> list[DoubleOwnership]:
        """Every pair of intervals of different members on one partition that overlap."""
        found: list[DoubleOwnership] = []
        for tp, ivs in sorted(self.intervals().items()):
            active: list[OwnershipInterval] = []
            for iv in ivs:  # sorted by start: sweep, keeping intervals not yet ended
                active = [a for a in active if a.end_ns is None or a.end_ns > iv.start_ns]
                for a in active:
                    if a.member != iv.member:
                        ends = [e for e in (a.end_ns, iv.end_ns) if e is not None]
                        found.append(DoubleOwnership(tp, a, iv, iv.start_ns, min(ends) if ends else None))
                active.append(iv)
        return found

    def report(self) -> str:
        origin = self.origin_ns()
        lines = [v.describe(origin) for v in self.violations()]
        lines += [f"anomaly: {a.member} {a.tp[0]}-{a.tp[1]} at +{(a.t_ns - origin) / 1e9:.3f}s: {a.what}"
                  for a in self.anomalies()]
        return "\n".join(lines) if lines else "no double ownership, no anomalies"

    def assert_no_double_ownership(self, allow_anomalies: bool = True) -> None:
        violations = self.violations()
        if violations or (not allow_anomalies and self.anomalies()):
            raise AssertionError(f"ownership ledger ({len(self.events())} events):\n{self.report()}")

    def records_outside_ownership(self, records: Iterable[object]) -> list[object]:
        """Records consumed by a member at a time it did not own the record's partition.

        ``records`` need attributes member, topic, partition, t_ns (support.consumer_events.ConsumedRecord).
        """
        intervals = self.intervals()
        out = []
        for r in records:
            ivs = intervals.get((r.topic, r.partition), ())  # type: ignore[attr-defined]
            if not any(iv.member == r.member and iv.contains(r.t_ns) for iv in ivs):  # type: ignore[attr-defined]
                out.append(r)
        return out
