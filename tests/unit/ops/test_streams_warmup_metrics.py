"""kcoord's warm-up gauges (coordinator/metrics.py's GroupCollector): the warm-up tasks the
streams groups' current plans place and the moves they hold back (coordinator/group/streams/
warmup.py's `Plan`), read at scrape time from the shards' soft state, never created or changed
by the scrape. With the switch off no group has a plan: both read 0, and are still exported."""
from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from coordinator.group.group_admin import group_state_name
from coordinator.group.streams.warmup import warmup_key
from coordinator.metrics import GroupCollector
from coordinator.metrics_kafka import SCRAPE_WALK_ATTEMPTS, walk_retrying
from tests.unit.group.streams.driver import Driver, beat
from tests.unit.group.streams.test_warmups import ALL, IMG, ON, STATEFUL, App, _scaled_out

WARMUPS = "kcoord_streams_group_warmup_tasks"
HELD = "kcoord_streams_group_held_task_moves"


def _gauges(*shards) -> tuple[float, float]:
    registry = CollectorRegistry()
    registry.register(GroupCollector(lambda: list(shards), group_state_name))
    values = {s.name: s.value for family in text_string_to_metric_families(generate_latest(registry).decode())
              for s in family.samples}
    return values[WARMUPS], values[HELD]


def _members_warmups(app: App) -> int:
    return sum(len(m.assigned.warmup) + len(m.pending_revocation.warmup) for m in app.d.group().members.values())


def test_held_moves_and_their_warmups_count_until_each_move_completes():
    app, moving = _scaled_out()
    first, second = sorted(moving & STATEFUL)
    app.settle("a", "b")
    assert app.member("b").assigned.warmup == {first, second}
    assert _gauges(app.d.shard) == (2.0, 2.0) and _members_warmups(app) == 2
    app.beat("b", offsets={first: 1_000}, ends={first: 1_000})          # first caught up: it moves
    app.settle("a", "b")
    assert first in app.member("b").assigned.active
    assert _gauges(app.d.shard) == (1.0, 1.0) and _members_warmups(app) == 1
    app.beat("b", offsets={second: 1_000}, ends={second: 1_000})
    app.settle("a", "b")
    assert app.member("b").assigned.active == moving and app.d.group().state().value == "Stable"
    # the group still has a plan (the last target's): the 0s are read from it
    assert app.d.shard.streams_soft["app"].warmups is not None
    assert _gauges(app.d.shard) == (0.0, 0.0)


def test_a_move_parked_beyond_the_budget_counts_as_held_without_a_warmup():
    app, moving = _scaled_out(budget=1)
    app.settle("a", "b")
    (warming,) = app.member("b").assigned.warmup
    assert len(moving & STATEFUL) == 2
    assert _gauges(app.d.shard) == (1.0, 2.0)
    app.beat("b", offsets={warming: 10}, ends={warming: 10})
    app.settle("a", "b")
    assert _gauges(app.d.shard) == (1.0, 1.0)     # the parked move now has the warm-up


def test_with_the_switch_off_both_read_zero_and_the_moves_are_not_held():
    kw = {k: v for k, v in ON.items() if k != "streams_warmups_enabled"}
    app = App(Driver(IMG, **kw))
    app.join("a", "pa")
    app.beat("a")
    app.join("b", "pb")
    app.settle("a", "b")
    assert app.member("b").assigned.active == app.d.group().target["b"].active != frozenset()
    assert app.d.shard.streams_soft["app"].warmups is None
    assert _gauges(app.d.shard) == (0.0, 0.0)


def test_the_gauges_sum_over_groups_and_shards_and_are_exported_with_none():
    one, _ = _scaled_out()
    two, _ = _scaled_out(budget=1)
    one.settle("a", "b")
    two.settle("a", "b")
    assert _gauges(one.d.shard, two.d.shard) == (3.0, 4.0)
    assert _gauges() == (0.0, 0.0)


def test_the_scrape_reads_the_plan_without_creating_or_changing_soft_state():
    app, _ = _scaled_out()
    app.settle("a", "b")
    table = app.d.shard.streams_soft
    plan = table["app"].warmups
    before = (dict(plan.assignment), dict(plan.held), dict(plan.moved), plan.epoch, plan.probe_ms)
    assert _gauges(app.d.shard) == _gauges(app.d.shard) == (2.0, 2.0)
    assert table["app"].warmups is plan
    assert (dict(plan.assignment), dict(plan.held), dict(plan.moved), plan.epoch, plan.probe_ms) == before
    del table["app"]                      # as after a reload: the soft state is gone until the next heartbeat
    # the warm-ups are in the members' current assignments (record 22 carries them); no plan
    # holds a move until the next heartbeat refines the target again
    assert _gauges(app.d.shard) == (2.0, 0.0)
    assert "app" not in table
    assert app.member("a").assigned.active | app.member("b").assigned.active == ALL


