"""Consume throughput through one kcoord process vs a two-process kcoord cluster (issue 14
§4: an upstream broker is fronted by one deterministic instance, which caps forwarding for
that broker at one process), in front of Apache Kafka 4.4 on this 2-core machine.

    .venv/bin/python bench/bench_cluster_throughput.py [--records 300000] [--size 100]
        [--partitions 6] [--consumers 1] [--runs 3] [--setups single,two]

``--records`` records of ``--size`` bytes are produced straight to Kafka once. Each run, per
setup (``--setups``; runs interleaved):
- ``single``: one plain `kcoord serve` (no --instance-id);
- ``two``: two instances kc-0, kc-1 (fencing on: the default, epoch), clients bootstrapped through the instance
  that does *not* front the broker, so Metadata has to send them on to the front;
``--consumers`` librdkafka consumers (classic protocol, one new group per run, coordinated
by kcoord) read the topic from the start through kcoord. The clock starts at the first
record and stops when every record was read: records/s and MB/s, the median of the runs;
the kcoord processes' CPU seconds over the read are reported too. Nothing is asserted.
"""
from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster.common import (  # noqa: E402
    cluster_config,
    cpu_seconds,
    median,
    start_instances,
    start_kafka44,
    stop_all,
    use_ports,
    wait_settled,
)


def produce(bootstrap: str, topic: str, records: int, size: int) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10_000,
                  "queue.buffering.max.messages": 1_000_000, "compression.type": "none"})
    value = b"x" * size
    for i in range(records):
        while True:
            try:
                p.produce(topic, value=value, key=str(i % 1000).encode())
                break
            except BufferError:
                p.poll(0.05)
        if i % 10_000 == 0:
            p.poll(0)
    if p.flush(120):
        raise RuntimeError("records left unsent after 120 s")


def consume_all(bootstrap: str, topic: str, group: str, records: int, consumers: int,
                timeout: float = 300.0) -> tuple[float, float]:
    """(seconds from the first record to the last, monotonic start) for ``consumers`` in one group."""
    from confluent_kafka import Consumer
    counts = [0] * consumers
    first: list[float] = []
    done = threading.Event()
    errors: list[str] = []

    def run(k: int) -> None:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                      "enable.auto.commit": True, "session.timeout.ms": 10_000,
                      "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760})
        c.subscribe([topic])
        deadline = time.monotonic() + timeout
        try:
            while not done.is_set() and time.monotonic() < deadline:
                batch = c.consume(10_000, 0.5)
                for m in batch:
                    if m.error():
                        errors.append(str(m.error()))
                        continue
                    if not first:
                        first.append(time.monotonic())
                    counts[k] += 1
                if sum(counts) >= records:
                    done.set()
        finally:
            c.close()

    threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(consumers)]
    for t in threads:
        t.start()
    done.wait(timeout)
    end = time.monotonic()
    for t in threads:
        t.join(30)
    if sum(counts) < records:
        raise RuntimeError(f"read {sum(counts)} of {records} records in {timeout}s; errors {errors[:3]}")
    return end - first[0], first[0]


def front_of(procs) -> int:
    """Index of the process whose ports front the upstream broker (Metadata's broker node)."""
    from support import raw_client
    md = raw_client.call_with(procs[0].bootstrap, 3, 12, topics=None, allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False)
    ports = [int(b.port) for b in md.brokers if int(b.node_id) < (1 << 30)]
    return next(k for k, p in enumerate(procs) for port in ports if p.port < port <= p.port + 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--consumers", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--setups", default="single,two")
    args = ap.parse_args()
    use_ports()
    from support.admin import create_topic

    kafka = start_kafka44("bench-cluster-throughput-")
    procs_by_setup: dict[str, list] = {}
    try:
        topic = "bench-cluster-throughput"
        create_topic(kafka.bootstrap, topic, args.partitions)
        t0 = time.monotonic()
        produce(kafka.bootstrap, topic, args.records, args.size)
        print(f"produced {args.records} x {args.size} B in {time.monotonic() - t0:.1f}s", flush=True)
        entry: dict[str, str] = {}
        for setup in args.setups.split(","):
            n = 2 if setup == "two" else 1
            procs = start_instances(kafka.bootstrap, f"__kc_bench_tp_{setup}_{int(time.time())}", n, 12,
                                    cluster_config(6000, fast=False), clustered=setup != "single",
                                    log_level="WARNING")
            procs_by_setup[setup] = procs
            if n > 1:
                wait_settled(procs, [f"probe-{i}" for i in range(40)])
                front = front_of(procs)
                entry[setup] = procs[1 - front].bootstrap        # a non-front instance: Metadata sends on
                print(f"  {setup}: broker fronted by {procs[front].bootstrap}, clients bootstrap at "
                      f"{entry[setup]}", flush=True)
            else:
                entry[setup] = procs[0].bootstrap
        results: dict[str, list[tuple[float, float]]] = {s: [] for s in procs_by_setup}
        for run in range(args.runs):
            for setup, procs in procs_by_setup.items():
                cpu0 = sum(cpu_seconds(p.process.pid) for p in procs)
                seconds, _ = consume_all(entry[setup], topic, f"tp-{setup}-{run}-{time.time_ns()}",
                                         args.records, args.consumers)
                cpu = sum(cpu_seconds(p.process.pid) for p in procs) - cpu0
                results[setup].append((args.records / seconds, cpu))
                print(f"  run {run + 1} {setup}: {args.records / seconds:,.0f} records/s "
                      f"({args.records * args.size / seconds / 1e6:.1f} MB/s), kcoord CPU {cpu:.2f}s", flush=True)
        print(f"\n| setup | records/s (median of {args.runs}) | MB/s | kcoord CPU s per run |")
        print("|---|---|---|---|")
        for setup, rows in results.items():
            rate = median(r for r, _ in rows)
            print(f"| {setup} | {rate:,.0f} | {rate * args.size / 1e6:.1f} | {median(c for _, c in rows):.2f} |")
    finally:
        for procs in procs_by_setup.values():
            stop_all(procs)
        kafka.stop()


if __name__ == "__main__":
    main()
