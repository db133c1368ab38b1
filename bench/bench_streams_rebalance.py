"""Streams rebalances with real Kafka Streams instances: Kafka 4.4's own streams coordinator
(KIP-1071, group.protocol=streams), at its defaults and tuned, against kcoord in front of Kafka
4.4, at its defaults and tuned; and on Tansu, which has no streams groups, a classic Streams
group (group.protocol=classic, Tansu's own classic coordinator: what these users have today)
against kcoord in front of Tansu, tuned.

    .venv/bin/python bench/bench_streams_rebalance.py [--runs 3] [--instances 10] [--partitions 32]
        [--subtopologies 3] [--kcoord-log-level INFO,kcoord.streams=DEBUG]
        [--sides kafka-default,kafka-tuned,kcoord-default,kcoord-tuned,tansu-classic,kcoord-tansu,kcoord-quiet]
        [--pin 0:1] [--doc docs/measurements/streams-rebalance.md] [--json figures.json]

The application: tests/clients/java/streams/CountStreamsApp.java (tests/support/streams_app.py),
a count with a repartition and a changelog. With ``--subtopologies 3`` (the default: the
workload the streams-groups issue names) three subtopologies (0: input → repartition topic,
1: count → output and a second repartition topic, 2: a count of the counts → output), with 2
the tests' application (0 and 1 only); ``--partitions`` input partitions make subtopologies ×
partitions tasks (each repartition topic, created by the coordinator or a classic group's
leader, gets the input's partition count). No input is produced unless ``--input-rate`` says
so: the figures are the protocol's and the instances', not a restore's.

Rows, each side measured in alternating order (the side list forwards on even runs, backwards
on odd runs), ``--runs`` times; the table gives medians and ranges:
- start: ``--instances`` instances started at once (their JVMs overlap); the time from the last
  instance's "ready" line (right after KafkaStreams.start()) until every instance is RUNNING on
  a stable assignment: every task active on exactly one instance (the instances' latest "tasks"
  lines) and the group STABLE with every member at its target (StreamsGroupDescribe). The end is
  the latest "tasks"/"state" line of that stable state (bench/streams_rebalance_lines.py), not
  the poll that noticed it.
  A classic group has no streams-group describe (and Tansu's DescribeGroups would only say
  Stable between join rounds), so there "stable" is what the instances show: every instance
  RUNNING (none REBALANCING), every task active on exactly one instance, every instance with at
  least one active task (there are more tasks than instances, and Streams' classic assignor
  spreads them: an instance RUNNING with none is between the rounds of a cooperative
  rebalance), and no instance printing a "state" or "tasks" line for CLASSIC_QUIET_S (a
  follow-up round would print one). The quiet time only delays the noticing: the end is still
  the latest line.
- join: one more instance starts: the time from its "ready" line until it is RUNNING with an
  active task, and the longest REBALANCING span of an instance that kept at least one of its
  active tasks through the join (Streams keeps processing retained tasks in most of it, so it
  bounds that instance's processing pause from above); measured until the group is stable again.
  With ``--input-rate R`` (records/s; bench/rebalance/producer.py) records flow to every
  input partition from the start's end (INPUT_CATCH_UP_S, then a steady window of
  ``--input-steady-s``) until INPUT_AFTER_S after the join settled, and the instances print
  their processing gaps over ``--gap-ms`` ("gap" lines): the row the streams-groups issue names,
  the longest processing pause of an instance that kept tasks, is then the longest gap holding
  one of its REBALANCING spans (streams_rebalance_lines.rebalance_pause_ns), beside the longest
  gap of the same instances in the steady window (what sparse input alone costs).
  A join not stable within ``--timeout`` leaves its cells empty and the run failed (the start's
  figure stays), and every instance's lines are kept (events.jsonl in the work dir).
Each side also counts the instants a task was active on two instances at once (active_overlaps
of tests/support/streams_app.py, from the "tasks" lines over the whole measurement): 0 expected.
The start's diagnosis (printed per run, kept in ``--json``; no figure of the table): each
instance's timeline from the last "ready" line (its first task, its task-set changes, its
REBALANCING spans: streams_rebalance_lines.start_timeline), the instances' JVM CPU seconds (in
all, and together per half second from the origin: on the 2-core machine 1.0 is all of it), the
whole machine's busy cores per half second from before the JVMs start (/proc/stat), and
for each side's servers (the broker; kcoord) the CPU seconds over the start window, per half
second, with kcoord's StreamsGroupHeartbeat answers and forwarded requests from its metrics
endpoint (bench/streams_rebalance_probe.py); and the coordinator's own account of the group
(bench/streams_rebalance_groups.py: Kafka's server.log, kcoord's state topic): when each member
joined, when the topology was validated, who had joined by then, each member's first target,
and when each was first handed active tasks (kcoord's records name the instance: the timelines
then also get the client's own time from that answer to its first task open and RUNNING), and,
from kcoord's records, when each was last handed tasks it did not have and the time from there
to the end of its last REBALANCING span.
Every start's lines are kept in the work dir (start-events.jsonl). ``--kcoord-initial-delay-ms``
runs the tuned kcoord sides with an initial rebalance delay: an experiment, not their row.
``--kcoord-log-level`` (e.g. ``INFO,kcoord.streams=DEBUG``: every StreamsGroupHeartbeat
answered, coordinator/group/streams/heartbeat.py) is each kcoord's --log-level; its log's path
is printed and kept in ``--json`` ("kcoord_logs"). ``--joiner-debug`` lines up the join phase by
phase: the joiner's Kafka client and Streams loggers at DEBUG in the work dir (joiner.log: each
request sent and answered, its heartbeats' assignments, its tasks' creation and restore; wall
clock in ms) and every instance's lines of the join (join-events.jsonl; ``--json`` keeps the
offset between the two clocks). ``--instances-log debug`` does the same for every started
instance (<group>/i<N>.log) and lines up each one's start step by step
(bench/streams_rebalance_steps.py: its first heartbeat, first answer with tasks, first store
open, restore, RUNNING, the error codes it retried on, each API's latency), kept in ``--json``
("steps"); ten JVMs logging at DEBUG slow the start on both sides alike, so such a run's figures
are no row. ``--instances-log light`` keeps only the lines of a few of those steps (the state
transitions, the restore, the admin client's retried ListOffsets), about what the bench's rows
cost. ``--kcoord-heartbeat-ms`` runs the tuned kcoord sides with another interval for settled
members than Kafka tuned's 500 ms: an experiment, not their row. Each Kafka broker's group
coordinator is warmed before the first run (warm_group_coordinator).

Sides. "kafka-default": Kafka 4.4.0 (one KRaft node, heap 1 GiB; bench_vs_kafka.KAFKA_DEFAULTS:
the test fixture's lowered group bounds put back) serving the group itself, its streams settings
at Kafka's defaults (initial delay 3 s, assignment interval 1 s, heartbeat 5 s). "kafka-tuned":
a second such broker with TUNED_BROKER below. "kcoord-default" / "kcoord-tuned": `kcoord serve`
in front of the kafka-default broker (which then only stores kcoord's state topic), at its
defaults / with KCOORD_TUNED and, per group, KCOORD_TUNED_GROUP. "tansu-classic": a Tansu
broker (tests/support/tansu.py, memory storage) serving the group itself, the instances with
group.protocol=classic and every other setting at Streams' defaults (so session.timeout.ms
45 s, which Tansu's JoinGroup waits on: see tests/support/tansu.py). Its instances run Kafka
Streams and kafka-clients **4.3.1**, not 4.4: a 4.4 client sends ApiVersions v5 with the cluster
id on every connection after the bootstrap one, which Tansu 0.6 misreads and drops, so a 4.4
instance never reaches Tansu's coordinator (tests/support/java.py, TANSU_BASELINE_JARS); 4.3.1,
the release before, runs, with the same application classes (TANSU_STREAMS_JAR, from ~/.m2).
"kcoord-tansu": `kcoord serve` in front of that Tansu broker, tuned as "kcoord-tuned",
group.protocol=streams, Streams 4.4 (kcoord answers ApiVersions itself). "kcoord-quiet": as
"kcoord-tuned", plus kcoord's extension streams_initial_rebalance_quiet_ms (`--kcoord-quiet-ms`: a
new group's first target waits until the joins pause, docs/user/streams-groups.md); not in the
default side list. Without ``--pin`` nothing is pinned: every JVM shares the machine's cores,
and the load average is recorded before, during and after.

``--pin SERVER:CLIENTS`` (e.g. ``0:1``; each a CPU set as bench/side_by_side/pinning.py's
parse_cpus reads it) splits the machine by the side-by-side tool's rule (bench/bench_side_by_side.py):
the whole server side on SERVER (every broker: Kafka 4.4, Tansu; and every kcoord), the load on
CLIENTS (every Streams instance's JVM, the joiner's too, and this process: its log readers, probes
and the group's describes). Each process is started while the starting thread is pinned to its
set, so the JVM sizes its GC and compiler threads for the CPUs it may use, and every thread it has
once started is pinned again (pinning.pin_process); each run logs how many threads sit where at the
start's end ("pinned"). Unpinned, kcoord's own CPU (0.3-0.4 s per start) and the broker's compete
with the ten JVMs' start on the same cores, and the start row is the machine's total; pinned, a
side's server cost cannot slow its clients, so Kafka alone and kcoord plus the same Kafka are
compared on the same one core each, as the side-by-side's rows are. Each run also keeps the CPU
seconds of each part over the start ("cpu_s": the broker, kcoord, the instances' JVMs from their
start, this process, the machine). The servers of every side listed are started once and stay
on SERVER, idle while another side runs: a Kafka side shares its core with the idle kcoord (and
a second broker, if both Kafka sides run), a kcoord side with the other side's idle broker;
"cpu_s" counts only the side's own servers.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import functools
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("KCOORD_TEST_PORTS", "29800-29899")
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "bench")]

import bench_vs_kafka as vsk  # noqa: E402
import streams_rebalance_groups as group_records  # noqa: E402
import streams_rebalance_lines as lines  # noqa: E402
import streams_rebalance_probe as probe  # noqa: E402
import streams_rebalance_steps as steps  # noqa: E402
from confluent_kafka import KafkaException  # noqa: E402
from rebalance.producer import PacedProducer  # noqa: E402
from side_by_side import pinning  # noqa: E402

from support import ports  # noqa: E402
from support.admin import committed_offsets, create_topic  # noqa: E402
from support.java import TANSU_BASELINE_JARS, ensure_java_jars  # noqa: E402
from support.kafka_broker import KafkaCluster, start_kafka  # noqa: E402
from support.kcoord import MEMBERSHIP  # noqa: E402
from support.metrics import kcoord_with_metrics  # noqa: E402
from support.names import unique_name  # noqa: E402
from support.streams_app import StreamsApp, active_overlaps, set_group_configs  # noqa: E402
from support.tansu import start_tansu  # noqa: E402
from support.wait import WaitTimeout, wait_until  # noqa: E402

TUNED_BROKER = {"group.streams.initial.rebalance.delay.ms": "0", "group.streams.assignment.interval.ms": "0",
                "group.streams.heartbeat.interval.ms": "500", "group.streams.min.heartbeat.interval.ms": "500"}
# kcoord's own names for the same settings (coordinator/config.py streams_*).
KCOORD_TUNED = ("streams_initial_rebalance_delay_ms=0", "streams_heartbeat_interval_ms=500",
                "streams_min_heartbeat_interval_ms=500")
# The assignment interval: the tuned side sets the group's own key (kcoord's serve-wide
# streams_assignment_interval_ms, 100 ms by default, would do the same for every group).
KCOORD_TUNED_GROUP = {"streams.assignment.interval.ms": "0"}
# kcoord's quiet hold of a new group's first target (off by default), `--kcoord-quiet-ms`. Its
# default, 500 ms: on a quiet machine the ten JVMs' first heartbeats came within 0.7 s, with
# gaps of about 0.1 s (docs/measurements/streams-rebalance.md); on a loaded one the gaps were
# 1 to 7 s, where the simulation (tests/unit/group/streams/test_convergence.py, slow_start)
# needed 2500 ms to move no task.
QUIET_KEY = "streams_initial_rebalance_quiet_ms"
# ... and its trickle (off by default): during the hold each member already runs up to this
# many tasks of its target, `--kcoord-quiet-tasks` (0: off). floor(tasks / instances) is the
# most that never has to move once every instance joined (docs/user/streams-groups.md).
QUIET_TASKS_KEY = "streams_initial_rebalance_quiet_tasks"
SIDES = {
    "kafka-default": "Kafka 4.4 alone, its streams coordinator at its defaults",
    "kafka-tuned": "Kafka 4.4 alone, tuned (" + ", ".join(f"{k}={v}" for k, v in TUNED_BROKER.items()) + ")",
    "kcoord-default": "kcoord (its defaults) in front of Kafka 4.4",
    "kcoord-tuned": "kcoord in front of Kafka 4.4, tuned (" + ", ".join(KCOORD_TUNED) + "; group config "
                    + ", ".join(f"{k}={v}" for k, v in KCOORD_TUNED_GROUP.items()) + ")",
    "tansu-classic": "Tansu alone, a classic Streams group (group.protocol=classic, Streams 4.3.1 at its defaults)",
    "kcoord-tansu": "kcoord in front of Tansu, tuned as above (group.protocol=streams)",
    "kcoord-quiet": "kcoord in front of Kafka 4.4, tuned as kcoord-tuned, with kcoord's extension "
                    + QUIET_KEY + "={quiet_ms}{quiet_tasks}",
}
# How long a classic group's instances must print nothing before it counts as stable.
CLASSIC_QUIET_S = 3.0
# Kafka Streams 4.3.1, as Maven keeps it (fetched with `mvn dependency:get` when missing): the
# tansu-classic side's Streams.
TANSU_STREAMS_JAR = Path.home() / ".m2/repository/org/apache/kafka/kafka-streams/4.3.1/kafka-streams-4.3.1.jar"


def on_streams_43(argv: list[str]) -> list[str]:
    """``argv`` (support.java.libs_java_command) with Kafka Streams and kafka-clients 4.3.1 in
    place of libs/'s 4.4.0 jars, every other library and the application's classes kept."""
    if not TANSU_STREAMS_JAR.is_file():
        # Fetched from Maven Central on first use, as the project's other jars are (a fresh
        # machine has Maven: docs/design/testing-against-kafka.md).
        log(f"fetching {TANSU_STREAMS_JAR.name} with mvn dependency:get")
        fetched = subprocess.run(["mvn", "-q", "-B", "dependency:get", "-Dtransitive=false",
                                  "-Dartifact=org.apache.kafka:kafka-streams:4.3.1"], capture_output=True, text=True)
        if not TANSU_STREAMS_JAR.is_file():
            raise RuntimeError(f"no {TANSU_STREAMS_JAR} after mvn dependency:get (exit {fetched.returncode}): "
                               f"{fetched.stdout[-2000:]}{fetched.stderr[-2000:]}")
    cache = ensure_java_jars()
    at = argv.index("-cp") + 1
    libs = [str(j) for j in sorted((cache / "libs").glob("*.jar"))
            if not j.name.startswith(("kafka-clients-", "kafka-streams-"))]
    clients = sorted((cache / TANSU_BASELINE_JARS).glob("kafka-clients-4.3.*.jar"))
    classes = [part for part in argv[at].split(":") if not part.endswith("/*")]
    return [*argv[:at], ":".join([*classes, *libs, str(TANSU_STREAMS_JAR), *map(str, clients)]), *argv[at + 1:]]
log = vsk.log
NS = 1e9
# side -> its kcoord's log file (the JSON keeps them, for --kcoord-log-level DEBUG runs)
KCOORD_LOGS: dict[str, str] = {}
T = TypeVar("T")


class Pin(NamedTuple):
    """``--pin SERVER:CLIENTS``: the brokers and kcoords on ``server``, the instances and this
    process on ``clients`` (the docstring)."""
    server: set[int]
    clients: set[int]

    @staticmethod
    def parse(text: str) -> Pin:
        server, sep, clients = text.partition(":")
        if not sep:
            raise argparse.ArgumentTypeError(f"{text!r}: SERVER:CLIENTS, e.g. 0:1")
        pin = Pin(pinning.parse_cpus(server), pinning.parse_cpus(clients))
        if pin.server & pin.clients:
            raise argparse.ArgumentTypeError(f"{text!r}: the two sets share CPUs {sorted(pin.server & pin.clients)}")
        return pin

    def text(self) -> str:
        return f"server side on CPUs {sorted(self.server)}, Streams instances and the bench on {sorted(self.clients)}"


def on_server(pin: Pin | None, what: str, start: Callable[[], T], pid: Callable[[T], int]) -> T:
    """``start()`` with the server side's pinning: started while this thread is on the server's
    CPUs (its process inherits them), then every thread of ``pid(started)`` pinned there."""
    if pin is None:
        return start()
    got, n = pinning.start_pinned(pin.server, pin.clients, start, pid)
    log(f"  {what}: pid {pid(got)}, {n} threads pinned on CPUs {sorted(pin.server)}")
    return got


class Side:
    """What the instances of one side talk to, and the cluster its topics live on."""

    def __init__(self, name: str, bootstrap: str, upstream: str, group_configs: dict[str, str] | None = None,
                 protocol: str = "streams", watched: dict[str, tuple[int, int | None]] | None = None,
                 group_timeline: Callable[[str, float], dict[str, Any]] | None = None) -> None:
        self.name, self.bootstrap, self.upstream, self.protocol = name, bootstrap, upstream, protocol
        self.group_configs = group_configs or {}
        # The side's servers whose CPU (and, with a metrics port, kcoord's counts) the start's
        # diagnosis records: name -> (pid, metrics port or None).
        self.watched = watched or {}
        # (group id, origin on the wall clock) -> the coordinator's own account of the start
        # (streams_rebalance_groups.py), or None where there is none (a classic group on Tansu).
        self.group_timeline = group_timeline


def all_tasks(partitions: int, subtopologies: int) -> set[str]:
    return {f"{s}_{p}" for s in range(subtopologies) for p in range(partitions)}


def stable(apps: list[StreamsApp], tasks: set[str], protocol: str = "streams") -> bool:
    """Every instance RUNNING, each task active on exactly one; then for a streams group the
    group STABLE with one member per instance, each at its target; for a classic group every
    instance with an active task and CLASSIC_QUIET_S without a new line (the docstring above)."""
    fatal = [(a.name, e) for a in apps for e in a.events("fatal")]
    if fatal:
        raise RuntimeError(f"instances failed: {fatal}")
    latest = [a.tasks()[0] for a in apps]
    if (any(a.state() != "RUNNING" for a in apps) or lines.active_twice(latest)
            or set().union(*latest) != tasks):
        return False
    if protocol == "classic":
        quiet_ns = time.monotonic_ns() - lines.settled_ns([a.events() for a in apps])
        return all(latest) and quiet_ns >= CLASSIC_QUIET_S * NS
    d = apps[0].ask("describe")
    members = d["members"]
    return (d["state"] == "STABLE" and len(members) == len(apps)
            and all(m["active"] == m["target_active"] and m["standby"] == m["target_standby"] for m in members))


def keep_lines(apps: list[StreamsApp], path: Path, why: str) -> None:
    """Every instance's lines in ``path`` (JSON lines with "instance"), to explain ``why`` later."""
    path.write_text("".join(json.dumps({"instance": x.name, **e}) + "\n" for x in apps for e in x.events()))
    log(f"  {why}; the instances' lines in {path}")


