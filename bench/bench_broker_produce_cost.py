"""A Kafka broker's CPU per ProduceRequest, per partition batch and per record, for the
requests kcoord's lean state-topic writer sends (coordinator/runtime/lean_writer.py).

    KCOORD_TEST_PORTS=LO-HI .venv/bin/python bench/bench_broker_produce_cost.py
        [--shapes 1x1,10x1,40x1,10x5,40x5] [--seconds 4] [--broker-cpus 0] [--load-cpus 1]

One Kafka 4.4.0 KRaft node (bench_vs_kafka.start_broker, Kafka's group defaults) pinned to
``--broker-cpus``; the writer (runtime/state_topic.py's StateTopic with its lean writer: an
idempotent producer, acks=all) on ``--load-cpus``. A shape ``PxK`` sends rounds of one
ProduceRequest holding ``P`` partition batches of ``K`` records each (the records of
OffsetCommit's size), one round in flight, for ``--seconds``. The broker's utime + stime
(/proc/PID/stat) over the window, less its idle rate measured first, divided by the rounds
gives its CPU per request; least squares over the shapes splits it as
``request + P * batch + P * K * record``.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "bench")]

import bench_vs_kafka as vsk  # noqa: E402
from side_by_side import pinning  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
PARTITIONS = 50


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


async def rounds(state, p: int, k: int, seconds: float) -> int:  # type: ignore[no-untyped-def]
    """Rounds of P batches of K records, one round in flight, for `seconds`."""
    records = [(b"\x00\x01" + b"g" * 24 + b"commit-topic" + i.to_bytes(4, "big"),
                b"\x00\x03" + b"\x00" * 30) for i in range(k)]
    loop = asyncio.get_running_loop()
    n = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        round_ = _Round(loop.create_future(), p)
        for i in range(p):
            state.append_then((n * p + i) % PARTITIONS, records, 0, round_.then)
        await round_.done
        n += 1
    return n


class _Round:
    """One round's appends: `done` once every one is answered."""

    def __init__(self, done: asyncio.Future, appends: int) -> None:
        self.done, self.left = done, appends

    def then(self, base: int, error: BaseException | None) -> None:
        if error is not None and not self.done.done():
            self.done.set_exception(error)
        self.left -= 1
        if self.left == 0 and not self.done.done():
            self.done.set_result(None)


def fit(points: list[tuple[int, int, float]]) -> tuple[float, float, float]:
    """Least squares of us = a + b * P + c * P * K."""
    rows = [(1.0, float(p), float(p * k)) for p, k, _ in points]
    ys = [us for _, _, us in points]
    ata = [[sum(r[i] * r[j] for r in rows) for j in range(3)] for i in range(3)]
    aty = [sum(r[i] * y for r, y in zip(rows, ys)) for i in range(3)]
    # Gaussian elimination, 3 x 3.
    m = [row[:] + [v] for row, v in zip(ata, aty)]
    for c in range(3):
        pivot = max(range(c, 3), key=lambda r: abs(m[r][c]))
        m[c], m[pivot] = m[pivot], m[c]
        for r in range(3):
            if r != c:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return m[0][3] / m[0][0], m[1][3] / m[1][1], m[2][3] / m[2][2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="1x1,10x1,40x1,10x5,40x5,1x40")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--broker-cpus", default="0")
    ap.add_argument("--load-cpus", default="1")
    a = ap.parse_args()
    broker_cpus, load_cpus = pinning.parse_cpus(a.broker_cpus), pinning.parse_cpus(a.load_cpus)
    shapes = [tuple(int(x) for x in s.split("x")) for s in a.shapes.split(",")]
    work = Path(tempfile.mkdtemp(prefix="broker-produce-"))
    with pinning.running_on(broker_cpus):
        kafka = vsk.start_broker("kafka-produce-cost", vsk.KAFKA_DEFAULTS, work)
    pid = kafka.nodes[0].process.pid
    pinning.pin_process(pid, broker_cpus)
    pinning.pin_process(os.getpid(), load_cpus)
    from coordinator.runtime.state_topic import StateTopic

    async def run() -> None:
        state = StateTopic(kafka.bootstrap, "__kcoord_produce_cost", PARTITIONS)
        await state.start()
        try:
            await rounds(state, 40, 2, 3.0)          # warm-up: the JIT, every partition's log
            await asyncio.sleep(1.0)
            t0, c0 = time.monotonic(), cpu_s(pid)
            await asyncio.sleep(3.0)
            idle = (cpu_s(pid) - c0) / (time.monotonic() - t0)
            print(f"broker idle: {idle * 1e3:.1f} ms CPU/s; load average {os.getloadavg()[0]:.2f}", flush=True)
            points = []
            for p, k in shapes:
                t0, c0 = time.monotonic(), cpu_s(pid)
                n = await rounds(state, p, k, a.seconds)
                busy = cpu_s(pid) - c0 - idle * (time.monotonic() - t0)
                us = busy / n * 1e6
                points.append((p, k, us))
                print(f"{p} batches x {k} records: {n / a.seconds:,.0f} requests/s, broker {us:.0f} us CPU/request, "
                      f"{us / p:.1f} us/batch, {us / (p * k):.2f} us/record", flush=True)
            if len({p for p, _, _ in points}) > 1 and len({p * k for p, k, _ in points}) > 2:
                req, batch, record = fit(points)
                print(f"fit: {req:.0f} us per request + {batch:.1f} us per batch + {record:.2f} us per record")
        finally:
            await state.stop()
    try:
        asyncio.run(run())
    finally:
        kafka.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
