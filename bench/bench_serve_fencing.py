"""Durable OffsetCommits through `kcoord serve --instance-id`, fencing none / transactional /
epoch, side by side on one Kafka 4.4 broker: commits/s, and the CPU per commit of kcoord and
of the broker (docs/design/fencing.md "fencing=epoch"; docs/measurements/several-processes.md).

    .venv/bin/python bench/bench_serve_fencing.py [--runs 3] [--seconds 4] [--modes none,transactional,epoch]
        [--connections 100] [--groups 200] [--partitions 4] [--kcoord-cpus 0] [--other-cpus 1]

One Kafka 4.4.0 KRaft node (bench_vs_kafka.start_broker, Kafka's group defaults) stores the
state topics. One `kcoord serve --instance-id kc-<mode> --config fencing=<mode>` per mode
(a one-member cluster: fencing=none is allowed while alone), each with its own state topic
and so its own membership group, all started before the first blast. kcoord processes are
pinned to ``--kcoord-cpus``, the broker and the load generator to ``--other-cpus``
(sched_setaffinity, as `taskset`). The load is bench_commit_cpu's closed loop: durable
OffsetCommit v8 of ``--partitions`` partitions for ``--groups`` simple groups (generation -1),
``--connections`` connections with one request in flight each.

Each of ``--runs`` rounds blasts every mode once, the order rotating from round to round
(alternating rounds); figures are the medians over the rounds. CPU per commit is the utime +
stime (/proc/PID/stat) of the kcoord process, and of the broker's JVM, over the measured
window, divided by the commits answered in it (an idle kcoord of another mode costs the
broker a little: its heartbeats and, for epoch, its keep-alive writes). Not a test: it
prints figures and a Markdown table.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("KCOORD_TEST_PORTS", "29700-29799")
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "bench")]

import bench_vs_kafka as vsk  # noqa: E402
from bench_side_by_side import commit_frames  # noqa: E402
from loadgen import procs  # noqa: E402
from side_by_side import load, pinning  # noqa: E402
from vs_kafka import wire  # noqa: E402

from support.kcoord import launch_serve  # noqa: E402
from support.wait import wait_until  # noqa: E402

MODES = ("none", "transactional", "epoch")


def start_member(bootstrap: str, mode: str, state_partitions: int) -> tuple:
    """`kcoord serve --instance-id kc-<mode> --config fencing=<mode>` with its own state topic
    (and so its own membership group); (process, bootstrap port)."""
    for attempt in range(3):
        port = procs.free_ports(2)
        args = [sys.executable, "-m", "coordinator.cli", "--log-level", "WARNING", "serve",
                "--listen", f"127.0.0.1:{port}", "--upstream", bootstrap,
                "--state-topic", f"__kcoord_fencing_{mode}_{port}_{os.getpid()}",
                "--state-partitions", str(state_partitions), "--instance-id", f"kc-{mode}",
                "--config", f"fencing={mode}"]
        try:
            process, _ = launch_serve(args, REPO, f"kcoord-fencing-{mode}-{port}", [], 90.0)
            return process, port
        except RuntimeError as e:
            # A port of the range taken meanwhile (the machine's ephemeral ports overlap
            # it): another block.
            if attempt == 2 or "Address already in use" not in str(e):
                raise
    raise AssertionError("unreachable")


def _commits(port: int) -> bool:
    """One commit succeeds (a cluster member answers NOT_COORDINATOR until its first
    assignment's shards are taken and loaded)."""
    try:
        return wire.check_commit(port, "fence", vsk.COMMIT_TOPIC)
    except RuntimeError:
        return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--groups", type=int, default=200)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--state-partitions", type=int, default=50)
    ap.add_argument("--kcoord-cpus", default="0")
    ap.add_argument("--other-cpus", default="1", help="the broker and the load generator")
    a = ap.parse_args()
    modes = a.modes.split(",")
    unknown = set(modes) - set(MODES)
    if unknown:
        raise SystemExit(f"unknown fencing modes {sorted(unknown)}; known: {', '.join(MODES)}")
    kcoord_cpus, other_cpus = pinning.parse_cpus(a.kcoord_cpus), pinning.parse_cpus(a.other_cpus)
    work = Path(tempfile.mkdtemp(prefix="serve-fencing-"))
    with pinning.running_on(other_cpus):
        kafka = vsk.start_broker("kafka-serve-fencing", vsk.KAFKA_DEFAULTS, work)
    broker_pid = kafka.nodes[0].process.pid
    started: dict[str, tuple] = {}
    try:
        vsk.create_topics(kafka.bootstrap, argparse.Namespace(hb_partitions=0, storm_partitions=0,
                                                              commit_partitions=a.partitions), {"commit"})
        for mode in modes:
            with pinning.running_on(kcoord_cpus):
                kc, port = start_member(kafka.bootstrap, mode, a.state_partitions)
            started[mode] = kc, port
            pinning.pin_process(kc.pid, kcoord_cpus)
        pinning.pin_process(broker_pid, other_cpus)
        pinning.pin_process(os.getpid(), other_cpus)
        print(f"kcoord on CPUs {sorted(kcoord_cpus)}; Kafka and the load on {sorted(other_cpus)}; "
              f"load average {os.getloadavg()[0]:.2f}", flush=True)
        offset = wire.commit_error_offset(vsk.COMMIT_TOPIC)
        frames = commit_frames("fence", a.groups, vsk.COMMIT_TOPIC, a.partitions)
        for mode, (kc, port) in started.items():
            wait_until(lambda p=port: _commits(p), 90, interval=0.5, message=f"fencing={mode} answers a commit")
            load.run(port, frames, offset, connections=a.connections, depth=1, server_pids=[kc.pid],
                     load_cpus=other_cpus, seconds=3.0, warmup=0.5)          # warm-up, not recorded
        figures: dict[str, list[tuple[float, float, float]]] = {m: [] for m in modes}
        for i in range(a.runs):
            order = modes[i % len(modes):] + modes[:i % len(modes)]
            for mode in order:
                kc, port = started[mode]
                broker_before = procs.cpu_seconds(broker_pid)
                r = load.run(port, frames, offset, connections=a.connections, depth=1, server_pids=[kc.pid],
                             load_cpus=other_cpus, seconds=a.seconds, warmup=a.warmup)
                # The broker's CPU over the whole blast (warm-up included) per commit answered
                # in the whole blast, the rate of the window times the blast's length.
                broker_s = procs.cpu_seconds(broker_pid) - broker_before
                if r.errors:
                    raise SystemExit(f"fencing={mode}: error responses {r.errors}")
                if not r.responses or r.cpu_us_per_op is None:
                    print(f"run {i + 1} fencing={mode}: no commit answered in the window", flush=True)
                    continue
                broker_us = broker_s / (r.rate * (a.seconds + a.warmup)) * 1e6
                figures[mode].append((r.rate, r.cpu_us_per_op, broker_us))
                print(f"run {i + 1} fencing={mode}: {r.rate:,.0f} commits/s, kcoord {r.cpu_us_per_op:.1f} us "
                      f"CPU/commit, broker {broker_us:.1f} us CPU/commit, p50 {r.p50_us:,.0f} us, "
                      f"p99 {r.p99_us:,.0f} us", flush=True)
        print(f"\n| fencing | commits/s (median of {a.runs}) | kcoord µs CPU/commit | broker µs CPU/commit "
              "| runs (commits/s) |")
        print("|---|---|---|---|---|")
        for mode in modes:
            fs = figures[mode]
            if not fs:
                print(f"| {mode} | no run answered | | | |")
                continue
            print(f"| {mode} | {statistics.median(f[0] for f in fs):,.0f} "
                  f"| {statistics.median(f[1] for f in fs):.1f} | {statistics.median(f[2] for f in fs):.1f} "
                  f"| {', '.join(f'{f[0]:,.0f}' for f in fs)} |")
        print(f"load average {os.getloadavg()[0]:.2f}")
    finally:
        for kc, _ in started.values():
            procs.processes.stop(kc, 15)
        kafka.stop()


if __name__ == "__main__":
    main()
