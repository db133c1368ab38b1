"""Heartbeats and durable commits through a kcoord cluster (issue 14 point 6), in front of
Apache Kafka 4.4, on this 2-core machine.

    .venv/bin/python bench/bench_cluster_heartbeat.py [--parts heartbeat,commits]
        [--setups single,one,two] [--members 1000] [--groups 10] [--seconds 5] [--runs 3]
        [--window 128 | --rate-per-process R | --rate R] [--connections 50]
        [--generators-per-process N]
        [--committers 48] [--commit-seconds 5] [--storm-members 1000]

Part ``heartbeat``: server CPU per steady KIP-848 heartbeat and aggregate heartbeats/s, per
setup (``--setups``):
- ``single``: one plain `kcoord serve` process (no --instance-id: today's single process);
- ``one``: a cluster of one (`--instance-id kc-0`, the default fencing=epoch: lease checks on);
- ``two``: two instances kc-0, kc-1; the groups are chosen so that half are coordinated by
  each (FindCoordinator), i.e. spread over both shard sets.
``--members`` simulated KIP-848 members (bench/loadgen) in ``--groups`` groups join through
their coordinator and are Stable (all setups side by side, runs interleaved); then
pre-encoded steady heartbeats are sent pipelined (``--window`` in flight per connection) by
two load-generator processes (one per instance with two instances, both at the one process
otherwise), as bench_heartbeat.py does. Server
CPU is read from /proc/<pid>/stat of every kcoord process over the measured window; CPU per
heartbeat = their sum / responses. Target from the issue: two processes' CPU per heartbeat
within 10 % of one process's. With two kcoords, two generators and Kafka on 2 cores the
aggregate rate is bounded by the machine, not by kcoord: compare CPU per heartbeat.
Pipelined load saturates every process, so the setups compete for the 2 cores and their
batches differ. ``--rate-per-process R`` instead offers R heartbeats/s to every process,
paced (open loop, ``--connections`` sockets per generator, round robin, as a fleet of
members heartbeating at their intervals does): each process does the same work whether it
runs alone or beside another, and none is saturated, so the per-heartbeat CPU shows what a
second process costs. ``--rate R`` offers R in all, split over the processes (two processes
then each serve half, in smaller batches). Ratios two/one and two/single are printed per
run (the runs are interleaved; the VM's speed swings more between runs than the setups
differ).

Part ``commits``: durable commits/s through `kcoord serve --instance-id kc-0` with
``--config fencing=transactional`` (one Kafka transaction per state-topic batch) vs
``fencing=none`` (the idempotent writer, as one process writes): ``--committers`` committing
members, each a thread with its own group (spread over the 12 shards), one OffsetCommit in
flight each (closed loop), for ``--commit-seconds``. Reported: commits/s, p50/p99 latency,
and kcoord's state-write latency (kcoord_state_write_seconds, from --metrics-port).
bench_fencing.py measures the log alone; this is the whole path. Setups alternate per run.

Part ``storm`` (not in the default ``--parts``): a join storm through one process with each
fencing mode: ``--storm-members`` simulated KIP-848 members in ``--groups`` new groups join at
once; seconds until all are STABLE (checked every 0.2 s). Runs alternate the modes.
Nothing is asserted: it prints figures.
"""
from __future__ import annotations

import argparse
import asyncio
import socket
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster.common import (  # noqa: E402
    cluster_config,
    commit,
    find,
    median,
    start_instances,
    start_kafka44,
    stop_all,
    use_ports,
    wait_settled,
)
from loadgen.blast import BlastResult, blast  # noqa: E402
from loadgen.groups import form_groups  # noqa: E402
from loadgen.wire import CONSUMER_GROUP_HEARTBEAT, response_error_offset  # noqa: E402

TOPIC = "bench-cluster-heartbeat"


