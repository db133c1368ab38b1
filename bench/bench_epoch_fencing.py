"""Durable appends per second: fencing=epoch (idempotent batches under a bumped epoch) vs
fencing=transactional (one transaction per append) vs none (StateTopic), same run, same
broker, rounds alternating, medians reported.

    python bench/bench_epoch_fencing.py [--bootstrap HOST:PORT] [--seconds 3] [--rounds 3] [--shards 1,8]
        [--service N]

An "append" is one round trip as the runtime makes it (bench_fencing.drive: one batch in
flight per shard, --records records of ~100 bytes). Besides appends/s and p50/p99 latency it
reports the CPU per append of this process (the writer's side: time.process_time) and of
the Kafka broker it starts (its JVM's utime+stime from /proc; with --bootstrap the broker's
CPU is not measured). With --service N, N closed-loop committers send durable OffsetCommits
(one partition, one group each) through the coordinator service instead (its runtime batches
a shard's commits into one append): the figures are then per commit, and the CPU of this
process includes the service. Not a test: it prints figures.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_fencing import drive, pct  # noqa: E402

from coordinator.runtime.fenced_state_log import FencedStateLog  # noqa: E402
from coordinator.runtime.state_topic import StateTopic  # noqa: E402

MODES = ("none", "transactional", "epoch")


async def drive_service(log, connections: int, seconds: float,
                        broker_pid: int | None) -> tuple[int, list[float], float, float]:
    """Closed-loop durable OffsetCommits through the coordinator service (runtime and shard
    batching included, no gateway): `connections` committers, one group each, one in flight."""
    from unit.runtime.test_shard_failures import commit, commit_errors, service_for

    service = service_for(log)
    await service.start()                 # loads (takes) every shard: not measured
    for c in range(connections):          # warm up: every group exists
        await commit(service, f"bench-{c}", "t", c % 4, 0)
    cpu0, broker0 = time.process_time(), cpu_seconds(broker_pid)
    latencies: list[float] = []
    count = 0
    stop = time.perf_counter() + seconds

    async def committer(c: int) -> None:
        nonlocal count
        i = 0
        while time.perf_counter() < stop:
            t0 = time.perf_counter()
            errors = commit_errors(await commit(service, f"bench-{c}", "t", c % 4, i))
            if errors != {0}:
                raise RuntimeError(f"commit answered {errors}")
            latencies.append(time.perf_counter() - t0)
            count += 1
            i += 1

    try:
        await asyncio.gather(*(committer(c) for c in range(connections)))
        return count, latencies, time.process_time() - cpu0, cpu_seconds(broker_pid) - broker0
    finally:
        service.close()


def cpu_seconds(pid: int | None) -> float:
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(bootstrap: str, broker_pid: int | None, shards_list: list[int], seconds: float,
                  rounds: int, records: int, service: int = 0) -> list[str]:
    partitions = max(shards_list)
    topic = f"__kcoord_bench_epoch_{int(time.time())}"
    logs = {"none": StateTopic(bootstrap, topic, partitions),
            "transactional": FencedStateLog(bootstrap, topic, partitions),
            "epoch": FencedStateLog(bootstrap, topic, partitions, fencing="epoch")}
    await logs["none"].start()
    rows = []
    try:
        for shards in shards_list:
            figures: dict[str, list[tuple[float, float, float, float, float]]] = {m: [] for m in MODES}
            for _ in range(rounds):
                for mode in MODES:
                    log = logs[mode]
                    if mode != "none":
                        await log.start()
                        if not service:   # take every shard anew: the other fenced mode took it last round
                            await log.load(range(partitions), lambda *a: None, lambda *a: None)
                    if service:           # the service loads (takes) the shards itself
                        n, latencies, cpu, broker = await drive_service(log, service, seconds, broker_pid)
                    else:
                        await drive(log, shards, 0.3, records)                   # warm up
                        cpu0, broker0 = time.process_time(), cpu_seconds(broker_pid)
                        n, latencies = await drive(log, shards, seconds, records)
                        cpu, broker = time.process_time() - cpu0, cpu_seconds(broker_pid) - broker0
                    figures[mode].append((n / seconds, pct(latencies, .5), pct(latencies, .99),
                                          cpu / max(n, 1) * 1e6, broker / max(n, 1) * 1e6))
            for mode in MODES:
                med = [statistics.median(f[i] for f in figures[mode]) for i in range(5)]
                rows.append(f"| {shards} | {mode} | {med[0]:,.0f} | {med[1]:.2f} / {med[2]:.2f} | {med[3]:.0f} | "
                            + (f"{med[4]:.0f}" if broker_pid else "-") + " |")
    finally:
        for log in logs.values():
            await log.stop()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", help="an already running upstream instead of starting Kafka 4.4")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shards", default="1,8")
    parser.add_argument("--records", type=int, default=1, help="records per append (batch)")
    parser.add_argument("--service", type=int, default=0, metavar="N",
                        help="instead of raw appends: N closed-loop committers through the coordinator service "
                             "(--shards gives the state topic's partition count)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    shards = [int(s) for s in args.shards.split(",")]
    what = "commit" if args.service else "append"
    print(f"| shards | fencing | {what}s/s | p50 / p99 ms | kcoord CPU µs/{what} | broker CPU µs/{what} |\n"
          f"|---|---|---|---|---|---| (medians of {args.rounds} alternating rounds of {args.seconds:g} s)")
    if args.bootstrap:
        rows = asyncio.run(measure(args.bootstrap, None, shards, args.seconds, args.rounds, args.records,
                                   args.service))
    else:
        from support.kafka_broker import KAFKA_44, start_kafka

        cluster = start_kafka(KAFKA_44, Path(tempfile.mkdtemp(prefix="bench-epoch-")))
        try:
            pid = cluster.nodes[0].process.pid if cluster.nodes[0].process is not None else None
            rows = asyncio.run(measure(cluster.bootstrap, pid, shards, args.seconds, args.rounds, args.records,
                                       args.service))
        finally:
            cluster.stop()
    print("\n".join(rows))


if __name__ == "__main__":
    main()
