"""kcoord's warm-up tasks (coordinator/group/streams/warmup.py, off by default): a stateful task
moving to a new instance stays active on its holder while the new owner restores it as a
warm-up, and moves once that owner's own report puts it within `streams.acceptable.recovery.lag`
(KIP-441's idea, as Kafka trunk's `AssignmentRefinerImpl` plans it; Kafka 4.4 assigns none).
Off, nothing changes (test_convergence's sequences, the records byte for byte)."""
from __future__ import annotations

import logging
from dataclasses import replace

import pytest
from kio.schema.errors import ErrorCode

from coordinator.group.streams import heartbeat, warmup
from coordinator.group.streams.model import MemberState, StreamsMember, Tasks
from coordinator.group.streams.offsets import MemberOffsets

from . import test_convergence
from .clients import Fleet
from .driver import REQ, Driver, beat, image, join, subtopology, topology
from .test_describe_and_migration import _describe

P = 4
TOP = topology(subtopology("0", sources=["in"], changelogs=["app-store-changelog"]), subtopology("1", sources=["s"]))
IMG = image(**{"in": P, "s": P, "app-store-changelog": P})
STATEFUL = {("0", p) for p in range(P)}
ALL = STATEFUL | {("1", p) for p in range(P)}
LAG = 100
INTERVAL = 15_000
ON = {"streams_warmups_enabled": True, "streams_initial_rebalance_delay_ms": 0, "streams_assignment_interval_ms": 0,
      "streams_acceptable_recovery_lag": LAG, "streams_task_offset_interval_ms": INTERVAL}
LONG_MAX = 2**63 - 1
NONE3: tuple = (set(), set(), set())


def _offsets(pairs) -> tuple:
    return tuple(REQ.TaskOffset(subtopology_id=s, partition=p, offset=o) for (s, p), o in sorted(pairs.items()))


class App:
    """Members as the tests drive them: each one's epoch and the tasks it reports holding
    (it reconciles at once: what it was handed is what it holds next)."""

    def __init__(self, d: Driver) -> None:
        self.d = d
        self.epoch: dict[str, int] = {}
        self.held: dict[str, tuple] = {}

    def _take(self, mid: str, a) -> None:
        assert a.error_code == ErrorCode.none, a.error_message
        self.epoch[mid] = a.member_epoch
        if a.active_tasks is not None:
            self.held[mid] = tuple(a.tasks(k) or set() for k in ("active", "standby", "warmup"))

    def join(self, mid: str, process: str):
        a = self.d.hb(join(mid, process, TOP))
        self._take(mid, a)
        return a

    def beat(self, mid: str, offsets=None, ends=None):
        req = beat(mid, self.epoch[mid], self.held.get(mid, NONE3))
        if offsets is not None or ends is not None:
            req = replace(req, task_offsets=None if offsets is None else _offsets(offsets),
                          task_end_offsets=None if ends is None else _offsets(ends))
        a = self.d.hb(req)
        self._take(mid, a)
        return a

    def member(self, mid: str):
        return self.d.group().members[mid]

    def settle(self, *mids: str, rounds: int = 6) -> None:
        for _ in range(rounds):
            for mid in mids:
                self.beat(mid)
                check(self.d)


def check(d: Driver, budget: int | None = None) -> None:
    """No task active on two members, no process holding a task twice, the warm-ups within
    the budget."""
    active: set = set()
    per_process: set = set()
    warmups = 0
    for m in d.group().members.values():
        for t in m.assigned.active | m.pending_revocation.active:
            assert t not in active, t
            active.add(t)
        for kind in ("active", "standby", "warmup"):
            for t in getattr(m.assigned, kind) | getattr(m.pending_revocation, kind):
                assert (m.process_id, t) not in per_process, (m.process_id, t)
                per_process.add((m.process_id, t))
        warmups += len(m.assigned.warmup)
    if budget is not None:
        assert warmups <= budget


def _scaled_out(budget: int | None = None, second_process: str = "pb") -> tuple[App, set]:
    """`a` runs every task; `b` joins: the assignor's target moves half of them to `b`."""
    d = Driver(IMG, **ON, **({} if budget is None else {"streams_num_warmup_replicas": budget}))
    app = App(d)
    assert app.join("a", "pa").tasks() == ALL
    app.beat("a")                                       # running: no offsets for its actives
    app.join("b", second_process)
    moving = d.group().target["b"].active
    assert len(moving) == len(ALL) // 2
    return app, moving


def test_off_by_default_and_kafkas_default_budget_does_not_turn_it_on():
    d = Driver(IMG, streams_initial_rebalance_delay_ms=0)
    settings = heartbeat.group_settings(d.shard, "app")
    assert settings.num_warmup_replicas == 2 and not settings.warmups_enabled and not warmup.enabled(settings)


