"""How fast a streams group converges, on the simulated clock, with simulated Kafka Streams
4.4 clients (clients.py): the benchmark's sequence (bench/bench_streams_rebalance.py) without
JVMs. Ten instances of the counting application (two subtopologies over 32 partitions: 64
tasks) start 37 ms apart, then an eleventh joins.

Two sides, both with no initial delay and no assignment interval (the benchmark's tuned sides):
- kcoord: its adaptive heartbeat interval (coordinator/group/heartbeat_interval.py);
- Kafka's rules: the fixed 500 ms interval Kafka 4.4 tuned hands out
  (`group.streams.heartbeat.interval.ms`). kcoord's reconciliation follows Kafka's
  (group-coordinator/.../streams/CurrentAssignmentBuilder.java: revoke before assign, a task
  given only once released), and its assignor Kafka's quota
  (group-coordinator/.../streams/assignor/StickyTaskAssignor.java, `maybeUpdateTasksPerMember`),
  so this side is what Kafka's coordinator does with the same clients.

What Kafka's rules give for the join, worked by hand: 64 tasks over 10 members are 7, 7, 7, 7
and six 6 (the quota is redone as members fill it); over 11 the quota is 6 until nine members
are full, then 5: the four members with 7 and one with 6 give up one task each, nobody else
changes. The joiner's first heartbeat computes the target (UNRELEASED_TASKS, nothing free);
each of the five revokers learns of its revocation at its next heartbeat (at most one interval
later), revokes and acknowledges at once (two round trips, no wait in between); the joiner
gets the released tasks at its next heartbeat after that.

`scenario` returns the figures; docs/measurements/streams-rebalance.md quotes them.

`slow_start`: the start the benchmark measured on a loaded machine (docs/measurements/
streams-rebalance.md, "the start row"): the ten first heartbeats spread over 5 s, and a member
opening the tasks it was handed (100 ms each) before it acts on a newer target, so a member
handed all 64 is slow to give them up. There kcoord's quiet hold of the first target
(`streams_initial_rebalance_quiet_ms`, membership.py) is compared with no hold. The measured
starts have gaps of 1 to 7 s between two JVMs' first heartbeats, so a quiet period shorter than
those gaps ends the hold after the first one or two joins: the benchmark's side uses 2500 ms.
"""
from __future__ import annotations

from .clients import Fleet
from .driver import Driver, image, subtopology, topic_info, topology

PARTITIONS = 32
TOP = topology(subtopology("0", sources=["in"], sinks=["app-rep"]),
               subtopology("1", repartition=[topic_info("app-rep", 0)], changelogs=["app-store-changelog"]))
IMAGE = image(**{"in": PARTITIONS, "app-rep": PARTITIONS, "app-store-changelog": PARTITIONS})
ALL = {(s, p) for s in ("0", "1") for p in range(PARTITIONS)}
STAGGER_MS = 37        # the instances' starts, spread as JVMs started together spread them
JOIN_AFTER_MS = 250    # the eleventh starts half a stable interval after the group settled
CALLBACK_MS = 20       # one pass of the Streams callbacks (revoke, then assign)
TUNED = {"streams_initial_rebalance_delay_ms": 0, "streams_assignment_interval_ms": 0}
KAFKA_RULES = {**TUNED, "consumer_heartbeat_policy": "fixed", "streams_heartbeat_interval_ms": 500}


def _started(instances: int, stagger_ms: int, callback_ms: int, config: dict,
             report_offsets: bool = False) -> tuple[Driver, Fleet, dict]:
    """``instances`` started ``stagger_ms`` apart, run until stable; the start's figures."""
    d = Driver(IMAGE, **{**TUNED, **config})
    fleet = Fleet(d, TOP, callback_ms=callback_ms, report_offsets=report_offsets)
    t0 = d.now_ms
    last_start = t0 + (instances - 1) * stagger_ms
    for i in range(instances):
        fleet.start(f"m{i}", f"p{i}", at_ms=t0 + i * stagger_ms)
    fleet.run_until(lambda: d.now_ms >= last_start and fleet.stable(ALL))
    return d, fleet, {"start_ms": d.now_ms - last_start, "start_round_trips": fleet.round_trips(),
                      "start_reconciliations": sum(c.reconciliations for c in fleet.clients.values()),
                      "start_moves": sum(c.moved_in for c in fleet.clients.values())}


# ten JVMs' first heartbeats, as one of the benchmark's kcoord starts had them (its instances'
# "ready" lines, relative to the first)
SLOW_JOINS_MS = (0, 580, 1440, 1440, 1670, 2580, 3050, 3099, 4560, 5039)
OPEN_MS_PER_TASK = 100      # a member handed 64 tasks took about 7 s to act on a revocation
QUIET = {"streams_initial_rebalance_quiet_ms": 2_500}


def slow_start(**config) -> dict[str, int]:
    """Start → stable (from the last join), the tasks moved (active tasks a member started
    beyond the 64 first placements), the most active tasks one member held; the fleet asserts
    no task is ever active twice."""
    d = Driver(IMAGE, **{**TUNED, **config})
    fleet = Fleet(d, TOP, callback_ms=CALLBACK_MS, open_ms_per_task=OPEN_MS_PER_TASK)
    t0 = d.now_ms
    for i, offset in enumerate(SLOW_JOINS_MS):
        fleet.start(f"m{i}", f"p{i}", at_ms=t0 + offset)
    last = t0 + SLOW_JOINS_MS[-1]
    fleet.run_until(lambda: d.now_ms >= last and fleet.stable(ALL))
    return {"start_ms": d.now_ms - last,
            "tasks_moved": sum(c.moved_in for c in fleet.clients.values()) - len(ALL),
            "most_held": max(c.most_active for c in fleet.clients.values())}


