"""A member waiting for unreleased tasks under kcoord's adaptive policy: it comes back once
every holder was told to revoke them, and the released tasks are handed together, not one
holder's at a time (coordinator/group/streams/release.py); for at most the stable interval,
never while a holder has not been told, and never under Kafka's fixed policy."""
from __future__ import annotations

from datetime import timedelta

from coordinator.group.streams.model import MemberState, StreamsGroupState

from .driver import Driver
from .test_heartbeat import App
from .test_heartbeat_interval import PENDING, _driver

M1_TASK, M2_TASK = ("0", 2), ("0", 5)    # what m3's target takes from m1 and from m2


def _third_joins(d: Driver) -> tuple[App, timedelta]:
    """m1 and m2 share the six tasks (m2 due 500 ms after the settling round, m1 550 ms: it
    heartbeat 50 ms later); m3 joins 200 ms after that round, its target one task of each;
    the interval m3 is told."""
    app = App(d)
    app.join("m1", "p1")
    app.join("m2", "p2")
    app.settle()
    d.advance(50)
    app.beat("m1")
    d.advance(150)
    told = app.join("m3", "p3").heartbeat_interval
    assert d.group().target["m3"].active == {M1_TASK, M2_TASK}
    assert d.group().members["m3"].state is MemberState.UNRELEASED_TASKS
    return app, told


def _both_told(d: Driver, app: App) -> None:
    d.advance(300)
    for m in ("m1", "m2"):
        app.beat(m)
        assert d.group().members[m].state is MemberState.UNREVOKED_TASKS


def test_the_released_tasks_come_together_once_every_holder_acknowledged():
    d = _driver()
    app, told = _third_joins(d)
    # back a short interval after the last holder is due (m1, in 350 ms), not after the first
    assert told == timedelta(milliseconds=450)
    _both_told(d, app)
    app.beat("m1")                                   # m1 acknowledges: its task is free
    assert d.group().members["m1"].state is MemberState.STABLE
    waiting = app.beat("m3")
    assert waiting.active_tasks is None and d.group().members["m3"].assigned.active == set()
    assert waiting.heartbeat_interval == PENDING
    app.beat("m2")
    both = app.beat("m3")
    assert both.tasks() == {M1_TASK, M2_TASK}
    app.settle()
    assert d.group().state() is StreamsGroupState.STABLE


def test_a_holder_not_told_yet_does_not_hold_the_released_ones_back():
    d = _driver()
    app, _ = _third_joins(d)
    d.advance(300)
    app.beat("m1")                                   # told
    app.beat("m1")                                   # acknowledged; m2 has not heartbeat since
    assert d.group().members["m2"].state is MemberState.STABLE
    assert app.beat("m3").tasks() == {M1_TASK}


def test_released_tasks_are_held_back_for_at_most_the_stable_interval():
    d = _driver()
    app, _ = _third_joins(d)
    _both_told(d, app)
    app.beat("m1")
    assert app.beat("m3").active_tasks is None       # held back from here
    d.advance(400)
    assert app.beat("m3").active_tasks is None
    d.advance(100)                                   # m2 still has not acknowledged
    assert app.beat("m3").tasks() == {M1_TASK}


def test_kafkas_fixed_policy_hands_each_released_task_at_once():
    d = _driver(consumer_heartbeat_policy="fixed")
    app, _ = _third_joins(d)
    _both_told(d, app)
    app.beat("m1")
    assert app.beat("m3").tasks() == {M1_TASK}


def test_a_replaced_static_member_leaves_nothing_keyed_by_its_id():
    """A static member that leaves with -2 and rejoins under a new member id, again and again:
    the soft state keyed by member id (due times, held-back starts) keeps none of the old ids."""
    from coordinator.group.streams.membership import soft_of

    from .driver import beat, join
    from .test_heartbeat import TOP

    d = _driver()
    app = App(d)
    app.join("m1", "p1")
    app.settle()
    soft = soft_of(d.shard, "app")
    mid = "s0"
    d.hb(join(mid, "p2", TOP, instance_id="i1"))
    for n in range(1, 50):
        soft.held_back_since[mid] = 0            # as if a hold were in progress for it
        assert d.hb(beat(mid, -2, instance_id="i1")).error_code == 0
        mid = f"s{n}"
        assert d.hb(join(mid, "p2", TOP, instance_id="i1")).error_code == 0
    gone = {f"s{n}" for n in range(49)}
    assert gone.isdisjoint(soft.held_back_since) and gone.isdisjoint(soft.due_ms)
