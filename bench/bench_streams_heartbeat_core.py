"""A steady streams heartbeat in the pure core: CPU per heartbeat, with no I/O.

    .venv/bin/python bench/bench_streams_heartbeat_core.py [--beats 20000] [--rounds 3] [--baseline GIT-REV]

The group has 10 members, 32 stateful tasks and one standby, and is stable. Each round times
``--beats`` heartbeats that change nothing (a member at its epoch), round-robin over the
members, with time.process_time. Each heartbeat is applied and replayed by the unit tests'
driver (tests/unit/group/streams/driver.py), so the figure includes that driver's cost.
``--baseline REV`` runs the same rounds on git revision REV (a temporary worktree),
alternating with this checkout in one run, and prints both medians.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def one_round(beats: int) -> float:
    """µs of CPU per steady heartbeat, in this process's checkout."""
    sys.path[:0] = [str(Path.cwd()), str(Path.cwd() / "tests")]
    from unit.group.streams.driver import REQ, Driver, beat, image, subtopology, topology

    top = topology(subtopology("0", sources=["input"], changelogs=["app-store-changelog"]))
    d = Driver(image(input=32, **{"app-store-changelog": 32}), streams_initial_rebalance_delay_ms=0,
               streams_assignment_interval_ms=0, streams_num_standby_replicas=1)
    members = [f"m{i}" for i in range(10)]
    for i, m in enumerate(members):
        d.hb(REQ.StreamsGroupHeartbeatRequest(
            group_id="app", member_id=m, member_epoch=0, endpoint_information_epoch=0,
            rebalance_timeout=timedelta(seconds=30), topology=top, active_tasks=(), standby_tasks=(),
            warmup_tasks=(), process_id=f"p{i}", client_tags=(), task_offsets=None, task_end_offsets=None))
    for _ in range(3):      # until every member is at the group's epoch
        for m in members:
            d.hb(beat(m, d.group().members[m].member_epoch))
    start = time.process_time()
    for k in range(beats):
        m = members[k % 10]
        d.hb(beat(m, d.group().members[m].member_epoch))
    return (time.process_time() - start) / beats * 1e6


def _child(cwd: Path, beats: int) -> float:
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", "--beats", str(beats)],
                         cwd=cwd, capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--beats", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--baseline", metavar="GIT-REV")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(f"{one_round(args.beats):.1f}")
        return
    sides = {"this checkout": REPO}
    with tempfile.TemporaryDirectory() as tmp:
        if args.baseline:
            base = Path(tmp) / "baseline"
            subprocess.run(["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(base), args.baseline],
                           check=True)
            sides = {args.baseline: base, **sides}
        try:
            figures: dict[str, list[float]] = {name: [] for name in sides}
            for r in range(args.rounds):
                for name, cwd in sides.items():
                    figures[name].append(_child(cwd, args.beats))
                    print(f"round {r + 1}/{args.rounds} {name}: {figures[name][-1]:.1f} us", file=sys.stderr)
            for name, values in figures.items():
                print(f"{name}: median {statistics.median(values):.1f} us of CPU per heartbeat "
                      f"({', '.join(f'{v:.1f}' for v in values)})")
        finally:
            if args.baseline:
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)], check=False)


if __name__ == "__main__":
    main()