def test_scale_out_keeps_the_active_on_its_holder_until_the_new_owner_caught_up():
    app, moving = _scaled_out()
    d = app.d
    stateful_moving = sorted(moving & STATEFUL)
    assert len(stateful_moving) == 2
    app.beat("b")
    # the stateless tasks move at once; the stateful ones are warm-ups on b, active on a
    assert app.member("b").assigned.warmup == set(stateful_moving)
    assert app.member("b").assigned.active <= moving - STATEFUL
    app.settle("a", "b")
    assert app.member("a").assigned.active == ALL - (moving - STATEFUL)
    assert app.member("b").assigned.active == moving - STATEFUL
    # records 20/21 and the describe's TargetAssignment stay the assignor's; the current
    # assignment (record 22) shows the warm-ups
    (group,) = _describe(d, "app").groups
    (mb,) = [m for m in group.members if m.member_id == "b"]
    assert {(t.subtopology_id, p) for t in mb.target_assignment.active_tasks for p in t.partitions} == moving
    assert {(t.subtopology_id, p) for t in mb.assignment.warmup_tasks for p in t.partitions} == set(stateful_moving)
    assert d.group().target["b"].warmup == set()
    first, second = stateful_moving
    epoch = d.group().group_epoch
    app.beat("b", offsets={first: 0, second: 0}, ends={first: 1_000, second: 1_000})      # lag 1000 > 100
    assert d.group().group_epoch == epoch
    app.beat("b", offsets={first: 900, second: 0}, ends={first: 1_000, second: 1_000})    # first: lag 100
    assert d.group().group_epoch == epoch + 1 == d.group().target_assignment_epoch     # one bump, target at once
    app.settle("a", "b")
    assert app.member("b").assigned.active == (moving - STATEFUL) | {first}
    assert app.member("b").assigned.warmup == {second}
    assert app.member("a").assigned.active == ALL - (moving - STATEFUL) - {first}
    app.beat("b", offsets={second: 1_000}, ends={second: 1_000})
    app.settle("a", "b")
    assert app.member("b").assigned.active == moving and app.member("a").assigned.active == ALL - moving
    assert not app.member("b").assigned.warmup and app.d.group().state().value == "Stable"


def test_the_budget_bounds_the_warmups_in_flight_and_parked_moves_follow():
    app, moving = _scaled_out(budget=1)
    stateful_moving = sorted(moving & STATEFUL)
    app.settle("a", "b")
    check(app.d, budget=1)
    (warming,) = app.member("b").assigned.warmup
    assert warming == stateful_moving[0]            # in task order
    parked = stateful_moving[1]
    assert parked in app.member("a").assigned.active
    app.beat("b", offsets={warming: 10}, ends={warming: 10})
    app.settle("a", "b")
    check(app.d, budget=1)
    assert warming in app.member("b").assigned.active and app.member("b").assigned.warmup == {parked}


def test_a_move_within_one_process_is_immediate():
    app, moving = _scaled_out(second_process="pa")       # another stream thread of a's process
    app.settle("a", "b")
    assert app.member("b").assigned.active == moving and not app.member("b").assigned.warmup


def test_the_probe_timer_bumps_the_epoch_at_the_task_offset_interval():
    app, _ = _scaled_out()
    app.settle("a", "b")
    d = app.d
    key = warmup.warmup_key("app")
    assert key in d.timers
    epoch = d.group().group_epoch
    d.advance(d.timers[key][0] - d.now_ms - 1)
    assert d.group().group_epoch == epoch
    d.advance(1)
    assert d.group().group_epoch == epoch + 1 == d.group().target_assignment_epoch
    app.settle("a", "b")                             # nothing caught up: still held back, probed again
    assert d.timers[key][0] == d.now_ms + 2 * INTERVAL          # the same moves held: the delay doubles


def test_the_probe_backs_off_to_ten_minutes_while_the_same_moves_stay_held():
    app, _ = _scaled_out()
    app.settle("a", "b")
    d = app.d
    key = warmup.warmup_key("app")
    delays = []
    for _ in range(8):
        due = d.timers[key][0]
        delays.append(due - d.now_ms)
        while d.now_ms < due:                       # the members heartbeat meanwhile
            d.advance(min(5_000, due - d.now_ms))
            app.settle("a", "b", rounds=1)
    assert delays == [INTERVAL * 2**i for i in range(6)] + [warmup.PROBE_MAX_MS] * 2, delays
    t = sorted(app.member("b").assigned.warmup)[0]
    app.beat("b", offsets={t: 1_000}, ends={t: 1_000})     # a move caught up: bumped now, not at the probe
    app.settle("a", "b")
    assert t in app.member("b").assigned.active
    assert d.timers[key][0] - d.now_ms == INTERVAL          # other moves held: the delay starts again


