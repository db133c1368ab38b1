"""Kafka 4.4's own group coordinator against kcoord in front of the same Kafka, side by side,
each side's whole server on the same cores.

    .venv/bin/python bench/bench_side_by_side.py [--runs 3] [--configs default,tuned,tansu]
        [--workloads commit_closed,commit_pipelined,heartbeat_closed,heartbeat_pipelined,storm,join]
        [--server-cpus 0] [--load-cpus 1] [--doc docs/measurements/side-by-side.md] [--out-dir DIR] [--quick]

Sides. "kafka": one Kafka 4.4.0 KRaft node (tests/support/kafka_broker.py, heap 1 GiB, full
JIT) serving the group APIs with its own coordinator. "kcoord": `kcoord serve` (its
defaults) in front of that same broker, which then only stores kcoord's state topic. The
server side of each (the broker; the broker plus kcoord) runs on ``--server-cpus``, every
load generator (raw-socket workers, simulated members, librdkafka consumers, the paced
producer) on ``--load-cpus``, by sched_setaffinity (bench/side_by_side/pinning.py).

Brokers. ``tansu``: Tansu 0.6 (tests/support/tansu.py, memory storage, its defaults) in
place of Kafka; its own coordinator is measured where its ApiVersions lists the workload's
API (OffsetCommit: the commit rows), and the other rows through kcoord alone (Tansu lists no
ConsumerGroupHeartbeat, API 68), their upstream cell saying so. ``default``: Kafka's group
defaults (bench_vs_kafka.KAFKA_DEFAULTS: the test fixture's lowered bounds put back, 50
offsets partitions, 3 network / 8 io threads). ``tuned``: the same plus what kcoord's tests
tune (tests/support/kafka_broker.py SETTINGS, tests/support/differential.py): the KIP-1263
assignment interval 0, the minimum consumer heartbeat interval 500 ms and session 6,000 ms,
and the heartbeat interval itself at 500 ms (kcoord's stable interval). kcoord runs in front
of each broker. Replication is the same on both sides: one node, so `__consumer_offsets` and
kcoord's state topic (50 partitions each) have one replica and min.insync.replicas 1; kcoord
writes with acks=all, Kafka's coordinator appends with acks=all too.

Workloads, each measured on both sides in alternating order (kafka first on even runs,
kcoord first on odd runs), ``--runs`` times; the table gives medians and ranges:
- commit_closed / commit_pipelined: durable OffsetCommit v8 of ``--commit-partitions``
  partitions for ``--commit-groups`` simple groups (generation -1: only the write is
  measured), ``--commit-connections`` connections with one in flight each, and
  ``--pipeline-connections`` × ``--pipeline-depth``;
- heartbeat_closed / heartbeat_pipelined: steady ConsumerGroupHeartbeats of ``--members``
  joined members in ``--groups`` groups (bench/vs_kafka/wire.py), one connection and one
  request in flight per member, and pipelined;
- storm: ``--storm-members`` members join one group at once (vs_kafka/wire.py join_storm):
  time until all are Stable at one epoch, and the server CPU of the storm;
- join: ten librdkafka consumers consume 22 partitions, an 11th subscribes
  (vs_kafka/clients.py join_11th): its first record, the stable assignment, the server CPU.
Before the first measurement of a broker configuration, ``--jit-warmup`` seconds of unrecorded
commits run on each side (the JVM's JIT and both sides' caches warm).
Figures: throughput, p50/p99 latency (bench/side_by_side/load.py) and CPU per operation of
the whole server side: the sum of the server processes' utime + stime (/proc/PID/stat)
over the measured window, over the responses in it. The machine may be shared: CPU per
operation is the figure to trust; the load average is recorded before and after.
"""
from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("KCOORD_TEST_PORTS", "29700-29799")
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "bench")]