def test_a_member_that_left_counts_no_more_before_the_next_heartbeat():
    app, _ = _scaled_out()
    app.settle("a", "b")
    assert _gauges(app.d.shard) == (2.0, 2.0)
    app.d.hb(beat("b", -1))                        # b leaves; a's next heartbeat has not come
    assert "b" in app.d.shard.streams_soft["app"].warmups.assignment     # the plan still names b
    assert _gauges(app.d.shard) == (0.0, 0.0)


def test_warmups_turned_off_by_a_heartbeat_that_bumps_anyway_drop_the_plan():
    app, _ = _scaled_out()
    app.settle("a", "b")
    app.d.config.streams_num_warmup_replicas = 0   # as the group's streams.num.warmup.replicas=0
    app.join("c", "pc")                            # a join: the group epoch is bumped anyway
    assert app.d.shard.streams_soft["app"].warmups is None
    # no move is held any more; b's warm-ups count until b lets them go
    assert _gauges(app.d.shard) == (_members_warmups(app), 0.0) == (2, 0.0)
    app.settle("a", "b", "c")
    assert _gauges(app.d.shard) == (0.0, 0.0) and _members_warmups(app) == 0


def test_a_target_a_probe_computes_keeps_counting_what_the_members_hold():
    app, _ = _scaled_out()
    app.settle("a", "b")
    d = app.d
    d.advance(d.timers[warmup_key("app")][0] - d.now_ms)   # the probe: a new target, no heartbeat yet
    g = d.group()
    assert d.shard.streams_soft["app"].warmups.epoch < g.target_assignment_epoch == g.group_epoch
    assert _gauges(d.shard) == (2.0, 2.0) and _members_warmups(app) == 2
    app.beat("a")
    assert _gauges(d.shard) == (2.0, 2.0)


def test_a_group_added_during_the_walk_neither_breaks_the_scrape_nor_counts():
    app, _ = _scaled_out()
    app.settle("a", "b")
    groups = app.d.shard.groups
    calls = []

    def state_changing_groups(g) -> str:
        # the event loop's thread adding a group in the middle of the first walk
        calls.append(g.group_id)
        if len(calls) == 1:
            groups["another"] = g
        return group_state_name(g)
    registry = CollectorRegistry()
    registry.register(GroupCollector(lambda: [app.d.shard], state_changing_groups))
    text = generate_latest(registry).decode()
    assert len(calls) == 1 and "another" in groups     # the walk went over a copy of the groups
    assert f"{WARMUPS} 2.0" in text


def test_walk_retrying_raises_any_other_error_at_once():
    attempts = []

    def broken() -> int:
        attempts.append(1)
        raise RuntimeError("a bug, not a change under the walk")
    with pytest.raises(RuntimeError, match="a bug"):
        walk_retrying(broken)
    assert len(attempts) == 1


def test_walk_retrying_gives_up_with_the_last_error():
    attempts = []

    def never() -> int:
        attempts.append(1)
        raise RuntimeError("dictionary changed size during iteration")
    with pytest.raises(RuntimeError, match="changed size"):
        walk_retrying(never)
    assert len(attempts) == SCRAPE_WALK_ATTEMPTS


def _size_changed(d: dict) -> None:
    for k in d:
        d[k + 100] = 0


def _keys_changed(d: dict) -> None:
    for k in d:          # the same size, other keys: CPython's "dictionary keys changed"
        del d[k]
        d[k + 100] = 0


def _set_changed(d: dict) -> None:
    s = set(d)
    for k in s:
        s.add(k + 100)


@pytest.mark.parametrize("mutate", [_size_changed, _keys_changed, _set_changed])
def test_walk_retrying_takes_the_walk_again_for_each_change_cpython_reports(mutate) -> None:
    attempts = []

    def walk() -> int:
        attempts.append(1)
        d = {1: 0, 2: 0}
        if len(attempts) == 1:
            mutate(d)            # raises CPython's own "... during iteration"
        return len(d)
    assert walk_retrying(walk) == 2 and len(attempts) == 2
