"""Scale-out: N kcoord processes of one cluster on N cores against one process on one core,
next to Kafka's own coordinator on the same cores (the side-by-side tool's loads and
pinning, bench/bench_side_by_side.py).

    .venv/bin/python bench/bench_scale_out.py [--runs 3] [--setups kafka1,kafka2,one,two]
        [--workloads commit_closed,heartbeat_pipelined] [--cpus 0,1] [--doc docs/measurements/scale-out.md]

One Kafka 4.4 KRaft node (bench_side_by_side's "tuned" configuration: kcoord's tests' group
settings) serves every setup; each kcoord setup has its own state topic (50 partitions, the
shards). CPUs A and B are ``--cpus``; the layouts, by sched_setaffinity (`taskset`), set again
before every measurement:

| setup | kcoord | the broker | the load generators |
|---|---|---|---|
| ``kafka1`` | — (Kafka's coordinator) | A | B |
| ``kafka2`` | — (Kafka's coordinator) | A, B | A, B |
| ``plain`` | one `kcoord serve` (no --instance-id) on A | B | B |
| ``one`` | one cluster instance (`--instance-id kc-0`, ``--fencing``) on A | B | B |
| ``one_ab`` | the same, on A | A, B | A, B (as in ``two``: only the second kcoord differs) |
| ``two`` | kc-0 on A, kc-1 on B (one cluster, one state topic, half the shards each) | A, B | A, B |

A 2-core machine has no third core: with two kcoord processes the broker and the load
generators share their cores, so the measured aggregate is bounded by the whole machine,
not by kcoord. The figures that tell whether kcoord itself scales are therefore also
reported: each kcoord process's CPU per operation (its utime + stime from /proc over the
responses its port gave, in the same window) and the cores each part used. If CPU per
operation per process stays flat from one to two processes, N processes on N cores of their
own serve N times one's rate (``projected``: N x 1e6 / the per-process µs per op).

``--core-quota F`` measures it instead: each kcoord process's core becomes a "device core" of
F of a real one (its own cgroup, CFS bandwidth control: side_by_side/quota.py), so that N of
them fit beside the broker and the load, which have the rest of the machine. With
``--cpus 0-1,0-1`` nothing is pinned and only the quotas bound kcoord; the measured aggregate
of ``two`` against ``one_ab`` is then kcoord's own scale-out. Each process's throttled share
of the run is reported: a process at its quota is held back by it. Kafka's coordinator lives
in its broker, so there ``kafka1`` is the broker on one device core (F) and ``kafka2`` on two
(2F), while the kcoord setups' broker has no quota.

Groups are spread over the instances: every group's coordinator is asked (FindCoordinator
v4, batched) and its requests go to that instance's port. Workloads (side-by-side's):
``commit_closed``: durable OffsetCommit of ``--commit-partitions`` partitions, generation -1,
``--commit-connections`` connections with one in flight each; ``commit_pipelined``:
``--pipeline-connections`` x ``--pipeline-depth``; ``heartbeat_pipelined``: steady
ConsumerGroupHeartbeats of ``--members`` formed KIP-848 members, pipelined. Runs alternate the
order of the setups (reversed on odd runs); every figure is the median of ``--runs``.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("KCOORD_TEST_PORTS", "29800-29899")
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "bench")]

import bench_side_by_side as sbs  # noqa: E402
import bench_vs_kafka as vsk  # noqa: E402
from cluster.common import cluster_config, start_instances, stop_all  # noqa: E402
from kio.schema.errors import ErrorCode  # noqa: E402
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest  # noqa: E402
from kio.static.primitive import i8  # noqa: E402
from loadgen import procs  # noqa: E402
from loadgen.client import KafkaConnection  # noqa: E402
from loadgen.profiling import Profile  # noqa: E402
from side_by_side import load, pinning  # noqa: E402
from side_by_side.quota import CpuQuota  # noqa: E402
from side_by_side.report import median  # noqa: E402
from vs_kafka import wire  # noqa: E402

from support.kafka_broker import ENV_JVM_OPTS  # noqa: E402
from support.wait import wait_until  # noqa: E402

SETUPS = ("kafka1", "kafka2", "plain", "one", "one_ab", "two")
WORKLOADS = ("commit_closed", "commit_pipelined", "heartbeat_pipelined")
log = vsk.log


# ------------------------------------------------------------------ servers
class Setup:
    """One side: its ports (the instances'), its kcoord pids, and where everything runs."""

    def __init__(self, name: str, broker_pid: int, broker_port: int, instances: list[Any], a: set[int],
                 b: set[int], quota: tuple[CpuQuota, float] | None = None) -> None:
        self.name, self.broker_pid, self.instances = name, broker_pid, instances
        self.quota = quota
        # Kafka's coordinator lives in the broker: on device cores, "kafka1" is the broker on
        # one (F) and "kafka2" on two (2F); the kcoord setups' broker has no quota.
        self.broker_cores = (None if quota is None or instances else quota[1] * (2 if name == "kafka2" else 1))
        self.ports = [p.port for p in instances] or [broker_port]
        both = a | b
        if name == "kafka1":
            self.broker_cpus, self.load_cpus, self.kcoord_cpus = a, b, []
        elif name in ("kafka2", "two", "one_ab"):
            self.broker_cpus, self.load_cpus = both, both
            self.kcoord_cpus = [a, b][:len(instances)]
        else:
            self.broker_cpus, self.load_cpus, self.kcoord_cpus = b, b, [a]

    @property
    def kcoord_pids(self) -> list[int]:
        return [p.process.pid for p in self.instances]

    def pin(self) -> None:
        pinning.pin_process(self.broker_pid, self.broker_cpus)
        if self.quota is not None:
            if self.broker_cores is None:
                self.quota[0].release(self.broker_pid)
            else:
                self.quota[0].place(self.broker_pid, self.broker_cores)
        for pid, cpus in zip(self.kcoord_pids, self.kcoord_cpus, strict=True):
            pinning.pin_process(pid, cpus)
            if self.quota is not None:
                self.quota[0].place(pid, self.quota[1])

    def throttled_s(self) -> list[float]:
        return [self.quota[0].throttled_s(pid) for pid in self.kcoord_pids] if self.quota and self.instances else []

    def layout(self) -> str:
        each = f" at {self.quota[1]:g} of a core" if self.quota else ""
        if self.broker_cores is not None:
            return (f"broker {sorted(self.broker_cpus)} at {self.broker_cores:g} of a core; "
                    f"load {sorted(self.load_cpus)}")
        kc = ", ".join(f"kcoord {sorted(c)}{each}" for c in self.kcoord_cpus)
        return f"{kc + '; ' if kc else ''}broker {sorted(self.broker_cpus)}; load {sorted(self.load_cpus)}"


def coordinator_ports(port: int, groups: list[str]) -> dict[str, int]:
    """Each group's coordinator port (FindCoordinator v4, batched), all answered without error."""

    async def go() -> dict[str, int]:
        conn = await KafkaConnection.open("127.0.0.1", port)
        try:
            r = await conn.call(wire.FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=i8(0),
                                                                                 coordinator_keys=tuple(groups)))
        finally:
            conn.close()
        bad = [(c.key, c.error_code) for c in r.coordinators if c.error_code != ErrorCode.none]
        if bad:
            raise RuntimeError(f"FindCoordinator at {port}: {bad[:3]}")
        return {c.key: c.port for c in r.coordinators}

    return procs.run(go())