def launch(apps: list[StreamsApp], pin: Pin | None = None) -> None:
    """Start ``apps`` at once; with ``pin`` on its clients' CPUs (the pool's threads, and so the
    JVMs they start, inherit this thread's set), every JVM thread pinned again once it is ready."""
    with pinning.running_on(pin.clients if pin else os.sched_getaffinity(0)):
        with concurrent.futures.ThreadPoolExecutor(len(apps)) as pool:   # JVM starts overlap
            list(pool.map(lambda app: app.start(180), apps))
    if pin is not None:
        n = sum(pinning.pin_process(x.process.pid, pin.clients) for x in apps if x.process is not None)
        log(f"  {len(apps)} instance JVM(s): {n} threads pinned on CPUs {sorted(pin.clients)}")


def where_threads_run(side: Side, apps: list[StreamsApp]) -> dict[str, dict[str, int]]:
    """Each part's threads by the CPUs they may use (pinning.thread_cpus): the pinning checked."""
    out: dict[str, dict[str, int]] = {}
    parts = [*((n, pid) for n, (pid, _) in side.watched.items()),
             *(("instances", x.process.pid) for x in apps if x.process is not None), ("bench", os.getpid())]
    for part, pid in parts:
        try:
            for cpus, n in pinning.thread_cpus(pid).items():
                out.setdefault(part, {})[cpus] = out.get(part, {}).get(cpus, 0) + n
        except (FileNotFoundError, ProcessLookupError):     # the process ended: nothing to say
            pass
    return out