def sweep(callback_ms: int, **config) -> dict[str, float]:
    """The start's figures averaged over 13 spreads of the starts (0 to 300 ms apart): one
    spread decides the members' heartbeat phases, and so a few hundred ms either way."""
    runs = [_started(10, stagger, callback_ms, config)[2] for stagger in range(0, 301, 25)]
    means = {k: sum(r[k] for r in runs) / len(runs) for k in runs[0]}
    return means | {"max_start_ms": max(r["start_ms"] for r in runs)}


def scenario(instances: int = 10, report_offsets: bool = False, **config) -> dict[str, int]:
    d, fleet, out = _started(instances, STAGGER_MS, CALLBACK_MS, config, report_offsets)
    before = {m: c.current[0] for m, c in fleet.clients.items()}
    joiner = fleet.start("joiner", "pj", at_ms=d.now_ms + JOIN_AFTER_MS)
    fleet.run_until(lambda: joiner.heartbeats > 0)        # its join: the new target is computed
    for c in fleet.clients.values():
        c.reconciliations = c.moved_in = 0
        c.heartbeats = int(c is joiner)
        c.busy_ms.clear()
    out["join_first_task_ms"] = fleet.run_until(lambda: bool(joiner.current[0]))
    out["join_stable_ms"] = out["join_first_task_ms"] + fleet.run_until(lambda: fleet.stable(ALL))
    stayed = [fleet.clients[m] for m in before]
    out.update(
        join_round_trips=fleet.round_trips(), join_moves=sum(c.moved_in for c in fleet.clients.values()),
        members_reconciling=sum(1 for c in stayed if c.reconciliations),
        members_gaining=sum(1 for c in stayed if c.current[0] - before[c.member]),
        longest_reconciling_ms=max((t for c in stayed for t in c.busy_ms), default=0))
    return out


def test_ten_started_together_are_stable_no_later_than_under_kafkas_rules():
    kcoord, kafka = scenario(), scenario(**KAFKA_RULES)
    assert kcoord["start_ms"] <= kafka["start_ms"], (kcoord, kafka)
    assert kcoord["start_moves"] <= kafka["start_moves"], (kcoord, kafka)


def test_over_many_start_spreads_kcoord_waits_less_on_average_and_at_worst():
    """Also with callbacks as slow as a task start (300 ms), where members reconcile while newer
    targets arrive (the client reconciles what it captured, then the newer one)."""
    for callback_ms in (CALLBACK_MS, 300):
        kcoord, kafka = sweep(callback_ms), sweep(callback_ms, **KAFKA_RULES)
        assert kcoord["start_ms"] < kafka["start_ms"], (callback_ms, kcoord, kafka)
        assert kcoord["max_start_ms"] <= kafka["max_start_ms"], (callback_ms, kcoord, kafka)


def test_a_join_moves_five_tasks_from_five_members_as_kafkas_rules_do():
    for figures in (scenario(), scenario(**KAFKA_RULES)):
        assert figures["join_moves"] == 5, figures
        assert figures["members_reconciling"] == 5, figures
        assert figures["members_gaining"] == 0, figures


def test_the_figures_are_the_same_when_clients_report_the_state_on_their_disk():
    """The 4.4 clients report their TaskOffsets (clients.py, `report_offsets`), which make the
    members with a task's state on disk its first candidates (Kafka 4.4's sticky assignor,
    assignor.py). In the start and the join no task is handed to a candidate under its quota
    that the ranking would move elsewhere: the join still moves five tasks from five members
    to the joiner, on both sides."""
    d, _, _ = _started(10, STAGGER_MS, CALLBACK_MS, {}, report_offsets=True)
    assert sum(len(o.offsets) for o in d.shard.streams_soft["app"].task_offsets.values()) > 0
    for config in ({}, KAFKA_RULES):
        assert scenario(report_offsets=True, **config) == scenario(**config)


def test_a_member_that_keeps_tasks_reconciles_within_one_callback_pass():
    """A revoker is not STABLE from the heartbeat that tells it to revoke until the one that
    acknowledges it, sent as soon as its callbacks ran: no heartbeat interval in between."""
    for figures in (scenario(), scenario(**KAFKA_RULES)):
        assert figures["longest_reconciling_ms"] == CALLBACK_MS, figures


def test_the_joiner_runs_its_first_task_no_later_than_under_kafkas_rules():
    kcoord, kafka = scenario(), scenario(**KAFKA_RULES)
    assert kcoord["join_first_task_ms"] <= kafka["join_first_task_ms"], (kcoord, kafka)
    assert kcoord["join_stable_ms"] <= kafka["join_stable_ms"], (kcoord, kafka)


def test_the_quiet_hold_moves_fewer_tasks_in_a_slow_start():
    off, on = slow_start(), slow_start(**QUIET)
    assert on["tasks_moved"] < off["tasks_moved"], (off, on)
    assert on["tasks_moved"] == 0, on      # no join after the hold ended: the first target is final
    assert on["most_held"] < off["most_held"], (off, on)
