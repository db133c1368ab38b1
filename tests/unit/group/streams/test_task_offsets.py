"""A streams member's reported task offsets, as Kafka 4.4 keeps them (read from its 4.4.0
group-coordinator jar: `MemberTaskOffsets.update`, `StreamsGroup.removeMember`,
`StreamsGroupMember.asStreamsGroupDescribeMember`, the sticky assignor's standby candidates):
replaced per side, a null side kept, gone with the member and on a reload, shown by the
describe, ranking who inherits an orphaned task. kcoord keeps only the configured topology's
tasks, one entry per task (docs/design/streams-groups.md)."""
from __future__ import annotations

from dataclasses import replace

from kio.schema.errors import ErrorCode

from coordinator.group.streams.assignor import MemberSpec, assign
from coordinator.group.streams.model import Tasks
from coordinator.group.streams.offsets import EMPTY, store

from .driver import REQ, Driver, beat, image, join, subtopology, topology
from .test_describe_and_migration import _describe
from .test_heartbeat import TOP, App, _fast

MAX_LONG = 2**63 - 1


def _offsets(*entries: tuple[str, int, int]) -> tuple:
    return tuple(REQ.TaskOffset(subtopology_id=s, partition=p, offset=o) for s, p, o in entries)


def _sent(req, offsets=None, ends=None):
    return replace(req, task_offsets=offsets, task_end_offsets=ends)


def _shown(d, member: str) -> tuple[list, list]:
    (group,) = _describe(d, "app").groups
    (m,) = [m for m in group.members if m.member_id == member]
    return ([(t.subtopology_id, t.partition, t.offset) for t in m.task_offsets],
            [(t.subtopology_id, t.partition, t.offset) for t in m.task_end_offsets])


def _beat(d: Driver, app: App, member: str, offsets=None, ends=None):
    a = d.hb(_sent(beat(member, app.epoch[member], app.held[member]), offsets, ends))
    assert a.error_code == ErrorCode.none, a.error_message
    return a


def test_each_side_is_replaced_when_sent_and_kept_when_null():
    d = _fast()
    app = App(d)
    a = d.hb(_sent(join("m1", "p1", TOP), _offsets(("0", 1, 10), ("0", 2, 20)), _offsets(("0", 1, 15))))
    app._take("m1", a)
    assert _shown(d, "m1") == ([("0", 1, 10), ("0", 2, 20)], [("0", 1, 15)])
    _beat(d, app, "m1", offsets=_offsets(("0", 3, 30)))                  # ends null: kept
    assert _shown(d, "m1") == ([("0", 3, 30)], [("0", 1, 15)])
    _beat(d, app, "m1", ends=())                                         # offsets null: kept
    assert _shown(d, "m1") == ([("0", 3, 30)], [])
    records_before = len(d.log)
    _beat(d, app, "m1", offsets=_offsets(("0", 4, 40)))
    assert _shown(d, "m1") == ([("0", 4, 40)], [])
    assert len(d.log) == records_before                                  # never in a record
    _beat(d, app, "m1")                                                  # neither sent
    assert _shown(d, "m1") == ([("0", 4, 40)], [])


def test_the_describe_sorts_them_and_shows_the_sentinels_as_sent():
    top = topology(subtopology("0", sources=["input"], changelogs=["app-store-changelog"]),
                   subtopology("1", sources=["other"]))
    d = Driver(image(input=6, other=3, **{"app-store-changelog": 6}), streams_initial_rebalance_delay_ms=0,
               streams_assignment_interval_ms=0)
    a = d.hb(_sent(join("m1", "p1", top), _offsets(("1", 2, MAX_LONG), ("0", 5, -1), ("1", 0, 7), ("0", 0, 3)),
                   _offsets(("0", 5, MAX_LONG))))
    assert a.error_code == ErrorCode.none, a.error_message
    assert _shown(d, "m1") == ([("0", 0, 3), ("0", 5, -1), ("1", 0, 7), ("1", 2, MAX_LONG)], [("0", 5, MAX_LONG)])
    assert _describe(d, "app", version=0).groups[0].members[0].task_offsets[0].offset == 3


def test_they_go_with_the_member_and_are_lost_on_a_reload():
    d = _fast()
    app = App(d)
    app.join("m1", "p1")
    app.join("m2", "p2")
    app.settle()
    _beat(d, app, "m1", offsets=_offsets(("0", 1, 10)))
    _beat(d, app, "m2", offsets=_offsets(("0", 2, 20)))
    fresh = d.reloaded()
    assert set(fresh.groups["app"].members) == {"m1", "m2"} and not fresh.streams_soft.get("app", None)
    assert d.hb(beat("m1", -1)).error_code == ErrorCode.none      # leaves
    assert set(d.shard.streams_soft["app"].task_offsets) == {"m2"}
    app.join("m1", "p1")                                                 # the same id again: none kept
    assert _shown(d, "m1") == ([], [])
    d.advance(45_001)                                                    # both sessions end: fenced
    assert not d.group().members and not d.shard.streams_soft["app"].task_offsets


def test_a_duplicate_task_is_refused_with_kafkas_words_and_keeps_what_was_there():
    d = _fast()
    app = App(d)
    app.join("m1", "p1")
    _beat(d, app, "m1", offsets=_offsets(("0", 1, 10)))
    records_before = len(d.log)
    for offsets, ends in ((_offsets(("0", 2, 1), ("0", 2, 2)), None), (None, _offsets(("x", 9, 1), ("x", 9, 1)))):
        a = d.hb(_sent(beat("m1", app.epoch["m1"], app.held["m1"]), offsets, ends))
        assert a.error_code == ErrorCode.invalid_request
        sub, part = ("0", 2) if offsets else ("x", 9)
        assert a.error_message == f"Task offsets contain a duplicate entry for subtopology {sub} and partition {part}."
    assert len(d.log) == records_before
    assert _shown(d, "m1") == ([("0", 1, 10)], [])


