"""kcoord's trickle of the quiet hold (`streams_initial_rebalance_quiet_tasks`, membership.py),
on the simulated clock: while a new group's quiet hold lasts, targets are computed at every
join and each member is handed at most k active tasks of its target, the first in task order;
nothing handed out has to move while every member's share is at least k; a capped member is
told to come back when the hold may end and gets the rest of its target then. Off (k = 0, or
no quiet hold) it is the hold as before, or Kafka's behaviour."""
from __future__ import annotations

from datetime import timedelta

from coordinator.group.streams.membership import soft_of
from coordinator.group.streams.model import MemberState, StreamsGroupState
from coordinator.group.streams.topology import ASSIGNMENT_DELAYED

from .driver import Driver, image, subtopology, topology
from .test_convergence import SLOW_JOINS_MS, slow_start
from .test_heartbeat import App, _never_active_twice

TOP = topology(subtopology("0", sources=["input"], sinks=["rep"]),
               subtopology("1", repartition=["rep"], changelogs=["app-store-changelog"]))
IMG = image(input=8, rep=8, **{"app-store-changelog": 8})
ALL = {(s, p) for s in ("0", "1") for p in range(8)}      # 16 tasks
STABLE = timedelta(milliseconds=500)


def _driver(**kw) -> Driver:
    return Driver(IMG, **{"streams_initial_rebalance_delay_ms": 0, "streams_assignment_interval_ms": 0,
                          "streams_initial_rebalance_quiet_ms": 500, "streams_initial_rebalance_quiet_tasks": 3,
                          **kw})


def _states(d: Driver) -> dict[str, MemberState]:
    return {m.member_id: m.state for m in d.group().members.values()}


def test_members_joining_300_ms_apart_each_run_at_most_k_tasks_the_first_of_their_target():
    d = _driver()
    app = App(d)
    answers = []
    for i in range(4):
        if i:
            d.advance(300)
        answers.append(app.join(f"m{i}", f"p{i}", TOP))
        app.settle(2)
        group = d.group()
        assert group.target_assignment_epoch == group.group_epoch      # computed at once, not held
        for m in group.members.values():
            assert len(m.assigned.active) <= 3
            assert sorted(m.assigned.active) == sorted(group.target[m.member_id].active)[:len(m.assigned.active)]
        _never_active_twice(d)
    assert all(ASSIGNMENT_DELAYED not in a.statuses() for a in answers)
    # nothing handed out had to move: no member was ever told to revoke
    assert all(s is MemberState.UNRELEASED_TASKS for s in _states(d).values())
    assert sorted(len(m.assigned.active) for m in d.group().members.values()) == [3, 3, 3, 3]


def test_a_capped_member_comes_back_when_the_hold_may_end_and_then_gets_the_rest():
    d = _driver()
    app = App(d)
    joined = app.join("m0", "p0", TOP)
    assert joined.tasks() == {("0", p) for p in range(3)} and joined.heartbeat_interval == STABLE
    d.advance(100)
    capped = app.beat("m0")
    assert capped.tasks() is None                                       # nothing new
    assert capped.heartbeat_interval == timedelta(milliseconds=400)     # the hold ends 500 ms after the join
    d.advance(400)
    rest = app.beat("m0")
    assert rest.tasks() == ALL
    assert soft_of(d.shard, "app").quiet_hold is None
    app.settle()
    assert d.group().state() is StreamsGroupState.STABLE


def test_after_the_pause_every_member_has_its_whole_target_and_nothing_was_revoked():
    d = _driver()
    app = App(d)
    for i in range(4):
        app.join(f"m{i}", f"p{i}", TOP)
        d.advance(200)
    revoked = []
    d.advance(500)
    for _ in range(4):
        for m in list(app.epoch):
            app.beat(m)
            revoked += [m for m, s in _states(d).items() if s is MemberState.UNREVOKED_TASKS]
    assert revoked == []
    group = d.group()
    assert group.state() is StreamsGroupState.STABLE
    assert set().union(*(m.assigned.active for m in group.members.values())) == ALL
    assert sorted(len(m.assigned.active) for m in group.members.values()) == [4, 4, 4, 4]


def test_a_join_after_the_hold_is_not_capped():
    d = _driver()
    app = App(d)
    app.join("m0", "p0", TOP)
    d.advance(600)
    app.settle()
    app.join("m1", "p1", TOP)
    app.settle()
    assert sorted(len(m.assigned.active) for m in d.group().members.values()) == [8, 8]


