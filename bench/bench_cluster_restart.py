"""Start-up and restart of `kcoord serve` against a real upstream, by checkout.

    KCOORD_TEST_PORTS=31600-31799 .venv/bin/python bench/bench_cluster_restart.py [--base REV]
        [--parts plain,restart] [--sessions 3000,10000] [--runs 3] [--upstreams tansu,kafka44]

Per upstream (tests/support's Tansu; Kafka 4.4 with the fixture's settings, whose
group.initial.rebalance.delay.ms is 0; ``kafka44-delay3000`` sets Kafka's default) and
membership session (``--sessions``, ms):
- plain: process start -> "kcoord ready" of a plain serve on a new state topic, with the
  single-process check (``cluster.solo.check``) off and on;
- restart: kc-0 and kc-1 (``--instance-id``) on a new state topic, settled one session plus
  3 s; a group kc-1 coordinates gets a commit; kc-1 is killed (-9) and restarted at once on
  its port and instance id. ``ready`` = kill -> its "kcoord ready"; ``answers`` = kill ->
  the group's OffsetFetch from it returns the commit.
The current checkout is measured; ``--base REV`` also measures REV from a temporary git
worktree (cwd and PYTHONPATH there), alternating runs. Runs print as they end, then a table
of runs and medians. Nothing is asserted.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from support import group_probe as probe  # noqa: E402
from support.admin import create_topic  # noqa: E402
from support.kafka_broker import KAFKA_44, start_kafka  # noqa: E402
from support.kcoord import CLUSTER, KcoordProcess, free_port_block, launch_serve  # noqa: E402
from support.tansu import start_tansu  # noqa: E402


def start(proc: KcoordProcess, code: Path) -> float:
    """Start ``proc`` from the checkout ``code``; seconds until it printed "kcoord ready"."""
    proc.port = proc.port or free_port_block(2)
    t0 = time.monotonic()
    proc.process, proc.log_path = launch_serve(proc.serve_args(), code, f"bench-restart-{proc.port}",
                                               proc._lines, 120, env={"PYTHONPATH": str(code)})
    return time.monotonic() - t0


def stop_all(procs: list[KcoordProcess]) -> None:
    for p in procs:
        if p.process and p.process.poll() is None:
            p.stop()


def plain(upstream: str, code: Path, session: int, check: str) -> float:
    cfg = ("consumer_heartbeat_interval_ms=500", f"cluster.session.timeout.ms={session}",
           f"cluster.heartbeat.interval.ms={min(1000, session // 10)}", "cluster.lease.margin.ms=1000",
           f"cluster.solo.check={check}")
    proc = KcoordProcess(upstream, f"__bench_plain_{os.getpid()}_{time.monotonic_ns()}", config=cfg)
    try:
        return start(proc, code)
    finally:
        stop_all([proc])


def restart(upstream: str, code: Path, session: int) -> tuple[float, float]:
    state = f"__bench_restart_{os.getpid()}_{time.monotonic_ns()}"
    create_topic(upstream, topic := state + "_t", 1)
    cfg = (*CLUSTER, f"cluster.session.timeout.ms={session}")
    procs = [KcoordProcess(upstream, state, config=cfg, extra_args=("--instance-id", f"kc-{i}")) for i in range(2)]
    try:
        for p in procs:
            start(p, code)
        time.sleep(session / 1000 + 3)
        victim = procs[1]
        group = next(g for g in (f"g{i}" for i in range(200)) if probe.find(procs[0].bootstrap, g)[3] == victim.port)
        while probe.commit(victim.bootstrap, group, topic, 7) != 0:
            time.sleep(0.05)
        t0 = time.monotonic()
        victim.kill()
        victim._lines.clear()
        start(victim, code)
        ready = time.monotonic() - t0
        while time.monotonic() - t0 < 120:
            try:
                if probe.fetch(victim.bootstrap, group, topic) == (0, 7):
                    return ready, time.monotonic() - t0
            except OSError:
                pass
            time.sleep(0.01)
        raise RuntimeError("the group did not answer within 120 s of the kill")
    finally:
        stop_all(procs)


def start_upstream(name: str, work: Path):
    if name == "tansu":
        return start_tansu(log_dir=work)
    m = re.fullmatch(r"kafka44(?:-delay(\d+))?", name)
    if not m:
        raise SystemExit(f"unknown upstream {name!r} (tansu, kafka44, kafka44-delayMS)")
    return start_kafka(KAFKA_44, work / name, overrides={"group.initial.rebalance.delay.ms": m[1]} if m[1] else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="also measure this revision (a temporary git worktree)")
    parser.add_argument("--parts", default="plain,restart")
    parser.add_argument("--sessions", default="3000,10000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--upstreams", default="tansu,kafka44")
    args = parser.parse_args()
    results: dict[tuple, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-restart-") as tmp:
        work = Path(tmp)
        codes = [("current", REPO)]
        if args.base:
            tree = work / "base"
            subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), args.base], check=True)
            codes.append((f"base {args.base}", tree))
        try:
            for name in args.upstreams.split(","):
                broker = start_upstream(name, work)
                try:
                    for part in args.parts.split(","):
                        for session in map(int, args.sessions.split(",")):
                            for run in range(args.runs):
                                for label, code in (codes if run % 2 == 0 else codes[::-1]):
                                    measure(results, part, name, session, run, label, code, broker.bootstrap)
                finally:
                    broker.stop()
        finally:
            if args.base:
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False)
    print(f"\n{'upstream':<17} {'part':<8} {'session':>7}  {'code':<16} {'what':<10} {'runs (s)':<22} median")
    for (name, part, session, label, what), values in results.items():
        good = [v for v in values if not math.isnan(v)]
        print(f"{name:<17} {part:<8} {session:>7}  {label:<16} {what:<10} {' '.join(f'{v:.2f}' for v in values):<22} "
              + (f"{statistics.median(good):.2f}" if good else "-"))


def measure(results: dict, part: str, name: str, session: int, run: int, label: str, code: Path, upstream: str) -> None:
    for check in (("false", "true") if run % 2 == 0 else ("true", "false")) if part == "plain" else (None,):
        whats = [f"check {'on' if check == 'true' else 'off'}"] if check else ["ready", "answers"]
        try:
            values = [plain(upstream, code, session, check)] if check else restart(upstream, code, session)
        except Exception as e:  # noqa: BLE001  (a failed run is reported as nan, the others go on)
            print(f"  run FAILED: {str(e)[:300]}", flush=True)
            values = [math.nan] * len(whats)
        for what, value in zip(whats, values):
            results.setdefault((name, part, session, label, what), []).append(value)
        print(f"  {name} {part} session {session} ms {label} run {run + 1}: "
              + ", ".join(f"{w} {v:.2f} s" for w, v in zip(whats, values)), flush=True)


if __name__ == "__main__":
    main()
