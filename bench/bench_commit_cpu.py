"""kcoord's CPU per durable OffsetCommit, kcoord alone on its own core.

    .venv/bin/python bench/bench_commit_cpu.py [--runs 3] [--seconds 4] [--python PATH ...]
        [--repo PATH ...] [--profile DIR] [--kcoord-cpus 0] [--other-cpus 1] [--config NAME=VALUE ...]

One Kafka 4.4.0 KRaft node (bench_vs_kafka.start_broker, Kafka's group defaults) stores
kcoord's state topic; `kcoord serve` (its defaults: fencing off) runs in front of it. kcoord
is pinned to ``--kcoord-cpus``; the broker and the load generator share ``--other-cpus``
(sched_setaffinity, as `taskset`). The load is bench_side_by_side's closed loop: durable
OffsetCommit v8 of ``--partitions`` partitions for ``--groups`` simple groups (generation
-1), ``--connections`` connections with one request in flight each.

The figure is kcoord's own utime + stime (/proc/PID/stat) over the measured window divided
by the commits answered in it: the CPU a commit costs kcoord, whatever the broker costs.
Each of ``--runs`` blasts is printed, then the median.

``--repo PATH`` (repeatable) measures the `coordinator/` of each checkout named (e.g. a
``git worktree`` of an older commit; default: this one): one `kcoord serve` per checkout,
each with its own state topic on the same broker, all started before the first blast, and
the blasts alternate between them (checkout A, B, A, B, ...) so that before and after come
from the same run.

``--python PATH`` (repeatable) runs `kcoord serve` under that interpreter (a venv with
kcoord's dependencies, e.g. one made from CPython 3.12 or 3.13), the load generator staying
here; every checkout runs under every interpreter named, the blasts alternating.
``--profile DIR`` samples each kcoord with py-spy during its last blast
(bench/loadgen/profiling.py: a flame graph, the collapsed stacks and the top functions).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("KCOORD_TEST_PORTS", "29700-29799")
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "bench")]

import bench_vs_kafka as vsk  # noqa: E402
from bench_side_by_side import commit_frames  # noqa: E402
from loadgen import procs  # noqa: E402
from loadgen.profiling import Profile  # noqa: E402
from side_by_side import load, pinning  # noqa: E402
from vs_kafka import wire  # noqa: E402

from support.kcoord import launch_serve  # noqa: E402


def start_kcoord(bootstrap: str, python: str, config: list[str], state_partitions: int,
                 repo: Path) -> tuple[subprocess.Popen, int]:
    port = procs.free_ports(2)
    args = [python, "-m", "coordinator.cli", "--log-level", "WARNING", "serve", "--listen", f"127.0.0.1:{port}",
            "--upstream", bootstrap, "--state-topic", f"__kcoord_cpu_{port}_{os.getpid()}",
            "--state-partitions", str(state_partitions)]
    for item in config:
        args += ["--config", item]
    process, _ = launch_serve(args, repo, f"kcoord-cpu-{port}", [], 90.0, env={"PYTHONPATH": str(repo)})
    return process, port


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--groups", type=int, default=200)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--depth", type=int, default=1)
    ap.add_argument("--state-partitions", type=int, default=50)
    ap.add_argument("--python", action="append", default=[], help="interpreters that run `kcoord serve`, alternating")
    ap.add_argument("--config", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--repo", action="append", type=Path, default=[], help="checkouts measured, alternating")
    ap.add_argument("--kcoord-cpus", default="0")
    ap.add_argument("--other-cpus", default="1", help="the broker and the load generator")
    ap.add_argument("--profile", type=Path, default=None, help="py-spy the last blast into this directory")
    a = ap.parse_args()
    kcoord_cpus, other_cpus = pinning.parse_cpus(a.kcoord_cpus), pinning.parse_cpus(a.other_cpus)
    work = Path(tempfile.mkdtemp(prefix="commit-cpu-"))
    with pinning.running_on(other_cpus):
        kafka = vsk.start_broker("kafka-commit-cpu", vsk.KAFKA_DEFAULTS, work)
    pythons = [os.path.abspath(p) for p in a.python] or [sys.executable]
    targets = [(repo, python) for repo in ([r.resolve() for r in a.repo] or [REPO]) for python in pythons]
    names: dict[tuple[Path, str], str] = {}
    for repo, python in targets:
        version = subprocess.run([python, "-c", "import sys; print(sys.version.split()[0])"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        names[(repo, python)] = f"{repo} (Python {version})"
    started: list[tuple[tuple[Path, str], subprocess.Popen, int]] = []
    try:
        vsk.create_topics(kafka.bootstrap, argparse.Namespace(hb_partitions=0, storm_partitions=0,
                                                              commit_partitions=a.partitions), {"commit"})
        for target in targets:
            with pinning.running_on(kcoord_cpus):
                kc, port = start_kcoord(kafka.bootstrap, target[1], a.config, a.state_partitions, target[0])
            started.append((target, kc, port))
            pinning.pin_process(kc.pid, kcoord_cpus)
        pinning.pin_process(kafka.nodes[0].process.pid, other_cpus)
        pinning.pin_process(os.getpid(), other_cpus)
        print(f"kcoord on CPUs {sorted(kcoord_cpus)}; Kafka and the load on {sorted(other_cpus)}; "
              f"load average {os.getloadavg()[0]:.2f}", flush=True)
        time.sleep(1.5)
        offset = wire.commit_error_offset(vsk.COMMIT_TOPIC)
        frames = commit_frames("cpu", a.groups, vsk.COMMIT_TOPIC, a.partitions)
        for _repo, kc, port in started:
            wire.check_commit(port, "cpu", vsk.COMMIT_TOPIC)
            load.run(port, frames, offset, connections=a.connections, depth=a.depth, server_pids=[kc.pid],
                     load_cpus=other_cpus, seconds=3.0, warmup=0.5)          # warm-up, not recorded
        figures: dict[tuple[Path, str], list] = {target: [] for target in targets}
        for i in range(a.runs):
            for target, kc, port in started:
                name = names[target]
                spy: contextlib.AbstractContextManager = contextlib.nullcontext()
                if a.profile is not None and i == a.runs - 1:
                    a.profile.mkdir(parents=True, exist_ok=True)
                    spy = Profile(kc.pid, str(a.profile / f"kcoord-{targets.index(target)}"), a.seconds + a.warmup)
                with spy:
                    r = load.run(port, frames, offset, connections=a.connections, depth=a.depth,
                                 server_pids=[kc.pid], load_cpus=other_cpus, seconds=a.seconds, warmup=a.warmup)
                f = r.figures()
                if r.errors:
                    raise SystemExit(f"{name}: error responses {r.errors}")
                if f["cpu_us_per_op"] is None:          # no answer in the window (a starved machine)
                    print(f"run {i + 1} {name}: no commit answered in the window", flush=True)
                    continue
                figures[target].append(f)
                print(f"run {i + 1} {name}: {f['rate']:,.0f} commits/s, kcoord {f['cpu_us_per_op']:.1f} us CPU/commit "
                      f"({f['server_cores']:.2f} cores), p50 {f['p50_us']:,.0f} us, p99 {f['p99_us']:,.0f} us",
                      flush=True)
        for target in targets:
            fs, name = figures[target], names[target]
            if not fs:
                print(f"median {name}: no run answered")
                continue
            each = ", ".join(f"{f['cpu_us_per_op']:.1f}" for f in fs)
            print(f"median {name}: {statistics.median(f['rate'] for f in fs):,.0f} commits/s, "
                  f"{statistics.median(f['cpu_us_per_op'] for f in fs):.1f} us kcoord CPU/commit (runs: {each})")
        print(f"load average {os.getloadavg()[0]:.2f}")
    finally:
        for _, kc, _ in started:
            procs.processes.stop(kc, 15)
        kafka.stop()


if __name__ == "__main__":
    main()
