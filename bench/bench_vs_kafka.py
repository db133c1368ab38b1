"""kcoord vs Apache Kafka 4.4's own group coordinator: same machine, same clients, same load, one run.

    .venv/bin/python bench/bench_vs_kafka.py [--quick] [--sections heartbeat,storm,commit,consume,join,formation]
        [--members 1000] [--groups 10] [--storm-members 1000] [--storm-partitions 2000]
        [--seconds 4] [--runs 1] [--classic] [--hb-on-500] [--skip-500] [--out-dir DIR] [--kafka-c1]

Why: the README's Kafka figures were estimates (intervals times rounds); this measures
Kafka 4.4.0's coordinator itself next to kcoord, so the comparison is one run's ratios.

What runs, one broker at a time (tests/support/kafka_broker.py, single KRaft node, jars in
.cache/kafka):
1. Kafka 4.4.0 with its group defaults ("kafka-default"), and `kcoord serve --upstream`
   in front of that same broker ("kcoord", kcoord's defaults: adaptive heartbeat interval,
   500 ms stable);
2. Kafka 4.4.0 again with group.consumer.heartbeat.interval.ms and
   group.consumer.min.heartbeat.interval.ms = 500 ("kafka-500", kcoord's stable interval).
Group-timing figures (join storm, 11th member, formation) run on all three; throughput
figures (heartbeats/s, commits/s, consume) on the first broker only (the interval does not
change them), Kafka and kcoord alternating.

Measured (methods in bench/vs_kafka/wire.py and clients.py):
- heartbeat: steady ConsumerGroupHeartbeat/s from ``--members`` joined simulated members in
  ``--groups`` groups: one request in flight per member (closed loop, a connection each)
  and pipelined; server CPU per request from /proc;
- storm: ``--storm-members`` KIP-848 members join one group at once (a topic of
  ``--storm-partitions``); time until all are Stable at one epoch owning every partition;
- join: ten librdkafka consumers consume 22 partitions at 2,000 records/s, an 11th joins:
  its first record, the stable assignment, the pauses the others see;
- formation: ten librdkafka consumers subscribe at once: time until all partitions are
  owned (consumer protocol; with --classic also classic eager range, where both wait
  group.initial.rebalance.delay.ms = 3 s, Kafka's default and kcoord's);
- commit: durable OffsetCommit/s (a response only after the record is acknowledged);
- consume: one confluent-kafka consumer reading ``--records`` 1 KiB records, direct and through kcoord.

Broker settings: the fixture's SETTINGS (tests/support/kafka_broker.py) with the overrides
in KAFKA_DEFAULTS below put back to Kafka's defaults; the JVM runs with C2 (the fixture's
C1-only flag is overridden by -XX:TieredStopAtLevel=4 unless --kafka-c1) and a 1 GiB heap
(Kafka's start script default). Ports: KCOORD_TEST_PORTS (default here 29700-29799).
Output: the table on stdout; JSON and HTML (SVG bars) in ``--out-dir``.
"""
from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("KCOORD_TEST_PORTS", "29700-29799")
os.environ.setdefault("KCOORD_BENCH_PORTS", os.environ["KCOORD_TEST_PORTS"])
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "bench")]

from loadgen import procs  # noqa: E402
from vs_kafka import clients, report, wire  # noqa: E402

from coordinator.config import CoordinatorConfig  # noqa: E402
from support.admin import create_topic  # noqa: E402
from support.kafka_broker import ENV_JVM_OPTS, KafkaCluster, start_kafka  # noqa: E402

KAFKA_VERSION = "4.4.0"  # the reference line (scripts/fetch_kafka.py KAFKA_44)
# Kafka's own defaults for what the fixture lowers and what matters here.
KAFKA_DEFAULTS = {
    "group.consumer.heartbeat.interval.ms": "5000",
    "group.consumer.min.heartbeat.interval.ms": "5000",
    "group.consumer.min.session.timeout.ms": "45000",
    "group.min.session.timeout.ms": "6000",
    "group.initial.rebalance.delay.ms": "3000",
    "offsets.topic.num.partitions": "50",
    "num.network.threads": "3",
    "num.io.threads": "8",
}
KAFKA_500 = {**KAFKA_DEFAULTS, "group.consumer.heartbeat.interval.ms": "500",
             "group.consumer.min.heartbeat.interval.ms": "500"}