def spread(setup: Setup, prefix: str, n: int) -> dict[int, list[str]]:
    """``n`` group names (equal length), as many per coordinator as the setup's instances
    can share evenly: coordinator port (as FindCoordinator answers it, where clients send
    group requests) -> its groups."""
    per = n // len(setup.ports)
    names = [f"{prefix}-{g:05d}" for g in range(n * 4 * len(setup.ports))]
    where = coordinator_ports(setup.ports[0], names)
    out: dict[int, list[str]] = {}
    for name in names:
        bucket = out.setdefault(where[name], [])
        if len(bucket) < per:
            bucket.append(name)
    if len(out) != len(setup.ports) or any(len(g) < per for g in out.values()):
        raise RuntimeError(f"{setup.name}: groups per coordinator port {({p: len(g) for p, g in out.items()})}, "
                           f"wanted {per} at each of {len(setup.ports)}")
    return out


def commit_targets(args: argparse.Namespace, setup: Setup, prefix: str) -> list[tuple[int, list[bytes]]]:
    """OffsetCommit frames of ``--commit-groups`` groups, each sent to its coordinator."""
    return [(p, sbs.commit_frames_for(g, vsk.COMMIT_TOPIC, args.commit_partitions))
            for p, g in spread(setup, prefix, args.commit_groups).items()]


