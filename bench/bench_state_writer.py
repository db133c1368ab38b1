"""kcoord's CPU per state-topic append through its writer (coordinator/runtime/lean_writer.py),
on one real Kafka node. The aiokafka producer it was compared with is gone from kcoord (the
state topic speaks through kcoord's own client); its figures stay in
docs/measurements/cpu-per-commit.md.

    .venv/bin/python bench/bench_state_writer.py [--rounds 2000] [--shards 10] [--records 4] [--runs 3]

Each round, ``--shards`` partitions get one append of ``--records`` offset-commit-sized records
each, all started in one loop turn (as the shards' writers flush at the end of a turn), and
the round waits for every acknowledgement (acks=all) before the next: the same batching
in every run. The figure is this process's CPU time (time.process_time: user + system of
kcoord's side only; the broker is another process) over the appends, and the wall-clock
rate. Each run has its own state topic on the same broker.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("KCOORD_TEST_PORTS", "29700-29799")
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "bench")]

from coordinator.runtime.state_topic import StateTopic  # noqa: E402

from support.kafka_broker import start_kafka  # noqa: E402

KEY = b"\x00\x01" + b"\x00\x0bgroup-00042" + b"\x00\x06orders" + b"\x00\x00\x00\x03"
VALUE = bytes(60)


async def one_run(bootstrap: str, writer: str, topic: str, a: argparse.Namespace) -> tuple[float, float]:
    state = StateTopic(bootstrap, topic, a.shards)
    await state.start()
    try:
        records = [(KEY + bytes([i]), VALUE) for i in range(a.records)]
        for _ in range(50):                              # warm: connections, metadata, caches
            await asyncio.gather(*(state.append(p, records, 0) for p in range(a.shards)))
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(a.rounds):
            await asyncio.gather(*(state.append(p, records, 0) for p in range(a.shards)))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    finally:
        await state.stop()
    appends = a.rounds * a.shards
    return cpu / appends * 1e6, appends / wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--shards", type=int, default=10)
    ap.add_argument("--records", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    cluster = start_kafka("4.3.1", Path(tempfile.mkdtemp(prefix="state-writer-")), heap="1g")
    try:
        figures: dict[str, list[tuple[float, float]]] = {"lean": []}
        for i in range(a.runs):
            for writer in figures:
                us, rate = asyncio.run(one_run(cluster.bootstrap, writer, f"__kcoord_writer_{writer}_{i}", a))
                figures[writer].append((us, rate))
                print(f"run {i + 1} {writer}: {us:.1f} us CPU per append ({a.records} records), {rate:,.0f} appends/s; "
                      f"load average {os.getloadavg()[0]:.1f}", flush=True)
        for writer, fs in figures.items():
            print(f"median {writer}: {statistics.median(f[0] for f in fs):.1f} us CPU per append, "
                  f"{statistics.median(f[1] for f in fs):,.0f} appends/s")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
