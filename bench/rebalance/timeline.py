"""Figures of one rebalance, computed from the members' event logs (one CLOCK_MONOTONIC line).

A member is anything with ``member``, ``events(kind)`` and ``consumed()`` (the test
harness's EventLogConsumer). Times are ns; figures are returned in seconds.
"""
from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .producer import sent_ns

NS = 1_000_000_000
# Steady-state gaps of one member come in steps of about 0.25 s (0.25, 0.5, 0.75 s: the
# fetch rhythm against Tansu); a pause the rebalance caused would add at least a heartbeat
# round. Gaps within this of the before-join worst are that rhythm, not a pause.
PAUSE_TOLERANCE_S = 0.1
OWNERSHIP = ("assigned", "revoked", "lost")


def gaps(times: Sequence[int], start: int, end: int) -> list[tuple[int, int]]:
    """The stretches of [start, end] with no time in ``times`` (sorted), as (from, to) ns.

    The stretch running into ``start`` counts from the last time before it: a member that
    paused just before the join and resumed after it paused for the whole stretch.
    """
    i = bisect.bisect_left(times, start)
    prev = times[i - 1] if i > 0 else start
    out = []
    for t in times[i:]:
        if t > end:
            break
        out.append((prev, t))
        prev = t
    out.append((prev, end))
    return out


def longest_gap(times: Sequence[int], start: int, end: int) -> float:
    """Longest stretch of [start, end] with no time in ``times`` (sorted), in seconds."""
    return max(b - a for a, b in gaps(times, start, end)) / NS


def longest_gap_overlapping(times: Sequence[int], start: int, end: int, lo: int, hi: int) -> tuple[float, float]:
    """Longest gap of [start, end] that overlaps [lo, hi] (the rebalance itself): its length
    and where it began relative to ``lo``, in seconds."""
    a, b = max(((a, b) for a, b in gaps(times, start, end) if a <= hi and b >= lo),
               key=lambda g: g[1] - g[0], default=(lo, lo))
    return (b - a) / NS, (a - lo) / NS


def record_times(members: Iterable) -> list[int]:
    return sorted(r.t_ns for m in members for r in m.consumed())


def ownership_events(members: Iterable) -> list[tuple[int, str, str, tuple]]:
    out = []
    for m in members:
        for e in m.events():
            if e["event"] in OWNERSHIP:
                out.append((int(e["t"]), m.member, e["event"], tuple((t, int(p)) for t, p in e["partitions"])))
    out.sort(key=lambda x: x[0])
    return out


def balanced(state: dict[str, set], names: Sequence[str], topic: str, partitions: int) -> bool:
    """Complete (every partition owned), disjoint, and every member within one of the others."""
    owned = [p for n in names for (t, p) in state.get(n, ()) if t == topic]
    if len(owned) != partitions or set(owned) != set(range(partitions)):
        return False
    sizes = [len(state.get(n, ())) for n in names]
    return max(sizes) - min(sizes) <= 1


def stable_since(members: Sequence, topic: str, partitions: int, end: int) -> int | None:
    """The moment from which the members' assignment was complete, disjoint and balanced
    without a break until ``end``; None if it was not at ``end``."""
    names = [m.member for m in members]
    state: dict[str, set] = {n: set() for n in names}
    since: int | None = None
    for t, member, kind, tps in ownership_events(members):
        if t > end:
            break
        if kind == "assigned":
            state[member].update(tps)
        else:
            state[member].difference_update(tps)
        ok = balanced(state, names, topic, partitions)
        if ok and since is None:
            since = t
        elif not ok:
            since = None
    return since


@dataclass
class MemberFigures:
    name: str
    gap_before_s: float
    gap_after_s: float
    affected: bool  # its assignment changed after the join
    gap_during_rebalance_s: float = 0.0  # longest gap overlapping [join, stable assignment]
    gap_during_rebalance_from_s: float = 0.0  # where that gap began, relative to the join


@dataclass
class JoinFigures:
    group_gap_before_s: float
    group_gap_after_s: float
    first_record_s: float | None
    stable_s: float | None
    max_record_delay_s: float | None
    first_partition_s: float | None = None  # the joiner's first non-empty "assigned" callback
    members: list[MemberFigures] = field(default_factory=list)

    def worst_gap(self, affected: bool | None = None) -> float | None:
        gaps = [m.gap_after_s for m in self.members if affected is None or m.affected == affected]
        return max(gaps) if gaps else None

    def worst_gap_during_rebalance(self, affected: bool) -> float | None:
        gaps = [m.gap_during_rebalance_s for m in self.members if m.affected == affected]
        return max(gaps) if gaps else None

    def worst_gap_before(self) -> float:
        return max(m.gap_before_s for m in self.members)

    def unaffected_paused(self) -> tuple[int, int]:
        """(unaffected members whose longest gap overlapping the rebalance, from the join to the
        stable assignment, exceeds the longest gap any member had in the window before the
        join by more than PAUSE_TOLERANCE_S; unaffected members): a pause beyond steady state."""
        floor = self.worst_gap_before()
        unaffected = [m for m in self.members if not m.affected]
        return sum(1 for m in unaffected if m.gap_during_rebalance_s > floor + PAUSE_TOLERANCE_S), len(unaffected)


def join_figures(existing: Sequence, joiner, topic: str, partitions: int, t_join: int, t_end: int,
                 before_s: float) -> JoinFigures:
    """Figures of one join: ``t_join`` = the joiner's subscribe(), window [t_join, t_end]."""
    everyone = [*existing, joiner]
    t_before = t_join - int(before_s * NS)
    group_times = record_times(everyone)
    figures = JoinFigures(
        group_gap_before_s=longest_gap(group_times, t_before, t_join),
        group_gap_after_s=longest_gap(group_times, t_join, t_end),
        first_record_s=None, stable_s=None, max_record_delay_s=None)
    since = stable_since(everyone, topic, partitions, t_end)
    t_stable = since if since is not None else t_end
    for m in existing:
        times = record_times([m])
        changed = any(t_join <= int(e["t"]) <= t_end for kind in OWNERSHIP for e in m.events(kind))
        figures.members.append(MemberFigures(
            m.member, longest_gap(times, t_before, t_join), longest_gap(times, t_join, t_end), changed,
            *longest_gap_overlapping(times, t_join, t_end, t_join, t_stable)))
    assigned = [int(e["t"]) for e in joiner.events("assigned") if e.get("partitions") and int(e["t"]) >= t_join]
    figures.first_partition_s = (min(assigned) - t_join) / NS if assigned else None
    first = [r.t_ns for r in joiner.consumed() if r.t_ns >= t_join]
    figures.first_record_s = (min(first) - t_join) / NS if first else None
    figures.stable_s = max(0, since - t_join) / NS if since is not None else None
    delays = [r.t_ns - s for m in everyone for r in m.consumed()
              if t_join <= r.t_ns <= t_end and (s := sent_ns(r.value)) is not None]
    figures.max_record_delay_s = max(delays) / NS if delays else None
    return figures
