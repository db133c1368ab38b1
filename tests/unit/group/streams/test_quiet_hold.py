"""kcoord's quiet hold of a new streams group's first target (`streams_initial_rebalance_quiet_ms`,
membership.py), on the simulated clock: off, Kafka's behaviour; on, the first target with tasks
waits until no member joined for the quiet period, never past max(initial delay,
`streams_initial_rebalance_quiet_max_ms`) after the first join; a group that had a target is
not held; the hold is soft (not in the log)."""
from __future__ import annotations

from datetime import timedelta

from kio.schema.errors import ErrorCode

from coordinator.group.streams.membership import soft_of
from coordinator.group.streams.model import StreamsGroupState
from coordinator.group.streams.responses import LEAVE_EPOCH
from coordinator.group.streams.timers import on_loaded
from coordinator.group.streams.topology import ASSIGNMENT_DELAYED

from .driver import Driver, beat, image
from .test_heartbeat import ALL, READY, App, _never_active_twice

QUIET = "Assignment delayed due to the configured initial rebalance quiet period."


def _driver(img=READY, **kw) -> Driver:
    return Driver(img, **{"streams_initial_rebalance_delay_ms": 0, "streams_assignment_interval_ms": 0,
                          "streams_initial_rebalance_quiet_ms": 500, **kw})


def _trickle(d: Driver, members: int, gap_ms: int) -> tuple[App, list]:
    """``members`` join ``gap_ms`` apart; their join answers."""
    app, answers = App(d), []
    for i in range(members):
        if i:
            d.advance(gap_ms)
        answers.append(app.join(f"m{i}", f"p{i}"))
    return app, answers


def _active_counts(d: Driver) -> list[int]:
    return sorted(len(m.assigned.active) for m in d.group().members.values())


def test_off_the_first_join_gets_every_task_at_once_whatever_the_bound():
    runs = []
    for bound in (10_000, 1):
        d = _driver(streams_initial_rebalance_quiet_ms=0, streams_initial_rebalance_quiet_max_ms=bound)
        app, answers = _trickle(d, 3, 300)
        assert answers[0].tasks() == ALL
        assert all(ASSIGNMENT_DELAYED not in a.statuses() for a in answers)
        assert soft_of(d.shard, "app").quiet_hold is None
        app.settle()
        runs.append((d.log, [(a.member_epoch, a.tasks(), a.statuses(), a.heartbeat_interval) for a in answers]))
    assert runs[0] == runs[1]


def test_joins_300_ms_apart_keep_holding_and_a_500_ms_pause_releases():
    d = _driver()
    app, answers = _trickle(d, 5, 300)
    assert all(a.tasks() == set() and a.statuses().get(ASSIGNMENT_DELAYED) == QUIET for a in answers)
    # each member is told to come back when the hold may end: 500 ms after the last join
    assert answers[-1].heartbeat_interval == timedelta(milliseconds=500)
    assert d.group().state() is StreamsGroupState.ASSIGNING
    d.advance(499)
    assert d.group().state() is StreamsGroupState.ASSIGNING
    d.advance(1)                          # the assignment timer computes the target
    assert d.group().state() is StreamsGroupState.RECONCILING
    app.settle()
    assert d.group().state() is StreamsGroupState.STABLE
    assert _active_counts(d) == [1, 1, 1, 1, 2]
    _never_active_twice(d)


def test_the_bound_releases_a_trickle_that_never_pauses():
    """Joins every 300 ms without end: the first target is computed at the bound (its timer),
    max(initial delay, quiet max) after the first join."""
    for delay, bound, released in ((0, 2_000, 2_000), (3_000, 2_000, 3_000)):
        d = _driver(streams_initial_rebalance_delay_ms=delay, streams_initial_rebalance_quiet_max_ms=bound)
        app = App(d)
        start = d.now_ms
        app.join("m0", "p0")
        i = 0
        while d.group().target_assignment_epoch == 1:
            assert d.now_ms - start < released, (delay, bound)
            d.advance(100)
            if (d.now_ms - start) % 300 == 0:
                i += 1
                app.join(f"m{i}", f"p{i}")
        assert d.group().assignment_timestamp_ms == start + released, (delay, bound)
        assert i >= released // 300 - 1


def test_a_group_that_had_a_target_is_not_held():
    d = _driver()
    app = App(d)
    app.join("m0", "p0")
    d.advance(500)
    app.settle()
    assert _active_counts(d) == [6]
    joined = app.join("m1", "p1")
    assert ASSIGNMENT_DELAYED not in joined.statuses()
    assert d.group().target_assignment_epoch == d.group().group_epoch
    app.settle()
    assert _active_counts(d) == [3, 3]


def test_a_target_without_tasks_does_not_end_the_hold():
    """The topology is not ready (its changelog is missing): the target computed after the
    pause hands out nothing, and the next join is held again."""
    d = _driver(image(input=6))
    app = App(d)
    app.join("m0", "p0")
    d.advance(600)
    assert d.group().target_assignment_epoch == d.group().group_epoch
    assert soft_of(d.shard, "app").quiet_hold is not None
    assert app.join("m1", "p1").statuses().get(ASSIGNMENT_DELAYED) == QUIET


def test_the_hold_is_soft_a_reload_computes_the_target_at_once():
    d = _driver()
    _trickle(d, 3, 300)
    fresh = d.reloaded()
    assert soft_of(fresh, "app").quiet_hold is None
    assert fresh.groups["app"].state() is StreamsGroupState.ASSIGNING
    due = [t for t in on_loaded(fresh, d.now_ms) if t.key[1] == "assignment"]
    assert [t.deadline_ms for t in due] == [d.now_ms]


def test_the_last_member_leaving_ends_the_hold_and_the_next_join_starts_a_new_one():
    d = _driver()
    app, _ = _trickle(d, 2, 300)
    for m in ("m0", "m1"):
        assert d.hb(beat(m, LEAVE_EPOCH)).error_code == ErrorCode.none
    assert soft_of(d.shard, "app").quiet_hold is None
    d.advance(5_000)
    answer = App(d).join("m2", "p2")
    assert answer.statuses().get(ASSIGNMENT_DELAYED) == QUIET
    assert soft_of(d.shard, "app").quiet_hold == (d.now_ms, d.now_ms)