def measure(side: Side, a: argparse.Namespace, work: Path, run: int) -> dict[str, Any]:
    """One start of ``--instances`` and one joiner on a fresh group; every instance killed after."""
    name = unique_name(f"srb-{side.name}-{run}")
    create_topic(side.upstream, f"{name}-in", a.partitions)
    create_topic(side.upstream, f"{name}-out", 1)
    if side.group_configs:
        set_group_configs(side.bootstrap, name, side.group_configs)
    tasks = all_tasks(a.partitions, a.subtopologies)

    def instance(i: int) -> StreamsApp:
        app = StreamsApp(side.bootstrap, app_id=name, input=f"{name}-in", output=f"{name}-out",
                         state_dir=str(work / name / f"i{i}"), name=f"{side.name}-i{i}",
                         app_server=f"127.0.0.1:{ports.free_port()}", protocol=side.protocol)
        app.argv += ["--subtopologies", str(a.subtopologies)]     # the application's own option
        if a.input_rate:
            app.argv += ["--gap-ms", str(a.gap_ms), "--commit-ms", str(a.commit_ms)]
        if side.name == "tansu-classic":
            app.argv = on_streams_43(app.argv)
        if a.instances_log and i < a.instances:
            app.argv = joiner_with_debug_log(app.argv, work / name / f"i{i}.log",
                                             INSTANCES_LIGHT_LOG4J if a.instances_log == "light" else JOINER_LOG4J)
        return app

    apps = [instance(i) for i in range(a.instances)]

    def settled() -> bool:
        return stable(apps, tasks, side.protocol)
    probes = {n: probe.Probe(pid, port).start() for n, (pid, port) in side.watched.items()}
    probes[MACHINE_PROBE] = probe.Probe(0).start()      # the whole machine, from before the JVMs start
    feed: PacedProducer | None = None
    try:
        bench_cpu = os.times()
        launch(apps, a.pin)
        # the JVMs too (from their ready lines on: launch waits for them): their share of the machine
        jvms = {x.name: probe.Probe(x.process.pid).start() for x in apps if x.process is not None}
        probes.update({f"{INSTANCE_PROBE}{n}": p for n, p in jvms.items()})
        wait_until(settled, a.timeout, 0.5, lambda: f"{side.name}: {len(apps)} instances stable "
                   f"({[(x.name, x.state(), len(x.tasks()[0])) for x in apps]})")
        events = [x.events() for x in apps]
        start_s = (lines.settled_ns(events) - lines.last_ready_ns(events)) / NS
        diagnosis = start_diagnosis(apps, probes, start_s)
        now = os.times()
        diagnosis["cpu_s"] = cpu_by_part(diagnosis, now.user + now.system - bench_cpu.user - bench_cpu.system)
        diagnosis["pinned"] = where_threads_run(side, apps)
        log(f"    CPU seconds over the start: {diagnosis['cpu_s']}; threads by CPU set: {diagnosis['pinned']}")
        if side.group_timeline is not None:
            diagnosis["group"] = side.group_timeline(name, diagnosis["origin_wall"])
            log(f"    the group's records: {diagnosis['group']}")
            hand_to_open(diagnosis)
        keep_lines(apps, work / name / "start-events.jsonl", "the start's diagnosis")
        if a.instances_log:     # each instance's start step by step, from its log
            diagnosis["steps"] = steps.group_steps(work / name, diagnosis["origin_wall"], start_s)
            for inst, got in sorted(diagnosis["steps"].items(), key=lambda kv: kv[1]["running"] or 0):
                log(f"    {inst}: " + ", ".join(f"{k} {v}" for k, v in got.items() if k != "latency_ms"))
        steady_from = 0
        if a.input_rate:    # the input flowing before, during and after the join (the docstring)
            # to the cluster directly, not through a kcoord side's gateway: the input is the
            # world's, not the application's, and costs both sides the same; values cycle over
            # INPUT_VALUES strings, so the counts change and every subtopology processes
            feed = PacedProducer(side.upstream, f"{name}-in", a.input_rate,
                                 value=lambda seq: f"v{seq % INPUT_VALUES}".encode()).start()
            time.sleep(INPUT_CATCH_UP_S)      # a fixed window: the first records, then steady
            steady_from = time.monotonic_ns()
            time.sleep(a.input_steady_s)
        before_join = time.monotonic_ns()
        joiner = instance(a.instances)
        if a.joiner_debug:
            joiner.argv = joiner_with_debug_log(joiner.argv, work / name / "joiner.log")
        apps.append(joiner)
        launch([joiner], a.pin)
        try:
            wait_until(settled, a.timeout, 0.5, lambda: f"{side.name}: joiner stable "
                       f"({[(x.name, x.state(), len(x.tasks()[0])) for x in apps]})")
        except WaitTimeout as exc:   # the start's figure stands; the join's are missing
            keep_lines(apps, work / name / "events.jsonl", "the join never settled")
            overlaps = active_overlaps(apps)
            return {"start_s": start_s, "start_diagnosis": diagnosis, "cpu_s": diagnosis["cpu_s"],
                    "join_first_task_s": None,
                    "join_stable_s": None, "pause_s": None,
                    "keepers": None, "overlaps": len(overlaps), "overlap_examples": overlaps[:3],
                    "join_error": f"{exc}"[:600]}
        joined = lines.first_running_task_ns(joiner.events())
        ready = lines.last_ready_ns([joiner.events()])
        end = lines.settled_ns([x.events() for x in apps])
        keepers = [x for x in apps[:-1] if lines.kept_tasks(x.events(), before_join)]
        pause = max((lines.longest_rebalancing_ns(x.events(), before_join, end) for x in keepers), default=0)
        processing: dict[str, Any] = {}
        if feed is not None:
            # the last keeper's pause may still be open at ``end``: its gap line is printed at
            # its next record, which the flowing input brings within a few ms
            time.sleep(INPUT_AFTER_S)
            fed = feed.stop()
            gaps = [lines.rebalance_pause_ns(x.events(), before_join, end) for x in keepers]
            steady = [lines.longest_gap_ns(x.events(), steady_from, before_join) for x in keepers]
            processing = {"processing_pause_s": max(gaps, default=0) / NS, "steady_gap_s": max(steady, default=0) / NS,
                          "keepers_pauses_s": [round(g / NS, 4) for g in gaps], "input": fed}
            if fed["failed"]:
                raise RuntimeError(f"the input feed failed: {fed}")
            keep_lines(apps, work / name / "input-events.jsonl", "the processing gaps")
        overlaps = active_overlaps(apps)
        if overlaps:      # the instances' lines, to explain it later
            keep_lines(apps, work / name / "events.jsonl", "task active twice")
        elif a.joiner_debug:   # the join's lines, to line up with the joiner's own log
            keep_lines(apps, work / name / "join-events.jsonl", "the join's phases")
        return {"start_s": start_s, "start_diagnosis": diagnosis, "cpu_s": diagnosis["cpu_s"],
                "join_first_task_s": (joined - ready) / NS if joined else None,
                "join_stable_s": (end - ready) / NS, "pause_s": pause / NS, "keepers": len(keepers),
                "overlaps": len(overlaps), "overlap_examples": overlaps[:3], **processing}
    finally:
        if feed is not None:    # stopped here too on any failure: a feed left running loads every later run
            feed.stop()
        for p in probes.values():
            p.stop(0)
        for x in apps:
            if x.alive:
                x.kill()
        # the instances' state directories (RocksDB stores, about 100 MB a run): a long set
        # filled a shared /tmp; the kept lines (*.jsonl) stay
        for i in range(a.instances + 1):
            shutil.rmtree(work / name / f"i{i}", ignore_errors=True)