def test_what_is_kept_is_bounded_by_the_topologys_tasks_whatever_is_sent():
    d = _fast()
    app = App(d)
    app.join("m1", "p1")
    app.join("m2", "p2")
    app.settle()
    hostile = _offsets(*((s, p, p) for s in ("0", "1", "x" * 200) for p in range(-3, 20_000)))
    for _ in range(3):
        _beat(d, app, "m1", offsets=hostile, ends=hostile)
    kept = d.shard.streams_soft["app"].task_offsets
    assert set(kept) == {"m1"}
    assert sorted(kept["m1"].offsets) == sorted(kept["m1"].end_offsets) == [("0", p) for p in range(6)]
    assert _shown(d, "m1")[0] == [("0", p, p) for p in range(6)]


def _spec(process: str, active=(), standby=(), reported=None) -> MemberSpec:
    return MemberSpec(process, Tasks(frozenset(active), frozenset(standby)), reported or {})


def test_an_orphaned_task_goes_to_the_member_with_its_state_on_disk():
    tasks = [("0", p) for p in range(6)]
    previous = {"b": [("0", 2), ("0", 3)], "c": [("0", 4), ("0", 5)]}    # a, holding 0 and 1, left
    without = assign({m: _spec(f"p{m}", ts) for m, ts in previous.items()}, tasks, 0)
    assert ("0", 0) in without["b"].active                              # the least loaded process, pb
    with_state = assign({"b": _spec("pb", previous["b"]),
                         "c": _spec("pc", previous["c"], reported={("0", 0): 500})}, tasks, 0)
    assert ("0", 0) in with_state["c"].active and ("0", 1) in with_state["b"].active


def test_standbys_rank_first_then_the_larger_offset_sum():
    tasks = [("0", 0)]
    standby_first = assign({"b": _spec("pb", reported={("0", 0): 10**9}), "c": _spec("pc", standby=[("0", 0)]),
                            "d": _spec("pd")}, tasks, 0)
    assert standby_first["c"].active == {("0", 0)}
    larger = assign({"b": _spec("pb", reported={("0", 0): 5}), "c": _spec("pc", reported={("0", 0): 9}),
                     "d": _spec("pd", reported={("0", 0): -1})}, tasks, 0)
    assert larger["c"].active == {("0", 0)}
    # the standby pass ranks them the same way: the second copy goes to the larger reported sum
    with_standby = assign({"a": _spec("pa", active=[("0", 0)]), "b": _spec("pb", reported={("0", 0): 5}),
                           "c": _spec("pc", reported={("0", 0): 9})}, tasks, 1)
    assert with_standby["a"].active == {("0", 0)} and with_standby["c"].standby == {("0", 0)}
    assert not with_standby["b"].standby


def test_a_later_candidate_wins_only_when_both_its_loads_are_lower():
    tasks = [("0", p) for p in range(4)]
    # b ranks first (larger sum) but its process already has a task: c, lower on both, wins
    specs = {"b": _spec("pb", active=[("0", 1)], reported={("0", 0): 9}), "c": _spec("pc", reported={("0", 0): 1}),
             "d": _spec("pd", active=[("0", 2), ("0", 3)])}
    assert ("0", 0) in assign(specs, tasks, 0)["c"].active
    # equal loads: the rank decides, not the process id
    specs = {"b": _spec("pb", reported={("0", 0): 1}), "c": _spec("pc", reported={("0", 0): 9})}
    assert ("0", 0) in assign(specs, tasks[:1], 0)["c"].active


def test_through_the_heartbeat_the_reported_offsets_move_an_orphaned_task():
    d = _fast()
    app = App(d)
    for m in ("m1", "m2", "m3"):
        app.join(m, f"p{m[1]}")
    app.settle()
    orphaned = sorted(app.held["m1"][0])
    _beat(d, app, "m3", offsets=_offsets(("0", orphaned[0][1], 1_000)))
    assert d.hb(beat("m1", -1)).error_code == ErrorCode.none
    app.epoch.pop("m1")
    app.held.pop("m1")
    app.settle()
    assert orphaned[0] in app.held["m3"][0]


def test_a_static_member_keeps_them_while_away_and_its_replacement_drops_them():
    """A static member leaving with -2 stays in the group (Kafka keeps its offsets: no
    `removeMember`); the member that takes its instance id replaces it, and its id's offsets go."""
    d = _fast()
    a = d.hb(_sent(join("s1", "p1", TOP, instance_id="i1"), _offsets(("0", 1, 10))))
    assert a.error_code == ErrorCode.none, a.error_message
    assert d.hb(beat("s1", -2, instance_id="i1")).error_code == ErrorCode.none
    assert _shown(d, "s1") == ([("0", 1, 10)], [])
    taken = d.hb(join("s1-again", "p1", TOP, instance_id="i1"))
    assert taken.error_code == ErrorCode.none, taken.error_message
    assert set(d.shard.streams_soft["app"].task_offsets) == set()
    assert _shown(d, "s1-again") == ([], [])


def test_entries_of_members_gone_another_way_are_dropped_once_the_table_outgrows_the_group():
    """A member removed by a replayed tombstone (not through `forget_due`) leaves its entry; the
    table never holds more than the group's members and a few more."""
    table: dict = {}
    members = {"a": None, "b": None}
    for i in range(100):
        store(table, members, f"gone{i}", EMPTY)
        assert len(table) <= len(members) + 18
    store(table, members, "a", EMPTY)
    assert "a" in table and len(table) <= len(members) + 18
