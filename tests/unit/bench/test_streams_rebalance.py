"""bench/streams_rebalance_lines.py: the Streams rebalance figures read from the instances'
own lines (when the start settled, when a joiner ran its first task, the longest REBALANCING
of an instance that kept its tasks, tasks active twice)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import streams_rebalance_lines as lines  # noqa: E402


def state(t: int, s: str) -> dict:
    return {"event": "state", "t": t, "state": s}


def tasks(t: int, *active: str) -> dict:
    return {"event": "tasks", "t": t, "active": list(active), "standby": []}


A = [{"event": "ready", "t": 10}, state(12, "REBALANCING"), tasks(20, "0_0", "1_0"), state(25, "RUNNING"),
     state(100, "REBALANCING"), tasks(110, "0_0"), state(140, "RUNNING")]
B = [{"event": "ready", "t": 15}, state(16, "REBALANCING"), tasks(30, "0_1", "1_1"), state(33, "RUNNING")]


def test_start_is_from_the_last_ready_to_the_last_settling_line() -> None:
    assert lines.last_ready_ns([A[:4], B]) == 15
    assert lines.settled_ns([A[:4], B]) == 33


def test_first_running_task_needs_both_running_and_an_active_task() -> None:
    assert lines.first_running_task_ns(B) == 33
    assert lines.first_running_task_ns([state(5, "RUNNING"), tasks(9, "0_0")]) == 9
    assert lines.first_running_task_ns([state(5, "RUNNING"), tasks(9)]) is None


def test_kept_tasks_are_held_at_the_mark_and_in_every_later_line() -> None:
    assert lines.kept_tasks(A, 50) == {"0_0"}
    assert lines.kept_tasks(A + [tasks(150)], 50) == set()
    assert lines.kept_tasks(B, 5) == set()


def test_longest_rebalancing_is_clipped_to_the_window_and_an_open_span_ends_at_its_end() -> None:
    assert lines.longest_rebalancing_ns(A, 50, 200) == 40
    assert lines.longest_rebalancing_ns(A, 120, 200) == 20
    assert lines.longest_rebalancing_ns(A[:5], 50, 130) == 30
    assert lines.longest_rebalancing_ns(B, 50, 200) == 0


def test_active_twice_names_each_doubled_task_once() -> None:
    assert lines.active_twice([{"0_0", "1_0"}, {"1_0"}, {"1_0", "0_1"}]) == ["1_0"]
    assert lines.active_twice([{"0_0"}, {"0_1"}]) == []


def gap(began: int, ended: int) -> dict:
    return {"event": "gap", "t": ended, "from": began, "thread": "t-1"}


def test_longest_gap_counts_whole_pauses_that_overlap_the_window() -> None:
    events = [*A, gap(40, 47), gap(95, 180), gap(300, 310)]
    assert lines.longest_gap_ns(events, 50, 200) == 85      # began before the window: whole
    assert lines.longest_gap_ns(events, 0, 60) == 7
    assert lines.longest_gap_ns(events, 181, 299) == 0      # none overlaps
    assert lines.longest_gap_ns(B, 0, 1000) == 0            # no gap lines at all


def test_rebalance_pause_is_the_longest_gap_holding_a_rebalancing_span() -> None:
    events = [*A, gap(60, 90), gap(95, 104), gap(105, 150), gap(300, 310)]
    assert lines.rebalance_pause_ns(events, 50, 200) == 45      # holds [100, 140]; 30 lies outside it
    assert lines.rebalance_pause_ns(events, 150, 200) == 0      # the span ended before the window
    assert lines.rebalance_pause_ns([*A[:5], gap(120, 260)], 50, 200) == 140    # an open span
    assert lines.rebalance_pause_ns([*B, gap(40, 50)], 0, 100) == 0             # no span