def test_off_without_the_quiet_hold_or_with_k_0():
    """k without a quiet period is nothing (Kafka's behaviour: the first member gets every
    task); k = 0 is the hold as before (nothing handed out, ASSIGNMENT_DELAYED)."""
    d = _driver(streams_initial_rebalance_quiet_ms=0)
    assert App(d).join("m0", "p0", TOP).tasks() == ALL
    d = _driver(streams_initial_rebalance_quiet_tasks=0)
    held = App(d).join("m0", "p0", TOP)
    assert held.tasks() == set() and ASSIGNMENT_DELAYED in held.statuses()


def test_in_the_slow_start_the_trickle_moves_nothing_and_settles_sooner_than_the_hold():
    """The simulated slow start (test_convergence.py: ten joins over 5 s, 64 tasks, a member
    opening its tasks before it acts on a newer target): with the hold's 2500 ms quiet period
    and k = 6 = floor(64 / 10), every member works while the others join, no task moves, and
    the start ends sooner than with the hold alone."""
    assert len(SLOW_JOINS_MS) == 10
    hold = slow_start(streams_initial_rebalance_quiet_ms=2_500)
    trickle = slow_start(streams_initial_rebalance_quiet_ms=2_500, streams_initial_rebalance_quiet_tasks=6)
    assert trickle["tasks_moved"] == 0 and hold["tasks_moved"] == 0, (hold, trickle)
    assert trickle["start_ms"] < hold["start_ms"], (hold, trickle)


def test_with_k_at_most_the_final_share_no_member_ever_revokes():
    """The bound the documentation gives: k = floor(tasks / members) moves nothing, whatever
    the number of members and tasks, joins inside the hold, every member heartbeating between
    joins (two subtopologies of p partitions: 2p tasks)."""
    for members, partitions in ((3, 8), (5, 8), (10, 32), (7, 16)):
        top = topology(subtopology("0", sources=["input"], sinks=["rep"]),
                       subtopology("1", repartition=["rep"], changelogs=["app-store-changelog"]))
        d = Driver(image(input=partitions, rep=partitions, **{"app-store-changelog": partitions}),
                   streams_initial_rebalance_delay_ms=0, streams_assignment_interval_ms=0,
                   streams_initial_rebalance_quiet_ms=500,
                   streams_initial_rebalance_quiet_tasks=2 * partitions // members)
        app = App(d)
        seen = set()
        for i in range(members):
            app.join(f"m{i}", f"p{i}", top)
            d.advance(150)
            app.settle(1)
            seen |= set(_states(d).values())
        d.advance(500)
        app.settle()
        seen |= set(_states(d).values())
        assert MemberState.UNREVOKED_TASKS not in seen, (members, partitions)
        group = d.group()
        assert group.state() is StreamsGroupState.STABLE, (members, partitions)
        loads = sorted(len(m.assigned.active) for m in group.members.values())
        assert sum(loads) == 2 * partitions and loads[-1] - loads[0] <= 1, (members, partitions, loads)


def test_the_topologys_validation_moves_the_hold_on_like_a_join():
    """A lone first member whose internal topics appear only after the quiet period (their
    creation took longer than it on a loaded cluster) is capped from the validation on, not
    handed every task just before the next member joins (which would make it revoke most of
    them): the quiet period runs from the later of the last join and the validation."""
    d = _driver()
    d.shard.image = image(input=8)                   # the repartition topic and changelog not created yet
    app = App(d)
    assert app.join("m0", "p0", TOP).tasks() == set()
    d.advance(600)                                   # past the quiet period (500 ms) with no other join
    assert app.beat("m0").tasks() is None            # still nothing to hand: the hold stays
    d.advance(100)
    d.shard.image = IMG
    validated = app.beat("m0")
    assert validated.tasks() == {("0", p) for p in range(3)}
    assert validated.heartbeat_interval == STABLE    # back when the hold may end: 500 ms after the validation
    d.advance(300)
    app.join("m1", "p1", TOP)
    app.settle(2)
    assert MemberState.UNREVOKED_TASKS not in _states(d).values()
    assert sorted(len(m.assigned.active) for m in d.group().members.values()) == [3, 3]
    d.advance(500)
    app.settle()
    group = d.group()
    assert group.state() is StreamsGroupState.STABLE
    assert sorted(len(m.assigned.active) for m in group.members.values()) == [8, 8]
    _never_active_twice(d)


def test_without_the_trickle_the_validation_after_the_quiet_period_holds_the_target_too():
    d = _driver(streams_initial_rebalance_quiet_tasks=0)
    d.shard.image = image(input=8)
    app = App(d)
    app.join("m0", "p0", TOP)
    d.advance(700)
    d.shard.image = IMG
    held = app.beat("m0")
    assert held.tasks() is None and ASSIGNMENT_DELAYED in held.statuses()
    d.advance(500)
    app.settle()
    assert sorted(len(m.assigned.active) for m in d.group().members.values()) == [16]