import bench_vs_kafka as vsk  # noqa: E402
from kio.schema.offset_commit.v8.request import (  # noqa: E402
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from loadgen import procs  # noqa: E402
from loadgen.wire import FrameTemplate  # noqa: E402
from side_by_side import load, pinning, report  # noqa: E402
from vs_kafka import clients, wire  # noqa: E402

from support.kafka_broker import ENV_JVM_OPTS  # noqa: E402
from support.tansu import start_tansu  # noqa: E402

CONFIGS = {
    "default": (f"Kafka {vsk.KAFKA_VERSION} at its group defaults", vsk.KAFKA_DEFAULTS),
    "tuned": (f"Kafka {vsk.KAFKA_VERSION} tuned as kcoord's tests tune it (assignment interval 0, heartbeat 500 ms)", {
        **vsk.KAFKA_DEFAULTS,
        "group.consumer.assignment.interval.ms": "0",
        "group.consumer.min.heartbeat.interval.ms": "500",
        "group.consumer.heartbeat.interval.ms": "500",
        "group.consumer.min.session.timeout.ms": "6000",
    }),
}
# Tansu is the other upstream kcoord's tests run on; it is started with its defaults
# (memory storage), and its own coordinator is measured only on what it serves.
TANSU = "tansu"
TANSU_TITLE = "Tansu 0.6 (memory storage), its own coordinator where it serves the API"
CONSUMER_GROUP_HEARTBEAT = 68     # KIP-848: the heartbeat, storm and 11th-member workloads need it
NEEDS_API = {"heartbeat_closed": CONSUMER_GROUP_HEARTBEAT, "heartbeat_pipelined": CONSUMER_GROUP_HEARTBEAT,
             "storm": CONSUMER_GROUP_HEARTBEAT, "join": CONSUMER_GROUP_HEARTBEAT, "commit_closed": 8,
             "commit_pipelined": 8}
WORKLOADS = ("commit_closed", "commit_pipelined", "heartbeat_closed", "heartbeat_pipelined", "storm", "join")
log = vsk.log


class Bench:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args = args
        self.work = work
        self.figures: dict[str, dict[str, dict[str, list[dict[str, Any] | None]]]] = {}
        self.failures: list[str] = []
        self.not_served: dict[str, dict[str, str]] = {}    # config -> workload -> why the upstream has no figure

    def record(self, config: str, workload: str, side: str, what: str,
               fn: Callable[..., dict[str, Any] | None], *args: Any) -> dict[str, Any] | None:
        """``fn(*args)``, one measurement: a failure is recorded as None and reported."""
        try:
            value = fn(*args)
        except Exception as exc:      # one failed measurement: reported, the run goes on
            value = None
            log(f"FAILED {what}: {exc!r}"[:600])
            self.failures.append(f"{what}: {exc!r}"[:400])
        self.figures.setdefault(config, {}).setdefault(workload, {}).setdefault(side, []).append(value)
        return value

    @staticmethod
    def order(sides: dict[str, Any], run: int) -> list[tuple[str, Any]]:
        items = list(sides.items())
        return items if run % 2 == 0 else items[::-1]


# ------------------------------------------------------------------ workloads
def commit_frames(prefix: str, groups: int, topic: str, partitions: int) -> list[bytes]:
    """One pre-encoded OffsetCommit v8 per group, of ``partitions`` partitions each; names of
    equal length, so every response's first error code is at one offset
    (wire.commit_error_offset)."""
    return commit_frames_for([f"{prefix}-{g:04d}" for g in range(groups)], topic, partitions)


def commit_frames_for(groups: list[str], topic: str, partitions: int) -> list[bytes]:
    """commit_frames of the named groups."""
    frames = []
    for group in groups:
        request = OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
            topics=(OffsetCommitRequestTopic(name=topic, partitions=tuple(
                OffsetCommitRequestPartition(partition_index=p, committed_offset=1000 + p, committed_leader_epoch=-1,
                                             committed_metadata="") for p in range(partitions))),))
        frames.append(FrameTemplate.of(wire.OFFSET_COMMIT, wire.OFFSET_COMMIT_VERSION, request)
                      .with_correlation(len(frames)))
    return frames


def blast(b: Bench, port: int, pids: list[int], frames: list[bytes], offset: int, connections: int,
          depth: int) -> dict[str, Any]:
    a = b.args
    r = load.run(port, frames, offset, connections=connections, depth=depth, server_pids=pids,
                 load_cpus=a.load_set, workers=a.workers, seconds=a.seconds, warmup=a.warmup)
    f = r.figures()
    if r.errors:
        raise RuntimeError(f"error responses {r.errors} ({r.responses} responses)")
    return f


def show(f: dict[str, Any]) -> str:
    return (f"{f['rate']:,.0f}/s, {f['cpu_us_per_op'] or 0:,.0f} us CPU/op (server {f['server_cores']:.2f} "
            f"cores, load {f['generator_cores']:.2f}), p50 {f['p50_us'] or 0:,.0f} us, p99 {f['p99_us'] or 0:,.0f} us")