def wait_serving(setup: Setup, topic: str) -> None:
    """Every instance serves commits for the groups it coordinates (a cluster member serves
    what it is assigned once its start-up session has passed)."""
    last = [""]

    def ok() -> bool:
        try:
            for port, groups in spread(setup, f"ready{int(time.monotonic())}", 4 * len(setup.ports)).items():
                wire.check_commit(port, groups[0], topic)
            return True
        except (RuntimeError, OSError) as exc:
            last[0] = repr(exc)
            return False

    wait_until(ok, 120, interval=1.0, message=lambda: f"{setup.name}: every instance serves commits ({last[0]})")


# ------------------------------------------------------------------ one measurement
def figures(setup: Setup, r: load.LoadResult) -> dict[str, Any]:
    f = r.figures()
    by_pid = r.server_cpu_by_pid or {}
    kc = [by_pid.get(pid, 0.0) for pid in setup.kcoord_pids]
    f["broker_us_per_op"] = by_pid.get(setup.broker_pid, 0.0) / r.responses * 1e6 if r.responses else None
    f["broker_cores"] = by_pid.get(setup.broker_pid, 0.0) / r.window_s
    if kc:
        f["kcoord_us_per_op"] = sum(kc) / r.responses * 1e6 if r.responses else None
        f["kcoord_cores"] = [c / r.window_s for c in kc]
        # runnable but not running: the CPU each process wanted while other work held its core
        f["kcoord_waiting"] = [(r.waiting_by_pid or {}).get(pid, 0.0) / r.window_s for pid in setup.kcoord_pids]
        # One instance answers everything (a plain serve names its broker listener, P+1, as
        # the coordinator); cluster instances each answer at their own bootstrap port.
        by_port = r.responses_by_port or {}
        each = ([r.responses] if len(kc) == 1 else [by_port.get(p.port, 0) for p in setup.instances])
        f["kcoord_us_per_op_each"] = [c / n * 1e6 if n else None for c, n in zip(kc, each, strict=True)]
        f["responses_each"] = each
    return f


def measure(args: argparse.Namespace, setup: Setup, workload: str, targets: list[tuple[int, list[bytes]]],
            offset: int) -> dict[str, Any]:
    setup.pin()
    conns, depth = ((args.commit_connections, 1) if workload == "commit_closed"
                    else (args.pipeline_connections, args.pipeline_depth))
    pinning.pin_process(os.getpid(), setup.load_cpus)
    throttled, t0 = setup.throttled_s(), time.monotonic()
    r = load.run_targets(targets, offset, connections=conns, depth=depth,
                         server_pids=[setup.broker_pid, *setup.kcoord_pids], load_cpus=setup.load_cpus,
                         workers=args.workers, seconds=args.seconds, warmup=args.warmup)
    if r.errors:
        raise RuntimeError(f"error responses {r.errors} ({r.responses} responses)")
    f = figures(setup, r)
    if setup.quota:
        # the share of the whole run (warm-up included) each process spent held back by its quota
        took = time.monotonic() - t0
        f["kcoord_throttled"] = [(b - a) / took for a, b in zip(throttled, setup.throttled_s(), strict=True)]
    return f


