"""Warm-ups (warmup.py) over time, with the simulated Kafka Streams 4.4 clients (clients.py:
they restore at a rate and report TaskOffsets / TaskEndOffsets by the 4.4 rules).

- A move a plan let through stands: the new owner's report drops the task's end offset once
  its warm-up is revoked for the move, and a next plan that held the task back again handed
  it back and forth, one group epoch per report (a scale-out 1 -> 2 took 129 epochs and
  345 s; with `streams.assignment.interval.ms` = 0, 1,000 epochs in no time).
- Random scale-outs, leaves and kills always converge to the assignor's target, with the
  switch on as off.
- A reload (the plan is soft) does not undo a move under way; an emptied group keeps no plan;
  a report one above its end offset, as a caught-up 4.4 client sends, is caught up.
"""
from __future__ import annotations

import random

import pytest

from coordinator.group.result import Result
from coordinator.group.streams.membership import soft_of
from coordinator.group.streams.model import StreamsGroupState

from .clients import Fleet
from .driver import Driver, beat, image, subtopology, topology
from .test_warmups import STATEFUL, _scaled_out, check

P = 6
TOP = topology(subtopology("0", sources=["in"], changelogs=["c0"]), subtopology("1", sources=["s"]),
               subtopology("2", sources=["t"], changelogs=["c2"]))
IMG = image(**{"in": P, "s": P, "t": P, "c0": P, "c2": P})
TASKS = {(s, p) for s in "012" for p in range(P)}
STATEFUL_ANY = {(s, p) for s in "02" for p in range(P)}
BASE = dict(streams_warmups_enabled=True, streams_initial_rebalance_delay_ms=0, streams_acceptable_recovery_lag=100,
            streams_task_offset_interval_ms=15_000, streams_session_timeout_ms=10_000)


class Fleet2(Fleet):
    """The simulated clients, with leaves, and a convergence check against the assignor's target."""

    def leave(self, member: str) -> None:
        self.clients.pop(member)
        self.d.hb(beat(member, -1))

    def converged(self) -> bool:
        group = self.d.shard.groups.get("app")
        if (group is None or group.state() is not StreamsGroupState.STABLE
                or group.group_epoch != group.target_assignment_epoch):
            return False
        for c in self.clients.values():
            m = group.members.get(c.member)
            if (m is None or c.reconciling is not None or c.current != tuple(frozenset(x) for x in m.assigned)
                    or m.assigned != group.target.get(c.member)):
                return False
        return sorted(t for c in self.clients.values() for t in c.current[0]) == sorted(TASKS)


@pytest.mark.parametrize("policy", ["fixed", "adaptive"])
@pytest.mark.parametrize("standbys", [0, 1])
def test_a_scale_out_converges_in_a_few_epochs(policy, standbys):
    d = Driver(IMG, **BASE, consumer_heartbeat_policy=policy, streams_num_standby_replicas=standbys)
    fleet = Fleet2(d, TOP, callback_ms=20, restore_per_ms=1, changelog=3_000)
    fleet.start("a", "pa")
    fleet.run_until(fleet.converged, limit_ms=60_000)
    epoch = d.group().group_epoch
    fleet.start("b", "pb")
    fleet.run_until(fleet.converged, limit_ms=120_000)
    assert d.group().group_epoch - epoch < 10
    assert d.group().members["b"].assigned.active & STATEFUL_ANY


def test_no_epoch_storm_without_an_assignment_interval():
    d = Driver(IMG, **BASE, streams_num_warmup_replicas=2, streams_num_standby_replicas=1,
               streams_assignment_interval_ms=0)
    fleet = Fleet2(d, TOP, callback_ms=0, restore_per_ms=1, changelog=3_000)
    fleet.start("m0", "p0")
    fleet.run_until(lambda: d.now_ms >= 1_030_000)
    fleet.start("m1", "p2")
    fleet.run_until(lambda: d.now_ms >= 1_032_000)
    fleet.leave("m1")
    fleet.run_until(lambda: d.now_ms >= 1_034_000)
    fleet.start("m2", "p1")
    fleet.run_until(lambda: d.now_ms >= 1_036_000)
    fleet.clients.pop("m0")                                  # killed: silent until its session runs out
    start_ms, start_epoch = d.now_ms, d.group().group_epoch
    fleet.run_until(lambda: d.group().group_epoch - start_epoch >= 1_000 or d.now_ms >= start_ms + 20_000)
    assert d.group().group_epoch - start_epoch < 50