# ``--input-rate``: the feed's first records reach tasks that have read nothing yet (INPUT_CATCH_UP_S
# is left out of every window); a keeper's pause still open when the group is stable again is
# closed by its next record (INPUT_AFTER_S more of input).
INPUT_CATCH_UP_S = 1.0
INPUT_VALUES = 1000
INPUT_AFTER_S = 1.0
# the start's probes of the instances' JVMs are named with this prefix, the whole machine's
# MACHINE_PROBE (the others: the side's servers)
INSTANCE_PROBE = "instance "
MACHINE_PROBE = "machine"


def cpu_by_part(d: dict[str, Any], bench_s: float) -> dict[str, float | None]:
    """The CPU seconds each part used over the start (start_diagnosis's figures): the servers
    and the machine from just before the JVMs started to the stable group, the instances' JVMs
    from their own start (all of a JVM's start is the start's), this process over the same."""
    servers = d["servers"]
    return {"broker": servers.get("broker", {}).get("cpu_s"), "kcoord": servers.get("kcoord", {}).get("cpu_s"),
            "instances": d["instances_cpu_s"], "bench": round(bench_s, 2), "machine": d.get("machine_cpu_s")}


def start_diagnosis(apps: list[StreamsApp], probes: dict[str, probe.Probe], start_s: float) -> dict[str, Any]:
    """Where the start's time went (no assertion): each instance's timeline from the last
    "ready" (lines.start_timeline), their summary, the JVMs' CPU seconds so far, and each
    watched server's CPU and (kcoord) heartbeat and forwarding counts over the start window."""
    events = [x.events() for x in apps]
    origin, end = lines.last_ready_ns(events), lines.settled_ns(events)
    timelines = {x.name: lines.start_timeline(e, origin, end) for x, e in zip(apps, events)}
    jvm_cpu = []
    for x in apps:
        try:
            jvm_cpu.append(probe.cpu_seconds(x.process.pid) if x.process is not None else 0.0)
        except OSError:
            jvm_cpu.append(0.0)
    # The origin on the wall clock too, to line the timelines up with the servers' logs (Kafka's
    # GroupMetadataManager lines) and the state topic's record timestamps (kcoord's group records).
    origin_wall = time.time() - (time.monotonic_ns() - origin) / NS
    stopped = {n: p.stop(origin) for n, p in probes.items()}
    per_half: dict[float, float] = {}
    for n, figures in stopped.items():
        if n.startswith(INSTANCE_PROBE):
            for at, cpu in figures.get("cpu_per_half_s", []):
                per_half[at] = per_half.get(at, 0.0) + cpu
    out = {"start_s": round(start_s, 3), "origin_wall": round(origin_wall, 3),
           "summary": lines.start_summary(list(timelines.values())),
           "instances_cpu_s": round(sum(jvm_cpu), 1),
           # all the instances' CPU seconds per half second from the origin (2 cores: 1.0 is all)
           "instances_cpu_per_half_s": [(at, round(cpu, 2)) for at, cpu in sorted(per_half.items())],
           # the whole machine's busy cores per half second, from before the JVMs started
           "machine_busy_cores": [(at, round(cpu * 2, 2))
                                  for at, cpu in stopped[MACHINE_PROBE].get("cpu_per_half_s", [])]
           if MACHINE_PROBE in stopped else None,
           "machine_cpu_s": stopped.get(MACHINE_PROBE, {}).get("cpu_s"),
           "servers": {n: f for n, f in stopped.items() if not n.startswith(INSTANCE_PROBE) and n != MACHINE_PROBE},
           "timelines": timelines}
    print_diagnosis(out)
    return out


