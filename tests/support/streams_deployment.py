"""A deployment of the counting Streams application (support.streams_app) on one route, for the
streams-group test modules to share per module.

Routes (``ROUTES``): "kafka44-direct", the instances talk to Kafka 4.4 itself, the oracle, on
a broker whose streams floors are lowered (STREAMS_FLOORS: Kafka's 45 s session floor would make
a kill -9 wait 45 s; the session's ``kafka44`` if its settings lower them, else the streams
modules' own broker); "kafka44",
"tansu" and "kafka39", the instances talk to `kcoord serve` in front of that upstream: on
kafka44 the same broker as the oracle's (kcoord serves the group, the broker's streams settings
do not matter), on Tansu and Kafka 3.9 (no streams groups at all) the session's shared broker.
The broker and one kcoord per upstream are the session's (tests/integration/streams/conftest.py):
each deployment has its own topics and application id. KCOORD_UPSTREAMS narrows the routes by
their upstream (support.upstreams); kafka39 is one of the subset's upstreams and runs by default.

The application counts words of a 6-partition input topic: 12 tasks, 0_0..0_5 stateless (the
input to the repartition topic), 1_0..1_5 stateful (the counts store and its changelog).

Rules: ``deploy`` stops the instances it started (all at once) and fails if the shared kcoord
died under it; every wait is bounded and names what it awaited.
"""
from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import ports
from .admin import create_topic
from .kcoord import FAST, KcoordProcess
from .names import unique_name
from .produce import make_producer
from .streams_app import StreamsApp, counts_on, set_group_configs
from .upstreams import FIXTURES, upstream_ids
from .wait import wait_until

PARTITIONS, WORDS, BATCH = 6, 17, 300
TASKS = frozenset(f"{s}_{p}" for s in (0, 1) for p in range(PARTITIONS))
STATEFUL = frozenset(t for t in TASKS if t.startswith("1_"))
# route id -> (upstream id for KCOORD_UPSTREAMS, the upstream's fixture, through kcoord)
ROUTES = {"kafka44-direct": ("kafka44", "streams_kafka44", False), "kafka44": ("kafka44", "streams_kafka44", True),
          "tansu": ("tansu", FIXTURES["tansu"], True), "kafka39": ("kafka39", FIXTURES["kafka39"], True)}
EVERYWHERE = ("kafka44-direct", "kafka44", "tansu")
# The oracle's broker: Kafka's defaults but the streams floors (45 s session, 5 s heartbeat),
# below which no group could go (tests/integration/streams/conftest.py).
STREAMS_FLOORS = {"group.streams.min.session.timeout.ms": "6000", "group.streams.min.heartbeat.interval.ms": "500"}
# The group's own: one standby, a 6 s session, and no initial delay (Kafka's 3 s wait for a new
# group's members would only slow the tests: the instances start together).
GROUP_CONFIGS = {"streams.num.standby.replicas": "1", "streams.session.timeout.ms": "6000",
                 "streams.heartbeat.interval.ms": "500", "streams.initial.rebalance.delay.ms": "0"}
# kcoord lowered as the oracle's broker: the same floors and initial delay under kcoord's own
# settings (coordinator/config.py streams_*), so the group takes the same group configs.
KCOORD_CONFIG = (*FAST, "streams_min_session_timeout_ms=6000", "streams_min_heartbeat_interval_ms=500",
                 "streams_initial_rebalance_delay_ms=0")


def routes(*only: str) -> list[str]:
    """The routes KCOORD_UPSTREAMS allows of ``only`` (default: EVERYWHERE, not kafka39)."""
    allowed = set(upstream_ids(in_subset=True))
    return [r for r in (only or EVERYWHERE) if ROUTES[r][0] in allowed]


class Gateways:
    """One `kcoord serve` per upstream (KCOORD_CONFIG), started on first use and kept until
    ``stop_all``: the streams modules share it, each group being its own application id."""

    def __init__(self) -> None:
        self._by_upstream: dict[str, KcoordProcess] = {}

    def in_front_of(self, upstream: str) -> KcoordProcess:
        gateway = self._by_upstream.get(upstream)
        if gateway is None:
            gateway = self._by_upstream[upstream] = KcoordProcess(
                upstream=upstream, state_topic=unique_name("__kcoord_streams"), config=KCOORD_CONFIG).start()
        check_running(gateway)
        return gateway

    def stop_all(self) -> None:
        """Stop every gateway at once (each stop waits for its process's exit)."""
        running = [g for g in self._by_upstream.values() if g.running()]
        with concurrent.futures.ThreadPoolExecutor(max(1, len(running))) as pool:
            list(pool.map(lambda gateway: gateway.stop(), running))


