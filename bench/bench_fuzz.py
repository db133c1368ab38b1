"""Fuzz a real `kcoord serve` in front of its embedded Tansu with 1,000,000 frames per mode,
and report the rate, the result, and the peak RSS of kcoord and of the broker.

    .venv/bin/python bench/bench_fuzz.py [--mode bytes|structured|both] [--frames 1000000] [--seed 1]
        [--upstream embedded|kafka] [--exclude 20,...] [--confirm]

Each mode gets a fresh `kcoord serve` (and so a fresh embedded Tansu, under
--embedded-memory-max). Every batch is checked (kcoord and the broker answer ApiVersions,
stay under their RSS bounds, no traceback in kcoord's log, both alive); see fuzz/live.py.
A broker that dies, outgrows its bound or stops answering is a FINDING, printed with the
requests sent just before and the seed; with --confirm those are replayed through a fresh
kcoord and embedded Tansu and bisected down to the request(s) that do it (fuzz/confirm.py).
`--upstream kafka` runs in front of Apache Kafka 4.4 with a 512 MiB heap instead
(tests/support/kafka_broker.py). `--exclude` leaves API keys out of the structured mode, as
the CI run in front of Tansu leaves out an open finding's API. Prints progress per batch and a JSON summary per mode;
exits 1 if any mode failed a check.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from loadgen import procs  # noqa: E402

from fuzz.confirm import Broker, confirm  # noqa: E402
from fuzz.health import KAFKA_RSS_LIMIT_MB, TANSU_RSS_LIMIT_MB, UpstreamWatch  # noqa: E402
from fuzz.live import FUZZ_CONFIG, IDLE_MS, LiveFuzzer, LiveReport, advertised  # noqa: E402
from fuzz.structured import StructuredFrames  # noqa: E402
from fuzz.sweep import frames as sweep_frames  # noqa: E402
from fuzz.sweep import sweep  # noqa: E402
from support import processes  # noqa: E402
from support.kcoord import launch_serve  # noqa: E402


def peak_rss_mb(pid: int) -> float:
    """VmHWM: the process's peak RSS so far (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


@dataclass
class Served:
    process: object
    log_path: Path
    port: int
    broker: UpstreamWatch
    stop_broker: object = None


# `--config KEY=VALUE` items given on the command line, after FUZZ_CONFIG: kcoord's extensions
# that are off by default (warm-up tasks, zone-aware standbys) are fuzzed only when turned on.
EXTRA_CONFIG: list[str] = []


def serve_embedded(memory_max: str) -> Served:
    port = procs.free_ports(2)
    lines: list[str] = []
    args = [sys.executable, "-m", "coordinator.cli", "--log-level", "WARNING", "serve", "--listen", f"127.0.0.1:{port}",
            "--state-topic", f"__kcoord_bench_{port}", "--state-partitions", "4", "--embedded-memory-max", memory_max,
            "--embedded-log", str(Path(tempfile.gettempdir()) / f"bench-fuzz-tansu-{port}.log")]
    for item in (*FUZZ_CONFIG, *EXTRA_CONFIG):
        args += ["--config", item]
    process, log_path = launch_serve(args, REPO, f"kcoord-bench-fuzz-{port}", lines, 60, env={"PYTHONPATH": str(REPO)})
    banner = next(line for line in lines if "embedded Tansu pid" in line)
    match = re.search(r"upstream (\S+):(\d+) \(embedded Tansu pid (\d+)", banner)
    assert match, banner
    watch = UpstreamWatch(f"embedded Tansu (--embedded-memory-max {memory_max})", match.group(1), int(match.group(2)),
                          int(match.group(3)), rss_limit_mb=TANSU_RSS_LIMIT_MB)
    return Served(process, log_path, port, watch)


def serve_kafka(work: Path) -> Served:
    from support.kafka_broker import KAFKA_44, start_kafka
    cluster = start_kafka(KAFKA_44, work, heap="512m")
    node = cluster.nodes[0]
    kcoord = procs.Kcoord(cluster.bootstrap, config=(*FUZZ_CONFIG, *EXTRA_CONFIG), state_partitions=4).start()
    watch = UpstreamWatch(f"Kafka {KAFKA_44} (-Xmx512m)", "127.0.0.1", int(cluster.bootstrap.rsplit(":", 1)[1]),
                          node.process.pid, rss_limit_mb=KAFKA_RSS_LIMIT_MB, timeout_s=10)
    return Served(kcoord.process, kcoord.log_path, kcoord.port, watch, stop_broker=cluster.stop)


def fresh_served(memory_max: str) -> Broker:
    """A fresh `kcoord serve` and embedded Tansu for a replay: what gets through kcoord."""
    served = serve_embedded(memory_max)
    return Broker("127.0.0.1", served.port, served.broker.pid, served.broker.host, served.broker.port,
                  lambda: processes.stop(served.process, 15))


