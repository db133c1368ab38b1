"""The two embedded upstreams of `kcoord serve`, side by side: Tansu (`--embedded tansu`) and a
single-node Apache Kafka 4.4 (`--embedded kafka`).

    KCOORD_TEST_PORTS=34800-34999 .venv/bin/python bench/bench_embedded.py [--runs 3]
        [--upstreams tansu,kafka] [--records 30000]

Per upstream and run, each a new `kcoord serve` process (the default state topic, 50
partitions) with a new data directory:
- ready: process start -> "kcoord ready" (the embedded broker started, the state topic
  created and loaded);
- first record: process start -> the first record consumed by a KIP-848 consumer that
  started once kcoord printed ready, after one record produced (what a newcomer waits for);
- RSS of kcoord and of the broker at ready and after ``--records`` 1 KB records produced
  and consumed (VmRSS from /proc), and their CPU seconds (utime + stime) up to ready;
- restart (kafka only): SIGTERM, then a new process on the same data directory -> ready;
- disk: the data directory's blocks used (and apparent size: sparse index files) after the
  load (kafka; Tansu keeps it in memory).
The jars are fetched before the runs (KCOORD_KAFKA_CACHE: the tests' cache); the first-ever
fetch is timed apart as ``fetch`` when the cache is empty. Runs print as they end, then
medians. Nothing is asserted.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from confluent_kafka import Consumer, Producer  # noqa: E402

from support import processes  # noqa: E402
from support.admin import create_topic  # noqa: E402
from support.kafka_broker import KAFKA_44, libs_dir  # noqa: E402
from support.kcoord import free_port_block, launch_serve  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def du_mb(path: Path) -> tuple[float, float]:
    """(MB of disk blocks used, MB apparent): Kafka's index files are preallocated sparse."""
    stats = [f.stat() for f in path.rglob("*") if f.is_file()]
    return sum(st.st_blocks * 512 for st in stats) / 1e6, sum(st.st_size for st in stats) / 1e6


def start(upstream: str, data_dir: Path, env: dict[str, str]) -> tuple[subprocess.Popen, str, int, float]:
    port = free_port_block(2)
    lines: list[str] = []
    args = [sys.executable, "-m", "coordinator.cli", "serve", "--listen", f"127.0.0.1:{port}",
            "--embedded", upstream]
    if upstream == "kafka":
        args += ["--embedded-data-dir", str(data_dir)]
    began = time.monotonic()
    process, _ = launch_serve(args, REPO, f"bench-embedded-{upstream}", lines, timeout=300, env=env)
    ready = time.monotonic() - began
    banner = next(line for line in lines if "embedded" in line and " pid " in line)
    broker = int(re.search(r" pid (\d+)", banner).group(1))
    return process, f"127.0.0.1:{port}", broker, ready


def first_record(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, b"first")
    producer.flush(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "group.protocol": "consumer",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                return
        raise RuntimeError("no record consumed within 120 s")
    finally:
        consumer.close()


def load(bootstrap: str, topic: str, records: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    value = b"x" * 1000
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=i % 3)
                break
            except BufferError:
                producer.poll(0.1)
    producer.flush(60)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"load-{topic}", "group.protocol": "consumer",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 300
    try:
        while got < records and time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.5):
                got += msg.error() is None
    finally:
        consumer.close()


def one_run(upstream: str, records: int, env: dict[str, str], work: Path) -> dict[str, float]:
    data_dir = work / f"{upstream}-{time.monotonic_ns()}"
    began = time.monotonic()
    process, bootstrap, broker, ready = start(upstream, data_dir, env)
    out: dict[str, float] = {"ready_s": ready}
    try:
        out["kcoord_cpu_s"], out["broker_cpu_s"] = cpu_s(process.pid), cpu_s(broker)
        out["kcoord_rss_mb"], out["broker_rss_mb"] = rss_mb(process.pid), rss_mb(broker)
        topic = f"bench-{time.monotonic_ns()}"
        create_topic(bootstrap, topic, 3, timeout=60)
        first_record(bootstrap, topic)
        out["first_record_s"] = time.monotonic() - began
        load(bootstrap, topic, records)
        out["kcoord_rss_loaded_mb"], out["broker_rss_loaded_mb"] = rss_mb(process.pid), rss_mb(broker)
        if upstream == "kafka":
            out["disk_mb"], out["disk_apparent_mb"] = du_mb(data_dir)
    finally:
        processes.stop(process, timeout=30)
    if upstream == "kafka":
        process, _, _, restart = start(upstream, data_dir, env)
        out["restart_ready_s"] = restart
        processes.stop(process, timeout=30)
        shutil.rmtree(data_dir, ignore_errors=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--upstreams", default="tansu,kafka")
    parser.add_argument("--records", type=int, default=30000)
    args = parser.parse_args()
    cache = libs_dir(KAFKA_44).parent.parent
    env = {"KCOORD_KAFKA_CACHE": str(cache)}
    results: dict[str, list[dict[str, float]]] = {u: [] for u in args.upstreams.split(",")}
    with tempfile.TemporaryDirectory(prefix="bench-embedded-") as tmp:
        for run in range(args.runs):
            for upstream in results:
                row = one_run(upstream, args.records, env, Path(tmp))
                results[upstream].append(row)
                print(f"run {run} {upstream}: " + ", ".join(f"{k} {v:.2f}" for k, v in row.items()), flush=True)
    print("\nmedians")
    for upstream, rows in results.items():
        keys = rows[0].keys()
        print(f"  {upstream}: " + ", ".join(f"{k} {statistics.median(r[k] for r in rows):.2f}" for k in keys))
    return 0


if __name__ == "__main__":
    sys.exit(main())
