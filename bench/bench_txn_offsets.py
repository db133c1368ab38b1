"""Transactional offset commits per second through kcoord vs Apache Kafka's own group coordinator,
same run, same Kafka 4.4 broker (issue 16 point 6).

    python bench/bench_txn_offsets.py [--seconds 10] [--producers 1,4] [--runs 3]

One "transactional commit" is what a consume-transform-produce loop does per batch, with
librdkafka (confluent_kafka): begin_transaction, produce one record to an output topic,
send_offsets_to_transaction (one partition of the group's input), commit_transaction, the next
begun when the previous one committed. Each producer has its own transactional id and group
(the group has no members: generation -1, as a standalone `send_offsets_to_transaction`).
Direct: the producer's bootstrap is Kafka, so Kafka's coordinator writes the offsets into
`__consumer_offsets`. Through kcoord: the bootstrap is a `kcoord serve` in front of the same
Kafka, which serves AddOffsetsToTxn (as AddPartitionsToTxn of its state partition) and
TxnOffsetCommit (appended as the client's producer); the rest is forwarded. librdkafka speaks
transactions v1 on both. The two sides alternate within each run; the figures are medians over
--runs. Not a test: it prints a table.
"""
from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402


def one_producer(bootstrap: str, txn_id: str, group: str, src: str, dst: str, seconds: float,
                 out: list[tuple[int, list[float]]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 0,
                         "enable.idempotence": True})
    meta = Consumer({"bootstrap.servers": bootstrap, "group.id": group}).consumer_group_metadata()
    producer.init_transactions(60)
    latencies: list[float] = []
    count = 0
    stop = time.perf_counter() + seconds
    while time.perf_counter() < stop:
        t0 = time.perf_counter()
        producer.begin_transaction()
        producer.produce(dst, value=b"x" * 100)
        producer.send_offsets_to_transaction([TopicPartition(src, 0, count + 1)], meta, 30)
        producer.commit_transaction(30)
        latencies.append(time.perf_counter() - t0)
        count += 1
    out.append((count, latencies))


def drive(bootstrap: str, tag: str, producers: int, seconds: float, src: str, dst: str) -> tuple[float, float, float]:
    """(commits/s, p50 ms, p99 ms) of `producers` concurrent transactional producers."""
    results: list[tuple[int, list[float]]] = []
    stamp = time.monotonic_ns()
    threads = [threading.Thread(target=one_producer, args=(bootstrap, f"bench-{tag}-{stamp}-{i}",
                                                           f"bench-{tag}-{stamp}-{i}", src, dst, seconds, results))
               for i in range(producers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == producers, "a producer failed (see its error above)"
    total = sum(n for n, _ in results)
    lat = sorted(x for _, ls in results for x in ls)
    return total / seconds, lat[len(lat) // 2] * 1000, lat[min(len(lat) - 1, int(0.99 * len(lat)))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--producers", default="1,4")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    from support.admin import create_topic
    from support.kafka_broker import KAFKA_44, start_kafka
    from support.kcoord import FAST, KcoordProcess

    cluster = start_kafka(KAFKA_44, Path(tempfile.mkdtemp(prefix="bench-txn-")))
    kcoord = None
    try:
        kcoord = KcoordProcess(upstream=cluster.bootstrap, state_topic=f"__kcoord_bench_txn_{int(time.time())}",
                               config=FAST).start(timeout=120)
        src, dst = f"bench-txn-in-{int(time.time())}", f"bench-txn-out-{int(time.time())}"
        create_topic(cluster.bootstrap, src, 1)
        create_topic(cluster.bootstrap, dst, 1)
        rows = []
        for n in [int(p) for p in args.producers.split(",")]:
            drive(cluster.bootstrap, "warm-kafka", n, 2, src, dst)
            drive(kcoord.bootstrap, "warm-kcoord", n, 2, src, dst)
            direct, through = [], []
            for _ in range(args.runs):
                direct.append(drive(cluster.bootstrap, "kafka", n, args.seconds, src, dst))
                through.append(drive(kcoord.bootstrap, "kcoord", n, args.seconds, src, dst))

            def med(xs: list[tuple[float, float, float]], i: int) -> float:
                return statistics.median(x[i] for x in xs)
            rows.append(f"| {n} | {med(direct, 0):,.0f} | {med(direct, 1):.1f} / {med(direct, 2):.1f} | "
                        f"{med(through, 0):,.0f} | {med(through, 1):.1f} / {med(through, 2):.1f} | "
                        f"{med(through, 0) / med(direct, 0):.2f} |")
    finally:
        if kcoord is not None:
            kcoord.stop()
        cluster.stop()
    print(f"Kafka 4.4, librdkafka (transactions v1), {args.seconds:.0f} s per side, median of {args.runs} runs")
    print("| producers | Kafka's coordinator: commits/s | p50 / p99 ms | through kcoord: commits/s | "
          "p50 / p99 ms | kcoord / Kafka |\n|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
