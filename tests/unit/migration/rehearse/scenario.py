"""Hand-built Observations of a small rehearsal, so the analysis can be tested without processes.

Times are given in seconds and stored as ns since T0 (the analysis reports seconds since t0).
"""
from __future__ import annotations

from migration.rehearse.group_admin import GroupView, MemberView
from migration.rehearse.observations import MemberLog, Observations, StepLog
from migration.rehearse.plan import RehearsalPlan, rolling_schedule
from migration.rehearse.probe import GroupSample
from migration.rehearse.producer import Delivered

T0 = 1_000_000_000_000
RUN = "abcd1234"


def ns(seconds: float) -> int:
    return T0 + int(seconds * 1e9)


def plan(members: int = 2, round_trip: bool = False, direction: str = "upgrade") -> RehearsalPlan:
    return RehearsalPlan(direction, "127.0.0.1:29700", members=members, round_trip=round_trip,  # type: ignore[arg-type]
                         topic="t", group="g", run_id=RUN)


def view(group_type: str, state: str = "Stable", epoch: int | None = None, members: tuple = ()) -> GroupView:
    return GroupView(group_type, state, epoch, epoch, tuple(members))


def member_view(client_id: str, protocol: str, epoch: int | None = None, parts: tuple[int, ...] = ()) -> MemberView:
    return MemberView(f"id-{client_id}", client_id, protocol, epoch, parts)


def sample(t: float, v: GroupView, offsets: dict[int, int] | None) -> GroupSample:
    return GroupSample(ns(t), v, offsets)


def record(t: float, value: str, partition: int = 0, offset: int = 0) -> dict:
    return {"t": ns(t), "event": "record", "topic": "t", "partition": partition, "offset": offset, "value": value}


def ev(t: float, kind: str, **fields) -> dict:
    return {"t": ns(t), "event": kind, **fields}


def upgrade_of_two() -> tuple[RehearsalPlan, Observations]:
    """Two members, two partitions: m0 and m1 classic, then m0 and m1 restarted with consumer.

    The group converts at 10.3 s (m0's consumer incarnation joined at 10.1 s)."""
    p = plan()
    steps = rolling_schedule(p)
    obs = Observations(plan={}, topic="t", group="g", partitions=2, t0_ns=T0, started_at="2026-01-01T00:00:00+00:00")
    obs.steps = [
        StepLog(steps[0], ns(9.0), ns(10.0), ns(10.1), ns(12.0), {0: 5, 1: 5}, {0: 8, 1: 7}),
        StepLog(steps[1], ns(15.0), ns(16.0), ns(16.1), ns(18.0), {0: 10, 1: 10}, {0: 12, 1: 12}),
    ]
    values = [f"{RUN}-{i:07d}" for i in range(6)]
    obs.delivered = [Delivered(v, i % 2, i // 2, ns(1 + i)) for i, v in enumerate(values)]
    obs.members = [
        MemberLog(0, 0, "classic", "rehearse-m0.0", [
            ev(0, "spawned"), ev(1, "ready"), ev(2, "assigned", partitions=[["t", 0]]),
            record(3, values[0]), ev(9.0, "close_requested"), ev(9.5, "revoked", partitions=[["t", 0]]),
            ev(10.0, "exited")]),
        MemberLog(1, 0, "classic", "rehearse-m1.0", [
            ev(0, "spawned"), ev(2, "assigned", partitions=[["t", 1]]), record(4, values[1]),
            record(5, values[2]), ev(15.0, "close_requested"), ev(16.0, "exited")]),
        MemberLog(0, 1, "consumer", "rehearse-m0.1", [
            ev(10.1, "spawned"), ev(11.0, "assigned", partitions=[["t", 0]]), record(13, values[3]),
            record(13.5, values[3]), ev(20, "exited")]),
        MemberLog(1, 1, "consumer", "rehearse-m1.1", [
            ev(16.1, "spawned"), ev(17.0, "assigned", partitions=[["t", 1]]), record(19, values[4]),
            ev(20, "exited")]),
    ]
    classic2 = (member_view("rehearse-m0.0", "classic"), member_view("rehearse-m1.0", "classic"))
    obs.samples = [
        sample(1.0, view("classic", "PreparingRebalance", members=classic2), {}),
        sample(3.0, view("classic", members=classic2), {0: 1, 1: 2}),
        sample(9.8, view("classic", "PreparingRebalance", members=classic2[1:]), {0: 5, 1: 5}),
        sample(10.3, view("consumer", epoch=2, members=(member_view("rehearse-m0.1", "consumer", 2, (0,)),
                                                         member_view("rehearse-m1.0", "classic", 2, (1,)))),
               {0: 6, 1: 6}),
        sample(12.5, view("consumer", epoch=3), {0: 8, 1: 7}),
        sample(19.0, view("consumer", epoch=5), {0: 20, 1: 30}),
    ]
    obs.t_first_stable, obs.t_end = ns(3.0), ns(20.0)
    obs.final_offsets = {0: 3, 1: 3}
    return p, obs