def hand_to_open(d: dict[str, Any]) -> None:
    """Each instance's time from the coordinator's first answer with active tasks for it (the
    group's records, keyed by instance where the coordinator keeps client ids: kcoord's) to its
    first task open and its first RUNNING with tasks: the client's own share of the start
    (docs/measurements/streams-rebalance.md, the seventh section). Kept in the timelines."""
    handed = (d.get("group") or {}).get("first_handed_s") or {}
    last = (d.get("group") or {}).get("last_handed_s") or {}
    shares, lasts = [], []
    for name, t in d["timelines"].items():
        at = handed.get(name)
        if at is None:
            continue
        t["handed"] = at
        t["hand_to_open_s"] = None if t["first_task_open"] is None else round(t["first_task_open"] - at, 3)
        t["hand_to_running_s"] = (None if t["first_running_with_task"] is None
                                  else round(t["first_running_with_task"] - at, 3))
        shares.append(f"{name} {at} +{t['hand_to_open_s']} open +{t['hand_to_running_s']} RUNNING")
        if (end := last.get(name)) is not None:
            # the last REBALANCING span's end: RUNNING on the whole start set
            ran = max((b for _, b in t["rebalancing"] if b is not None), default=t["first_running_with_task"])
            t["last_handed"] = end
            t["last_hand_to_running_s"] = None if ran is None else round(ran - end, 3)
            lasts.append(f"{name} {end} +{t['last_hand_to_running_s']}")
    if shares:
        log("    first handed -> first open, RUNNING: " + "; ".join(shares))
    if lasts:
        log("    last handed -> RUNNING after it: " + "; ".join(lasts))