def commits(b: Bench, config: str, sides: dict[str, tuple[int, list[int]]]) -> None:
    a = b.args
    offset = wire.commit_error_offset(vsk.COMMIT_TOPIC)
    frames = {}
    for side, (port, _) in sides.items():
        wire.check_commit(port, f"sbs{side[:2]}", vsk.COMMIT_TOPIC)
        frames[side] = commit_frames(f"sbs{side[:2]}", a.commit_groups, vsk.COMMIT_TOPIC, a.commit_partitions)
    shapes = {"commit_closed": (a.commit_connections, 1), "commit_pipelined": (a.pipeline_connections,
                                                                                a.pipeline_depth)}
    for side, (port, pids) in sides.items():     # JIT and caches warm before anything is recorded
        if a.jit_warmup > 0:
            f = load.run(port, frames[side], offset, connections=a.commit_connections, depth=1, server_pids=pids,
                         load_cpus=a.load_set, seconds=a.jit_warmup, warmup=0.5)
            log(f"  {config} warm-up {side} (not recorded): {show(f.figures())}")
    for workload, (conns, depth) in shapes.items():
        if workload not in a.workload_set:
            continue
        for i in range(a.runs):
            for side, (port, pids) in b.order(sides, i):
                what = f"{config} {workload} run {i + 1} {side}"
                got = b.record(config, workload, side, what, blast, b, port, pids, frames[side], offset, conns, depth)
                if got:
                    log(f"  {what}: {show(got)}")


def heartbeats(b: Bench, config: str, sides: dict[str, tuple[int, list[int]]]) -> None:
    """Members are formed right before their blasts and leave after them (a member silent
    past its session would be fenced, its heartbeats answered UNKNOWN_MEMBER_ID)."""
    a = b.args
    offset = wire.heartbeat_error_offset()
    shapes = {"heartbeat_closed": (a.members, 1), "heartbeat_pipelined": (a.pipeline_connections, a.pipeline_depth)}
    for i in range(a.runs):
        for side, (port, pids) in b.order(sides, i):
            log(f"  {config} heartbeats run {i + 1} {side}: forming {a.members} members in {a.groups} groups")
            try:
                frames, took, members = wire.form_heartbeat_groups(port, f"sbs{config[:2]}{side[:2]}{i}", a.members,
                                                                   a.groups, vsk.HB_TOPIC, a.hb_partitions)
            except Exception as exc:
                log(f"FAILED heartbeat formation on {side}: {exc!r}")
                b.failures.append(f"{config} heartbeat formation run {i + 1} {side}: {exc!r}"[:400])
                for workload in shapes:
                    b.figures.setdefault(config, {}).setdefault(workload, {}).setdefault(side, []).append(None)
                continue
            log(f"    Stable in {took:.1f}s")
            for workload, (conns, depth) in shapes.items():
                if workload not in a.workload_set:
                    continue
                what = f"{config} {workload} run {i + 1} {side}"
                got = b.record(config, workload, side, what, blast, b, port, pids, frames, offset, conns, depth)
                if got:
                    log(f"  {what}: {show(got)}")
            log(f"    {wire.leave(port, members)} of {len(members)} members left")


def storms(b: Bench, config: str, sides: dict[str, tuple[int, list[int]]]) -> None:
    a = b.args

    def one(port: int, pids: list[int], group: str) -> dict[str, Any]:
        cpu0 = sum(procs.cpu_seconds(p) for p in pids)
        r = wire.join_storm(port, group, vsk.STORM_TOPIC, a.storm_partitions, a.storm_members, a.storm_timeout)
        r["server_cpu_s"] = sum(procs.cpu_seconds(p) for p in pids) - cpu0
        return r

    for i in range(a.runs):
        for side, (port, pids) in b.order(sides, i):
            what = f"{config} storm run {i + 1} {side}"
            got = b.record(config, "storm", side, what, one, port, pids, f"sbs-storm-{config}-{side}-{i}")
            if got:
                log(f"  {what}: {got['ms']:,.0f} ms, epoch {got['epoch']}, server CPU {got['server_cpu_s']:.1f} s")
            time.sleep(1.0)


