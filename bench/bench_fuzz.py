"""Fuzz a real `kcoord serve` (over a real Tansu) with 1,000,000 frames and report the rate.

    .venv/bin/python bench/bench_fuzz.py [--frames 1000000] [--seed 1] [--rss-limit-mb 600]

Every batch is checked (ApiVersions answered within 2 s, RSS under the bound, no traceback
in kcoord's log, process alive); see fuzz/live.py. Prints progress per batch and a JSON
summary at the end; exits 1 on the first failed check.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from loadgen import procs  # noqa: E402

from fuzz.live import FUZZ_CONFIG, IDLE_MS, LiveFuzzer, LiveReport  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--rss-limit-mb", type=float, default=600.0)
    args = ap.parse_args()
    broker = procs.tansu()
    kcoord = procs.Kcoord(broker.bootstrap, config=FUZZ_CONFIG, state_partitions=4).start()
    try:
        host, port = "127.0.0.1", kcoord.port
        fuzzer = LiveFuzzer(host, port, kcoord.pid, kcoord.log_path, state_topic=f"__kcoord_bench_{port}",
                            rss_limit_mb=args.rss_limit_mb, seed=args.seed, concurrency=args.concurrency)

        def progress(r: LiveReport) -> None:
            print(f"[bench_fuzz] batch {r.batches}: {r.frames:,}/{args.frames:,} frames, "
                  f"{r.frames_per_second:,.0f}/s, RSS max {r.max_rss_mb:.0f} MB", flush=True)
        report = procs.run(fuzzer.run(args.frames, args.batch, idle_ms=IDLE_MS, progress=progress))
    finally:
        kcoord.stop()
        broker.stop()
    print(report.summary())
    print(json.dumps({"frames": report.frames, "mutated": report.mutated, "frames_per_second": round(report.frames_per_second),
                      "connections": report.connections, "max_rss_mb": round(report.max_rss_mb),
                      "by_mutation": dict(report.by_mutation), "failures": report.failures}, indent=1))
    if report.failures:
        kcoord.print_log_tail()
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
