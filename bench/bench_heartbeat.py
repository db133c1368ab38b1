"""Steady-state heartbeats/s: one kcoord gateway process vs Tansu's classic Heartbeat, same run.

    .venv/bin/python bench/bench_heartbeat.py [--members 1000] [--groups 10]
        [--modes pipelined,closed_loop] [--seconds 5] [--runs 3] [--window 128]
        [--workers 2] [--profile PREFIX] [--in-process] [--repo PATH]

Set-up, over the wire:
- one Tansu broker; a topic of ``--partitions`` partitions;
- kcoord (`kcoord serve --upstream <tansu>`, its own process): ``--members`` simulated
  KIP-848 consumers in ``--groups`` groups join (ConsumerGroupHeartbeat v1, epoch 0) and
  heartbeat until every group is Stable (ConsumerGroupDescribe);
- Tansu: the same number of classic members in the same number of groups join
  (JoinGroup v7, SyncGroup v5; session timeout ``--tansu-session-ms``: Tansu holds a
  JoinGroup for about half of it).

Load: the steady heartbeat each member sends: kcoord ConsumerGroupHeartbeat v1 with
group id, member id and member epoch (every other field null, as clients send it in
steady state); Tansu Heartbeat v4 with group id, generation id and member id. Requests
are pre-encoded; ``--workers`` raw-socket processes send them:
- ``pipelined``: one connection per worker, ``--window`` requests in flight;
- ``closed_loop``: one connection per member, one request in flight each (how real
  consumers heartbeat: each waits for its response).
Runs alternate Tansu / kcoord. Reported: requests/s (median of runs), kcoord/Tansu
ratio, the server process's CPU per request (/proc/<pid>/stat over the measured window),
the generator's own CPU, and error responses (non-zero error codes; must be 0).

``--profile PREFIX`` records the kcoord process with py-spy during one extra run of the
first mode (PREFIX.svg flame graph, PREFIX.txt collapsed stacks, top functions printed).
``--in-process`` measures instead the CPU per steady heartbeat through service, runtime
and core without sockets (bench/loadgen/inproc.py). ``--repo`` runs kcoord from another
checkout (before/after comparisons).
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from loadgen import procs  # noqa: E402
from loadgen.blast import BlastResult, blast  # noqa: E402
from loadgen.classic import HEARTBEAT_VERSION, form_classic_group  # noqa: E402
from loadgen.groups import form_groups  # noqa: E402
from loadgen.profiling import Profile  # noqa: E402
from loadgen.wire import CONSUMER_GROUP_HEARTBEAT, HEARTBEAT, response_error_offset  # noqa: E402

TOPIC = "bench-heartbeat"


def group_sizes(members: int, groups: int, prefix: str) -> dict[str, int]:
    base, extra = divmod(members, groups)
    # Equal-length group ids: every frame of a kind has the same size.
    return {f"{prefix}-{i:04d}": base + (1 if i < extra else 0) for i in range(groups)}


async def kcoord_frames(port: int, args) -> list[bytes]:
    driver, conns, by_group = await form_groups(
        "127.0.0.1", port, group_sizes(args.members, args.groups, "kc"), (TOPIC,), args.partitions)
    driver.stop()
    await asyncio.sleep(0.3)   # last in-flight responses
    for c in conns:
        c.close()
    members = [m for ms in by_group.values() for m in ms]
    return [m.steady_template().with_correlation(i) for i, m in enumerate(members)]


async def tansu_frames(port: int, args) -> list[bytes]:
    formed = await asyncio.gather(*(
        form_classic_group("127.0.0.1", port, gid, n, (TOPIC,), args.tansu_session_ms)
        for gid, n in group_sizes(args.members, args.groups, "ta").items()))
    members = [m for ms in formed for m in ms]
    return [m.heartbeat_template().with_correlation(i) for i, m in enumerate(members)]


def run_load(port: int, api_key: int, version: int, frames: list[bytes], mode: str, pid: int, args) -> BlastResult:
    connections = max(1, len(frames) // args.workers) if mode == "closed_loop" else 1
    return blast("127.0.0.1", port, response_error_offset(api_key, version), frames, mode=mode,
                 workers=args.workers, window_size=args.window, connections=connections,
                 seconds=args.seconds, warmup=args.warmup, server_pids={"server": pid})


def fmt_run(r: BlastResult) -> str:
    server_us = r.server_cpu["server"] / r.responses * 1e6 if r.responses else float("nan")
    gen_us = r.generator_cpu / r.responses * 1e6 if r.responses else float("nan")
    return (f"{r.rate:>9,.0f} req/s  server {server_us:5.1f} us/req ({r.server_cpu['server'] / r.window:4.2f} cores)"
            f"  generator {gen_us:5.1f} us/req ({r.generator_cpu / r.window:4.2f} cores)"
            f"  errors {dict(r.errors) or 0}")


def summary(name: str, runs: list[BlastResult]) -> tuple[float, float]:
    rate = statistics.median(r.rate for r in runs)
    server_us = statistics.median(r.server_cpu["server"] / max(r.responses, 1) * 1e6 for r in runs)
    lo, hi = min(r.rate for r in runs), max(r.rate for r in runs)
    print(f"  {name:7s} median {rate:,.0f} req/s (min {lo:,.0f}, max {hi:,.0f}, n={len(runs)}), "
          f"server CPU {server_us:.1f} us/req")
    return rate, server_us


def profile(pid: int, port: int, frames: list[bytes], mode: str, out: str, args) -> None:
    with Profile(pid, out, args.seconds + args.warmup + 2):
        r = run_load(port, CONSUMER_GROUP_HEARTBEAT, 1, frames, mode, pid, args)
    print(f"profile run ({mode}): {fmt_run(r)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--modes", default="pipelined,closed_loop")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--window", type=int, default=128, help="requests in flight per connection (pipelined)")
    parser.add_argument("--workers", type=int, default=2, help="load-generator processes")
    parser.add_argument("--tansu-session-ms", type=int, default=30000,
                        help="classic session timeout: long enough to outlive a kcoord run")
    parser.add_argument("--state-partitions", type=int, default=4)
    parser.add_argument("--config", action="append", default=[], help="kcoord --config NAME=VALUE")
    parser.add_argument("--profile", default=None, help="py-spy output prefix")
    parser.add_argument("--skip-tansu", action="store_true")
    parser.add_argument("--in-process", action="store_true",
                        help="CPU per steady heartbeat through service, runtime and core, no sockets (loadgen/inproc.py)")
    parser.add_argument("--repo", default=str(procs.REPO))
    args = parser.parse_args()
    modes = args.modes.split(",")
    if args.in_process:
        bench = Path(__file__).resolve().parent
        print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
        subprocess.run([sys.executable, "-m", "loadgen.inproc", "--members", str(args.members),
                        "--groups", str(args.groups), "--partitions", str(args.partitions),
                        "--runs", str(args.runs)],
                       cwd=bench, env={**os.environ, "PYTHONPATH": args.repo}, check=True)
        return

    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    print(f"members={args.members} groups={args.groups} partitions={args.partitions} workers={args.workers} "
          f"window={args.window} seconds={args.seconds} runs={args.runs} cpus={os.cpu_count()} repo={args.repo}")
    broker = procs.tansu()
    kc = None
    try:
        procs.run(procs.create_topic("127.0.0.1", broker.port, TOPIC, args.partitions))
        kc = procs.Kcoord(broker.bootstrap, tuple(args.config), args.state_partitions, Path(args.repo)).start()
        started = time.monotonic()
        kc_frames = procs.run(kcoord_frames(kc.port, args))
        print(f"kcoord: {args.members} members joined and Stable in {time.monotonic() - started:.1f}s "
              f"(kcoord pid {kc.pid}, RSS {procs.rss_kib(kc.pid) / 1024:.0f} MiB)")
        ta_frames: list[bytes] = []
        if not args.skip_tansu:
            started = time.monotonic()
            ta_frames = procs.run(tansu_frames(broker.port, args))
            print(f"tansu: {args.members} classic members joined in {time.monotonic() - started:.1f}s")
        for mode in modes:
            print(f"mode {mode}:")
            kc_runs, ta_runs = [], []
            for i in range(args.runs):
                if ta_frames:
                    ta_runs.append(run_load(broker.port, HEARTBEAT, HEARTBEAT_VERSION, ta_frames, mode,
                                            broker.process.pid, args))
                    print(f"  run {i + 1} tansu  {fmt_run(ta_runs[-1])}")
                kc_runs.append(run_load(kc.port, CONSUMER_GROUP_HEARTBEAT, 1, kc_frames, mode, kc.pid, args))
                print(f"  run {i + 1} kcoord {fmt_run(kc_runs[-1])}")
            kc_rate, _ = summary("kcoord", kc_runs)
            if ta_runs:
                ta_rate, _ = summary("tansu", ta_runs)
                print(f"  kcoord / tansu = {kc_rate / ta_rate:.2f}")
        if args.profile:
            profile(kc.pid, kc.port, kc_frames, modes[0], args.profile, args)
    except BaseException:
        if kc is not None:
            kc.print_log_tail()
        raise
    finally:
        if kc is not None:
            kc.stop()
        broker.stop()


if __name__ == "__main__":
    main()
