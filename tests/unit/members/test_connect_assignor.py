"""members/connect/assignor.py: KIP-415's incremental cooperative behaviour on a declarative
target: balanced, sticky, lost units held for the scheduled delay, then placed."""
from __future__ import annotations

from members.connect.assignor import IncrementalCooperativeAssignor, WorkerSpec, decode_assignment_metadata

UNITS = [(c, t) for c in ("c1", "c2") for t in (-1, 0, 1, 2)]


def _workers(targets: dict[str, frozenset]) -> dict[str, WorkerSpec]:
    return {m: WorkerSpec(m, b'{"url": "http://%s"}' % m.encode(), us) for m, us in targets.items()}


def _counts(targets):
    return {m: (sum(1 for u in us if u[1] == -1), sum(1 for u in us if u[1] != -1)) for m, us in targets.items()}


def _check_exact(targets, units):
    seen = [u for us in targets.values() for u in us]
    assert sorted(seen) == sorted(units), "every unit exactly once"


def test_first_round_spreads_connectors_and_tasks_evenly():
    a = IncrementalCooperativeAssignor(lambda: UNITS, scheduled_rebalance_max_delay_ms=2_000)
    r = a.assign("w1", _workers({"w1": frozenset(), "w2": frozenset(), "w3": frozenset()}), 0)
    _check_exact(r.targets, UNITS)
    assert sorted(_counts(r.targets).values()) == [(0, 2), (1, 2), (1, 2)]
    assert r.delay_ms == 0
    meta = decode_assignment_metadata(r.metadata["w2"])
    assert meta == {"leader": "w1", "leader_url": "http://w1", "delay_ms": 0}


def test_sticky_when_nothing_changed_and_balanced_on_a_join():
    a = IncrementalCooperativeAssignor(lambda: UNITS)
    r1 = a.assign("w1", _workers({"w1": frozenset(), "w2": frozenset()}), 0)
    r2 = a.assign("w1", _workers(r1.targets), 10)
    assert r2.targets == r1.targets
    r3 = a.assign("w1", _workers({**r1.targets, "w3": frozenset()}), 20)
    _check_exact(r3.targets, UNITS)
    assert max(t for _, t in _counts(r3.targets).values()) - min(t for _, t in _counts(r3.targets).values()) <= 1
    for m in ("w1", "w2"):           # moves only what balance needs
        assert len(r3.targets[m] & r1.targets[m]) >= len(r3.targets[m]) - 1


def test_lost_units_are_held_for_the_delay_then_placed():
    a = IncrementalCooperativeAssignor(lambda: UNITS, scheduled_rebalance_max_delay_ms=2_000)
    r = a.assign("w1", _workers({"w1": frozenset(), "w2": frozenset(), "w3": frozenset()}), 0)
    lost = r.targets["w3"]
    survivors = {m: us for m, us in r.targets.items() if m != "w3"}
    held = a.assign("w1", _workers(survivors), 1_000)
    assert held.delay_ms == 2_000
    assert not (set().union(*held.targets.values()) & lost)
    again = a.assign("w1", _workers(held.targets), 2_500)        # a round inside the delay
    assert again.delay_ms == 500 and not (set().union(*again.targets.values()) & lost)
    done = a.assign("w1", _workers(again.targets), 3_000)         # the delay is over
    assert done.delay_ms == 0
    _check_exact(done.targets, UNITS)


def test_a_worker_joining_during_the_delay_takes_the_lost_units():
    a = IncrementalCooperativeAssignor(lambda: UNITS, scheduled_rebalance_max_delay_ms=60_000)
    r = a.assign("w1", _workers({"w1": frozenset(), "w2": frozenset(), "w3": frozenset()}), 0)
    lost = r.targets["w3"]
    held = a.assign("w1", _workers({m: us for m, us in r.targets.items() if m != "w3"}), 1_000)
    assert held.delay_ms > 0
    back = a.assign("w1", _workers({**held.targets, "w3b": frozenset()}), 2_000)   # the bounced worker
    assert back.targets["w3b"] == lost and back.delay_ms == 0
    _check_exact(back.targets, UNITS)


def test_deleted_units_are_dropped_and_new_ones_placed():
    config = list(UNITS)
    a = IncrementalCooperativeAssignor(lambda: config)
    r = a.assign("w1", _workers({"w1": frozenset(), "w2": frozenset()}), 0)
    config[:] = [u for u in UNITS if u[0] != "c2"] + [("c3", -1), ("c3", 0)]
    r2 = a.assign("w1", _workers(r.targets), 10)
    _check_exact(r2.targets, config)


def test_a_new_assigner_without_memory_still_holds_lost_units():
    first = IncrementalCooperativeAssignor(lambda: UNITS, scheduled_rebalance_max_delay_ms=2_000)
    r = first.assign("w1", _workers({"w1": frozenset(), "w2": frozenset(), "w3": frozenset()}), 0)
    lost = r.targets["w1"]                                   # the leader itself died
    second = IncrementalCooperativeAssignor(lambda: UNITS, scheduled_rebalance_max_delay_ms=2_000)
    held = second.assign("w2", _workers({m: us for m, us in r.targets.items() if m != "w1"}), 1_000)
    assert held.delay_ms == 2_000 and not (set().union(*held.targets.values()) & lost)
    done = second.assign("w2", _workers(held.targets), 3_000)
    _check_exact(done.targets, UNITS)
