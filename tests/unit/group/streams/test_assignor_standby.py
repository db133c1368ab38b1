"""The sticky assignor's placement as Kafka 4.4.0's `StickyTaskAssignor` (read from its jar:
docs/design/streams-groups.md, "The sticky assignor's placement, as Kafka 4.4.0 does it"): the
chosen "previous standby" candidate is checked against its quota only after it is chosen, the task's
previous active owner is offered its standby first, a later candidate wins only when both its
loads are lower, and standbys are placed from the highest partition down. Each case is built
so that Kafka's own ties (left to hash order) cannot change what is asserted."""
from __future__ import annotations

from coordinator.group.streams.assignor import MemberSpec, assign
from coordinator.group.streams.model import Tasks

STATEFUL = frozenset({"1"})


def _spec(process: str, active=(), standby=(), reported=None) -> MemberSpec:
    return MemberSpec(process, Tasks(frozenset(active), frozenset(standby)), reported or {})


def _t(*partitions: int, sub: str = "0") -> list[tuple[str, int]]:
    return [(sub, p) for p in partitions]


def _holder(out, task, kind: str = "standby") -> list[str]:
    return sorted(m for m, a in out.items() if task in getattr(a, kind))


def test_a_full_chosen_candidate_sends_the_active_task_to_the_least_loaded_process():
    """b ranks first for 0_0 (larger offset sum) and c is not lower on both loads, so b is
    chosen; b is at its quota of 2, so 0_0 goes to the least loaded process (d's, empty), not
    to c, the next candidate with room."""
    specs = {"b": _spec("pb", _t(1, 2), reported={("0", 0): 9}), "b2": _spec("pb"),
             "c": _spec("pc", _t(5), reported={("0", 0): 1}), "c2": _spec("pc", _t(3, 4)), "d": _spec("pd")}
    out = assign(specs, _t(*range(8)), 0)
    assert out["b"].active == set(_t(1, 2))
    assert _holder(out, ("0", 0), "active") == ["d"]


def _three_processes(e2_standby: bool) -> dict[str, MemberSpec]:
    """Eight members with two stateless tasks each kept (the active quota, 2); subtopology 1
    stateful, its tasks active on d and f; c holds 1_1 and 1_0 as standbys, e1 1_2, e2 1_3 (if
    ``e2_standby``), e reported an offset for 1_0. The total quota is ceil((16 + 4) / 8) = 3."""
    one = {p: ("1", p) for p in range(4)}
    return {"c": _spec("pc", _t(0, 1), standby=[one[1], one[0]]), "c1": _spec("pc", _t(2, 3)),
            "c2": _spec("pc", _t(4, 5)),
            "e": _spec("pe", _t(6, 7), reported={one[0]: 5}), "e1": _spec("pe", _t(8, 9), standby=[one[2]]),
            "e2": _spec("pe", _t(10, 11), standby=[one[3]] if e2_standby else []),
            "d": _spec("pd", [one[0], one[1]]), "f": _spec("pf", [one[2], one[3]])}


def _sixteen() -> list[tuple[str, int]]:
    return _t(*range(12)) + _t(*range(4), sub="1")


def test_a_full_chosen_candidate_sends_the_standby_to_the_least_loaded_process():
    """1_1 fills c (3); for 1_0, c ranks first (a standby) and e is not lower on both loads
    (process 8/3 against c's 7/3), so c is chosen, found full, and 1_0's standby goes to the
    least loaded process without it (f's, 2), not to e."""
    out = assign(_three_processes(True), _sixteen(), 1, STATEFUL)
    assert out["c"].standby == {("1", 1)}
    assert out["e1"].standby == {("1", 2)} and out["e2"].standby == {("1", 3)}
    assert _holder(out, ("1", 0)) == ["f"]


def test_a_later_candidate_equal_in_process_load_does_not_win():
    """As above with e's process at c's load (7/3 each): e's lower member load alone does not
    make it win (both loads must be lower), so c is chosen and full, and 1_0's standby goes to
    the least loaded process, f's."""
    out = assign(_three_processes(False), _sixteen(), 1, STATEFUL)
    assert out["c"].standby == {("1", 1)}
    assert _holder(out, ("1", 0)) == ["f"]
    assert _holder(out, ("1", 3)) == ["d"]          # placed by the last pass first (partition 3)


def test_the_previous_active_owner_gets_the_standby_first():
    """a had 0_0 and 0_1 active; at its active quota (1) it keeps 0_0 and 0_1 goes to a standby
    holder. 0_1's standby goes back to a (its state is there), before c and e, its previous
    standby holders."""
    specs = {"a": _spec("pa", _t(0, 1)), "c": _spec("pc", standby=_t(1)), "d": _spec("pd"),
             "e": _spec("pe", standby=_t(1))}
    out = assign(specs, _t(0, 1, 2, 3), 1)
    assert out["a"].active == {("0", 0)}
    assert _holder(out, ("0", 1), "active") in (["c"], ["e"])
    assert _holder(out, ("0", 1)) == ["a"]


def test_the_previous_active_owner_is_skipped_when_its_process_holds_the_task():
    """A task that stays with its owner takes its standby from the candidates: the owner's
    process already holds it."""
    specs = {"a": _spec("pa", _t(0)), "b": _spec("pb", standby=_t(0)), "c": _spec("pc")}
    out = assign(specs, _t(0), 1)
    assert out["a"].active == {("0", 0)} and _holder(out, ("0", 0)) == ["b"]


def test_standbys_are_placed_from_the_highest_partition_down():
    """s is the standby holder of 0_0 and 0_1 with room (total quota 2) for one: Kafka visits
    0_1 first, so s keeps 0_1's standby and 0_0's goes to the least loaded other process."""
    specs = {"a": _spec("pa", _t(0)), "b": _spec("pb", _t(1)), "s": _spec("ps", _t(2), standby=_t(0, 1))}
    out = assign(specs, _t(0, 1, 2), 1)
    assert out["s"].standby == {("0", 1)}
    assert _holder(out, ("0", 0)) == ["b"]

