"""Memory per idle member: RSS of the kcoord process at N joined, stable, heartbeating
members, minus its RSS with none, divided by N.

    .venv/bin/python bench/bench_memory.py [--members 10000] [--group-size 500]
        [--partitions 1000] [--members-per-connection 100] [--settle 10] [--config NAME=VALUE]
        [--in-process] [--repo PATH]

Over the wire (default): a Tansu broker, a topic of ``--partitions`` partitions, one
`kcoord serve` process. RSS (VmRSS of /proc/<pid>/status) is read once the gateway is
ready and has answered a first request (the 0-member figure), then ``--members``
simulated KIP-848 consumers join in groups of ``--group-size`` (a few groups at a time,
each waited on until Stable), many members sharing a connection (legal in Kafka). They
keep heartbeating at the interval the coordinator hands out; after ``--settle`` seconds
of that, RSS is read three times a second apart and the median is used.

The same window also measures the steady heartbeat load the coordinator's policy produces
at that size (issue 5: heartbeats/s against ``consumer_heartbeat_budget_per_second``) and
the CPU the kcoord process spends on it (utime + stime from /proc over the window).

``--in-process``: the same members join a sans-IO shard in this process (no sockets, no
runtime) and tracemalloc shows where the bytes per member go (the shard's state only:
no timers, connections or buffers).
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from loadgen import procs  # noqa: E402
from loadgen.client import KafkaConnection, MemberDriver  # noqa: E402
from loadgen.groups import form_groups  # noqa: E402

TOPIC = "bench-memory"
TARGET_BYTES = 5 * 1024


def group_plan(members: int, group_size: int) -> dict[str, int]:
    plan, i = {}, 0
    while members > 0:
        n = min(group_size, members)
        plan[f"mem-{i:05d}"] = n
        members -= n
        i += 1
    return plan


async def fill(port: int, pid: int, args) -> tuple[list[MemberDriver], list[KafkaConnection]]:
    plan = group_plan(args.members, args.group_size)
    ids = list(plan)
    drivers, conns = [], []
    started = time.monotonic()
    for i in range(0, len(ids), args.groups_at_once):
        batch = {gid: plan[gid] for gid in ids[i:i + args.groups_at_once]}
        driver, batch_conns, _ = await form_groups("127.0.0.1", port, batch, (TOPIC,), args.partitions,
                                                   members_per_connection=args.members_per_connection,
                                                   timeout=args.timeout)
        drivers.append(driver)
        conns += batch_conns
        done = sum(len(d.members) for d in drivers)
        print(f"  {done:6d} members stable after {time.monotonic() - started:5.1f}s, "
              f"RSS {procs.rss_kib(pid) / 1024:6.1f} MiB")
    return drivers, conns


async def steady(port: int, pid: int, args) -> tuple[float, int]:
    drivers, conns = await fill(port, pid, args)
    print(f"  all {args.members} members stable; heartbeating for {args.settle:.0f}s")
    before, cpu0, t0 = sum(d.responses for d in drivers), procs.cpu_seconds(pid), time.monotonic()
    await asyncio.sleep(args.settle)
    elapsed = time.monotonic() - t0
    rate = (sum(d.responses for d in drivers) - before) / elapsed
    cpu = (procs.cpu_seconds(pid) - cpu0) / elapsed
    samples = []
    for _ in range(3):
        samples.append(procs.rss_kib(pid))
        await asyncio.sleep(1.0)
    errors: dict[int, int] = {}
    for d in drivers:
        for m in d.members:
            for code, n in m.errors.items():
                errors[code] = errors.get(code, 0) + n
    for d in drivers:
        d.stop()
    for c in conns:
        c.close()
    budget = _budget(args.config)
    print(f"  heartbeats/s while idle: {rate:,.0f} (budget {budget:,}/s: {'under' if rate <= budget else 'OVER'}); "
          f"kcoord CPU {cpu * 100:.1f}% of one core ({cpu / rate * 1e6 if rate else 0:.0f} µs per heartbeat); "
          f"error responses by code {errors or 0}; RSS samples {samples} KiB")
    return rate, int(statistics.median(samples))


def _budget(config: list[str]) -> int:
    from coordinator.config import CoordinatorConfig
    for item in config:
        name, _, value = item.partition("=")
        if name == "consumer_heartbeat_budget_per_second":
            return int(value)
    return CoordinatorConfig().consumer_heartbeat_budget_per_second


def over_the_wire(args) -> None:
    broker = procs.tansu()
    kc = None
    try:
        procs.run(procs.create_topic("127.0.0.1", broker.port, TOPIC, args.partitions))
        kc = procs.Kcoord(broker.bootstrap, tuple(args.config), args.state_partitions, Path(args.repo)).start()
        time.sleep(1.5)
        procs.run(_touch(kc.port))
        time.sleep(1.0)
        rss0 = procs.rss_kib(kc.pid)
        print(f"  RSS with 0 members: {rss0 / 1024:.1f} MiB")
        rate, rss_n = procs.run(steady(kc.port, kc.pid, args))
        per_member = (rss_n - rss0) * 1024 / args.members
        print(f"RSS {rss0} KiB -> {rss_n} KiB with {args.members} members: {per_member:,.0f} bytes per idle member "
              f"(target <= {TARGET_BYTES} bytes: {'met' if per_member <= TARGET_BYTES else 'MISSED'})")
    except BaseException:
        if kc is not None:
            kc.print_log_tail()
        raise
    finally:
        if kc is not None:
            kc.stop()
        broker.stop()


async def _touch(port: int) -> None:
    """One request through the gateway, so the 0-member RSS includes a warmed-up path."""
    from kio.schema.api_versions.v3.request import ApiVersionsRequest
    conn = await KafkaConnection.open("127.0.0.1", port)
    await conn.call(18, 3, ApiVersionsRequest(client_software_name="bench", client_software_version="1"))
    conn.close()


def in_process(args) -> None:
    import tracemalloc
    sys.path.insert(0, str(procs.REPO / "tests"))
    from unit.group.context import ShardContext, topic

    from coordinator.group.shard import RequestContext
    from loadgen.consumer_member import ConsumerMember
    from loadgen.groups import StabilityTracker
    plan = group_plan(args.members, args.group_size)
    ctx = ShardContext(topic(TOPIC, args.partitions))
    ctx.log = _NoLog()            # the simulated state topic is not part of the coordinator's memory
    request_ctx = RequestContext(api_version=1, client_id="kcoord-loadgen", client_host="/127.0.0.1")
    gc.collect()
    tracemalloc.start(8)
    base = tracemalloc.take_snapshot()
    for gid, n in plan.items():
        members = [ConsumerMember(gid, (TOPIC,)) for _ in range(n)]
        tracker = StabilityTracker(members, args.partitions)
        pending = list(members)
        for _ in range(50):            # rounds of heartbeats until the group is stable
            for m in pending:
                response = ctx.shard.consumer_group_heartbeat(request_ctx, m.next_request(), ctx.now_ms)
                ctx.shard.apply(response)
                m.on_response(response.response)
                tracker.observe(m, response.response, 0)
            ctx.advance(1000)
            group = ctx.group(gid)
            if group.state.value == "Stable" and all(m.member_epoch == group.assignment_epoch for m in members):
                break
        else:
            raise RuntimeError(f"{gid} did not become stable in process")
    ctx.timers.clear()
    gc.collect()
    snap = tracemalloc.take_snapshot()
    diff = snap.compare_to(base, "filename")
    total = sum(d.size_diff for d in diff)
    print(f"in-process shard state: {total / args.members:,.0f} bytes per member (tracemalloc, {args.members} members)")
    for d in sorted(diff, key=lambda d: -d.size_diff)[:12]:
        print(f"  {d.size_diff / args.members:8,.0f} B/member  {d.traceback[0].filename}")
    lines = snap.compare_to(base, "lineno")
    print("top allocation sites:")
    for d in sorted(lines, key=lambda d: -d.size_diff)[:15]:
        frame = d.traceback[0]
        print(f"  {d.size_diff / args.members:8,.0f} B/member  {frame.filename}:{frame.lineno}")


class _NoLog(list):
    def append(self, item) -> None:  # noqa: ANN001
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=10_000)
    parser.add_argument("--group-size", type=int, default=500)
    parser.add_argument("--groups-at-once", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--members-per-connection", type=int, default=100)
    parser.add_argument("--settle", type=float, default=10.0)
    parser.add_argument("--state-partitions", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--config", action="append", default=[], help="kcoord --config NAME=VALUE")
    parser.add_argument("--in-process", action="store_true")
    parser.add_argument("--repo", default=str(procs.REPO))
    args = parser.parse_args()
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    print(f"members={args.members} group_size={args.group_size} partitions={args.partitions} "
          f"members_per_connection={args.members_per_connection} cpus={os.cpu_count()} "
          f"load average {os.getloadavg()[0]:.1f} repo={args.repo}")
    if args.in_process:
        in_process(args)
    else:
        over_the_wire(args)


if __name__ == "__main__":
    main()
