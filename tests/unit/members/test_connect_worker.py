"""members/connect/worker.py against the connect group's coordinator core (a simulated clock,
tests/unit/connect/driver.py): the worker state machine, and C11's scenario in simulation:
three workers run two connectors with three tasks each; one is killed; no unit is ever
owned twice, and the lost units run again after the session timeout plus the scheduled
delay (3 s and 2 s here; Connect's default delay is five minutes)."""
from __future__ import annotations

import pytest

from coordinator.config import CoordinatorConfig
from members.connect.assignor import IncrementalCooperativeAssignor
from members.connect.worker import Assign, Compute, ConnectWorker, Lost, Revoke, State

from ..connect.driver import ConnectContext

UNITS = [(c, t) for c in ("c1", "c2") for t in (-1, 0, 1, 2)]


class Cluster:
    def __init__(self, n: int, *, session_ms=3_000, delay_ms=2_000) -> None:
        self.ctx = ConnectContext(config=CoordinatorConfig(consumer_session_timeout_ms=session_ms))
        self.workers = {f"w{i}": ConnectWorker("g", IncrementalCooperativeAssignor(
            lambda: UNITS, url=f"http://w{i}", scheduled_rebalance_max_delay_ms=delay_ms), member_id=f"w{i}")
            for i in range(1, n + 1)}
        self.running: dict[tuple[str, int], str] = {}       # unit -> the worker running it
        self.dead: set[str] = set()

    def _act(self, w: ConnectWorker, actions) -> None:
        now = self.ctx.now_ms
        while actions:
            a = actions.pop(0)
            if isinstance(a, Revoke):
                for u in a.units:
                    assert self.running.pop(u) == w.member_id
                actions += w.revoked(now)
            elif isinstance(a, Assign):
                for u in a.units:
                    owner = self.running.setdefault(u, w.member_id)
                    assert owner == w.member_id, f"{u} started on {w.member_id} while {owner} runs it"
                actions += w.assigned(now)
            elif isinstance(a, Lost):
                for u in a.units:
                    self.running.pop(u, None)
            elif isinstance(a, Compute):
                prep = self.ctx.send_prepare(w.prepare_request())
                install = w.on_prepare(prep, now)
                if install is not None:
                    w.on_install(self.ctx.send_install(install), now)

    def step(self, ms: int = 50) -> None:
        for m, w in self.workers.items():
            if m in self.dead:
                continue
            req = w.poll(self.ctx.now_ms)
            if req is not None:
                self._act(w, w.on_heartbeat(self.ctx.send_cgh(req), self.ctx.now_ms))
        self.ctx.advance(ms)

    def run(self, ms: int) -> None:
        for _ in range(ms // 50):
            self.step()

    def kill(self, member_id: str) -> None:
        self.dead.add(member_id)
        for u, owner in list(self.running.items()):
            if owner == member_id:
                del self.running[u]           # the process died with its units

    def stable(self) -> bool:
        return sorted(self.running) == sorted(UNITS) and \
            all(w.state is State.STABLE for m, w in self.workers.items() if m not in self.dead)


def test_three_workers_share_the_units():
    c = Cluster(3)
    c.run(3_000)
    assert c.stable()
    per_worker = {m: sum(1 for o in c.running.values() if o == m) for m in c.workers}
    assert sorted(per_worker.values()) == [2, 3, 3]
    d = c.ctx.describe("g").groups[0]
    assert d.group_state == "Stable" and len(d.members) == 3


@pytest.mark.parametrize("kill_assigner", [True, False], ids=["assigner", "other"])
def test_c11_in_simulation_kill_one_worker(kill_assigner):
    c = Cluster(3, session_ms=3_000, delay_ms=2_000)
    c.run(3_000)
    assert c.stable()
    assigner = c.ctx.group("g").client_assignment.last_assigner
    victim = assigner if kill_assigner else next(m for m in sorted(c.workers) if m != assigner)
    assert any(o == victim for o in c.running.values())
    lost = {u for u, o in c.running.items() if o == victim}
    killed_at = c.ctx.now_ms
    c.kill(victim)
    while c.ctx.now_ms < killed_at + 4_400:       # session (>= 2.5 s after the last heartbeat) + delay
        c.step()
        assert not (lost & set(c.running)), "lost units must wait for the session timeout and the delay"
    while not c.stable() and c.ctx.now_ms < killed_at + 7_000:
        c.step()
    assert c.stable(), f"lost units not running again by {c.ctx.now_ms - killed_at} ms"
    assert lost <= set(c.running) and victim not in c.running.values()


def test_a_new_worker_gets_units_only_after_they_were_revoked():
    c = Cluster(2)
    c.run(2_000)
    assert c.stable()
    c.workers["w9"] = ConnectWorker("g", IncrementalCooperativeAssignor(lambda: UNITS), member_id="w9")
    c.run(2_000)                                   # every Assign asserted single ownership
    assert c.stable() and "w9" in c.running.values()


def test_a_fenced_worker_loses_its_units_and_rejoins():
    c = Cluster(2, session_ms=3_000)
    c.run(2_000)
    c.dead.add("w2")                               # paused, not dead: it will come back
    c.run(3_500)
    assert "w2" not in c.ctx.group("g").members
    c.dead.discard("w2")
    w2 = c.workers["w2"]
    actions = w2.on_heartbeat(c.ctx.send_cgh(w2.poll(c.ctx.now_ms) or w2._request()), c.ctx.now_ms)
    assert any(isinstance(a, Lost) for a in actions) and w2.member_epoch == 0
    for u, o in list(c.running.items()):
        if o == "w2":
            del c.running[u]
    c.run(4_000)
    assert "w2" in c.ctx.group("g").members


def test_leave_revokes_first_then_sends_epoch_minus_one():
    c = Cluster(1)
    c.run(1_000)
    w = c.workers["w1"]
    actions = w.leave(c.ctx.now_ms)
    assert isinstance(actions[0], Revoke) and w.poll(c.ctx.now_ms + 10_000) is None
    w.revoked(c.ctx.now_ms)
    req = w.poll(c.ctx.now_ms)
    assert req.member_epoch == -1
    w.on_heartbeat(c.ctx.send_cgh(req), c.ctx.now_ms)
    assert w.state is State.LEFT and c.ctx.group("g").is_empty()