def print_diagnosis(d: dict[str, Any]) -> None:
    wall = time.strftime("%H:%M:%S", time.gmtime(d["origin_wall"])) + f".{int(d['origin_wall'] % 1 * 1000):03d} UTC"
    log(f"    start {d['start_s']:.2f} s (origin: the last ready line, {wall}); {d['summary']}; "
        f"the instances' JVMs used {d['instances_cpu_s']} CPU s; per half second from the origin "
        f"{d.get('instances_cpu_per_half_s')}; the machine's busy cores per half second {d.get('machine_busy_cores')} "
        f"(of {os.cpu_count()})")
    for name, s in d["servers"].items():
        log(f"    {name}: " + "; ".join(f"{k} {v}" for k, v in s.items()))
    for name, t in d["timelines"].items():
        log(f"    {name}: ready {t['ready']}, first tasks line {t['first_active_tasks_line']}, first open "
            f"{t['first_task_open']}, RUNNING {t['first_running_with_task']}, active sizes {t['active_sizes']}, "
            f"opens/closes {t['opens']}/{t['closes']}, REBALANCING {t['rebalancing']}")


# A log4j2 configuration writing to {path} (str.format), each line stamped with the wall clock
# in ms; the loggers are appended.
LOG4J_FILE = """status = error
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{UNIX_MILLIS}} %-5p [%t] %c{{1}} - %m%n
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = FILE
"""


# --joiner-debug: the joiner's Kafka client and Streams loggers at DEBUG into a file (every
# request it sends and each answer: NetworkClient; its heartbeats and reconciliation: the
# consumer internals; its tasks' creation and restore: Streams), each line stamped with the
# wall clock in ms, and the instances' lines kept (join-events.jsonl; "t" is CLOCK_MONOTONIC:
# the run's JSON keeps the offset between the two clocks, "wall_minus_monotonic_ns"). The same
# loggers on every side, so the phases compare; the extra logging slows that one JVM a little.
JOINER_LOG4J = LOG4J_FILE + """logger.clients.name = org.apache.kafka.clients
logger.clients.level = DEBUG
logger.streams.name = org.apache.kafka.streams
logger.streams.level = DEBUG
logger.metrics.name = org.apache.kafka.common.metrics
logger.metrics.level = WARN
"""


# --instances-log light: the steps of streams_rebalance_steps.py that cost few lines: the
# client's state transitions, the stream thread's task initialisation (INFO), the restore's
# start and end, and each ListOffsets of a changelog the admin client retries (its handler's
# DEBUG line: the partition had no leader on the broker yet).
INSTANCES_LIGHT_LOG4J = LOG4J_FILE + """logger.streams.name = org.apache.kafka.streams
logger.streams.level = INFO
logger.retries.name = org.apache.kafka.clients.admin.internals.ListOffsetsHandler
logger.retries.level = DEBUG
"""


def joiner_with_debug_log(argv: list[str], path: Path, template: str = JOINER_LOG4J) -> list[str]:
    """``argv`` with its log4j2 configuration replaced by ``template`` writing to ``path``."""
    config = path.with_suffix(".log4j2.properties")
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(template.format(path=path))
    return [f"-Dlog4j2.configurationFile={config}" if arg.startswith("-Dlog4j2.configurationFile=") else arg
            for arg in argv]


def start_side_servers(sides: list[str], work: Path, a: argparse.Namespace) -> tuple[dict[str, Side], list[Any]]:
    """The brokers and kcoords the chosen sides need; the list of what to stop."""
    out: dict[str, Side] = {}
    stops: list[Any] = []
    brokers: dict[str, KafkaCluster] = {}
    tansu: list[str] = []

    def tansu_broker() -> str:
        if not tansu:
            t = on_server(a.pin, "Tansu", lambda: start_tansu(log_dir=work), lambda t: t.process.pid)
            stops.append(t.stop)
            log(f"Tansu at {t.bootstrap}")
            tansu.append(t.bootstrap)
        return tansu[0]

    def broker(kind: str) -> KafkaCluster:
        if kind not in brokers:
            overrides = {**vsk.KAFKA_DEFAULTS, **(TUNED_BROKER if kind == "tuned" else {})}
            log(f"starting Kafka {vsk.KAFKA_VERSION} ({kind}): {overrides}")
            brokers[kind] = on_server(
                a.pin, f"Kafka ({kind})",
                lambda: start_kafka(vsk.KAFKA_VERSION, work / f"kafka-{kind}", overrides=overrides, heap="1g"),
                broker_pid)
            stops.append(brokers[kind].stop)
            warm_group_coordinator(brokers[kind].bootstrap)
        return brokers[kind]

    for side in sides:
        if side.startswith("kafka-"):
            k = broker(side.removeprefix("kafka-"))
            out[side] = Side(side, k.bootstrap, k.bootstrap, watched={"broker": (broker_pid(k), None)},
                             group_timeline=functools.partial(group_records.kafka_group, k.nodes[0].log_path))
        elif side == "tansu-classic":
            out[side] = Side(side, tansu_broker(), tansu_broker(), protocol="classic")
        else:
            upstream = tansu_broker() if side == "kcoord-tansu" else broker("default").bootstrap
            tuned = side in ("kcoord-tuned", "kcoord-tansu", "kcoord-quiet")
            quiet = (f"{QUIET_KEY}={a.kcoord_quiet_ms}", f"{QUIET_TASKS_KEY}={a.kcoord_quiet_tasks}")
            config = (*MEMBERSHIP, *(KCOORD_TUNED if tuned else ()), *(quiet if side == "kcoord-quiet" else ()))
            if tuned and a.kcoord_initial_delay_ms is not None:   # an experiment, named in the log and JSON
                config = tuple(f"streams_initial_rebalance_delay_ms={a.kcoord_initial_delay_ms}"
                               if c.startswith("streams_initial_rebalance_delay_ms=") else c for c in config)
            if tuned and a.kcoord_heartbeat_ms is not None:   # an experiment too: the interval lever
                # under kcoord's adaptive policy (its default) a settled member is told
                # consumer_heartbeat_stable_interval_ms (500 ms by default, as Kafka tuned's);
                # the streams_* ones are Kafka's fixed policy's
                config = tuple(c for c in config if not c.startswith(("streams_heartbeat_interval_ms=",
                                                                      "streams_min_heartbeat_interval_ms=")))
                config += (f"streams_heartbeat_interval_ms={a.kcoord_heartbeat_ms}",
                           f"streams_min_heartbeat_interval_ms={a.kcoord_heartbeat_ms}",
                           f"consumer_heartbeat_stable_interval_ms={a.kcoord_heartbeat_ms}")
            state_topic = unique_name("__kcoord_srb")
            kc = kcoord_with_metrics(upstream, state_topic, config=config, log_level=a.kcoord_log_level)
            kc = on_server(a.pin, f"kcoord ({side})", kc.start, kcoord_pid)
            stops.append(kc.stop)
            log(f"kcoord ({side}) at {kc.bootstrap}: {config}; its log {kc.log_path}")
            KCOORD_LOGS[side] = str(kc.log_path)
            assert kc.process is not None
            watched = {"kcoord": (kc.process.pid, kc.metrics_port)}
            if side in ("kcoord-tuned", "kcoord-default", "kcoord-quiet"):
                watched["broker"] = (broker_pid(brokers["default"]), None)
            out[side] = Side(side, kc.bootstrap, upstream, KCOORD_TUNED_GROUP if tuned else None, watched=watched,
                             group_timeline=functools.partial(group_records.kcoord_group, upstream, state_topic))
    return out, stops


