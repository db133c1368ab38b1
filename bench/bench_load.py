"""How long kcoord takes to load its state topic at start, by the two readers it has.

    .venv/bin/python bench/bench_load.py [--records 300000] [--partitions 8] [--runs 3]

Issue 16 changed the loader of a single process: loads read the partitions raw through the
marker-aware reader (coordinator/runtime/txn_log_reader.py over fenced_state_log's Fetch
links, read_uncommitted with control batches) instead of aiokafka's read_committed consumer,
which stops at the last stable offset behind any open client transaction. This measures
what that costs at start: a realistic generated log (ops.generator: commits, group records,
transactions with COMMIT and ABORT markers, unknown record types) produced into a Tansu
topic, then `GroupCoordinatorService.start()` timed with each reader, runs alternating.
Both must end with the same groups and offsets (checked: a mismatch stops the run).
Benchmarks are not tests: nothing asserts a speed.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from coordinator.config import CoordinatorConfig  # noqa: E402
from coordinator.runtime.state_topic import StateTopic  # noqa: E402
from coordinator.service import GroupCoordinatorService  # noqa: E402
from ops.generator import GeneratorSpec, generate  # noqa: E402
from ops.logsource import Problems  # noqa: E402
from ops.produce_log import produce  # noqa: E402
from ops.segment import iter_buffer  # noqa: E402


def _produce(bootstrap: str, topic: str, spec: GeneratorSpec) -> int:
    problems = Problems()
    batches = generate(spec)

    def log_batches():
        for p, bs in batches.items():
            buf = b"".join(bs)
            yield from iter_buffer(buf, len(buf), f"generated-{p}", p, problems)

    out = produce(bootstrap, topic, log_batches(), spec.partitions)
    return out.records


async def _load(bootstrap: str, topic: str, partitions: int, raw: bool) -> tuple[float, int, int]:
    st = StateTopic(bootstrap, topic, partitions)
    if not raw:
        st.enable_txn_offsets = None   # type: ignore[assignment]  # the service then keeps aiokafka's reader
    svc = GroupCoordinatorService(CoordinatorConfig(state_topic=topic, state_topic_partitions=partitions), st)
    started = time.perf_counter()
    await svc.start()
    seconds = time.perf_counter() - started
    groups = sum(len(rt.shard.groups) for rt in svc.runtimes)
    offsets = sum(len(parts) for rt in svc.runtimes for topics in rt.shard.offsets.offsets.values()
                  for parts in topics.values())
    svc.close()
    await st.stop()
    return seconds, groups, offsets


def main() -> int:
    from support.tansu import start_tansu

    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--groups", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    broker = start_tansu()
    try:
        topic = "__kcoord_bench_load"
        spec = GeneratorSpec(partitions=args.partitions, groups=args.groups, records=args.records)
        t0 = time.perf_counter()
        n = _produce(broker.bootstrap, topic, spec)
        print(f"produced {n:,} records ({args.partitions} partitions, {args.groups} groups) to Tansu in "
              f"{time.perf_counter() - t0:.1f}s", flush=True)
        results: dict[str, list[float]] = {"raw (marker-aware)": [], "aiokafka read_committed": []}
        states = set()
        for run in range(args.runs):
            order = [True, False] if run % 2 == 0 else [False, True]
            for raw in order:
                name = "raw (marker-aware)" if raw else "aiokafka read_committed"
                seconds, groups, offsets = asyncio.run(_load(broker.bootstrap, topic, args.partitions, raw))
                states.add((groups, offsets))
                results[name].append(seconds)
                print(f"  run {run + 1} {name:<24} {seconds:6.2f} s  {n / seconds:>9,.0f} records/s  "
                      f"({groups} groups, {offsets} offsets)", flush=True)
        if len(states) != 1:
            print(f"the two readers loaded different states: {sorted(states)}")
            return 1
        print("median:")
        for name, values in results.items():
            m = statistics.median(values)
            print(f"  {name:<24} {m:6.2f} s  {n / m:>9,.0f} records/s (n={len(values)})")
    finally:
        broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
