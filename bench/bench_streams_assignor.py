"""The built-in streams `sticky` task assignor (coordinator/group/streams/assignor.py) on large
groups: CPU per assignment.

    .venv/bin/python bench/bench_streams_assignor.py [--members 1000] [--tasks 5000] [--runs 5]
        [--standbys 1] [--processes 0] [--profile] [--digest] [--baseline GIT-REV]

Scenarios (two subtopologies, tasks split between them, the first stateful; `--processes`
processes with members spread over them, 0: one process per member):
- FULL: no previous assignment.
- INCREMENTAL: the FULL result as every member's previous assignment, then one member more.
- SHRINK: the FULL result as previous, with a tenth of the members gone.

Timed: `assign(...)` only (inputs built before), CPU time (time.process_time) median and min
per assignment, over ``--runs`` runs after a full `gc.collect()`. ``--digest`` prints a hash
of every scenario's result (to compare the assignor's results before and after a change on
the same seeded inputs); ``--profile`` prints cProfile's top functions of one INCREMENTAL run;
``--baseline REV`` also times the assignor as it was at git revision REV, in the same run on
the same inputs, and says whether its results are the same.
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import hashlib
import importlib.util
import os
import pstats
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from coordinator.group.streams.assignor import MemberSpec, assign  # noqa: E402
from coordinator.group.streams.model import EMPTY_TASKS  # noqa: E402

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def baseline(rev: str) -> Callable:
    """`assign` of coordinator/group/streams/assignor.py at git revision `rev` (its relative
    imports resolve to today's package: only the assignor's own code is the baseline's)."""
    source = subprocess.run(["git", "show", f"{rev}:coordinator/group/streams/assignor.py"], cwd=REPO,
                            check=True, capture_output=True, text=True).stdout
    spec = importlib.util.spec_from_loader("coordinator.group.streams._assignor_baseline", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "coordinator.group.streams"
    sys.modules[spec.name] = module          # dataclasses look their module up
    exec(compile(source, f"{rev}:assignor.py", "exec"), module.__dict__)  # noqa: S102 (our own file)
    return module.assign


def _members(n: int, processes: int, previous: dict | None = None, prefix: str = "m") -> dict[str, MemberSpec]:
    out = {}
    for i in range(n):
        mid = f"{prefix}{i:05d}"
        pid = f"p{(i % processes) if processes else i:05d}"
        out[mid] = MemberSpec(pid, (previous or {}).get(mid, EMPTY_TASKS))
    return out


def _tasks(n: int) -> list[tuple[str, int]]:
    half = n // 2
    return [("0", p) for p in range(half)] + [("1", p) for p in range(n - half)]


def scenarios(a: argparse.Namespace) -> dict[str, tuple]:
    tasks = _tasks(a.tasks)
    stateful = frozenset({"0"})
    full = _members(a.members, a.processes)
    first = assign(full, tasks, a.standbys, stateful)
    grown = _members(a.members, a.processes, first)
    grown["n99999"] = MemberSpec("pnew", EMPTY_TASKS)
    shrunk = {m: s for i, (m, s) in enumerate(sorted(_members(a.members, a.processes, first).items()))
              if i % 10 != 0}
    return {"FULL": (full, tasks, a.standbys, stateful), "INCREMENTAL": (grown, tasks, a.standbys, stateful),
            "SHRINK": (shrunk, tasks, a.standbys, stateful)}


def digest(result: dict) -> str:
    h = hashlib.sha256()
    for m in sorted(result):
        t = result[m]
        h.update(repr((m, sorted(t.active), sorted(t.standby), sorted(t.warmup))).encode())
    return h.hexdigest()[:16]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--members", type=int, default=1000)
    p.add_argument("--tasks", type=int, default=5000)
    p.add_argument("--standbys", type=int, default=1)
    p.add_argument("--processes", type=int, default=0)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--digest", action="store_true")
    p.add_argument("--baseline", help="a git revision whose assignor to time too")
    a = p.parse_args()
    cases = scenarios(a)
    print(f"streams sticky assignor: {a.members} members, {a.tasks} tasks, {a.standbys} standby(s), "
          f"{a.processes or a.members} processes")
    sides = [("now", assign)] + ([(a.baseline, baseline(a.baseline))] if a.baseline else [])
    for name, args in cases.items():
        results = []
        for side, fn in sides:
            cpu = []
            result = None
            for _ in range(a.runs):
                gc.collect()
                t0 = time.process_time()
                result = fn(*args)
                cpu.append(time.process_time() - t0)
            results.append(result)
            line = (f"  {name:12s} {side:10s} CPU median {statistics.median(cpu) * 1e3:9.1f} ms  "
                    f"min {min(cpu) * 1e3:9.1f} ms")
            if a.digest:
                line += f"  result {digest(result)}"
            print(line)
        if len(results) > 1:
            print(f"  {name:12s} same result as {a.baseline}: {results[0] == results[1]}")
    if a.profile:
        prof = cProfile.Profile()
        prof.runcall(assign, *cases["INCREMENTAL"])
        pstats.Stats(prof).sort_stats("cumulative").print_stats(15)


if __name__ == "__main__":
    main()