def warm_group_coordinator(bootstrap: str) -> None:
    """Kafka creates __consumer_offsets on the first FindCoordinator and then loads its
    partitions; a fresh broker's first group (any type: one coordinator runtime) is answered
    NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS meanwhile. Without this the first start on a
    Kafka side lost 1.5 s to it (its members' first join 1.5 to 1.6 s after their first
    heartbeat, 40 and 56 such answers: docs/measurements/streams-rebalance.md, the twelfth
    section), which no kcoord side pays (kcoord's state topic exists before its first run, and a
    deployed cluster has its __consumer_offsets). One group's OffsetFetch, answered, is the
    coordinator up."""
    started = time.monotonic()
    group = unique_name("srb-warm")

    def answered() -> bool:
        try:
            committed_offsets(bootstrap, group, "srb-warm", 1, timeout=10)
        except KafkaException:     # NOT_COORDINATOR while __consumer_offsets loads: ask again
            return False
        return True
    wait_until(answered, 120, 0.5, f"{bootstrap}: a group coordinator")
    log(f"  {bootstrap}: group coordinator answered after {time.monotonic() - started:.1f} s")


def kcoord_pid(kc: Any) -> int:
    assert kc.process is not None, "kcoord is not running"
    return int(kc.process.pid)


def broker_pid(cluster: KafkaCluster) -> int:
    process = cluster.nodes[0].process
    assert process is not None, "the broker is not running"
    return process.pid


def _seconds(values: list[float | None]) -> str:
    present = [v for v in values if v is not None]
    if not present:
        return "—"
    spread = f" ({min(present):.2f}–{max(present):.2f})" if len(present) > 1 else ""
    return f"**{statistics.median(present):.2f} s**{spread}"


def table(figures: dict[str, list[dict[str, Any] | None]], a: argparse.Namespace) -> str:
    """One row per side; each cell the median over the runs, the range in brackets."""
    head = ["side", f"{a.instances} started at once: last start() → all RUNNING, stable",
            f"instance {a.instances + 1} joins: ready → its first task RUNNING",
            "… → group stable again", "longest REBALANCING of an instance that kept tasks",
            *(("longest processing pause of an instance that kept tasks",
               "longest processing gap of those instances before the join (steady input)") if a.input_rate else ()),
            "task active twice", "runs ok"]
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for side, runs in figures.items():
        ok = [r for r in runs if r]

        def col(key: str, ok: list[dict[str, Any]] = ok) -> str:
            return _seconds([r[key] for r in ok])
        label = SIDES[side].format(quiet_ms=a.kcoord_quiet_ms, quiet_tasks=f", {QUIET_TASKS_KEY}={a.kcoord_quiet_tasks}"
                                   if a.kcoord_quiet_tasks else "")
        out.append("| " + " | ".join([label, col("start_s"), col("join_first_task_s"), col("join_stable_s"),
                                      col("pause_s"),
                                      *((col("processing_pause_s"), col("steady_gap_s")) if a.input_rate else ()),
                                      str(sum(r["overlaps"] for r in ok)),
                                      f"{sum(not r.get('join_error') for r in ok)} of {len(runs)}"]) + " |")
    return "\n".join(out)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--instances", type=int, default=10)
    p.add_argument("--partitions", type=int, default=32, help="input partitions (one task per subtopology each)")
    p.add_argument("--subtopologies", type=int, choices=(2, 3), default=3,
                   help="the application's subtopologies: 3 (the issue's workload) or 2 (the tests' application)")
    p.add_argument("--kcoord-log-level", default="INFO",
                   help="each kcoord's --log-level, e.g. INFO,kcoord.streams=DEBUG (every heartbeat answered)")
    p.add_argument("--sides", default=",".join(s for s in SIDES if s != "kcoord-quiet"))
    p.add_argument("--timeout", type=float, default=300.0, help="bound of each wait for a stable group, s")
    p.add_argument("--doc", type=Path, default=None, help="write the Markdown page here")
    p.add_argument("--kcoord-initial-delay-ms", type=int, default=None,
                   help="an experiment: this streams_initial_rebalance_delay_ms on the tuned kcoord sides "
                        "(their table label does not say it: do not publish such a run as the tuned row)")
    p.add_argument("--kcoord-heartbeat-ms", type=int, default=None,
                   help="an experiment: this heartbeat interval of settled members on the tuned kcoord sides "
                        "(adaptive policy's stable interval and the streams_* ones) in place of Kafka tuned's "
                        "500 ms (their table label does not say it: never the tuned row)")
    p.add_argument("--kcoord-quiet-ms", type=int, default=500,
                   help="the kcoord-quiet side's streams_initial_rebalance_quiet_ms")
    p.add_argument("--kcoord-quiet-tasks", type=int, default=0,
                   help="the kcoord-quiet side's streams_initial_rebalance_quiet_tasks (0: off)")
    p.add_argument("--joiner-debug", action="store_true",
                   help="the joiner's client and Streams logs at DEBUG in the work dir (joiner.log), its "
                        "and the others' lines in join-events.jsonl (the work dir)")
    p.add_argument("--instances-log", choices=("debug", "light"), default=None,
                   help="every started instance's log in the work dir (<group>/i<N>.log, kept): the start "
                        "step by step; debug: its client and Streams loggers at DEBUG, as the joiner's with "
                        "--joiner-debug (ten JVMs logging slow the start, both sides alike: no row figure); "
                        "light: only the steps' own lines (INSTANCES_LIGHT_LOG4J)")
    p.add_argument("--input-rate", type=float, default=0.0,
                   help="records/s produced to the input (round-robin over its partitions) from the start's "
                        "end until the join's: the keepers' processing pauses are measured (0: no input)")
    p.add_argument("--input-steady-s", type=float, default=3.0,
                   help="with --input-rate: the steady window before the join, whose longest gap is the baseline")
    p.add_argument("--gap-ms", type=int, default=20,
                   help="with --input-rate: the instances print processing gaps over this (StreamsEvents)")
    p.add_argument("--commit-ms", type=int, default=30000,
                   help="with --input-rate: the instances' commit.interval.ms (Streams' default for "
                        "at-least-once, 30 s; the application's own 200 ms, the tests', commits each task "
                        "five times a second and saturated the 2-core machine's ten JVMs)")
    p.add_argument("--json", type=Path, default=None, help="write every run's figures and start diagnosis here")
    p.add_argument("--pin", type=Pin.parse, default=None, metavar="SERVER:CLIENTS",
                   help="e.g. 0:1: brokers and kcoords on SERVER's CPUs, the Streams instances and this process on "
                        "CLIENTS' (the side-by-side's rule; default: nothing pinned)")
    a = p.parse_args(argv)
    unknown = set(a.sides.split(",")) - SIDES.keys()
    if unknown:
        p.error(f"unknown sides {sorted(unknown)}; known: {sorted(SIDES)}")
    return a


