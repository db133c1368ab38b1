"""A stateful Kafka Streams 4.4 application with group.protocol=streams (KIP-1071) through kcoord,
checked by invariants against Kafka 4.4's own streams coordinator.

The application (tests/clients/java/streams/CountStreamsApp.java) counts the words of a
6-partition input topic: a repartition (groupBy the word) and a changelog (the counts store),
so 12 tasks: 0_0..0_5 stateless, 1_0..1_5 stateful. Three instances, one standby replica
(the group's `streams.num.standby.replicas`), each with an application.server endpoint.

Routes, one module-scoped deployment each (the tests below run in order on it):
- kafka44-direct: the instances talk to Kafka 4.4 itself, the oracle: the same assertions
  must hold there, which validates the harness. Its broker is the module's own, with the
  streams session and heartbeat floors lowered (the shared fixture keeps Kafka's 45 s floor,
  and a kill -9 would wait it out).
- kafka44, tansu: the instances talk to `kcoord serve` in front of that upstream.

What is checked:
- the output is correct and complete: the latest count of each word equals its occurrences in
  the input, once everything is processed, and again after the kill -9;
- no task is ever active on two instances at once, from the instances' own task lines
  (support.streams_app.active_overlaps) and from every StreamsGroupDescribe taken;
- the describe agrees with the instances: one member per instance, its endpoint, its tasks;
  a standby never on the process of its active task;
- interactive-query metadata (metadataForAllStreamsClients, queryMetadataForKey) is the same
  from every instance and matches the group's assignment;
- kill -9 of an instance: the survivors take all its tasks over, the standbys are placed again,
  and the counts of what came after are right.
"""
from __future__ import annotations

import collections
import concurrent.futures
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from support import ports
from support.admin import create_topic
from support.kcoord import FAST, KcoordProcess
from support.names import unique_name
from support.produce import make_producer
from support.streams_app import StreamsApp, active_overlaps, counts_on, set_group_configs
from support.upstreams import FIXTURES, upstream_ids
from support.wait import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.java, pytest.mark.timeout(240)]

PARTITIONS, WORDS, BATCH = 6, 17, 300
TASKS = {f"{s}_{p}" for s in (0, 1) for p in range(PARTITIONS)}
STATEFUL = {t for t in TASKS if t.startswith("1_")}
# route id -> (upstream id, through kcoord)
ROUTES = {"kafka44-direct": ("kafka44", False)}
# The oracle's broker: Kafka's defaults but the streams floors (45 s session, 5 s heartbeat),
# which no group could go below, and the 3 s initial delay of a new group.
ORACLE_BROKER = {"group.streams.min.session.timeout.ms": "6000", "group.streams.min.heartbeat.interval.ms": "500",
                 "group.streams.initial.rebalance.delay.ms": "0"}
GROUP_CONFIGS = {"streams.num.standby.replicas": "1", "streams.session.timeout.ms": "6000",
                 "streams.heartbeat.interval.ms": "500"}
# kcoord's streams groups with the same timings as the oracle's.
KCOORD_CONFIG = FAST


def _routes() -> list[str]:
    allowed = set(upstream_ids(in_subset=False))
    return [r for r, (up, _) in ROUTES.items() if up in allowed]


