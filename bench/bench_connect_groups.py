"""Connect groups (issue 18 point 6, seed 001): time from a worker joining or leaving to
every worker stable, through a real `kcoord serve` in front of a real Tansu broker.

    .venv/bin/python bench/bench_connect_groups.py [--workers 3,100] [--runs 3] [--json FILE]

Per run, in a fresh group: N Python workers (members/connect/, asyncio driver, all in this
process, one connection each) form the group (formation), one more joins (join), then one
leaves gracefully (leave). Each figure is the time from the event (the first heartbeat
sent, or the leave started) to "every worker stable": every worker STABLE with owned ==
target, all at one member epoch higher than before the event, every unit owned exactly once
(and, for a join, the new worker owns some). Units: max(2, N/2) connectors of 3 tasks each,
task -1 being the connector (8 units for 3 workers, 200 for 100).

The KIP-415 scheduled delay is 0 here: a departed worker's units are placed at once, so the
leave figure is the protocol's own time. With a delay D, a leave or crash adds D (C11 tests
it). kcoord runs with its defaults (heartbeat intervals 100 ms pending / 500 ms stable).
Not a test: it prints figures. Ports: KCOORD_TEST_PORTS (default here 29850-29899).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("KCOORD_TEST_PORTS", "29850-29899")
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from members.connect.assignor import IncrementalCooperativeAssignor  # noqa: E402
from members.connect.driver import ConnectDriver  # noqa: E402
from members.connect.worker import ConnectWorker, State  # noqa: E402

POLL_S = 0.005          # how often the stable condition is checked
TIMEOUT_S = 120.0       # a run that does not settle within this fails loudly


def units_for(n: int) -> frozenset[tuple[str, int]]:
    return frozenset((f"conn-{c}", t) for c in range(max(2, n // 2)) for t in (-1, 0, 1, 2))


class Group:
    def __init__(self, bootstrap: str, group_id: str, units: frozenset) -> None:
        self.bootstrap, self.group_id, self.units = bootstrap, group_id, units
        self.workers: list[tuple[ConnectWorker, asyncio.Event, asyncio.Task]] = []

    def add(self) -> ConnectWorker:
        i = len(self.workers)
        w = ConnectWorker(self.group_id, IncrementalCooperativeAssignor(
            lambda: self.units, url=f"http://w-{i}:8083", scheduled_rebalance_max_delay_ms=0),
            rebalance_timeout_ms=30_000)
        stop = asyncio.Event()
        task = asyncio.create_task(ConnectDriver(w, self.bootstrap, client_id=f"w-{i}").run(stop))
        self.workers.append((w, stop, task))
        return w

    def live(self) -> list[ConnectWorker]:
        return [w for w, stop, _ in self.workers if not stop.is_set()]

    def stable(self, above_epoch: int, must_own: ConnectWorker | None = None) -> bool:
        ws = self.live()
        if not all(w.state is State.STABLE and w.owned == w.target for w in ws):
            return False
        epochs = {w.member_epoch for w in ws}
        if len(epochs) != 1 or next(iter(epochs)) <= above_epoch:
            return False
        if sum(len(w.owned) for w in ws) != len(self.units) or frozenset().union(*(w.owned for w in ws)) != self.units:
            return False
        return must_own is None or bool(must_own.owned)

    def epoch(self) -> int:
        return max((w.member_epoch for w in self.live()), default=0)

    async def settle(self, since: float, above_epoch: int, must_own: ConnectWorker | None = None) -> float:
        deadline = since + TIMEOUT_S
        while not self.stable(above_epoch, must_own):
            if time.monotonic() > deadline:
                raise TimeoutError(f"group {self.group_id} not stable after {TIMEOUT_S}s")
            await asyncio.sleep(POLL_S)
        return (time.monotonic() - since) * 1000

    async def close(self) -> None:
        for _, stop, _ in self.workers:
            stop.set()
        await asyncio.gather(*(t for _, _, t in self.workers), return_exceptions=True)


async def one_run(bootstrap: str, n: int) -> dict[str, float]:
    g = Group(bootstrap, f"bench-connect-{n}-{uuid.uuid4().hex[:8]}", units_for(n))
    try:
        t0 = time.monotonic()
        for _ in range(n):
            g.add()
        out = {"formation": await g.settle(t0, 0)}
        before = g.epoch()
        t0 = time.monotonic()
        joined = g.add()
        out["join"] = await g.settle(t0, before, must_own=joined)
        before = g.epoch()
        leaver, stop, task = g.workers[0]
        t0 = time.monotonic()
        stop.set()
        out["leave"] = await g.settle(t0, before)
        await asyncio.wait_for(task, 30)
        assert leaver.state is State.LEFT and not leaver.owned
        return out
    finally:
        await g.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", default="3,100")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--json")
    args = p.parse_args()

    from support.kcoord import KcoordProcess
    from support.tansu import start_tansu

    results: dict[int, list[dict[str, float]]] = {}
    with start_tansu() as broker:
        kcoord = KcoordProcess(upstream=broker.bootstrap, state_topic=f"__kcoord_bench_{uuid.uuid4().hex[:8]}").start()
        try:
            for n in (int(x) for x in args.workers.split(",")):
                results[n] = [asyncio.run(one_run(kcoord.bootstrap, n)) for _ in range(args.runs)]
        finally:
            kcoord.stop()
    print("| workers | units | event | median ms | max ms | runs |\n|---|---|---|---|---|---|")
    for n, runs in results.items():
        for event in ("formation", "join", "leave"):
            xs = [r[event] for r in runs]
            print(f"| {n} | {len(units_for(n))} | {event} | {statistics.median(xs):.0f} | {max(xs):.0f} | {len(xs)} |")
    if args.json:
        Path(args.json).write_text(json.dumps({str(n): r for n, r in results.items()}, indent=2))


if __name__ == "__main__":
    main()