def pinned_text(meta: dict[str, Any]) -> str:
    pin = meta.get("pin")
    if pin is None:
        return (f"Nothing pinned: every JVM (the broker, {meta['instances'] + 1} Streams instances) and kcoord "
                "share the cores with whatever else runs.")
    return (f"Pinned (`--pin`, the side-by-side's rule): the server side (the broker; kcoord) on CPUs "
            f"{pin['server']}, the {meta['instances'] + 1} Streams instances' JVMs and the bench on CPUs "
            f"{pin['clients']}; whatever else runs shares them.")


def write_doc(path: Path, command: str, meta: dict[str, Any], text: str, failures: list[str]) -> None:
    input_text = (f"{meta['input_rate']:g} records/s of input around the join" if meta.get("input_rate")
                  else "no input produced")
    failed = "\n## Failed measurements\n\n" + "\n".join(f"- {f}" for f in failures) + "\n" if failures else ""
    path.write_text(f"""# Streams rebalances: Kafka 4.4's streams coordinator and kcoord

Real Kafka Streams 4.4 instances (`group.protocol=streams`) of the counting application
(tests/clients/java/streams/CountStreamsApp.java: {meta['subtopologies']} subtopologies, {meta['partitions']} input
partitions, so {meta['subtopologies'] * meta['partitions']} tasks; {input_text}), started together and then
joined by one more. How each figure is taken: the docstring of `bench/bench_streams_rebalance.py`.

    {command}

- Machine: {meta['machine']}. {pinned_text(meta)}
- Load average (1/5/15 min): {meta['load_before']} before, {meta['load_after']} after;
  {meta['load_during']}. Elapsed {meta['elapsed_min']:.0f} min.
- Each cell: the median of the runs, the range in brackets; the sides alternate in order run by run.

## Results

{text}
{failed}""")


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    command = shlex.join(["python", "bench/bench_streams_rebalance.py", *(argv if argv is not None else sys.argv[1:])])
    work = Path(tempfile.mkdtemp(prefix="bench-streams-rebalance-"))
    load_before = os.getloadavg()
    if a.pin is not None:    # this process (its threads: the probes, the log readers) on the clients' CPUs
        n = pinning.pin_process(os.getpid(), a.pin.clients)
        log(f"pinning: {a.pin.text()}; this process's {n} threads on CPUs {sorted(a.pin.clients)}")
    sampler = pinning.LoadAverage().start()
    log(f"command: {command}; load average {load_before}; work dir {work}")
    sides = a.sides.split(",")
    figures: dict[str, list[dict[str, Any] | None]] = {s: [] for s in sides}
    failures: list[str] = []
    servers, stops = start_side_servers(sides, work, a)
    try:
        for run in range(a.runs):
            for side in (sides if run % 2 == 0 else sides[::-1]):
                what = f"run {run + 1} {side}"
                try:
                    measured = measure(servers[side], a, work, run)
                    log(f"  {what}: {measured}")
                    if measured.get("join_error"):
                        failures.append(f"{what}, the join: {measured['join_error']}"[:400])
                    got: dict[str, Any] | None = measured
                except Exception as exc:     # one failed measurement: reported, the run goes on
                    got = None
                    log(f"FAILED {what}: {exc!r}"[:800])
                    failures.append(f"{what}: {exc!r}"[:400])
                figures[side].append(got)
    finally:
        for stop in reversed(stops):
            stop()
    text = table(figures, a)
    meta = {"partitions": a.partitions, "instances": a.instances, "subtopologies": a.subtopologies,
            "input_rate": a.input_rate,
            "kcoord_logs": KCOORD_LOGS, "work_dir": str(work),
            "pin": None if a.pin is None else {"server": sorted(a.pin.server), "clients": sorted(a.pin.clients)},
            "wall_minus_monotonic_ns": time.time_ns() - time.monotonic_ns(),
            "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}, Kafka {vsk.KAFKA_VERSION} "
                       "(1 KRaft node, heap 1g)",
            "load_before": " / ".join(f"{x:.2f}" for x in load_before),
            "load_after": " / ".join(f"{x:.2f}" for x in os.getloadavg()),
            "load_during": pinning.LoadAverage.text(sampler.stop()), "elapsed_min": (time.monotonic() - vsk.T0) / 60}
    print(f"\n{text}\n")
    print(f"load average before {meta['load_before']}, after {meta['load_after']}; {meta['load_during']}")
    if failures:
        print("FAILURES:\n  " + "\n  ".join(failures))
    if a.doc:
        write_doc(a.doc, command, meta, text, failures)
        print(f"wrote {a.doc}")
    if a.json:
        a.json.write_text(json.dumps({"command": command, "meta": meta, "figures": figures, "failures": failures},
                                     indent=1))
        print(f"wrote {a.json}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