@dataclass
class Deployment:
    route: str
    bootstrap: str          # what the instances talk to
    upstream: str           # the cluster itself (topics, reading the output)
    app_id: str
    input: str
    output: str
    state_root: Path
    apps: list[StreamsApp] = field(default_factory=list)
    words: collections.Counter = field(default_factory=collections.Counter)
    batches: int = 0

    def start(self, count: int, *, static: bool = False) -> list[StreamsApp]:
        """``count`` new instances (static: group.instance.id = the instance's name), started at once."""
        names = [f"i{len(self.apps) + i}" for i in range(count)]
        return self.launch([StreamsApp(self.bootstrap, app_id=self.app_id, input=self.input, output=self.output,
                                       state_dir=str(self.state_root / name), name=name,
                                       instance_id=name if static else None,
                                       app_server=f"127.0.0.1:{ports.free_port()}") for name in names])

    def launch(self, new: list[StreamsApp]) -> list[StreamsApp]:
        self.apps += new
        with concurrent.futures.ThreadPoolExecutor(len(new)) as pool:   # JVM starts overlap
            list(pool.map(lambda app: app.start(90), new))
        return new

    def stop(self, apps: list[StreamsApp], how: str = "") -> None:
        with concurrent.futures.ThreadPoolExecutor(len(apps)) as pool:
            codes = list(pool.map(lambda app: app.shutdown(how=how), apps))
        assert codes == [0] * len(apps), f"clean closes: {codes}"

    @property
    def alive(self) -> list[StreamsApp]:
        return [a for a in self.apps if a.alive]

    def produce(self) -> None:
        producer = make_producer(self.upstream)
        for i in range(BATCH):
            word = f"w{(self.batches * BATCH + i) % WORDS}"
            self.words[word] += 1
            producer.produce(self.input, key=f"k{i}", value=word)
        assert producer.flush(30) == 0, "input not all delivered"
        self.batches += 1

    def describe(self) -> dict:
        return self.alive[0].ask("describe")

    def stable(self) -> dict | None:
        """The describe once the group is STABLE with one member per live instance, each at its
        target and every task active somewhere; else None."""
        d = self.describe()
        members = d["members"]
        ok = (d["state"] == "STABLE" and len(members) == len(self.alive)
              and all(m["active"] == m["target_active"] and m["standby"] == m["target_standby"] for m in members)
              and set(itertools.chain.from_iterable(m["active"] for m in members)) == TASKS
              and all(a.state() == "RUNNING" and a.tasks()[0] == set(_member_of(d, a)["active"]) for a in self.alive))
        return d if ok else None

    def wait_stable(self, timeout: float = 60.0) -> dict:
        return wait_until(self.stable, timeout, 0.3, lambda: f"{self.app_id} stable over {len(self.alive)} instances "
                                                             f"(describe: {self.describe()})")

    def wait_counts(self, timeout: float = 60.0) -> None:
        expected = dict(self.words)
        wait_until(lambda: counts_on(self.upstream, self.output, 1) == expected, timeout, 0.5,
                   lambda: f"counts {expected}, got {counts_on(self.upstream, self.output, 1)}")


def _member_of(describe: dict, app: StreamsApp) -> dict:
    (member,) = [m for m in describe["members"] if m["endpoint"] == app.app_server]
    return member


def check_describe(d: dict, apps: list[StreamsApp], standbys_everywhere: bool = True) -> None:
    """One member per instance at its endpoint; each task active once; a standby never on the
    process that runs the task; standbys of stateful tasks only (on every member unless there
    are more members than standbys)."""
    assert sorted(m["endpoint"] for m in d["members"]) == sorted(a.app_server for a in apps), d
    active = collections.Counter(itertools.chain.from_iterable(m["active"] for m in d["members"]))
    assert set(active) == TASKS and set(active.values()) == {1}, f"each task active exactly once: {active}"
    for m in d["members"]:
        assert not set(m["active"]) & set(m["standby"]), f"standby beside its active task: {m}"
        assert set(m["standby"]) <= STATEFUL, f"standbys of stateful tasks only: {m}"
        assert m["standby"] or not standbys_everywhere, f"no standby on {m}"


def expected_metadata(d: dict, dep: Deployment) -> list[dict]:
    """metadataForAllStreamsClients as the describe's assignment implies it: subtopology 0 reads
    the input, 1 the repartition topic; a standby task's partitions are its source's."""
    repartition = f"{dep.app_id}-by-value-repartition"

    def partitions(tasks: list[str]) -> list[str]:
        return sorted(f"{dep.input if t.startswith('0_') else repartition}:{t.split('_')[1]}" for t in tasks)
    return sorted(({"host": m["endpoint"], "stores": ["counts"], "active": partitions(m["active"]),
                    "standby": partitions(m["standby"])} for m in d["members"]), key=lambda c: c["host"])