def spread_groups(procs, groups: int) -> dict[int, tuple[int, list[str]]]:
    """``groups`` equal-length group ids, as many coordinated by each process as possible
    (FindCoordinator): process index -> (the port FindCoordinator names, its group ids).
    A single process names its broker listener (P+1), an instance its bootstrap port P."""
    per: dict[int, tuple[int, list[str]]] = {}
    want = -(-groups // len(procs))
    i = 0
    while sum(len(v[1]) for v in per.values()) < groups:
        gid = f"hb-{i:05d}"
        i += 1
        code, _, _, port = find(procs[0].bootstrap, gid)
        owner = next((k for k, p in enumerate(procs) if p.port <= port <= p.port + 1), None)
        if code == 0 and owner is not None and len(per.setdefault(owner, (port, []))[1]) < want:
            per[owner][1].append(gid)
        if i > 10_000:
            raise RuntimeError(f"could not spread {groups} groups over {len(procs)} processes: {per}")
    return per


async def frames_for(port: int, group_ids: list[str], members_per_group: int, partitions: int) -> list[bytes]:
    driver, conns, by_group = await form_groups("127.0.0.1", port, {g: members_per_group for g in group_ids},
                                                (TOPIC,), partitions)
    driver.stop()
    await asyncio.sleep(0.3)   # let the last in-flight responses arrive before closing
    for c in conns:
        c.close()
    members = [m for ms in by_group.values() for m in ms]
    return [m.steady_template().with_correlation(i) for i, m in enumerate(members)]


def heartbeat_prepare(kafka, setup: str, args, procs_out: list) -> tuple[dict[int, list[bytes]], dict[int, int]]:
    """Start a setup's processes (appended to ``procs_out``) and form its groups: the steady
    heartbeat frames by coordinator port, and the kcoord pid behind each port."""
    n = 2 if setup == "two" else 1
    state = f"__kc_bench_hb_{setup}_{int(time.time())}"
    # Members' sessions at kcoord's maximum (60 s): the setups' runs are interleaved, so a
    # setup's members wait through the others' runs without heartbeats.
    procs = start_instances(kafka.bootstrap, state, n, 12,
                            cluster_config(6000, fast=False, extra=("consumer_session_timeout_ms=60000",)),
                            clustered=setup != "single", log_level="WARNING")
    procs_out.extend(procs)
    if setup != "single":
        wait_settled(procs, [f"probe-{i}" for i in range(40)])
    by_proc = spread_groups(procs, args.groups)
    per_group = args.members // args.groups
    frames = {port: asyncio.run(frames_for(port, gids, per_group, args.partitions))
              for port, gids in by_proc.values()}
    print(f"  {setup}: {sum(len(f) for f in frames.values())} members Stable, groups per process "
          f"{[len(v[1]) for v in by_proc.values()]}", flush=True)
    return frames, {port: procs[k].process.pid for k, (port, _) in by_proc.items()}


def heartbeat_measure(setup: str, frames: dict[int, list[bytes]], pids: dict[int, int], args) -> dict[str, float]:
    """One measured window: every process of the setup loaded at once (two generator
    processes in all, split over the processes), CPU summed over them."""
    error_offset = response_error_offset(CONSUMER_GROUP_HEARTBEAT, 1)
    outs: dict[int, BlastResult] = {}
    # Two generator processes in all by default; --generators-per-process N gives every
    # kcoord process the same load shape (N connections, each with its window) in every setup.
    workers = args.generators_per_process or (2 if len(frames) == 1 else 1)

    def load(port: int) -> None:
        # --rate: the same aggregate offered load in every setup, split evenly over the
        # processes; --rate-per-process: the same load on every process (two processes
        # then serve twice the aggregate). Neither saturates the server; without them,
        # pipelined at the machine's ceiling.
        rate = args.rate_per_process or args.rate / len(frames)
        outs[port] = blast("127.0.0.1", port, error_offset, frames[port],
                           mode="paced" if rate else "pipelined", rate=rate,
                           connections=args.connections, workers=workers, window_size=args.window,
                           seconds=args.seconds, warmup=args.warmup, server_pids={"server": pids[port]})

    threads = [threading.Thread(target=load, args=(port,)) for port in frames]
    for t in threads:
        t.start()
    for t in threads:
        t.join(args.seconds + args.warmup + 120)
    responses = sum(r.responses for r in outs.values())
    server_cpu = sum(r.server_cpu["server"] for r in outs.values())
    errors = sum(sum(r.errors.values()) for r in outs.values())
    return {"rate": sum(r.rate for r in outs.values()), "us": server_cpu / max(1, responses) * 1e6,
            "cores": server_cpu / args.seconds, "errors": float(errors)}


def ratio_lines(rows: dict[str, list[dict[str, float]]]) -> list[str]:
    """Per-run ratios of CPU per heartbeat, two processes against each one-process setup:
    the runs are interleaved, so a run's setups saw the same state of the VM, whose speed
    swings more between runs than the setups differ."""
    lines = []
    for base in ("one", "single"):
        if "two" in rows and base in rows:
            ratios = sorted(t["us"] / b["us"] for t, b in zip(rows["two"], rows[base], strict=True))
            lines.append(f"two/{base} CPU per heartbeat, per run: median {median(ratios):.3f}, "
                         f"range {ratios[0]:.3f}-{ratios[-1]:.3f}, runs within 10 %: "
                         f"{sum(r <= 1.10 for r in ratios)}/{len(ratios)}")
    return lines


# ------------------------------------------------------------------ commits
def metric_sum(port: int, name: str) -> tuple[float, float]:
    """(sum, count) of a Prometheus histogram, over its label sets."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    total = count = 0.0
    for line in text.splitlines():
        if line.startswith(name + "_sum"):
            total += float(line.rsplit(" ", 1)[1])
        elif line.startswith(name + "_count"):
            count += float(line.rsplit(" ", 1)[1])
    return total, count


def counter(port: int, name: str) -> float:
    """A Prometheus counter's value, summed over its label sets."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + " ") or line.startswith(name + "{"))


CT_SECONDS = "kcoord_state_concurrent_transactions_seconds_total"
CT_RETRIES = "kcoord_state_concurrent_transactions_total"


def commit_run(kafka, fencing: str, args) -> dict[str, float]:
    from support.admin import create_topic
    from support.ports import free_port

    stamp = f"{fencing}_{time.monotonic_ns()}"
    topic = f"bench-commits-{stamp}"
    create_topic(kafka.bootstrap, topic, 1)
    metrics_port = free_port()
    procs = start_instances(kafka.bootstrap, f"__kc_bench_commits_{stamp}", 1, 12,
                            cluster_config(6000, fencing=fencing, fast=False), log_level="WARNING",
                            extra_args=("--metrics-port", str(metrics_port)))
    proc = procs[0]
    try:
        wait_settled(procs, [f"probe-{i}" for i in range(8)])
        groups = [f"bench-commit-{i:04d}" for i in range(args.committers)]
        # The topic reaches kcoord's metadata within its refresh: one commit waits for it
        # (UNKNOWN_TOPIC_OR_PARTITION before), then the measured load starts.
        from support.wait import wait_until
        wait_until(lambda: commit(proc.bootstrap, groups[0], topic, 1) == 0, 60, message="the first commit")
        latencies: list[float] = []
        errors = [0]
        lock = threading.Lock()
        start = threading.Event()
        stop_at = [0.0]

        def member(group: str) -> None:
            sock = socket.create_connection(("127.0.0.1", proc.port), timeout=30)
            mine: list[float] = []
            bad = 0
            offset = 0
            start.wait()
            try:
                while time.monotonic() < stop_at[0]:
                    offset += 1
                    t0 = time.monotonic()
                    code = commit(sock, group, topic, offset)
                    if code == 0:
                        mine.append(time.monotonic() - t0)
                    else:
                        bad += 1
            finally:
                sock.close()
            with lock:
                latencies.extend(mine)
                errors[0] += bad

        threads = [threading.Thread(target=member, args=(g,), daemon=True) for g in groups]
        for t in threads:
            t.start()
        w0 = metric_sum(metrics_port, "kcoord_state_write_seconds")
        ct0 = counter(metrics_port, CT_SECONDS), counter(metrics_port, CT_RETRIES)
        t0 = time.monotonic()
        stop_at[0] = t0 + args.commit_seconds
        start.set()
        for t in threads:
            t.join(args.commit_seconds + 60)
        elapsed = time.monotonic() - t0
        w1 = metric_sum(metrics_port, "kcoord_state_write_seconds")
        ct1 = counter(metrics_port, CT_SECONDS), counter(metrics_port, CT_RETRIES)
        writes = w1[1] - w0[1]
        latencies.sort()

        def pct(q: float) -> float:
            return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000 if latencies else float("nan")

        r = {"rate": len(latencies) / elapsed, "p50": pct(0.5), "p99": pct(0.99), "errors": float(errors[0]),
             "writes": writes / elapsed, "write_ms": (w1[0] - w0[0]) / max(1, writes) * 1000,
             # Issue 14 point 6: the share of state-write time spent backing off while the
             # upstream still writes the previous transaction's markers (transactions v1).
             "ct_share": (ct1[0] - ct0[0]) / max(1e-9, w1[0] - w0[0]), "ct_retries": (ct1[1] - ct0[1]) / elapsed}
        print(f"  fencing={fencing}: {r['rate']:,.0f} commits/s, p50 {r['p50']:.1f} ms, p99 {r['p99']:.1f} ms, "
              f"{r['writes']:.0f} state writes/s of {r['write_ms']:.1f} ms mean, "
              f"CONCURRENT_TRANSACTIONS {r['ct_share']:.0%} of write time ({r['ct_retries']:.0f} retries/s), "
              f"errors {errors[0]}", flush=True)
        return r
    finally:
        stop_all(procs)


def storm_run(kafka, fencing: str, args) -> float:
    """Seconds from the first join until ``--storm-members`` simulated KIP-848 members in
    ``--groups`` groups are all STABLE (loadgen.groups.form_groups: the members' view, then
    ConsumerGroupDescribe, checked every 0.2 s) through one `kcoord serve --instance-id kc-0`
    with the given fencing. Every join and reconciliation is written to the state topic."""
    stamp = f"{fencing}_{time.monotonic_ns()}"
    procs = start_instances(kafka.bootstrap, f"__kc_bench_storm_{stamp}", 1, 12,
                            cluster_config(6000, fencing=fencing, fast=False), log_level="WARNING")
    try:
        wait_settled(procs, [f"probe-{i}" for i in range(8)])
        (port, gids), = spread_groups(procs, args.groups).values()
        gids = [f"{g}-{stamp}" for g in gids]      # fresh groups (the coordinator is the only one)
        per_group = args.storm_members // args.groups

        async def form() -> float:
            t0 = time.monotonic()
            driver, conns, _ = await form_groups("127.0.0.1", port, {g: per_group for g in gids}, (TOPIC,),
                                                 args.partitions)
            elapsed = time.monotonic() - t0
            driver.stop()
            for c in conns:
                c.close()
            return elapsed

        elapsed = asyncio.run(form())
        print(f"  fencing={fencing}: {args.storm_members} members STABLE in {elapsed * 1000:.0f} ms", flush=True)
        return elapsed
    finally:
        stop_all(procs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="heartbeat,commits")
    parser.add_argument("--setups", default="single,one,two")
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--window", type=int, default=128)
    parser.add_argument("--rate", type=float, default=0.0,
                        help="offered heartbeats/s in all (paced, open loop) instead of pipelined saturation")
    parser.add_argument("--rate-per-process", type=float, default=0.0,
                        help="offered heartbeats/s per kcoord process (paced, open loop)")
    parser.add_argument("--connections", type=int, default=50, help="sockets per generator when paced")
    parser.add_argument("--generators-per-process", type=int, default=0,
                        help="generator processes per kcoord process (default: two in all)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--committers", type=int, default=48)
    parser.add_argument("--commit-seconds", type=float, default=5.0)
    parser.add_argument("--storm-members", type=int, default=1000, help="members of the join storm (part storm)")
    args = parser.parse_args()
    use_ports()
    parts = args.parts.split(",")
    from support.admin import create_topic

    kafka = start_kafka44("bench-cluster-heartbeat-")
    out = []
    try:
        if "heartbeat" in parts:
            create_topic(kafka.bootstrap, TOPIC, args.partitions)
            setups = args.setups.split(",")
            rows: dict[str, list[dict[str, float]]] = {setup: [] for setup in setups}
            prepared = {}
            hb_procs: list = []
            try:
                for setup in setups:
                    print(f"heartbeats, setup {setup}: starting and forming groups ...", flush=True)
                    prepared[setup] = heartbeat_prepare(kafka, setup, args, hb_procs)
                # Interleaved (single, one, two, single, ...): the machine's load drifts.
                for run in range(args.runs):
                    for setup in setups:
                        r = heartbeat_measure(setup, *prepared[setup], args)
                        rows[setup].append(r)
                        print(f"  run {run + 1}/{args.runs} {setup}: {r['rate']:,.0f} heartbeats/s, server CPU "
                              f"{r['us']:.1f} us/heartbeat ({r['cores']:.2f} cores), errors {r['errors']:.0f}",
                              flush=True)
            finally:
                stop_all(hb_procs)
            shape = (f"paced at {args.rate_per_process:,.0f} heartbeats/s offered per process" if args.rate_per_process
                     else f"paced at {args.rate:,.0f} heartbeats/s offered in all" if args.rate
                     else f"pipelined, window {args.window}")
            if args.rate or args.rate_per_process:
                shape += f", {args.connections} sockets per generator"
            out.append(f"\n{args.members} KIP-848 members in {args.groups} groups, {shape}\n"
                       "| setup | heartbeats/s (median) | server CPU us/heartbeat (median) | server cores | errors |"
                       "\n|---|---|---|---|---|")
            for setup, rs in rows.items():
                out.append(f"| {setup} | {median(r['rate'] for r in rs):,.0f} | {median(r['us'] for r in rs):.1f} | "
                           f"{median(r['cores'] for r in rs):.2f} | {sum(r['errors'] for r in rs):.0f} |")
            out.extend(ratio_lines(rows))
        if "storm" in parts:
            if "heartbeat" not in parts:
                create_topic(kafka.bootstrap, TOPIC, args.partitions)
            storms: dict[str, list[float]] = {"transactional": [], "none": []}
            for run in range(args.runs):
                for fencing in storms:
                    print(f"join storm, fencing={fencing}, run {run + 1}/{args.runs} ...", flush=True)
                    storms[fencing].append(storm_run(kafka, fencing, args))
            out.append(f"\njoin storm: {args.storm_members} simulated KIP-848 members in {args.groups} groups to all "
                       "STABLE, one kcoord process\n| fencing | median | range |\n|---|---|---|")
            for fencing, ts in storms.items():
                out.append(f"| {fencing} | {median(ts) * 1000:.0f} ms | {min(ts) * 1000:.0f}–{max(ts) * 1000:.0f} ms |")
        if "commits" in parts:
            by = {"transactional": [], "none": []}
            for run in range(args.runs):
                for fencing in by:
                    print(f"commits, fencing={fencing}, run {run + 1}/{args.runs} ...", flush=True)
                    by[fencing].append(commit_run(kafka, fencing, args))
            out.append(f"\n{args.committers} committing members, one OffsetCommit in flight each, one kcoord process\n"
                       "| fencing | commits/s (median) | p50 / p99 ms | state writes/s | write ms (mean) "
                       "| CONCURRENT_TRANSACTIONS share of write time (retries/s) | errors |"
                       "\n|---|---|---|---|---|---|---|")
            for fencing, rs in by.items():
                out.append(f"| {fencing} | {median(r['rate'] for r in rs):,.0f} | {median(r['p50'] for r in rs):.1f} / "
                           f"{median(r['p99'] for r in rs):.1f} | {median(r['writes'] for r in rs):.0f} | "
                           f"{median(r['write_ms'] for r in rs):.1f} | {median(r['ct_share'] for r in rs):.0%} "
                           f"({median(r['ct_retries'] for r in rs):.0f}) | {sum(r['errors'] for r in rs):.0f} |")
    finally:
        kafka.stop()
    print("\n".join(out))


if __name__ == "__main__":
    main()