def test_a_holder_leaving_while_its_task_warms_hands_it_to_the_new_owner():
    app, moving = _scaled_out()
    app.settle("a", "b")
    assert app.member("b").assigned.warmup
    assert app.d.hb(beat("a", -1)).error_code == ErrorCode.none
    app.settle("b")
    assert app.member("b").assigned.active == ALL and not app.member("b").assigned.warmup


@pytest.mark.parametrize(("offset", "end"), [
    (-1, 0), (-5, -1), (0, LONG_MAX), (LONG_MAX, LONG_MAX), (LONG_MAX - 1, LONG_MAX), (None, 0), (0, None)])
def test_hostile_offsets_never_promote(offset, end):
    app, moving = _scaled_out()
    app.settle("a", "b")
    (t, _) = sorted(app.member("b").assigned.warmup)
    epoch = app.d.group().group_epoch
    offsets = {("9", 0): 0, ("0", P + 3): 0, ("1", 0): 0}
    ends = dict(offsets)
    if offset is not None:
        offsets[t] = offset
    if end is not None:
        ends[t] = end
    app.beat("b", offsets=offsets, ends=ends)
    app.settle("a", "b")
    assert app.d.group().group_epoch == epoch
    assert t in app.member("a").assigned.active and t in app.member("b").assigned.warmup


def test_a_stateless_or_fresh_task_is_never_held_back():
    """The first target (nobody holds anything) and stateless tasks are reconciled as the target."""
    d = Driver(IMG, **{**ON, "streams_initial_rebalance_delay_ms": 3_000})
    app = App(d)
    app.join("a", "pa")
    app.join("b", "pb")
    d.advance(3_000)
    app.settle("a", "b")
    assert app.member("a").assigned.active and app.member("b").assigned.active
    for mid in ("a", "b"):
        assert app.member(mid).assigned == d.group().target[mid]


# ---------------------------------------------------------------------- the switch off

def test_off_the_refinement_is_never_reached_and_the_records_are_the_same(monkeypatch):
    """test_convergence's sequences (ten instances, then an eleventh) give the same figures and
    the same records, byte for byte, whatever `streams.num.warmup.replicas` is, with the
    refinement made to fail if anything reached it."""
    def unreachable(*_a, **_k):
        raise AssertionError("warm-ups reached with the switch off")

    logs = []
    for budget in (2, 20):
        figures = [test_convergence.scenario(streams_num_warmup_replicas=budget),
                   test_convergence.scenario(report_offsets=True, streams_num_warmup_replicas=budget)]
        d, _, _ = test_convergence._started(10, 37, 20, {"streams_num_warmup_replicas": budget}, True)
        logs.append((figures, d.log))
    monkeypatch.setattr(heartbeat, "refined", unreachable)
    monkeypatch.setattr(heartbeat, "reported_caught_up", unreachable)
    figures = [test_convergence.scenario(), test_convergence.scenario(report_offsets=True)]
    d, _, _ = test_convergence._started(10, 37, 20, {}, True)
    assert all(entry == (figures, d.log) for entry in logs)
    assert figures[0]["join_moves"] == 5


def test_with_the_switch_on_and_no_offsets_reported_the_convergence_join_parks_its_moves():
    """On, the same join keeps the joiner's stateful tasks on their holders while it warms
    them: the stateless ones move, the stateful ones wait for reports that never come."""
    on = test_convergence.scenario(streams_warmups_enabled=True)
    off = test_convergence.scenario()
    assert on["join_moves"] < off["join_moves"]


def test_the_member_state_while_warming_is_stable():
    app, _ = _scaled_out()
    app.settle("a", "b")
    assert app.member("b").state is MemberState.STABLE and app.member("a").state is MemberState.STABLE


# ---------------------------------------------------------------------- simulated 4.4 clients

CHANGELOG = 5_000       # records per stateful task's changelog
RATE = 1                # records restored per ms


