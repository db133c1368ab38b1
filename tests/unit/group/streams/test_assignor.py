"""The built-in sticky streams assignor: every task active once, standbys never beside the
same task on one process, stickiness, balance across processes."""
from __future__ import annotations

import logging

from coordinator.group.streams.assignor import MemberSpec, assign
from coordinator.group.streams.model import EMPTY_TASKS, Tasks

TASKS = [(s, p) for s in ("0", "1") for p in range(6)]


def _specs(procs: dict[str, str], previous: dict[str, Tasks] | None = None) -> dict[str, MemberSpec]:
    return {m: MemberSpec(p, (previous or {}).get(m, EMPTY_TASKS)) for m, p in procs.items()}


def _check_invariants(out, procs, num_standby):
    actives = [t for a in out.values() for t in a.active]
    assert sorted(actives) == sorted(TASKS)                     # every task active exactly once
    for t in TASKS:
        holders = [procs[m] for m, a in out.items() if t in a.active or t in a.standby]
        assert len(holders) == len(set(holders)), (t, holders)  # never twice on one process


def test_every_task_is_active_once_and_the_load_is_balanced():
    procs = {"m1": "p1", "m2": "p2", "m3": "p3"}
    out = assign(_specs(procs), TASKS, 0)
    _check_invariants(out, procs, 0)
    assert sorted(len(a.active) for a in out.values()) == [4, 4, 4]
    assert all(not a.standby and not a.warmup for a in out.values())


def test_balance_is_across_processes_by_their_number_of_members():
    procs = {"a1": "pa", "a2": "pa", "b1": "pb"}      # pa has twice pb's capacity
    out = assign(_specs(procs), TASKS, 0)
    per_process = {"pa": 0, "pb": 0}
    for m, a in out.items():
        per_process[procs[m]] += len(a.active)
    assert per_process == {"pa": 8, "pb": 4}


def test_standbys_never_go_to_a_process_holding_the_task():
    procs = {"m1": "p1", "m2": "p1", "m3": "p2", "m4": "p3"}
    out = assign(_specs(procs), TASKS, 2)
    _check_invariants(out, procs, 2)
    assert sum(len(a.standby) for a in out.values()) == 2 * len(TASKS)   # three processes: room for both


def test_standbys_beyond_capacity_stay_unassigned_with_a_warning(caplog):
    procs = {"m1": "p1", "m2": "p1", "m3": "p2"}
    with caplog.at_level(logging.WARNING, logger="kcoord.streams.assignor"):
        out = assign(_specs(procs), TASKS, 2)
    _check_invariants(out, procs, 2)
    assert sum(len(a.standby) for a in out.values()) == len(TASKS)       # one other process per task only
    assert "Unable to assign 12 of 24 standby tasks" in caplog.text


def test_tasks_stay_with_their_owner_when_a_member_joins():
    procs = {"m1": "p1", "m2": "p2"}
    first = assign(_specs(procs), TASKS, 1)
    procs3 = {**procs, "m3": "p3"}
    second = assign(_specs(procs3, first), TASKS, 1)
    _check_invariants(second, procs3, 1)
    assert sorted(len(a.active) for a in second.values()) == [4, 4, 4]
    for m in ("m1", "m2"):
        assert len(second[m].active & first[m].active) == 4             # only what m3 needs moved


def test_an_orphaned_task_goes_to_the_member_that_had_it_as_standby():
    """Up to the active quota (6 over two members): Kafka checks the quota of the standby it
    chose, and a full one leaves the task to the least loaded member."""
    procs = {"m1": "p1", "m2": "p2", "m3": "p3"}
    first = assign(_specs(procs), TASKS, 1)
    del procs["m3"]
    second = assign(_specs(procs, first), TASKS, 1)
    for m in ("m1", "m2"):
        assert second[m].active >= first[m].active                      # kept what they had
    for t in first["m3"].active:
        warm = next(m for m in ("m1", "m2") if t in first[m].standby)
        assert t in second[warm].active or len(second[warm].active) == 6
    assert sorted(len(a.active) for a in second.values()) == [6, 6]


def test_no_members_no_assignment():
    assert assign({}, TASKS, 1) == {}


def test_standbys_only_for_the_tasks_of_stateful_subtopologies():
    procs = {"m1": "p1", "m2": "p2", "m3": "p3"}
    out = assign(_specs(procs), TASKS, 1, stateful=frozenset({"1"}))
    _check_invariants(out, procs, 1)
    standbys = sorted(t for a in out.values() for t in a.standby)
    assert standbys == [("1", p) for p in range(6)]      # subtopology 0 keeps no state: no standby


def _one_by_one(n: int, tasks: list) -> tuple[dict[str, str], dict[str, Tasks]]:
    """``n`` members joining one at a time, each assignment sticky to the one before."""
    procs: dict[str, str] = {}
    out: dict[str, Tasks] = {}
    for i in range(n):
        procs[f"m{i}"] = f"p{i}"
        out = assign(_specs(procs, out), tasks, 0)
    return procs, out


def test_members_that_joined_one_by_one_end_within_one_task_of_each_other():
    """Kafka's quota is redone whenever a member fills it (`maybeUpdateTasksPerMember`): ten
    members joining one by one over 64 tasks hold 7 or 6 each (a fixed ceil(64 / 10) = 7 let
    the first eight keep 7 and left 4 to each of the last two)."""
    tasks = [(s, p) for s in ("0", "1") for p in range(32)]
    _, out = _one_by_one(10, tasks)
    assert sorted(len(a.active) for a in out.values()) == [6] * 6 + [7] * 4


def test_a_join_moves_tasks_only_to_the_new_member():
    """The eleventh member's tasks come from the fullest members; no member that stays gains a
    task (a gain would wait for another member's revocation and start a new task)."""
    tasks = [(s, p) for s in ("0", "1") for p in range(32)]
    procs, before = _one_by_one(10, tasks)
    procs["m10"] = "p10"
    after = assign(_specs(procs, before), tasks, 0)
    assert all(after[m].active <= before[m].active for m in before)
    assert sorted(len(a.active) for a in after.values()) == [5, 5] + [6] * 9
    assert len(after["m10"].active) == 5