def joins(b: Bench, config: str, sides: dict[str, tuple[int, list[int]]], bootstraps: dict[str, str]) -> None:
    a = b.args

    def one(side: str, pids: list[int], log_dir: Path) -> dict[str, Any]:
        cpu0, t0 = sum(procs.cpu_seconds(p) for p in pids), time.monotonic()
        target = clients.consumer_target(f"sbs-{config}-{side}", bootstraps[side], a.join_debug)
        r = clients.join_11th(target, partitions=22,
                              rate=a.rate, before_s=5.0, after_s=2.0, log_dir=log_dir)
        r["server_cpu_s"] = sum(procs.cpu_seconds(p) for p in pids) - cpu0
        r["wall_s"] = time.monotonic() - t0
        return r

    for i in range(a.runs):
        for side, (_, pids) in b.order(sides, i):
            d = b.work / "logs" / f"join-{config}-{side}-{i}"
            d.mkdir(parents=True, exist_ok=True)
            what = f"{config} 11th member run {i + 1} {side}"
            got = b.record(config, "join", side, what, one, side, pids, d)
            if got:
                log(f"  {what}: first record {got['first_record_s']:.2f} s, stable {got['stable_s']:.2f} s, "
                    f"server CPU {got['server_cpu_s']:.1f} s in {got['wall_s']:.0f} s")


# ------------------------------------------------------------------ one broker configuration
class _Upstream:
    """The broker of one configuration: Kafka (its pid, port, log) or Tansu, alike."""

    def __init__(self, b: Bench, config: str) -> None:
        if config == TANSU:
            self.tansu = start_tansu(log_dir=b.work)
            self.pid, self.port, self.bootstrap = self.tansu.process.pid, self.tansu.port, self.tansu.bootstrap
            self.log_path, self.stop = str(self.tansu.log_path), self.tansu.stop
            log(f"Tansu at {self.bootstrap} pid {self.pid}")
        else:
            kafka = vsk.start_broker(f"kafka-{config}", CONFIGS[config][1], b.work)
            self.pid, self.port, self.bootstrap = kafka.nodes[0].process.pid, kafka.port, kafka.bootstrap
            self.log_path, self.stop = str(kafka.nodes[0].log_path), kafka.stop


def api_keys(port: int) -> set[int]:
    """The API keys the broker's ApiVersions lists."""
    from kio.schema.api_versions.v3.request import ApiVersionsRequest
    from loadgen.client import KafkaConnection

    async def go() -> set[int]:
        conn = await KafkaConnection.open("127.0.0.1", port)
        try:
            r = await conn.call(18, 3, ApiVersionsRequest(client_software_name="bench", client_software_version="1"))
        finally:
            conn.close()
        return {int(k.api_key) for k in r.api_keys}

    return procs.run(go())


def phase(b: Bench, config: str) -> dict[str, Any]:
    a = b.args
    sections = {"commit" if w.startswith("commit") else "heartbeat" if w.startswith("heartbeat") else w
                for w in a.workload_set}
    kafka, _ = pinning.start_pinned(a.server_set, a.load_set, lambda: _Upstream(b, config), lambda k: k.pid)
    kc = None
    try:
        vsk.create_topics(kafka.bootstrap, a, sections)
        kc, more = pinning.start_pinned(a.server_set, a.load_set, lambda: vsk.start_kcoord(kafka.bootstrap, a),
                                        lambda k: k.pid)
        threads = more + pinning.pin_process(kafka.pid, a.server_set)   # and the broker's threads started since
        kpid = kafka.pid
        log(f"{config}: upstream pid {kpid} and kcoord pid {kc.pid} ({threads} threads) on CPUs "
            f"{sorted(a.server_set)}; load generators on {sorted(a.load_set)}")
        time.sleep(1.5)       # the gateway's metadata view has the topics (refresh: 1 s)
        listed = api_keys(kafka.port)
        refused = {w: NEEDS_API[w] for w in a.workload_set if NEEDS_API[w] not in listed}
        b.not_served[config] = {w: f"not served: its ApiVersions lists no API {k}" for w, k in refused.items()}
        both = {"kafka": (kafka.port, [kpid]), "kcoord": (kc.port, [kc.pid, kpid])}

        def sides(*workloads: str) -> dict[str, tuple[int, list[int]]]:
            """Kafka's side only where the upstream serves the workloads' API."""
            return both if not set(workloads) & set(refused) else {"kcoord": both["kcoord"]}

        if {"commit_closed", "commit_pipelined"} & a.workload_set:
            commits(b, config, sides("commit_closed", "commit_pipelined"))
        if {"heartbeat_closed", "heartbeat_pipelined"} & a.workload_set:
            heartbeats(b, config, sides("heartbeat_closed"))
        if "storm" in a.workload_set:
            storms(b, config, sides("storm"))
        if "join" in a.workload_set:
            joins(b, config, sides("join"), {"kafka": kafka.bootstrap, "kcoord": f"127.0.0.1:{kc.port}"})
        return {"kafka_log": kafka.log_path, "kcoord_log": str(kc.log_path),
                "kafka_rss_mib": procs.rss_kib(kpid) / 1024, "kcoord_rss_mib": procs.rss_kib(kc.pid) / 1024}
    finally:
        if kc is not None:
            kc.stop()
        kafka.stop()