@contextlib.contextmanager
def gateway_with(upstream: str, *settings: str) -> Iterator[KcoordProcess]:
    """A kcoord of a module's own, KCOORD_CONFIG and ``settings``, in front of ``upstream``: a
    module that turns one of kcoord's extensions on (the shared gateways keep Kafka's behaviour,
    which the differential tests compare); fails if it died under the module."""
    process = KcoordProcess(upstream=upstream, state_topic=unique_name("__kcoord_streams_ext"),
                            config=(*KCOORD_CONFIG, *settings)).start()
    try:
        yield process
        check_running(process)
    finally:
        process.stop()


def check_running(gateway: KcoordProcess) -> None:
    assert gateway.running(), f"kcoord in front of {gateway.upstream} died; log:\n{gateway.log_text()[-4000:]}"


@dataclass
class Deployment:
    route: str
    bootstrap: str          # what the instances talk to
    upstream: str           # the cluster itself (topics, reading the output)
    app_id: str
    input: str
    output: str
    state_root: Path
    guarantee: str = "at_least_once"
    # The instances' producer batch.size; 0 on Tansu, whose ListOffsets LATEST is the last
    # batch's base offset + 1: a task that moves to an instance without its state restores its
    # changelog to that offset and loses the rest of the last batch (seen: changelog ends
    # 18/13/13/13/7 listed against 21/15/15/15/9 records, counts short after the scale-out).
    # 0 makes most batches one record (a batch's buffer is sized by its first record's upper
    # bound, so a small second record may still fit): fewer losses, not none.
    batch_size: int | None = None
    group_configs: dict[str, str] = field(default_factory=dict)   # the group's own, set at deploy
    apps: list[StreamsApp] = field(default_factory=list)
    words: collections.Counter = field(default_factory=collections.Counter)
    batches: int = 0

    def start(self, count: int, *, static: bool = False, zones: tuple[str, ...] = ()) -> list[StreamsApp]:
        """``count`` new instances (static: group.instance.id = the instance's name), started at once;
        ``zones``: each one's client.tag.zone, in turn."""
        names = [f"i{len(self.apps) + i}" for i in range(count)]
        return self.launch([StreamsApp(self.bootstrap, app_id=self.app_id, input=self.input, output=self.output,
                                       state_dir=str(self.state_root / name), name=name, guarantee=self.guarantee,
                                       batch_size=self.batch_size,
                                       instance_id=name if static else None,
                                       app_server=f"127.0.0.1:{ports.free_port()}",
                                       zone=zones[i % len(zones)] if zones else None)
                            for i, name in enumerate(names)])

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

    def produce(self, count: int = BATCH, chunk: int | None = None,
                halfway: Callable[[], None] | None = None) -> None:
        """``count`` input records (one per batch: Tansu's end offsets stay true), words in turn,
        flushed every ``chunk`` records (records keep arriving while the instances work);
        ``halfway`` runs once half of them are delivered."""
        producer = make_producer(self.upstream)
        first = self.batches * BATCH
        self.batches += 1
        for i in range(count):
            word = f"w{(first + i) % WORDS}"
            self.words[word] += 1
            producer.produce(self.input, key=f"k{i}", value=word)
            if chunk and (i + 1) % chunk == 0:
                assert producer.flush(30) == 0, "input not all delivered"
            if halfway is not None and i + 1 == count // 2:
                assert producer.flush(30) == 0, "input not all delivered"
                halfway()
        assert producer.flush(30) == 0, "input not all delivered"

    def describe(self) -> dict[str, Any]:
        """StreamsGroupDescribe (Admin, through what serves the group); fails if any task is in
        two members' current active tasks: every describe the harness takes is checked."""
        d = self.alive[0].ask("describe")
        return self._checked(d)

    def _checked(self, d: dict[str, Any]) -> dict[str, Any]:
        twice = [t for t, n in collections.Counter(itertools.chain.from_iterable(
            m["active"] for m in d["members"])).items() if n > 1]
        assert not twice, f"tasks {twice} active on two members at once: {d}"
        return d

    def stable(self) -> dict[str, Any] | None:
        """The describe once the group is STABLE with one member per live instance, each at its
        target, every task active somewhere and every instance RUNNING those tasks; else None."""
        fatal = [(a.name, e) for a in self.apps for e in a.events("fatal")]
        assert not fatal, f"instances failed: {fatal}; instances: {self.report()}"
        # Right after the instances start, no member's first heartbeat may have reached the
        # coordinator yet: the group is not there (GROUP_ID_NOT_FOUND), so not stable yet.
        answer = self.alive[0].answer("describe")
        if answer["event"] == "error" and str(answer.get("error", "")).endswith("GroupIdNotFoundException"):
            return None
        assert answer["event"] == "describe", f"{self.alive[0].name}: 'describe' -> {answer}"
        d = self._checked(answer)
        members = d["members"]
        ok = (d["state"] == "STABLE" and len(members) == len(self.alive)
              and all(m["active"] == m["target_active"] and m["standby"] == m["target_standby"] for m in members)
              and set(itertools.chain.from_iterable(m["active"] for m in members)) == TASKS
              and all(a.state() == "RUNNING" and a.tasks()[0] == set(member_of(d, a)["active"]) for a in self.alive))
        return d if ok else None

    @property
    def session_s(self) -> float:
        """The group's session timeout in seconds (Kafka's default when the group sets none)."""
        return int(self.group_configs.get("streams.session.timeout.ms", 45_000)) / 1000

    def wait_stable(self, timeout: float = 60.0) -> dict[str, Any]:
        found: dict[str, Any] | None = wait_until(
            self.stable, timeout, 0.3, lambda: f"{self.app_id} stable over {len(self.alive)} instances "
                                               f"(describe: {self.describe()}; instances: {self.report()})")
        assert found is not None
        return found

    def report(self) -> str:
        """Each live instance's state, tasks and log tail: what a failed wait shows."""
        return "\n".join(f"--- {a.name}: {a.state()} {a.tasks()} {a.events('restore')[-4:]}\n{a.stderr_tail(8)}"
                         for a in self.alive)

    def wait_counts(self, timeout: float = 60.0) -> None:
        """The output's latest count per word equals the input's (read_committed under EOS)."""
        expected = dict(self.words)
        committed = self.guarantee.startswith("exactly_once")

        def now() -> dict[str, int]:
            return counts_on(self.upstream, self.output, 1, read_committed=committed)
        wait_until(lambda: now() == expected, timeout, 0.5,
                   lambda: f"counts {expected}, got {now()}; instances: {self.report()}")


