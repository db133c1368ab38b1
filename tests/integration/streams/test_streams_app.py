"""A stateful Kafka Streams 4.4 application with group.protocol=streams (KIP-1071) through kcoord,
checked by invariants against Kafka 4.4's own streams coordinator.

The application (tests/clients/java/streams/CountStreamsApp.java) counts the words of a
6-partition input topic: a repartition (groupBy the word) and a changelog (the counts store),
so 12 tasks: 0_0..0_5 stateless, 1_0..1_5 stateful. Three instances, one standby replica
(the group's `streams.num.standby.replicas`), each with an application.server endpoint.

Routes (support.streams_deployment), one module-scoped deployment each; the tests below run
in order on it:
- kafka44-direct: the instances talk to Kafka 4.4 itself, the oracle: the same assertions
  must hold there, which validates the harness;
- kafka44, tansu: the instances talk to `kcoord serve` in front of that upstream;
- kafka39: kcoord in front of Kafka 3.9, a cluster with no streams groups at all, for the
  counts, the interactive-query metadata and the kill -9 takeover (BASIC_ROUTES; the static and
  scale tests exercise kcoord's group, the same in front of any upstream, on kafka44 and tansu).

What is checked:
- the output is correct and complete: the latest count of each word equals its occurrences in
  the input, once everything is processed, and again after the kill -9;
- no task is ever active on two instances at once, from each active task's own open and close
  on each instance (support.streams_app.active_overlaps) and from every StreamsGroupDescribe taken;
- the describe agrees with the instances: one member per instance, its endpoint, its tasks;
  a standby never on the process of its active task;
- interactive-query metadata (metadataForAllStreamsClients, queryMetadataForKey) is the same
  from every instance and matches the group's assignment;
- kill -9 of an instance: the survivors take all its tasks over, the standbys are placed again,
  and the counts of what came after are right;
- a static member closed with REMAIN_IN_GROUP restarts on its state directory within its
  session without a rebalance;
- scale out from 3 to 6 instances and in to 2 (closed with LEAVE_GROUP): stable each time,
  counts right.
"""
from __future__ import annotations

import collections
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.streams_app import StreamsApp, active_overlaps, set_group_configs
from support.streams_deployment import STATEFUL, TASKS, Deployment, deploy, member_of, routes
from support.wait import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.java, pytest.mark.timeout(240)]