QUICK = dict(runs=1, jit_warmup=2.0, members=200, groups=4, storm_members=100, storm_partitions=200, seconds=2.0,
             warmup=0.5, commit_groups=40, configs="default", workloads="commit_closed,heartbeat_closed,storm")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help=f"smoke run: {QUICK}")
    ap.add_argument("--runs", type=int, default=3, help="alternating runs of every measurement (medians)")
    ap.add_argument("--configs", default="default,tuned",
                    help=f"broker configurations: {', '.join((*CONFIGS, TANSU))}")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--server-cpus", default="0", help="the whole server side (Kafka; Kafka + kcoord)")
    ap.add_argument("--load-cpus", default="1", help="every load generator")
    ap.add_argument("--workers", type=int, default=1, help="raw-socket load processes")
    ap.add_argument("--seconds", type=float, default=4.0, help="measured window of every blast")
    ap.add_argument("--warmup", type=float, default=1.0, help="unmeasured start of every blast")
    ap.add_argument("--jit-warmup", type=float, default=8.0,
                    help="seconds of unrecorded commits on each side before the first measurement (JIT warm)")
    ap.add_argument("--commit-groups", type=int, default=200)
    ap.add_argument("--commit-partitions", type=int, default=4, help="partitions per OffsetCommit")
    ap.add_argument("--commit-connections", type=int, default=100)
    ap.add_argument("--pipeline-connections", type=int, default=8)
    ap.add_argument("--pipeline-depth", type=int, default=16)
    ap.add_argument("--members", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=10)
    ap.add_argument("--hb-partitions", type=int, default=100)
    ap.add_argument("--storm-members", type=int, default=1000)
    ap.add_argument("--storm-partitions", type=int, default=2000)
    ap.add_argument("--storm-timeout", type=float, default=90.0)
    ap.add_argument("--rate", type=float, default=2000, help="11th member: records/s produced")
    ap.add_argument("--join-debug", default="", metavar="CONTEXTS",
                    help="11th member only: librdkafka debug contexts (e.g. cgrp,fetch,protocol,broker) in its "
                         "log under the work directory; bench/side_by_side/join_phases.py reads them")
    ap.add_argument("--state-partitions", type=int, default=50, help="kcoord's, as offsets.topic.num.partitions")
    ap.add_argument("--kcoord-config", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--doc", type=Path, default=None, help="write the Markdown page here")
    ap.add_argument("--out-dir", type=Path, default=None, help="JSON and HTML (default: the work directory)")
    args = ap.parse_args(argv)
    if args.quick:
        given = {x.split("=")[0].lstrip("-").replace("-", "_") for x in (argv or sys.argv[1:])}
        for k, v in QUICK.items():
            if k not in given:
                setattr(args, k, v)
    args.commit_partitions = max(1, args.commit_partitions)
    args.server_set, args.load_set = pinning.parse_cpus(args.server_cpus), pinning.parse_cpus(args.load_cpus)
    if args.server_set & args.load_set:
        raise SystemExit("--server-cpus and --load-cpus overlap")
    args.workload_set = {w.strip() for w in args.workloads.split(",") if w.strip()}
    if args.workload_set - set(WORKLOADS) or any(c not in (*CONFIGS, TANSU) for c in args.configs.split(",")):
        raise SystemExit(f"workloads: {WORKLOADS}; configs: {(*CONFIGS, TANSU)}")
    return args


DOC_HEAD = """# Side by side: Kafka 4.4's own coordinator and kcoord in front of the same Kafka

Generated by `bench/bench_side_by_side.py` (its docstring has the method). Command:

    {command}

- **CPU sets** (sched_setaffinity, as `taskset`): the whole server side on CPUs {server}
  (Kafka alone; or the same Kafka plus `kcoord serve` in front of it), every load generator
  on CPUs {load}. The JVM and kcoord are started pinned, so the JVM sizes its threads for
  that set.
- **CPU per operation** is the server side's user + system time (/proc, every server
  process summed) over the measured window, divided by the responses in it. It is the
  figure to trust: the machine is shared, so throughput moves with what else runs.
- **Latency**: p50/p99 from send to response of every request in the window, at the load
  generator.
- **Storage**: one KRaft node, so `__consumer_offsets` and kcoord's state topic have one
  replica each (50 partitions each, min.insync.replicas 1, acks=all on both).
- Each figure is the median of {runs} alternating runs (Kafka first, then kcoord first, ...),
  the range in brackets, after {jit}s of unrecorded commits on each side (JIT warm).
- Load average (1/5/15 min): {load_before} before, {load_after} after; {load_during}. {machine}.
  Elapsed {elapsed}.
"""


def write_doc(path: Path, results: dict[str, Any], text: str) -> None:
    m = results["meta"]
    head = DOC_HEAD.format(
        command=m["command"], server=m["args"]["server_cpus"], load=m["args"]["load_cpus"],
        runs=m["args"]["runs"], jit=m["args"]["jit_warmup"],
        load_before=" / ".join(f"{x:.2f}" for x in m["load_average_before"]),
        load_after=" / ".join(f"{x:.2f}" for x in m["load_average_after"]), machine=m["machine"],
        load_during=pinning.LoadAverage.text(m["load_average_during"]),
        elapsed=f"{m['elapsed_s'] / 60:.0f} min")
    failures = ("\n## Failed measurements\n\n" + "\n".join(f"- {f}" for f in m["failures"]) + "\n"
                if m["failures"] else "")
    configs = "\n".join(f"- **{CONFIGS[c][0]}**: `{CONFIGS[c][1]}`" if c in CONFIGS else f"- **{TANSU_TITLE}**"
                        for c in m["config_titles"])
    path.write_text(f"{head}\n## Brokers\n\n{configs}\n\n## Results\n\n{text}\n{failures}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ[ENV_JVM_OPTS] = (os.environ.get(ENV_JVM_OPTS, "") + " -XX:TieredStopAtLevel=4").strip()
    work = Path(tempfile.mkdtemp(prefix="bench-side-by-side-"))
    out_dir = args.out_dir or work
    out_dir.mkdir(parents=True, exist_ok=True)
    os.sched_setaffinity(0, args.load_set)
    command = shlex.join(["python", "bench/bench_side_by_side.py", *(argv if argv is not None else sys.argv[1:])])
    load_before = os.getloadavg()
    sampler = pinning.LoadAverage().start()
    log(f"command: {command}; load average {load_before}; work dir {work}")
    b = Bench(args, work)
    phases: dict[str, Any] = {}
    for config in args.configs.split(","):
        try:
            phases[config] = phase(b, config)
        except Exception as exc:
            log(f"FAILED phase {config}: {exc!r}")
            b.failures.append(f"phase {config}: {exc!r}"[:400])
    import confluent_kafka
    results = {
        "meta": {
            "command": command, "elapsed_s": time.monotonic() - vsk.T0,
            "args": {k: (sorted(v) if isinstance(v, set) else str(v) if isinstance(v, Path) else v)
                     for k, v in vars(args).items()},
            "load_average_before": load_before, "load_average_after": os.getloadavg(),
            "load_average_during": sampler.stop(),
            "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}, librdkafka "
                       f"{confluent_kafka.libversion()[0]}, Kafka {vsk.KAFKA_VERSION} (1 KRaft node, heap 1g, "
                       "tiered JIT)",
            "config_titles": {c: CONFIGS[c][0] if c in CONFIGS else TANSU_TITLE for c in args.configs.split(",")},
            "configs": {c: CONFIGS[c][1] if c in CONFIGS else {} for c in args.configs.split(",")},
            "side_titles": {TANSU: {"kafka": "Tansu 0.6 alone (its own coordinator)",
                                    "kcoord": "kcoord in front of the same Tansu"}},
            "phases": phases, "failures": b.failures, "not_served": b.not_served,
        },
        "figures": b.figures,
    }
    text = report.tables(results)
    print(f"\n{text}\n")
    la = results["meta"]["load_average_after"]
    print(f"load average before {load_before}, after {la}; elapsed {results['meta']['elapsed_s']:.0f} s")
    if b.failures:
        print("FAILURES:\n  " + "\n  ".join(b.failures))
    report.write_json(out_dir / "side-by-side.json", results)
    report.write_html(out_dir / "side-by-side.html", results, text)
    if args.doc:
        write_doc(args.doc, results, text)
        print(f"wrote {args.doc}")
    print(f"results: {out_dir / 'side-by-side.json'}, {out_dir / 'side-by-side.html'}; logs in {work}")
    return 1 if b.failures else 0


if __name__ == "__main__":
    sys.exit(main())