def member_of(describe: dict[str, Any], app: StreamsApp) -> dict[str, Any]:
    """The describe's member of ``app`` (by its application.server endpoint)."""
    (member,) = [m for m in describe["members"] if m["endpoint"] == app.app_server]
    return member


@contextlib.contextmanager
def deploy(route: str, request: Any, tmp_path_factory: Any, guarantee: str = "at_least_once",
           gateway: KcoordProcess | None = None) -> Iterator[Deployment]:
    """Topics and group configs on the route's (shared) broker or kcoord; no instance yet.
    ``gateway``: a kcoord of the module's own in front of the route's upstream, instead of the
    shared one (a module that turns one of kcoord's extensions on)."""
    upstream_id, fixture, via_kcoord = ROUTES[route]
    upstream = request.getfixturevalue(fixture)
    if gateway is None and via_kcoord:
        gateway = request.getfixturevalue("streams_gateways").in_front_of(upstream.bootstrap)
    name = unique_name(f"count-{route}")
    d = Deployment(route, gateway.bootstrap if gateway else upstream.bootstrap, upstream.bootstrap,
                   name, f"{name}-in", f"{name}-out", tmp_path_factory.mktemp("state"), guarantee,
                   batch_size=0 if upstream_id == "tansu" else None)
    create_topic(upstream.bootstrap, d.input, PARTITIONS)
    create_topic(upstream.bootstrap, d.output, 1)
    d.group_configs = GROUP_CONFIGS
    set_group_configs(d.bootstrap, d.app_id, d.group_configs)
    try:
        yield d
    finally:
        # Closes overlap (each is Streams' own close, seconds under load).
        with concurrent.futures.ThreadPoolExecutor(max(1, len(d.apps))) as pool:
            list(pool.map(lambda app: app.shutdown(), d.apps))
    if gateway is not None:
        check_running(gateway)