BASIC = ("test_counts_complete_and_each_task_active_once", "test_interactive_query_metadata_from_every_instance",
         "test_kill9_survivors_take_over_with_standbys")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test on every route of EVERYWHERE; the BASIC ones on kafka39 too."""
    if "dep" in metafunc.fixturenames:
        ids = routes() + (routes("kafka39") if metafunc.function.__name__ in BASIC else [])
        metafunc.parametrize("dep", ids, indirect=True, ids=ids, scope="module")


@pytest.fixture(scope="module")
def dep(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
        java_classes: Path) -> Iterator[Deployment]:
    with deploy(request.param, request, tmp_path_factory) as deployment:
        yield deployment


def check_describe(d: dict[str, Any], apps: list[StreamsApp]) -> None:
    """One member per instance at its endpoint; each task active once; a standby never on the
    process that runs the task; standbys of stateful tasks only, each stateful task with exactly
    one (the group's one replica: every group here has two processes or more, so one always fits;
    which process gets it is the assignor's, and one holding every stateful task has none)."""
    assert sorted(m["endpoint"] for m in d["members"]) == sorted(a.app_server for a in apps), d
    active = collections.Counter(itertools.chain.from_iterable(m["active"] for m in d["members"]))
    assert set(active) == TASKS and set(active.values()) == {1}, f"each task active exactly once: {active}"
    for m in d["members"]:
        assert not set(m["active"]) & set(m["standby"]), f"standby beside its active task: {m}"
        assert set(m["standby"]) <= STATEFUL, f"standbys of stateful tasks only: {m}"
    standbys = collections.Counter(itertools.chain.from_iterable(m["standby"] for m in d["members"]))
    assert standbys == collections.Counter(STATEFUL), f"one standby per stateful task: {standbys}; {d}"


def expected_metadata(d: dict[str, Any], dep: Deployment) -> list[dict[str, Any]]:
    """metadataForAllStreamsClients as the describe's assignment implies it: subtopology 0 reads
    the input, 1 the repartition topic; a standby task's partitions are its source's. A client's
    stores are those its *active* partitions feed (Streams' StreamsMetadataState.getStoresOnHost
    on the active partitions): "counts" only with an active task of subtopology 1."""
    repartition = f"{dep.app_id}-by-value-repartition"

    def partitions(tasks: list[str]) -> list[str]:
        return sorted(f"{dep.input if t.startswith('0_') else repartition}:{t.split('_')[1]}" for t in tasks)

    def stores(active: list[str]) -> list[str]:
        return ["counts"] if set(active) & STATEFUL else []
    return sorted(({"host": m["endpoint"], "stores": stores(m["active"]), "active": partitions(m["active"]),
                    "standby": partitions(m["standby"])} for m in d["members"]), key=lambda c: c["host"])


def test_counts_complete_and_each_task_active_once(dep: Deployment) -> None:
    dep.start(3)
    dep.produce()
    d = dep.wait_stable(90)
    check_describe(d, dep.apps)
    dep.wait_counts()
    assert active_overlaps(dep.apps) == []
    states = {a.name: [e["state"] for e in a.events("state")] for a in dep.apps}
    assert all("ERROR" not in s and s[-1] == "RUNNING" for s in states.values()), states


def test_interactive_query_metadata_from_every_instance(dep: Deployment) -> None:
    d = dep.wait_stable()
    want = expected_metadata(d, dep)

    def metadata_everywhere() -> bool:
        return all(sorted(a.ask("metadata")["clients"], key=lambda c: c["host"]) == want for a in dep.alive)
    wait_until(metadata_everywhere, 30, 0.5, lambda: f"every instance's metadata is {want}: "
                                                     f"{[a.ask('metadata')['clients'] for a in dep.alive]}")
    by_endpoint = {m["endpoint"]: m for m in d["members"]}
    for word in sorted(dep.words):
        answers = [a.ask(f"key {word}") for a in dep.alive]
        assert len({(k["active"], tuple(k["standby"]), k["partition"]) for k in answers}) == 1, answers
        key = answers[0]
        task = f"1_{key['partition']}"
        assert task in by_endpoint[key["active"]]["active"], (word, key, d)
        assert key["standby"] == sorted(e for e, m in by_endpoint.items() if task in m["standby"]), (word, key, d)


def test_kill9_survivors_take_over_with_standbys(dep: Deployment) -> None:
    before = dep.wait_stable()
    victim = dep.alive[0]
    lost = set(member_of(before, victim)["active"])
    victim.kill()
    after = dep.wait_stable(dep.session_s + 40)
    check_describe(after, dep.alive)
    assert lost <= set(itertools.chain.from_iterable(m["active"] for m in after["members"]))
    dep.produce()
    dep.wait_counts()
    assert active_overlaps(dep.apps) == []


def test_static_member_restarts_within_its_session_without_rebalance(dep: Deployment) -> None:
    """A static member closed with REMAIN_IN_GROUP and started again on its state directory
    within its session takes its tasks back: the group epoch does not move and no other
    instance's tasks change. (Streams names the member "<group.instance.id>-<thread>".)"""
    # The session long enough for a JVM's restart, in effect before the static member's first
    # heartbeat: a static leave keeps the session timer its last heartbeat set, and on Kafka a
    # heartbeat before the broker applied the change set it with the old 6 s (a landing run's
    # slower host: epoch 7 -> 9)
    session = "streams.session.timeout.ms"
    set_group_configs(dep.bootstrap, dep.app_id, {session: "45000"})
    try:
        (static,) = dep.start(1, static=True)
        before = dep.wait_stable(60)
        mine = member_of(before, static)
        others = {a.name: len(a.events("tasks")) for a in dep.alive if a is not static}
        dep.stop([static], how="remain")
        again = dep.launch([static.again()])[0]
        after = dep.wait_stable(40)
    finally:
        if session in dep.group_configs:
            set_group_configs(dep.bootstrap, dep.app_id, {session: dep.group_configs[session]})
    back = member_of(after, again)
    moved = [a.name for a in dep.alive if a is not again and len(a.events("tasks")) != others[a.name]]
    problems = [what for what, bad in (
        (f"group epoch {before['epoch']} -> {after['epoch']}", after["epoch"] != before["epoch"]),
        (f"member {back['instance']} is not {static.name}-1", back["instance"] != f"{static.name}-1"),
        (f"its tasks {mine['active']}/{mine['standby']} -> {back['active']}/{back['standby']}",
         (back["active"], back["standby"]) != (mine["active"], mine["standby"])),
        (f"tasks of {moved} changed while it was away", bool(moved))) if bad]
    assert not problems, f"the static member's restart rebalanced: {problems}; before {before}; after {after}"
    dep.produce()
    # On Tansu the restarted instance restores its changelog to the end ListOffsets LATEST
    # lists: kcoord answers the high watermark there (gateway/tansu_list_offsets.py).
    dep.wait_counts()
    assert active_overlaps(dep.apps) == []


def test_scale_out_to_six_and_in_to_two(dep: Deployment) -> None:
    dep.wait_stable()
    if len(dep.alive) < 3:
        dep.start(3 - len(dep.alive))
    dep.start(3)
    check_describe(dep.wait_stable(90), dep.alive)
    assert active_overlaps(dep.apps) == []
    dep.produce()
    dep.wait_counts()
    dep.stop(dep.alive[2:], how="leave")
    check_describe(dep.wait_stable(60), dep.alive)
    dep.produce()
    dep.wait_counts()
    assert active_overlaps(dep.apps) == []
