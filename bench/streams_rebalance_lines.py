"""The Streams rebalance benchmark's figures (bench/bench_streams_rebalance.py), read from the
instances' own JSON lines (tests/clients/java/streams/CountStreamsApp.java): "ready" after
KafkaStreams.start(), "state" transitions, "tasks" lines printed when a poll of the local
threads sees the active/standby sets change, and (``--gap-ms``) "gap" lines: a stream thread's
processing pauses (migration/rehearse/java/streams/StreamsEvents.java). Every "t" is CLOCK_MONOTONIC ns, one clock for
every process on the machine, so lines of different instances compare.

Rules: pure functions of the event lists (dicts with "event" and "t"); no I/O, no clock.
"""
from __future__ import annotations

import collections
from collections.abc import Iterable, Sequence
from typing import Any

Event = dict[str, Any]


def last_ready_ns(instances: Iterable[Sequence[Event]]) -> int:
    """When the last instance's start() returned: the latest "ready" line."""
    return max(e["t"] for events in instances for e in events if e["event"] == "ready")


def settled_ns(instances: Iterable[Sequence[Event]]) -> int:
    """When the last instance reached what it shows now: its latest "tasks" or "state" line.
    Read once every instance is RUNNING on a stable assignment, it is when that assignment
    was reached (the poll that printed it started at most one poll interval earlier)."""
    return max(e["t"] for events in instances for e in events if e["event"] in ("tasks", "state"))


def active_twice(latest_active: Iterable[Iterable[str]]) -> list[str]:
    """Tasks in more than one instance's latest active set."""
    counts = collections.Counter(t for tasks in latest_active for t in tasks)
    return sorted(t for t, n in counts.items() if n > 1)


def first_running_task_ns(events: Sequence[Event]) -> int | None:
    """The first instant the instance was RUNNING with an active task (Streams reaches RUNNING
    once its tasks are restored and processing), or None."""
    state, active = None, False
    for e in events:
        if e["event"] == "state":
            state = e["state"]
        elif e["event"] == "tasks":
            active = bool(e["active"])
        if state == "RUNNING" and active:
            return int(e["t"])
    return None


def active_at(events: Sequence[Event], at_ns: int) -> set[str]:
    """The active tasks of the last "tasks" line at or before ``at_ns``."""
    active: set[str] = set()
    for e in events:
        if e["event"] == "tasks" and e["t"] <= at_ns:
            active = set(e["active"])
    return active


def kept_tasks(events: Sequence[Event], since_ns: int) -> set[str]:
    """The active tasks the instance held at ``since_ns`` and in every later "tasks" line."""
    kept = active_at(events, since_ns)
    for e in events:
        if e["event"] == "tasks" and e["t"] > since_ns:
            kept &= set(e["active"])
    return kept


def longest_rebalancing_ns(events: Sequence[Event], since_ns: int, until_ns: int) -> int:
    """The longest span in state REBALANCING within [since_ns, until_ns] (a span still open
    ends at ``until_ns``); 0 if none."""
    spans = [min(until_ns if left is None else left, until_ns) - max(began, since_ns)
             for began, left in rebalancing_spans(events)]
    return max([0, *spans])


def longest_gap_ns(events: Sequence[Event], since_ns: int, until_ns: int) -> int:
    """The longest processing pause ("gap" line: from one record to the thread's next) that
    overlaps [since_ns, until_ns], whole (a pause that began before ``since_ns`` counts in full:
    it is one pause); 0 if none."""
    return max([0, *(e["t"] - e["from"] for e in events
                     if e["event"] == "gap" and e["from"] < until_ns and e["t"] > since_ns)])


def rebalance_pause_ns(events: Sequence[Event], since_ns: int, until_ns: int) -> int:
    """The instance's processing pause at its rebalance: the longest "gap" line that overlaps one
    of its REBALANCING spans within [since_ns, until_ns] (a span still open ends at
    ``until_ns``), whole. A thread between its revocation and its assignment callbacks processes
    nothing, so the gap holding the span is the pause the rebalance cost, told apart from the
    gaps of sparse input around it (longest_gap_ns); 0 without such a span or gap."""
    spans = [(began, until_ns if left is None else left) for began, left in rebalancing_spans(events)
             if began < until_ns and (left is None or left > since_ns)]
    return max([0, *(e["t"] - e["from"] for e in events if e["event"] == "gap"
                     for began, left in spans if e["from"] < left and e["t"] > began)])


def rebalancing_spans(events: Sequence[Event]) -> list[tuple[int, int | None]]:
    """Every span in state REBALANCING: (entered, left), left None while still open."""
    spans: list[tuple[int, int | None]] = []
    began = None
    for e in events:
        if e["event"] != "state":
            continue
        if e["state"] == "REBALANCING" and began is None:
            began = e["t"]
        elif e["state"] != "REBALANCING" and began is not None:
            spans.append((began, e["t"]))
            began = None
    if began is not None:
        spans.append((began, None))
    return spans


def start_timeline(events: Sequence[Event], origin_ns: int, until_ns: int | None = None) -> dict[str, Any]:
    """One instance's start, in seconds from ``origin_ns`` (the last instance's "ready"), up to
    ``until_ns``: its own "ready"; its first "tasks" line with an active task and its first
    task opened ("active" open, the task's processors initialized); when it was first RUNNING
    with an active task; how many "tasks" lines (each a change of its task sets) and "active"
    opens/closes it printed; and its REBALANCING spans."""
    def s(t: int | None) -> float | None:
        return None if t is None else round((t - origin_ns) / 1e9, 3)
    within = [e for e in events if until_ns is None or e["t"] <= until_ns]
    ready = next((e["t"] for e in within if e["event"] == "ready"), None)
    first_tasks = next((e["t"] for e in within if e["event"] == "tasks" and e["active"]), None)
    opens = [e for e in within if e["event"] == "active" and e.get("phase") == "open"]
    closes = [e for e in within if e["event"] == "active" and e.get("phase") == "close"]
    tasks_lines = [e for e in within if e["event"] == "tasks"]
    return {"ready": s(ready), "first_active_tasks_line": s(first_tasks),
            "first_task_open": s(opens[0]["t"]) if opens else None,
            "first_running_with_task": s(first_running_task_ns(within)),
            "tasks_lines": len(tasks_lines), "active_sizes": [len(e["active"]) for e in tasks_lines],
            "opens": len(opens), "closes": len(closes),
            "rebalancing": [(s(a), s(b)) for a, b in rebalancing_spans(within)]}


def start_summary(timelines: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The instances' start timelines folded: the spread of their first tasks, and the totals
    of task-set changes, task opens/closes and REBALANCING spans (more spans or closes: more
    rounds)."""
    def spread(key: str) -> list[float] | None:
        got = sorted(t[key] for t in timelines if t[key] is not None)
        return [got[0], got[len(got) // 2], got[-1]] if got else None
    return {"first_active_tasks_line_min_med_max": spread("first_active_tasks_line"),
            "first_task_open_min_med_max": spread("first_task_open"),
            "first_running_min_med_max": spread("first_running_with_task"),
            "ready_min_med_max": spread("ready"),
            "tasks_lines": sum(t["tasks_lines"] for t in timelines),
            "opens": sum(t["opens"] for t in timelines), "closes": sum(t["closes"] for t in timelines),
            "rebalancing_spans": sum(len(t["rebalancing"]) for t in timelines)}