def show(f: dict[str, Any]) -> str:
    kc = ""
    if "kcoord_us_per_op_each" in f:
        each = ", ".join(f"{u or 0:,.0f}" for u in f["kcoord_us_per_op_each"])
        cores = ", ".join(f"{c:.2f}" for c in f["kcoord_cores"])
        waits = ", ".join(f"{c:.2f}" for c in f.get("kcoord_waiting", []))
        held = ", ".join(f"{c:.2f}" for c in f.get("kcoord_throttled", []))
        kc = (f"; kcoord {f['kcoord_us_per_op'] or 0:,.0f} us/op (each {each}; cores {cores}; waiting {waits}"
              f"{'; throttled ' + held if held else ''})")
    return (f"{f['rate']:,.0f}/s{kc}; broker {f['broker_us_per_op'] or 0:,.0f} us/op ({f['broker_cores']:.2f} "
            f"cores); load {f['generator_cores']:.2f} cores; p50 {f['p50_us'] or 0:,.0f} us, p99 "
            f"{f['p99_us'] or 0:,.0f} us")


def run_setup(args: argparse.Namespace, setup: Setup, run: int, figures_out: dict[str, Any],
              failures: list[str]) -> None:
    def record(workload: str, fn: Any) -> None:
        what = f"{workload} run {run + 1} {setup.name}"
        try:
            f = fn()
            log(f"  {what} [{setup.layout()}]: {show(f)}")
        except Exception as exc:      # one failed measurement: reported, the run goes on
            f = None
            log(f"FAILED {what}: {exc!r}"[:600])
            failures.append(f"{what}: {exc!r}"[:400])
        figures_out.setdefault(workload, {}).setdefault(setup.name, []).append(f)

    offset = wire.commit_error_offset(vsk.COMMIT_TOPIC)
    for workload in ("commit_closed", "commit_pipelined"):
        if workload in args.workload_set:
            targets = commit_targets(args, setup, f"so{setup.name[:2]}{run}")
            record(workload, lambda t=targets, w=workload: measure(args, setup, w, t, offset))
    if "heartbeat_pipelined" in args.workload_set:
        pinning.pin_process(os.getpid(), setup.load_cpus)
        groups = spread(setup, f"sh{setup.name[:2]}{run}", args.groups)
        formed = []
        try:
            for port, names in groups.items():
                per, extra = divmod(args.members // len(groups), len(names))
                sizes = {g: per + (1 if i < extra else 0) for i, g in enumerate(names)}
                frames, took, members = wire.form_heartbeat_groups(port, "", 0, 0, vsk.HB_TOPIC, args.hb_partitions,
                                                                   sizes=sizes)
                formed.append((port, frames, members))
            targets = [(port, frames) for port, frames, _ in formed]
            record("heartbeat_pipelined",
                   lambda: measure(args, setup, "heartbeat_pipelined", targets, wire.heartbeat_error_offset()))
        except Exception as exc:
            log(f"FAILED heartbeat formation run {run + 1} {setup.name}: {exc!r}"[:600])
            failures.append(f"heartbeat formation run {run + 1} {setup.name}: {exc!r}"[:400])
            figures_out.setdefault("heartbeat_pipelined", {}).setdefault(setup.name, []).append(None)
        finally:
            for port, _, members in formed:
                wire.leave(port, members)


def profile(args: argparse.Namespace, setup: Setup, workload: str, targets: list[tuple[int, list[bytes]]],
            offset: int) -> dict[str, Any]:
    """One more, unrecorded measurement with py-spy sampling every kcoord process of the
    setup (loadgen/profiling.py: ``--profile-dir``/<setup>-<workload>-kc<i>.svg and .txt, and
    the top functions printed): where each process spends its CPU."""
    with contextlib.ExitStack() as stack:
        for i, pid in enumerate(setup.kcoord_pids):
            stack.enter_context(Profile(pid, str(args.profile_dir / f"{setup.name}-{workload}-kc{i}"),
                                        args.warmup + args.seconds + 1))
        return measure(args, setup, workload, targets, offset)


# ------------------------------------------------------------------ report
def _med(runs: list[dict[str, Any] | None], key: str, index: int | None = None) -> float | None:
    vals = [(r[key][index] if index is not None else r[key]) for r in runs if r and r.get(key) is not None]
    return median(vals)


def table(results: dict[str, Any]) -> str:
    figs = results["figures"]
    lines = []
    for workload, per in figs.items():
        lines += [f"### {workload}", "", "| setup | CPUs | ops/s | server µs/op | kcoord µs/op (each process) | "
                  "kcoord cores (each) | kcoord waiting for a CPU (each) | kcoord throttled by its quota (each) | "
                  "broker µs/op (cores) | load cores | p50 / p99 |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        for name, runs in per.items():
            ok = [r for r in runs if r]
            if not ok:
                lines.append(f"| {name} | {results['meta']['layouts'][name]} | failed | | | | | | | | |")
                continue
            n_kc = len(ok[0].get("kcoord_cores", []))
            each = ", ".join(f"{_med(ok, 'kcoord_us_per_op_each', i) or 0:,.0f}" for i in range(n_kc))
            cores = ", ".join(f"{_med(ok, 'kcoord_cores', i):.2f}" for i in range(n_kc))
            waits = ", ".join(f"{_med(ok, 'kcoord_waiting', i) or 0:.2f}" for i in range(n_kc))
            held = ", ".join(f"{_med(ok, 'kcoord_throttled', i) or 0:.2f}" for i in range(n_kc)
                             if _med(ok, 'kcoord_throttled', i) is not None)
            kc = f"**{_med(ok, 'kcoord_us_per_op'):,.0f}** ({each})" if n_kc else "—"
            rates = [r["rate"] for r in ok]
            lines.append(
                f"| {name} | {results['meta']['layouts'][name]} | **{median(rates):,.0f}** "
                f"({min(rates):,.0f}–{max(rates):,.0f}) | {_med(ok, 'cpu_us_per_op') or 0:,.0f} | {kc} | "
                f"{cores or '—'} | {waits or '—'} | {held or '—'} | "
                f"{_med(ok, 'broker_us_per_op'):,.0f} ({_med(ok, 'broker_cores'):.2f}) | "
                f"{_med(ok, 'generator_cores'):.2f} | {(_med(ok, 'p50_us') or 0) / 1000:,.1f} / "
                f"{(_med(ok, 'p99_us') or 0) / 1000:,.1f} ms |")
        lines += ["", *scaling(per), ""]
    return "\n".join(lines)


def scaling(per: dict[str, list[dict[str, Any] | None]]) -> list[str]:
    def rate(name: str) -> float | None:
        return median([r["rate"] for r in per.get(name, []) if r])

    def us(name: str) -> float | None:
        return _med([r for r in per.get(name, []) if r], "kcoord_us_per_op")

    out = []
    k1, k2, two = rate("kafka1"), rate("kafka2"), rate("two")
    if k1 and k2:
        out.append(f"- Kafka's coordinator, 2 cores / 1 core: **{k2 / k1:.2f}×** (the same cores, for comparison)")
    for base in ("one", "one_ab", "plain"):
        one, one_us, two_us = rate(base), us(base), us("two")
        if not (one and two):
            continue
        line = f"- two processes / `{base}`: measured **{two / one:.2f}×** (target ≥ 1.8×)"
        if one_us and two_us:
            line += (f"; kcoord CPU per op {one_us:,.0f} µs ({base}) → {two_us:,.0f} µs (two, per process): on two "
                     f"cores of their own two processes would serve **{2 * one_us / two_us:.2f}×** one's CPU-bound "
                     f"rate (2 × 1e6/{two_us:,.0f} = {2e6 / two_us:,.0f}/s against 1e6/{one_us:,.0f} = "
                     f"{1e6 / one_us:,.0f}/s)")
        out.append(line)
    return out


DOC_HEAD = """# Scale-out: kcoord processes on their own cores, next to Kafka's coordinator

Generated by `bench/bench_scale_out.py` (its docstring has the method). Command:

    {command}

- {machine}; Kafka's group settings: bench_side_by_side's "tuned" configuration
  (`{config}`); kcoord settings `{kcoord}`.
- Each figure is the median of {runs} runs (setups in alternating order), the range in
  brackets; the measured window is {seconds} s after {warmup} s.
- Load average (1/5/15 min): {load_before} before, {load_after} after; {load_during}.
  Elapsed {elapsed}.
- CPU per operation: each process's utime + stime (/proc/PID/stat) over the window, over the
  responses (kcoord: the responses of that process's own port).

"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--setups", default="kafka1,kafka2,one,two")
    ap.add_argument("--workloads", default="commit_closed,heartbeat_pipelined")
    ap.add_argument("--cpus", default="0,1", help="CPU A, CPU B")
    ap.add_argument("--workers", type=int, default=2, help="load processes (split over the instances)")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--jit-warmup", type=float, default=6.0, help="unrecorded commits per setup first")
    ap.add_argument("--commit-groups", type=int, default=200)
    ap.add_argument("--commit-partitions", type=int, default=4)
    ap.add_argument("--commit-connections", type=int, default=100)
    ap.add_argument("--pipeline-connections", type=int, default=8)
    ap.add_argument("--pipeline-depth", type=int, default=16)
    ap.add_argument("--members", type=int, default=200)
    ap.add_argument("--groups", type=int, default=10)
    ap.add_argument("--hb-partitions", type=int, default=100)
    ap.add_argument("--state-partitions", type=int, default=50)
    ap.add_argument("--fencing", default="epoch", help="the cluster instances' fencing setting")
    ap.add_argument("--core-quota", type=float, default=0.0,
                    help="each kcoord process's CPU quota in cores (a device core; 0: none)")
    ap.add_argument("--session-ms", type=int, default=10000, help="cluster.session.timeout.ms")
    ap.add_argument("--profile-dir", type=Path, default=None,
                    help="after the runs, one py-spy profiled commit measurement per kcoord setup, stacks here")
    ap.add_argument("--doc", type=Path, default=None)
    ap.add_argument("--out-dir", type=Path, default=None)
    args = ap.parse_args(argv)
    a_cpu, b_cpu = (pinning.parse_cpus(c) for c in args.cpus.split(",", 1))
    names = [s.strip() for s in args.setups.split(",") if s.strip()]
    args.workload_set = {w.strip() for w in args.workloads.split(",") if w.strip()}
    if set(names) - set(SETUPS) or args.workload_set - set(WORKLOADS):
        raise SystemExit(f"setups: {SETUPS}; workloads: {WORKLOADS}")
    os.environ[ENV_JVM_OPTS] = (os.environ.get(ENV_JVM_OPTS, "") + " -XX:TieredStopAtLevel=4").strip()
    work = Path(tempfile.mkdtemp(prefix="bench-scale-out-"))
    out_dir = args.out_dir or work
    out_dir.mkdir(parents=True, exist_ok=True)
    command = shlex.join(["python", "bench/bench_scale_out.py", *(argv if argv is not None else sys.argv[1:])])
    load_before = os.getloadavg()
    sampler = pinning.LoadAverage().start()
    log(f"command: {command}; load average {load_before}; work dir {work}")
    config = sbs.CONFIGS["tuned"][1]
    kafka = vsk.start_broker("kafka-scale-out", config, work)
    vsk.create_topics(kafka.bootstrap, args, {"commit", "heartbeat"})
    kpid = kafka.nodes[0].process.pid
    kcoord_config = cluster_config(args.session_ms, fencing=args.fencing, fast=False)
    started: list[Any] = []
    setups: dict[str, Setup] = {}
    quota = CpuQuota() if args.core_quota > 0 else None
    figs: dict[str, Any] = {}
    failures: list[str] = []
    try:
        for name in names:
            instances: list[Any] = []
            if name in ("plain", "one", "one_ab", "two"):
                n = 2 if name == "two" else 1
                instances = start_instances(kafka.bootstrap, f"__kcoord_scale_{name}_{os.getpid()}", n,
                                            args.state_partitions, () if name == "plain" else kcoord_config,
                                            log_level="WARNING", clustered=name != "plain")
                started += instances
            setups[name] = Setup(name, kpid, kafka.port, instances, a_cpu, b_cpu,
                                 (quota, args.core_quota) if quota else None)
        for s in setups.values():
            if s.instances:
                wait_serving(s, vsk.COMMIT_TOPIC)
            s.pin()
            log(f"{s.name}: {s.layout()}; ports {s.ports}")
            if args.jit_warmup > 0:
                targets = commit_targets(args, s, f"sw{s.name[:2]}")
                pinning.pin_process(os.getpid(), s.load_cpus)
                r = load.run_targets(targets, wire.commit_error_offset(vsk.COMMIT_TOPIC),
                                     connections=args.commit_connections, depth=1,
                                     server_pids=[kpid, *s.kcoord_pids], load_cpus=s.load_cpus,
                                     workers=args.workers, seconds=args.jit_warmup, warmup=0.5)
                log(f"  warm-up {s.name} (not recorded): {show(figures(s, r))}")
        for i in range(args.runs):
            order = list(setups.values()) if i % 2 == 0 else list(setups.values())[::-1]
            for s in order:
                run_setup(args, s, i, figs, failures)
        if args.profile_dir:
            args.profile_dir.mkdir(parents=True, exist_ok=True)
            for s in setups.values():
                if s.instances:
                    targets = commit_targets(args, s, f"sp{s.name[:2]}")
                    f = profile(args, s, "commit_closed", targets, wire.commit_error_offset(vsk.COMMIT_TOPIC))
                    log(f"  profiled {s.name} commit_closed (not recorded): {show(f)}")
    finally:
        if quota is not None:
            quota.close()
        stop_all(started)
        kafka.stop()
    import orjson
    results = {"meta": {"command": command, "load_average_before": load_before,
                        "load_average_after": os.getloadavg(), "load_average_during": sampler.stop(),
                        "elapsed_s": time.monotonic() - vsk.T0,
                        "layouts": {n: s.layout() for n, s in setups.items()}, "failures": failures,
                        "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}, Kafka "
                                   f"{vsk.KAFKA_VERSION} (1 KRaft node, heap 1g)",
                        "args": {k: (sorted(v) if isinstance(v, set) else str(v)) for k, v in vars(args).items()}},
               "figures": figs}
    text = table(results)
    print(f"\n{text}\n")
    m = results["meta"]
    print(f"load average before {load_before}, after {m['load_average_after']}; "
          f"{pinning.LoadAverage.text(m['load_average_during'])}; elapsed {m['elapsed_s']:.0f} s")
    (out_dir / "scale-out.json").write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    if args.doc:
        head = DOC_HEAD.format(
            command=command, machine=m["machine"], config=config, kcoord=" ".join(kcoord_config),
            runs=args.runs, seconds=args.seconds, warmup=args.warmup,
            load_before=" / ".join(f"{x:.2f}" for x in load_before),
            load_after=" / ".join(f"{x:.2f}" for x in m["load_average_after"]),
            elapsed=f"{m['elapsed_s'] / 60:.0f} min", load_during=pinning.LoadAverage.text(m["load_average_during"]))
        fails = "\n## Failed measurements\n\n" + "\n".join(f"- {f}" for f in failures) + "\n" if failures else ""
        args.doc.write_text(f"{head}## Results\n\n{text}\n{fails}")
        print(f"wrote {args.doc}")
    if failures:
        print("FAILURES:\n  " + "\n  ".join(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