SECTIONS = ("heartbeat", "storm", "commit", "consume", "join", "formation")
HB_TOPIC, STORM_TOPIC, COMMIT_TOPIC, CONSUME_TOPIC = "vsk-hb", "vsk-storm", "vsk-commit", "vsk-consume"

T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


class Run:
    """The figures of one benchmark run: figures[key][column] = [values of each run]."""

    def __init__(self, args) -> None:
        self.args = args
        self.figures: dict[str, dict[str, list]] = {}
        self.details: dict[str, dict[str, list]] = {}
        self.failures: list[str] = []

    def add(self, key: str, column: str, value: Any, detail: Any = None) -> None:
        self.figures.setdefault(key, {}).setdefault(column, []).append(value)
        if detail is not None:
            self.details.setdefault(key, {}).setdefault(column, []).append(detail)

    def attempt(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)``, one measurement: a failure is reported and recorded, the run goes on."""
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            log(f"FAILED {what}: {exc!r}"[:800])
            traceback.print_exc(limit=3, file=sys.stderr)
            self.failures.append(f"{what}: {exc!r}"[:400])
            return None


# ------------------------------------------------------------------ sections
def heartbeat_section(run: Run, columns: dict[str, tuple[int, int]]) -> None:
    """columns: name -> (port, server pid)."""
    a = run.args
    offset = wire.heartbeat_error_offset()
    # Members are formed right before their blasts: a member silent for longer than the
    # session timeout (45 s on both) is gone, and its heartbeats answer UNKNOWN_MEMBER_ID.
    for i in range(a.runs):
        for col, (port, pid) in columns.items():
            log(f"heartbeat: forming {a.members} members in {a.groups} groups on {col}")
            got = run.attempt(f"heartbeat formation on {col}", wire.form_heartbeat_groups,
                port, f"hb{col[:2]}{i}", a.members, a.groups, HB_TOPIC, a.hb_partitions)
            if not got:
                continue
            fr, _, members = got
            run.add("heartbeat_formation", col, got[1])
            log(f"  {col}: Stable in {got[1]:.1f}s")
            for mode in a.modes.split(","):
                r = run.attempt(f"heartbeat {mode} on {col}", wire.blast_frames,
                    port, pid, fr, offset, mode, workers=a.workers, seconds=a.seconds, warmup=a.warmup,
                    window=a.window)
                if r is None:
                    continue
                f = wire.blast_figures(r)
                if f["errors"]:
                    run.failures.append(f"heartbeat {mode} on {col}: error responses {f['errors']}")
                run.add(f"heartbeat_{mode}", col, r.rate, f)
                if mode == "closed_loop":
                    run.add("heartbeat_closed_loop_cpu", col, f["server_cpu_us_per_request"])
                log(f"  heartbeat {mode} run {i + 1} {col}: {r.rate:,.0f}/s, server {f['server_cpu_cores']:.2f} "
                    f"cores ({f['server_cpu_us_per_request'] or 0:.0f} us/req), errors {f['errors'] or 0}")
            left = run.attempt(f"heartbeat members leaving {col}", wire.leave, port, members)
            log(f"  {left} of {len(members)} members left")


def commit_section(run: Run, columns: dict[str, tuple[int, int]]) -> None:
    a = run.args
    offset = wire.commit_error_offset(COMMIT_TOPIC)
    frames = {}
    for col, (port, _) in columns.items():
        if run.attempt(f"commit check on {col}", wire.check_commit, port, f"cm{col[:2]}", COMMIT_TOPIC):
            frames[col] = wire.commit_frames(f"cm{col[:2]}", a.commit_groups, COMMIT_TOPIC, a.commit_partitions)
    for mode in a.modes.split(","):
        for i in range(a.runs):
            for col, fr in frames.items():
                port, pid = columns[col]
                conns = a.commit_connections if mode == "closed_loop" else 1
                r = run.attempt(f"commit {mode} on {col}", wire.blast_frames,
                    port, pid, fr, offset, mode, workers=a.workers, seconds=a.seconds, warmup=a.warmup,
                    window=a.window, connections=max(1, conns // a.workers))
                if r is None:
                    continue
                f = wire.blast_figures(r)
                run.add(f"commit_{mode}", col, r.rate, f)
                log(f"  commit {mode} run {i + 1} {col}: {r.rate:,.0f}/s, server {f['server_cpu_cores']:.2f} cores, "
                    f"errors {f['errors'] or 0}")


def storm_section(run: Run, columns: dict[str, tuple[int, int]]) -> None:
    """columns: name -> (port, server pid)."""
    a = run.args
    for i in range(a.runs):
        for col, (port, pid) in columns.items():
            log(f"storm run {i + 1}: {a.storm_members} members on {col}")
            cpu0, t0 = procs.cpu_seconds(pid), time.monotonic()
            r = run.attempt(f"storm on {col}", wire.join_storm,
                port, f"storm-{col}-{i}", STORM_TOPIC, a.storm_partitions, a.storm_members, a.storm_timeout)
            if r:
                # the server's CPU from the first join to the members' leave (the coordinator's
                # process; for kcoord its upstream broker's share is not counted)
                r["server_cpu_s"] = procs.cpu_seconds(pid) - cpu0
                r["wall_s"] = time.monotonic() - t0
                run.add("storm", col, r["ms"], r)
                log(f"  {col}: {r['ms']:.0f} ms, epoch {r['epoch']}, {r['heartbeats']} heartbeats, "
                    f"joins answered by {r['all_joins_answered_ms']:.0f} ms, interval {r['stable_interval_ms']} ms, "
                    f"errors {r['errors']}; {r['left']} left; server CPU {r['server_cpu_s']:.1f}s in "
                    f"{r['wall_s']:.1f}s")
            time.sleep(1.0)


def join_section(run: Run, columns: dict[str, str], log_dir: Path) -> None:
    a = run.args
    for i in range(a.runs):
        for col, bootstrap in columns.items():
            log(f"11th member run {i + 1} on {col}")
            d = log_dir / f"join-{col}-{i}"
            d.mkdir(parents=True, exist_ok=True)
            r = run.attempt(f"11th member on {col}", clients.join_11th,
                clients.consumer_target(col, bootstrap), partitions=a.join_partitions, rate=a.rate,
                before_s=a.before_s, after_s=a.after_s, log_dir=d)
            if not r:
                continue
            run.add("join_first_record", col, r["first_record_s"], r)
            run.add("join_stable", col, r["stable_s"])
            run.add("join_nobody_consumed", col, r["nobody_consumed_after_s"])
            run.add("join_kept_pause", col, r["kept_partitions_longest_pause_s"])
            run.add("join_pause_before", col, r["longest_pause_before_join_s"])
            log(f"  {col}: first record {r['first_record_s']}, stable {r['stable_s']}, nobody consumed "
                f"{r['nobody_consumed_after_s']:.2f}s, kept-partitions pause {r['kept_partitions_longest_pause_s']} "
                f"(before join {r['longest_pause_before_join_s']:.2f}s), paused beyond steady "
                f"{r['kept_partitions_paused_beyond_steady']}")


def formation_section(run: Run, columns: dict[str, str], log_dir: Path, classic: bool) -> None:
    a = run.args
    for i in range(a.runs):
        for col, bootstrap in columns.items():
            kinds = [("formation", clients.consumer_target)]
            if classic:
                kinds.append(("formation_classic", clients.classic_target))
            for key, make in kinds:
                log(f"{key} run {i + 1} on {col}")
                d = log_dir / f"{key}-{col}-{i}"
                d.mkdir(parents=True, exist_ok=True)
                r = run.attempt(f"{key} on {col}", clients.formation,
                    make(f"{key}-{col}", bootstrap), partitions=a.formation_partitions, log_dir=d)
                if r:
                    run.add(key, col, r["from_first_subscribe_s"], r)
                    log(f"  {col}: {r['from_first_subscribe_s']:.2f}s")


def consume_section(run: Run, kafka: KafkaCluster, kcoord_bootstrap: str) -> None:
    a = run.args
    log(f"consume: producing {a.records} records of {a.record_size} B")
    create_topic(kafka.bootstrap, CONSUME_TOPIC, a.consume_partitions)
    rate = clients.produce(kafka.bootstrap, CONSUME_TOPIC, a.records, a.record_size)
    log(f"  produced at {rate:,.0f} records/s")
    pair = [("kafka-default", kafka.bootstrap), ("kcoord", kcoord_bootstrap)]
    for i in range(max(2, a.runs)):      # at least 2, the order swapped: the first read warms the page cache
        for col, bootstrap in (pair if i % 2 == 0 else pair[::-1]):
            r = run.attempt(f"consume via {col}", clients.consume_rate,
                bootstrap, CONSUME_TOPIC, a.consume_partitions, a.records)
            if r:
                run.add("consume_mb", col, r["mb_per_s"], r)
                run.add("consume_records", col, r["records_per_s"])
                log(f"  consume run {i + 1} {col}: {r['records_per_s']:,.0f} records/s, {r['mb_per_s']:.1f} MB/s")


# ------------------------------------------------------------------ brokers
def start_broker(name: str, overrides: dict[str, str], work: Path) -> KafkaCluster:
    log(f"starting Kafka {KAFKA_VERSION} ({name}): {overrides}")
    cluster = start_kafka(KAFKA_VERSION, work / name, overrides=overrides, heap="1g")
    took = wire.wait_for_coordinator(cluster.port)
    log(f"  {cluster} pid {cluster.nodes[0].process.pid}; group coordinator loaded in {took:.1f}s")
    return cluster


def start_kcoord(bootstrap: str, args) -> procs.Kcoord:
    """`kcoord serve` in front of the broker. A start that creates its state topic fails at
    once with StateTopicUnavailable when the broker's metadata does not show the new topic yet
    (a loaded broker still creating the logs of a big topic): then it is started again on the
    same port, hence the same state topic."""
    kc = procs.Kcoord(bootstrap, tuple(args.kcoord_config), args.state_partitions)
    for attempt in (1, 2, 3):
        try:
            return kc.start()
        except RuntimeError as exc:
            if attempt == 3:
                raise
            log(f"kcoord did not start (attempt {attempt}), again on the same state topic: {str(exc)[-200:]}")
            time.sleep(2)
    raise AssertionError("unreachable")


def create_topics(bootstrap: str, args, sections: set[str]) -> None:
    wanted = {HB_TOPIC: args.hb_partitions if "heartbeat" in sections else 0,
              STORM_TOPIC: args.storm_partitions if "storm" in sections else 0,
              COMMIT_TOPIC: args.commit_partitions if "commit" in sections else 0}
    for topic, n in wanted.items():
        if n:
            create_topic(bootstrap, topic, n, timeout=120)
    # The broker answers CreateTopics at once but creates the logs of a 2,000-partition topic
    # for a long while on a loaded machine; topics created meanwhile (kcoord's state topic)
    # stay out of its metadata until it is done. A last one-partition topic, awaited in the
    # metadata, waits for that, so kcoord's start does not race it.
    create_topic(bootstrap, f"vsk-sentinel-{time.monotonic_ns()}", 1, timeout=180)


def phase_defaults(run: Run, sections: set[str], work: Path) -> dict[str, Any]:
    a = run.args
    kafka = start_broker("kafka-default", KAFKA_DEFAULTS, work)
    kc = None
    info: dict[str, Any] = {"kafka_log": str(kafka.nodes[0].log_path)}
    try:
        t = time.monotonic()
        create_topics(kafka.bootstrap, a, sections)
        log(f"  topics created in {time.monotonic() - t:.1f}s")
        t = time.monotonic()
        kc = start_kcoord(kafka.bootstrap, a)
        info["kcoord_log"] = str(kc.log_path)
        log(f"kcoord pid {kc.pid} at 127.0.0.1:{kc.port} in front of {kafka.bootstrap}, ready in "
            f"{time.monotonic() - t:.1f}s")
        time.sleep(1.5)       # the gateway's metadata view has the topics (refresh: 1 s)
        kpid = kafka.nodes[0].process.pid
        if "heartbeat" in sections:
            heartbeat_section(run, {"kafka-default": (kafka.port, kpid), "kcoord": (kc.port, kc.pid)})
        if "commit" in sections:
            commit_section(run, {"kafka-default": (kafka.port, kpid), "kcoord": (kc.port, kc.pid)})
        if "consume" in sections:
            run.attempt("consume", consume_section, run, kafka, f"127.0.0.1:{kc.port}")
        if "storm" in sections:
            storm_section(run, {"kafka-default": (kafka.port, kpid), "kcoord": (kc.port, kc.pid)})
        if "formation" in sections:
            formation_section(run, {"kafka-default": kafka.bootstrap, "kcoord": f"127.0.0.1:{kc.port}"},
                              work / "logs", classic=a.classic)
        if "join" in sections:
            join_section(run, {"kafka-default": kafka.bootstrap, "kcoord": f"127.0.0.1:{kc.port}"}, work / "logs")
        info["kcoord_rss_mib"] = procs.rss_kib(kc.pid) / 1024
        info["kafka_rss_mib"] = procs.rss_kib(kpid) / 1024
    finally:
        if kc is not None:
            kc.stop()
        kafka.stop()
    return info


def phase_500(run: Run, sections: set[str], work: Path) -> dict[str, Any]:
    a = run.args
    kafka = start_broker("kafka-500", KAFKA_500, work)
    try:
        create_topics(kafka.bootstrap, a, sections & {"storm", "heartbeat"} if a.hb_on_500 else sections & {"storm"})
        kpid = kafka.nodes[0].process.pid
        if "heartbeat" in sections and a.hb_on_500:
            heartbeat_section(run, {"kafka-500": (kafka.port, kpid)})
        if "storm" in sections:
            storm_section(run, {"kafka-500": (kafka.port, kpid)})
        if "formation" in sections:
            formation_section(run, {"kafka-500": kafka.bootstrap}, work / "logs", classic=False)
        if "join" in sections:
            join_section(run, {"kafka-500": kafka.bootstrap}, work / "logs")
        return {"kafka_log": str(kafka.nodes[0].log_path)}
    finally:
        kafka.stop()


QUICK = dict(members=200, groups=4, storm_members=100, storm_partitions=200, seconds=2.0, warmup=0.5,
             modes="closed_loop", records=20_000, commit_groups=4, commit_partitions=50, commit_connections=50,
             sections="heartbeat,storm,commit,consume")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="smoke run (~90 s): small loads, closed loop only, no real-client scenarios: " + str(QUICK))
    ap.add_argument("--sections", default=",".join(SECTIONS))
    ap.add_argument("--runs", type=int, default=1, help="runs of every measurement (interleaved)")
    ap.add_argument("--members", type=int, default=1000, help="heartbeat load: joined members")
    ap.add_argument("--groups", type=int, default=10, help="heartbeat load: groups")
    ap.add_argument("--hb-partitions", type=int, default=100)
    ap.add_argument("--modes", default="closed_loop,pipelined", help="blast modes for heartbeats and commits")
    ap.add_argument("--seconds", type=float, default=4.0, help="measured window of every blast")
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--window", type=int, default=128, help="pipelined: requests in flight per connection")
    ap.add_argument("--workers", type=int, default=2, help="load-generator processes")
    ap.add_argument("--hb-on-500", action="store_true", help="measure heartbeats/s on the 500 ms broker too")
    ap.add_argument("--storm-members", type=int, default=1000)
    ap.add_argument("--storm-partitions", type=int, default=2000)
    ap.add_argument("--storm-timeout", type=float, default=90.0)
    ap.add_argument("--commit-groups", type=int, default=10)
    ap.add_argument("--commit-partitions", type=int, default=100)
    ap.add_argument("--commit-connections", type=int, default=100, help="closed loop: connections in all")
    ap.add_argument("--records", type=int, default=200_000, help="consume: records to read")
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--consume-partitions", type=int, default=8)
    ap.add_argument("--join-partitions", type=int, default=22)
    ap.add_argument("--rate", type=float, default=2000, help="11th member: records/s produced")
    ap.add_argument("--before-s", type=float, default=5.0)
    ap.add_argument("--after-s", type=float, default=2.0)
    ap.add_argument("--formation-partitions", type=int, default=20)
    ap.add_argument("--classic", action="store_true",
                    help="add classic (eager range) formation on Kafka defaults and kcoord: both wait the 3 s "
                         "group.initial.rebalance.delay.ms")
    ap.add_argument("--skip-500", action="store_true", help="skip the second broker (500 ms intervals)")
    ap.add_argument("--state-partitions", type=int, default=50,
                    help="kcoord --state-partitions (its default, as Kafka's offsets.topic.num.partitions)")
    ap.add_argument("--kcoord-config", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--kafka-c1", action="store_true",
                    help="keep the fixture's C1-only JIT for Kafka (default: full tiered compilation)")
    ap.add_argument("--out-dir", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.quick:
        given = {a.split("=")[0].lstrip("-").replace("-", "_") for a in (argv or sys.argv[1:])}
        for k, v in QUICK.items():
            if k not in given:
                setattr(args, k, v)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sections = {s.strip() for s in args.sections.split(",") if s.strip()}
    unknown = sections - set(SECTIONS)
    if unknown:
        raise SystemExit(f"unknown sections {sorted(unknown)}")
    if not args.kafka_c1:
        os.environ[ENV_JVM_OPTS] = (os.environ.get(ENV_JVM_OPTS, "") + " -XX:TieredStopAtLevel=4").strip()
    work = Path(tempfile.mkdtemp(prefix="bench-vs-kafka-"))
    out_dir = args.out_dir or work
    out_dir.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    log(f"command: {shlex.join([sys.executable, *sys.argv])}")
    log(f"load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}; work dir {work}")
    run = Run(args)
    phases: dict[str, Any] = {}
    phases["kafka-default"] = run.attempt("phase Kafka defaults + kcoord", phase_defaults, run, sections, work)
    if not args.skip_500:
        phases["kafka-500"] = run.attempt("phase Kafka 500 ms", phase_500, run, sections, work)
    load_after = os.getloadavg()
    d = CoordinatorConfig()
    import confluent_kafka
    results = {
        "meta": {
            "command": shlex.join([sys.executable, *sys.argv]),
            "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "elapsed_s": time.monotonic() - T0,
            "load_average_before": load_before, "load_average_after": load_after,
            "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}, librdkafka "
                       f"{confluent_kafka.libversion()[0]}, Kafka {KAFKA_VERSION} (1 KRaft node, heap 1g, "
                       f"JIT {'C1 only' if args.kafka_c1 else 'tiered C1+C2'})",
            "kafka_defaults_overrides": KAFKA_DEFAULTS, "kafka_500_overrides": KAFKA_500,
            "kcoord_config": args.kcoord_config or "(defaults)",
            "kcoord_defaults": {"consumer_heartbeat_policy": d.consumer_heartbeat_policy,
                                "stable_interval_ms": d.consumer_heartbeat_stable_interval_ms,
                                "pending_interval_ms": d.consumer_heartbeat_pending_interval_ms,
                                "assignment_interval_ms": d.consumer_assignment_interval_ms,
                                "group_initial_rebalance_delay_ms": d.group_initial_rebalance_delay_ms},
            "phases": phases, "failures": run.failures,
        },
        "figures": run.figures, "details": run.details,
    }
    text = report.table(results)
    print()
    print(text)
    print()
    print(f"load average before {load_before[0]:.2f} / {load_before[1]:.2f} / {load_before[2]:.2f}, after "
          f"{load_after[0]:.2f} / {load_after[1]:.2f} / {load_after[2]:.2f} (1/5/15 min); "
          f"elapsed {time.monotonic() - T0:.0f} s; {results['meta']['machine']}")
    print(f"Kafka defaults run: {KAFKA_DEFAULTS}")
    print("Kafka 500 ms run: the same with group.consumer.heartbeat.interval.ms=500, "
          "group.consumer.min.heartbeat.interval.ms=500")
    if run.failures:
        print("FAILURES:\n  " + "\n  ".join(run.failures))
    report.write_json(out_dir / "bench-vs-kafka.json", results)
    report.write_html(out_dir / "bench-vs-kafka.html", results, text)
    print(f"results: {out_dir / 'bench-vs-kafka.json'}, {out_dir / 'bench-vs-kafka.html'}; logs in {work}")
    return 1 if run.failures else 0


if __name__ == "__main__":
    sys.exit(main())