@pytest.mark.parametrize("policy", ["adaptive", "fixed"])
@pytest.mark.parametrize("seed", range(20))
def test_random_scaling_converges(seed, policy):
    rnd = random.Random(seed)
    d = Driver(IMG, **BASE, consumer_heartbeat_policy=policy, streams_num_warmup_replicas=rnd.choice((1, 2, 3)),
               streams_num_standby_replicas=rnd.choice((0, 1)),
               streams_assignment_interval_ms=rnd.choice((0, 100, 1000)))
    fleet = Fleet2(d, TOP, callback_ms=20, restore_per_ms=1, changelog=3_000)
    n = 0
    fleet.start("m0", "p0")
    fleet.run_until(fleet.converged, limit_ms=300_000)
    for _ in range(10):
        r = rnd.random()
        if len(fleet.clients) > 1 and r < 0.25:
            fleet.leave(rnd.choice(sorted(fleet.clients)))
        elif len(fleet.clients) > 1 and r < 0.45:
            fleet.clients.pop(rnd.choice(sorted(fleet.clients)))      # killed: its session runs out
        else:
            for _ in range(rnd.choice((1, 2))):
                n += 1
                fleet.start(f"m{n}", f"p{rnd.randrange(4)}")
        e0 = d.group().group_epoch
        fleet.run_until(fleet.converged, limit_ms=300_000)
        assert d.group().group_epoch - e0 < 60, "epoch bumps"


def test_a_reload_does_not_undo_a_move_under_way():
    app, moving = _scaled_out()
    d = app.d
    app.settle("a", "b")
    first, second = sorted(moving & STATEFUL)
    app.beat("b", offsets={first: 950, second: 0}, ends={first: 1_000, second: 1_000})   # caught up on `first`
    old_a = app.held["a"]
    a = d.hb(beat("a", app.epoch["a"], old_a))               # told to revoke `first`, not yet done
    app.epoch["a"] = a.member_epoch
    assert first in d.group().members["a"].pending_revocation.active
    d.shard = d.reloaded()                                   # the plan and the reports are gone
    d.timers = {}
    d.apply(Result(timers=d.shard.on_loaded(d.now_ms)))
    app.held["a"] = (set(old_a[0]) - {first}, set(old_a[1]), set(old_a[2]))
    app.settle("a", "b")
    check(d)
    assert first in d.group().members["b"].assigned.active


def test_an_emptied_group_keeps_no_plan():
    app, _ = _scaled_out()
    app.settle("a", "b")
    d = app.d
    assert soft_of(d.shard, "app").warmups is not None
    assert d.hb(beat("a", -1)).error_code == 0
    assert d.hb(beat("b", -1)).error_code == 0
    assert not d.group().members and soft_of(d.shard, "app").warmups is None


def test_a_report_one_above_its_end_offset_is_caught_up():
    """What a caught-up Kafka Streams 4.4 warm-up reports (seen: offset 3, end offset 2 for a
    changelog of three records)."""
    app, _ = _scaled_out()
    app.settle("a", "b")
    t = sorted(app.member("b").assigned.warmup)[0]
    app.beat("b", offsets={t: 1_001}, ends={t: 1_000})
    app.settle("a", "b")
    assert t in app.member("b").assigned.active


def test_a_move_stands_through_a_plan_made_while_no_member_holds_the_task():
    """Plan 1 lets T move from H to O; H has revoked it and O is not yet given it when plan 2
    is made (no holder: it moves), and O's report has dropped T's end offset. Plan 3 must not
    hold T back on a caught-up standby elsewhere."""
    from coordinator.group.streams.model import StreamsMember, Tasks
    from coordinator.group.streams.offsets import MemberOffsets
    from coordinator.group.streams.warmup import refine
    t, none = ("0", 0), frozenset()

    def member(mid, pid, active=none, standby=none):
        return StreamsMember(mid, member_epoch=1, process_id=pid, assigned=Tasks(frozenset(active), frozenset(standby)))
    target = {"H": Tasks(), "O": Tasks(frozenset({t})), "S": Tasks(standby=frozenset({t}))}
    up = MemberOffsets({t: 10}, {t: 10})
    plan1 = refine({"H": member("H", "p1", active={t}), "O": member("O", "p2"), "S": member("S", "p3", standby={t})},
                   target, {"O": up, "S": up}, frozenset({"0"}), 2, 0)
    assert plan1.held == {} and plan1.moved == {t: "p2"}
    members = {"H": member("H", "p1"), "O": member("O", "p2"), "S": member("S", "p3", standby={t})}
    reports = {"O": MemberOffsets({t: 10}, {}), "S": up}
    plan2 = refine(members, target, reports, frozenset({"0"}), 2, 0, plan1.moved)
    plan3 = refine(members, target, reports, frozenset({"0"}), 2, 0, plan2.moved)
    assert plan2.held == plan3.held == {} and plan3.assignment["O"].active == {t}
