"""The heartbeat interval a streams member is told, and the assignment pacing timer, with a
simulated clock: kcoord's adaptive interval (short while the member has tasks to revoke or
receive, the stable one otherwise, never below the group's own interval, a held-back target's
due time in between), Kafka's fixed one under `consumer_heartbeat_policy=fixed`, and a
held-back target computed by the timer, not by the next heartbeat."""
from __future__ import annotations

from datetime import timedelta

from coordinator.group.streams.model import StreamsGroupState
from coordinator.group.streams.topology import ASSIGNMENT_DELAYED

from .driver import Driver, beat
from .test_heartbeat import READY, App

PENDING, STABLE, FIXED = timedelta(milliseconds=100), timedelta(milliseconds=500), timedelta(seconds=5)


def _driver(**kw) -> Driver:
    return Driver(READY, **{"streams_initial_rebalance_delay_ms": 0, "streams_assignment_interval_ms": 0, **kw})


def _moving(d: Driver) -> tuple[App, dict]:
    """m1 holds every task; m2 joins 200 ms into m1's stable interval; the answers while tasks
    move: m2 waits for m1's next heartbeat, m1 revokes, m2 comes back."""
    app = App(d)
    app.join("m1", "p1")
    app.settle(2)
    told = {"m1 alone": app.beat("m1").heartbeat_interval}
    d.advance(200)
    told["m2 joins"] = app.join("m2", "p2").heartbeat_interval
    d.advance(300)
    told["m1 revokes"] = app.d.hb(beat("m1", app.epoch["m1"], app.held["m1"])).heartbeat_interval
    told["m2 waits for m1's acknowledgement"] = app.beat("m2").heartbeat_interval
    return app, told


def test_a_member_waiting_for_tasks_comes_back_once_their_holder_was_told_to_revoke_them():
    """The short interval only while a holder of the member's missing tasks was already told to
    revoke them; before that, one short interval after the holder is due (m1: 300 ms later);
    a member revoking is told the stable interval (its acknowledgement does not wait for it)."""
    d = _driver()
    app, told = _moving(d)
    assert told == {"m1 alone": STABLE, "m2 joins": timedelta(milliseconds=400), "m1 revokes": STABLE,
                    "m2 waits for m1's acknowledgement": PENDING}
    app.settle()
    assert d.group().state() is StreamsGroupState.STABLE
    assert {app.beat(m).heartbeat_interval for m in ("m1", "m2")} == {STABLE}


def test_the_fixed_policy_tells_kafkas_interval_whatever_the_member_does():
    d = _driver(consumer_heartbeat_policy="fixed")
    app, told = _moving(d)
    assert set(told.values()) == {FIXED}
    app.settle()
    assert app.beat("m1").heartbeat_interval == FIXED


def test_the_groups_own_interval_is_a_floor_of_both_intervals():
    d = _driver()
    d.shard.group_configs.replace("app", {"streams.heartbeat.interval.ms": "7000"})
    app, told = _moving(d)
    assert set(told.values()) == {timedelta(seconds=7)}
    app.settle()
    assert app.beat("m2").heartbeat_interval == timedelta(seconds=7)


def test_the_stable_interval_stretches_with_the_members_within_a_third_of_the_session():
    d = _driver(consumer_heartbeat_budget_per_second=1)      # one heartbeat a second for the process
    app = App(d)
    app.join("m1", "p1")
    app.join("m2", "p2")
    app.settle()
    assert app.beat("m1").heartbeat_interval == timedelta(seconds=2)       # 2 members / 1 per second
    d = _driver(consumer_heartbeat_budget_per_second=1, streams_session_timeout_ms=3_000)
    app = App(d)
    app.join("m1", "p1")
    app.join("m2", "p2")
    app.settle()
    assert app.beat("m1").heartbeat_interval == timedelta(seconds=1)       # capped at 3000 / 3


def test_a_member_waiting_for_a_held_back_target_comes_back_when_it_is_due():
    d = _driver(streams_initial_rebalance_delay_ms=300)
    first = App(d).join("m1", "p1")
    assert ASSIGNMENT_DELAYED in first.statuses()
    assert first.heartbeat_interval == timedelta(milliseconds=300)          # due in 300 ms
    d = _driver(streams_initial_rebalance_delay_ms=3_000)
    assert App(d).join("m1", "p1").heartbeat_interval == STABLE             # due later: no longer than stable
    d = _driver(streams_initial_rebalance_delay_ms=50)
    assert App(d).join("m1", "p1").heartbeat_interval == PENDING            # due sooner: no shorter than pending


def test_a_target_held_back_by_the_assignment_interval_is_computed_by_the_timer():
    d = _driver(streams_assignment_interval_ms=1_000)
    app = App(d)
    app.join("m1", "p1")                          # the group's first target: at once
    assert d.group().target_assignment_epoch == d.group().group_epoch
    d.advance(10)
    joined = app.join("m2", "p2")
    assert joined.statuses()[ASSIGNMENT_DELAYED] == "Assignment delayed due to the configured assignment interval."
    assert d.group().state() is StreamsGroupState.ASSIGNING
    assert joined.heartbeat_interval == STABLE    # due in 990 ms, longer than the stable interval
    d.advance(989)
    assert d.group().state() is StreamsGroupState.ASSIGNING
    d.advance(1)                                  # no heartbeat: the timer computes the target
    group = d.group()
    assert group.target_assignment_epoch == group.group_epoch
    assert sorted(len(t.active) for t in group.target.values()) == [3, 3]


def test_when_members_are_due_is_forgotten_when_they_leave_or_are_fenced():
    """The soft table of when each member is due next holds only the group's members: a leave
    and a session timeout drop theirs (memory stays bounded by the group)."""
    d = _driver(streams_session_timeout_ms=10_000)
    app = App(d)
    for m in ("m1", "m2", "m3"):
        app.join(m, f"p{m}")
    app.settle(2)
    due = d.shard.streams_soft["app"].due_ms
    assert set(due) == {"m1", "m2", "m3"}
    assert d.hb(beat("m2", -1)).error_code == 0
    assert set(due) == {"m1", "m3"}
    d.advance(9_000)
    app.beat("m1")                       # m3 stays silent past its session
    d.advance(2_000)
    assert "m3" not in d.group().members and set(due) == {"m1"}
