"""Durable commits per second with fencing (FencedStateLog: one transaction per append) vs
without (StateTopic, fencing=none), same run, same broker (issue 14 point 6).

    python bench/bench_fencing.py [--upstream tansu|kafka44|both] [--seconds 5] [--shards 1,8]

A "commit" is one append round trip as ShardRuntime makes it: one batch in flight per shard,
each holding --records records of ~100 bytes (an OffsetCommit result), the next sent when
the previous one is acknowledged. With --shards N, N shards write at once (aggregate figure).
Fenced: AddPartitionsToTxn + Produce + EndTxn per append (transactions v1); the time spent
retrying CONCURRENT_TRANSACTIONS (the previous transaction's markers not yet written) is
reported. Not a test: it prints figures.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from coordinator.runtime.fenced_state_log import FencedStateLog  # noqa: E402
from coordinator.runtime.state_topic import StateTopic  # noqa: E402


async def drive(log, shards: int, seconds: float, records: int) -> tuple[int, list[float]]:
    value = b"v" * 80
    latencies: list[float] = []
    stop = time.perf_counter() + seconds
    count = 0

    async def shard(p: int) -> None:
        nonlocal count
        i = 0
        while time.perf_counter() < stop:
            t0 = time.perf_counter()
            await log.append(p, [(b"key-%d-%d" % (p, (i + j) % 100), value) for j in range(records)],
                             int(time.time() * 1000))
            latencies.append(time.perf_counter() - t0)
            count += 1
            i += records

    await asyncio.gather(*(shard(p) for p in range(shards)))
    return count, latencies


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000 if values else float("nan")


async def measure(bootstrap: str, name: str, shards_list: list[int], seconds: float, records: int) -> list[str]:
    rows = []
    partitions = max(shards_list)
    topic = f"__kcoord_bench_fencing_{int(time.time())}"
    plain = StateTopic(bootstrap, topic, partitions)
    await plain.start()
    fenced = FencedStateLog(bootstrap, topic, partitions)
    await fenced.start()
    try:
        await fenced.load(range(partitions), lambda *a: None, lambda *a: None)   # take every shard
        for shards in shards_list:
            await drive(plain, shards, 0.5, records)                            # warm up
            await drive(fenced, shards, 0.5, records)
            n_plain, lat_plain = await drive(plain, shards, seconds, records)
            fenced.concurrent_retries, fenced.concurrent_wait_s = 0, 0.0
            n_fenced, lat_fenced = await drive(fenced, shards, seconds, records)
            rows.append(f"| {name} | {shards} | {records} | {n_plain / seconds:,.0f} | {pct(lat_plain, .5):.2f} / "
                        f"{pct(lat_plain, .99):.2f} | {n_fenced / seconds:,.0f} | {pct(lat_fenced, .5):.2f} / "
                        f"{pct(lat_fenced, .99):.2f} | {n_fenced / max(1, n_plain):.2f} | "
                        f"{fenced.concurrent_retries} / {fenced.concurrent_wait_s * 1000:.0f} ms |")
    finally:
        await plain.stop()
        await fenced.stop()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream", default="both", choices=["tansu", "kafka44", "both"])
    parser.add_argument("--bootstrap", help="an already running upstream instead of starting one")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--shards", default="1,8")
    parser.add_argument("--records", type=int, default=1, help="records per append (batch)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    shards = [int(s) for s in args.shards.split(",")]
    header = ("| upstream | shards | records/append | none: commits/s | none p50/p99 ms | fenced: commits/s | "
              "fenced p50/p99 ms | fenced/none | CONCURRENT_TRANSACTIONS retries / wait |\n"
              "|---|---|---|---|---|---|---|---|---|")
    rows: list[str] = []
    if args.bootstrap:
        rows += asyncio.run(measure(args.bootstrap, "given", shards, args.seconds, args.records))
    else:
        from support.kafka_broker import KAFKA_44, start_kafka
        from support.tansu import start_tansu

        if args.upstream in ("tansu", "both"):
            with start_tansu() as broker:
                rows += asyncio.run(measure(broker.bootstrap, "Tansu 0.6", shards, args.seconds, args.records))
        if args.upstream in ("kafka44", "both"):
            cluster = start_kafka(KAFKA_44, Path(tempfile.mkdtemp(prefix="bench-fencing-")))
            try:
                rows += asyncio.run(measure(cluster.bootstrap, "Kafka 4.4", shards, args.seconds, args.records))
            finally:
                cluster.stop()
    print(header)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