def run_mode(mode: str, args: argparse.Namespace) -> tuple[LiveReport, dict]:
    served = serve_kafka(Path(tempfile.mkdtemp(prefix="bench-fuzz-kafka-"))) if args.upstream == "kafka" \
        else serve_embedded(args.embedded_memory_max)
    fuzzer = LiveFuzzer("127.0.0.1", served.port, served.process.pid, served.log_path,
                        state_topic=f"__kcoord_bench_{served.port}", rss_limit_mb=args.rss_limit_mb, seed=args.seed,
                        concurrency=args.concurrency, mode=mode, upstream=served.broker,
                        read_timeout=1.0 if mode == "structured" else 2.0, exclude=args.exclude)

    def progress(r: LiveReport) -> None:
        print(f"[bench_fuzz {mode}] batch {r.batches}: {r.frames:,}/{args.frames:,} frames, "
              f"{r.frames_per_second:,.0f}/s, RSS max kcoord {r.max_rss_mb:.0f} MB, broker "
              f"{r.upstream_max_rss_mb:.0f} MB", flush=True)
    structured = mode == "structured"
    try:
        report = procs.run(fuzzer.run(args.frames, args.batch, idle_ms=IDLE_MS, progress=progress,
                                      half_frames_per_batch=0 if structured else 2, burst=0 if structured else 200))
        peaks = {"kcoord_peak_rss_mb": round(peak_rss_mb(served.process.pid)),
                 "broker_peak_rss_mb": round(max(peak_rss_mb(served.broker.pid), served.broker.max_rss_mb))}
    finally:
        processes.stop(served.process, 15)
        if served.stop_broker is not None:
            served.stop_broker()
    confirmed = []
    if args.confirm and served.broker.suspects:
        def start() -> Broker:
            return fresh_served(args.embedded_memory_max)
        confirmed = procs.run(confirm(served.broker.suspects, start))
        if not confirmed:       # the harm needs what earlier frames built: bisect the whole run
            confirmed = procs.run(confirm(served.broker.everything_sent(), start))
    summary = {"mode": mode, "upstream": served.broker.name, "excluded": sorted(args.exclude),
               "frames": report.frames, "mutated": report.mutated,
               "frames_per_second": round(report.frames_per_second), "seconds": round(report.seconds, 1),
               "connections": report.connections, "responses": report.responses, **peaks,
               "by_mutation": dict(report.by_mutation) if not structured else None,
               "failures": report.failures, "confirmed": confirmed}
    if report.failures:
        print(f"--- kcoord log ({served.log_path}), last 3000 characters ---\n"
              f"{served.log_path.read_text(errors='replace')[-3000:]}")
    return report, summary


def run_sweep(args: argparse.Namespace) -> int:
    """Every fixed-width field of every advertised request at each extreme, alone through a
    fresh kcoord and embedded Tansu (fuzz/sweep.py): the findings name field and value."""
    def start() -> Broker:
        return fresh_served(args.embedded_memory_max)
    probe = start()
    try:
        versions = procs.run(advertised("127.0.0.1", probe.port))
    finally:
        probe.stop()
    structured = StructuredFrames(versions, random.Random(args.seed), templates_per_version=1)
    items = list(sweep_frames(structured))
    rng = random.Random(args.seed)
    items += [structured.frame(rng, 1) for _ in range(args.sweep_random)]
    print(f"[bench_fuzz sweep] {len(items):,} frames: {len(structured.versions)} API versions, every field alone "
          f"and {args.sweep_random:,} random structured frames", flush=True)

    def progress(sent: int, found: int) -> None:
        print(f"[bench_fuzz sweep] {sent:,}/{len(items):,} frames, {found} findings", flush=True)
    found = procs.run(sweep(items, start, progress=progress))
    print(json.dumps({"mode": "sweep", "frames": len(items), "findings": found}, indent=1), flush=True)
    return 1 if found else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("bytes", "structured", "both"), default="both")
    ap.add_argument("--frames", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--rss-limit-mb", type=float, default=600.0, help="kcoord's RSS bound")
    ap.add_argument("--upstream", choices=("embedded", "kafka"), default="embedded")
    ap.add_argument("--embedded-memory-max", default="2g")
    ap.add_argument("--exclude", type=lambda text: {int(k) for k in text.split(",") if k}, default=set(),
                    help="API keys the structured mode leaves out (comma-separated), e.g. 20 (DeleteTopics)")
    ap.add_argument("--confirm", action="store_true",
                    help="replay a finding's suspects one by one through a fresh kcoord and embedded Tansu")
    ap.add_argument("--sweep", action="store_true",
                    help="instead: every fixed-width field of every request at each extreme, then --sweep-random "
                         "random structured frames, each alone")
    ap.add_argument("--sweep-random", type=int, default=20_000)
    ap.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                    help="more kcoord settings (repeatable), e.g. streams_warmups_enabled=true")
    args = ap.parse_args()
    EXTRA_CONFIG[:] = args.config
    if args.sweep:
        return run_sweep(args)
    failed = False
    for mode in (("bytes", "structured") if args.mode == "both" else (args.mode,)):
        report, summary = run_mode(mode, args)
        print(report.summary())
        print(json.dumps(summary, indent=1), flush=True)
        failed |= bool(report.failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