def test_simulated_clients_scale_out_moves_a_stateful_task_only_once_its_new_owner_restored_it(caplog):
    """Simulated Streams 4.4 clients (clients.py) restoring at a simulated rate and reporting
    their offsets by the 4.4 rules: the first instance restores and runs everything, a second
    joins. Its stateful tasks run as warm-ups on it and stay active on the first until its own
    report puts them within the lag; then one epoch bump moves them (both warm-ups restore at
    the same rate), well before the probe timer, and no task is ever active twice (the fleet
    checks it at every reconciliation)."""
    d = Driver(IMG, **{**ON, "streams_task_offset_interval_ms": 60_000})
    fleet = Fleet(d, TOP, callback_ms=20, restore_per_ms=RATE, changelog=CHANGELOG)
    first = fleet.start("a", "pa")
    fleet.run_until(lambda: fleet.stable(ALL) and all(first.restored.get(t) == CHANGELOG for t in STATEFUL))
    joined_at = d.now_ms
    second = fleet.start("b", "pb")
    fleet.run_until(lambda: second.heartbeats > 0)
    epoch = d.group().group_epoch
    moving = d.group().target["b"].active & STATEFUL
    started: dict = {}

    def done() -> bool:      # notes when each moving task starts on the second, and its restore
        for t in second.current[0] & moving - started.keys():
            started[t] = (d.now_ms, second.restored.get(t, 0))
        if d.group().group_epoch == epoch:     # until the bump, the first runs them
            assert moving <= first.current[0] and moving <= second.current[2] | second.target[2]
        return fleet.stable(ALL) and moving <= second.current[0]

    with caplog.at_level(logging.DEBUG, logger="kcoord.streams.membership"):
        fleet.run_until(done, limit_ms=30_000)
    promotions = [r.getMessage() for r in caplog.records if "promotes task" in r.getMessage()]
    assert len(promotions) == len(moving), promotions          # one DEBUG line per promotion
    assert started.keys() == moving
    for t, (when, restored) in started.items():
        assert CHANGELOG - restored <= LAG, (t, restored)
        assert when - joined_at >= (CHANGELOG - LAG) // RATE
        assert t not in first.current[0]
    assert min(when for when, _ in started.values()) - joined_at < INTERVAL   # not the probe
    assert d.group().group_epoch == epoch + 1          # one bump moved both


def test_the_warming_member_leaving_leaves_the_task_where_it_runs():
    app, moving = _scaled_out()
    app.settle("a", "b")
    assert app.d.hb(beat("b", -1)).error_code == ErrorCode.none
    app.settle("a")
    assert app.member("a").assigned == Tasks(active=frozenset(ALL)) == app.d.group().target["a"]


# ---------------------------------------------------------------------- the refinement alone

T0, T1 = ("0", 0), ("0", 1)


def _member(mid: str, process: str, active=(), standby=(), warm=()) -> StreamsMember:
    return StreamsMember(mid, process_id=process, assigned=Tasks(frozenset(active), frozenset(standby),
                                                                 frozenset(warm)))


def _refine(members, target, offsets=None, budget=2, moved=None):
    """(assignment, held, promoted) of one refinement."""
    by_id = {m.member_id: m for m in members}
    r = warmup.refine(by_id, target, offsets or {}, frozenset({"0"}), budget, LAG, moved)
    return r.assignment, r.held, r.promoted


def test_a_standby_on_the_new_owner_warms_it_without_budget():
    members = [_member("h", "ph", active=[T0, T1]), _member("o", "po", standby=[T0])]
    assignment, held, _ = _refine(members, {"h": Tasks(frozenset({T1})), "o": Tasks(frozenset({T0}))}, budget=0)
    assert assignment["h"] == Tasks(frozenset({T0, T1}))
    assert assignment["o"] == Tasks(standby=frozenset({T0}))
    assert held == {T0: "po"}


def test_with_the_holder_gone_the_caught_up_standby_keeps_the_task_active():
    members = [_member("s", "ps", standby=[T0]), _member("z", "pz", standby=[T0]), _member("o", "po")]
    offsets = {"s": MemberOffsets({T0: 950}, {T0: 1_000}), "z": MemberOffsets({T0: 990}, {T0: 1_000})}
    target = {"s": Tasks(standby=frozenset({T0})), "z": Tasks(), "o": Tasks(frozenset({T0}))}
    assignment, held, _ = _refine(members, target, offsets)
    assert assignment["z"].active == {T0} and not assignment["z"].standby     # the least lag
    assert assignment["s"] == Tasks(standby=frozenset({T0}))
    assert assignment["o"] == Tasks(warmup=frozenset({T0}))
    assert held == {T0: "po"}


def test_a_caught_up_new_owner_takes_the_task_at_once_and_the_promotion_is_reported():
    members = [_member("h", "ph", active=[T0]), _member("o", "po", warm=[T0])]
    offsets = {"o": MemberOffsets({T0: 1_000}, {T0: 1_000})}
    target = {"h": Tasks(), "o": Tasks(frozenset({T0}))}
    assignment, held, promoted = _refine(members, target, offsets)
    assert assignment == target and held == {} and promoted == [(T0, "o")]


def test_turning_warmups_off_under_a_plan_hands_the_held_moves_over():
    app, moving = _scaled_out()
    app.settle("a", "b")
    assert app.member("b").assigned.warmup
    epoch = app.d.group().group_epoch
    app.d.config.streams_num_warmup_replicas = 0      # as the group's streams.num.warmup.replicas=0
    app.settle("a", "b")
    assert app.d.group().group_epoch == epoch + 1
    assert app.member("b").assigned == app.d.group().target["b"] and app.member("b").assigned.active == moving
