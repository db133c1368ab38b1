"""The span logic the streams tests (support.streams_app) share with the Streams rehearsal
(migration.rehearse.streams_analysis, where it lives): an active task's lifetime on an instance
from its "active" open/close lines (StreamsEvents.ActiveLife), and the overlap of two
instances' spans of one task."""
from __future__ import annotations

from typing import Any

from migration.rehearse.streams_analysis import overlaps, task_spans


def active(t: int, phase: str, task: str) -> dict[str, Any]:
    return {"event": "active", "t": t, "phase": phase, "task": task}


def test_open_close_pairs_are_spans_and_other_lines_are_ignored() -> None:
    events = [
        {"event": "state", "t": 5, "state": "RUNNING", "from": "REBALANCING"},
        active(10, "open", "0_1"), active(11, "open", "1_1"),
        # A "tasks" line still listing 0_1 after its close says nothing about the span.
        active(20, "close", "0_1"), {"event": "tasks", "t": 25, "active": ["0_1", "1_1"], "standby": []},
        active(30, "close", "1_1"),
    ]
    assert sorted(task_spans(events, end=1000)) == [("0_1", 10, 20), ("1_1", 11, 30)]


def test_a_task_opened_again_after_its_close_is_a_new_span() -> None:
    events = [active(10, "open", "1_2"), active(20, "close", "1_2"), active(40, "open", "1_2"),
              active(50, "close", "1_2")]
    assert task_spans(events, end=1000) == [("1_2", 10, 20), ("1_2", 40, 50)]


def test_a_task_still_open_is_held_until_the_end_given() -> None:
    """The end is the kill, the "closed" line, or now (held_intervals chooses)."""
    events = [active(10, "open", "1_0"), active(12, "open", "0_0"), active(20, "close", "0_0")]
    assert sorted(task_spans(events, end=77)) == [("0_0", 12, 20), ("1_0", 10, 77)]


def test_a_close_without_open_is_no_span() -> None:
    assert task_spans([active(20, "close", "1_0")], end=99) == []


def test_handover_after_the_close_is_no_overlap() -> None:
    old = task_spans([active(10, "open", "1_5"), active(20, "close", "1_5")], end=100)
    new = task_spans([active(21, "open", "1_5")], end=100)
    assert overlaps([("i3", old), ("i5", new)]) == []


def test_new_owner_opening_before_the_old_one_closed_overlaps() -> None:
    """What a coordinator that hands a task over before its owner released it produces."""
    old = task_spans([active(10, "open", "1_5"), active(20, "close", "1_5")], end=100)
    new = task_spans([active(18, "open", "1_5")], end=100)
    assert overlaps([("i3", old), ("i5", new)]) == ["task 1_5: i3 [10, 20] and i5 [18, 100]"]


def test_a_killed_instance_holds_its_open_tasks_until_the_kill() -> None:
    killed_at = 50
    victim = task_spans([active(10, "open", "0_3")], end=killed_at)
    too_early = task_spans([active(40, "open", "0_3")], end=100)
    in_time = task_spans([active(60, "open", "0_3")], end=100)
    assert overlaps([("i1", victim), ("i2", in_time)]) == []
    assert overlaps([("i1", victim), ("i2", too_early)]) == ["task 0_3: i1 [10, 50] and i2 [40, 100]"]


def test_one_instance_never_overlaps_itself_but_a_restart_under_its_name_can() -> None:
    spans = [("0_0", 10, 20), ("0_0", 15, 30)]
    assert overlaps([("i1", spans)]) == []
    assert overlaps([("i1", [("0_0", 10, 20)]), ("i1", [("0_0", 15, 30)])]) == \
        ["task 0_0: i1 [10, 20] and i1 [15, 30]"]