@pytest.fixture(scope="module", params=_routes())
def dep(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
        java_classes: Path) -> Iterator[Deployment]:
    upstream_id, via_kcoord = ROUTES[request.param]
    broker = None
    gateway = None
    if via_kcoord:
        upstream = request.getfixturevalue(FIXTURES[upstream_id])
    else:
        from support.kafka_broker import KAFKA_44, start_kafka

        upstream = broker = start_kafka(KAFKA_44, tmp_path_factory.mktemp("oracle"), overrides=ORACLE_BROKER)
    try:
        if via_kcoord:
            gateway = KcoordProcess(upstream=upstream.bootstrap, state_topic=unique_name("__kcoord_streams"),
                                    config=KCOORD_CONFIG).start()
        name = unique_name(f"count-{request.param}")
        d = Deployment(request.param, gateway.bootstrap if gateway else upstream.bootstrap, upstream.bootstrap,
                       name, f"{name}-in", f"{name}-out", tmp_path_factory.mktemp("state"))
        create_topic(upstream.bootstrap, d.input, PARTITIONS)
        create_topic(upstream.bootstrap, d.output, 1)
        set_group_configs(d.bootstrap, d.app_id, GROUP_CONFIGS)
        yield d
        for app in d.apps:
            app.shutdown()
    finally:
        if gateway is not None and gateway.process is not None and gateway.process.poll() is None:
            gateway.stop()
        if broker is not None:
            broker.stop()


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
    lost = set(_member_of(before, victim)["active"])
    victim.kill()
    after = dep.wait_stable(60)
    check_describe(after, dep.alive)
    assert lost <= set(itertools.chain.from_iterable(m["active"] for m in after["members"]))
    dep.produce()
    dep.wait_counts()
    assert active_overlaps(dep.apps) == []


def test_scale_out_to_six_and_in_to_two(dep: Deployment) -> None:
    dep.wait_stable()
    if len(dep.alive) < 3:
        dep.start(3 - len(dep.alive))
    dep.start(3)
    check_describe(dep.wait_stable(90), dep.alive, standbys_everywhere=False)
    dep.produce()
    dep.wait_counts()
    dep.stop(dep.alive[2:], how="leave")
    check_describe(dep.wait_stable(60), dep.alive)
    dep.produce()
    dep.wait_counts()
    assert active_overlaps(dep.apps) == []


def test_static_member_restarts_within_its_session_without_rebalance(dep: Deployment) -> None:
    """A static member closed with REMAIN_IN_GROUP and started again on its state directory
    within its session takes its tasks back: the group epoch does not move and no other
    instance's tasks change. (Streams names the member "<group.instance.id>-<thread>".)"""
    (static,) = dep.start(1, static=True)
    before = dep.wait_stable(60)
    mine = _member_of(before, static)
    others = {a.name: len(a.events("tasks")) for a in dep.alive if a is not static}
    set_group_configs(dep.bootstrap, dep.app_id, {"streams.session.timeout.ms": "45000"})
    try:
        dep.stop([static], how="remain")
        again = dep.launch([static.again()])[0]
        after = dep.wait_stable(40)
    finally:
        set_group_configs(dep.bootstrap, dep.app_id, {"streams.session.timeout.ms": GROUP_CONFIGS[
            "streams.session.timeout.ms"]})
    back = _member_of(after, again)
    assert (after["epoch"], back["instance"], back["active"], back["standby"]) == \
        (before["epoch"], f"{static.name}-1", mine["active"], mine["standby"]), (before, after)
    assert {a.name: len(a.events("tasks")) for a in dep.alive if a is not again} == others, \
        "another instance's tasks changed while the static member was away"
    dep.produce()
    dep.wait_counts()
    assert active_overlaps(dep.apps) == []
