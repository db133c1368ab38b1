"""Test files longest first, so the two xdist workers finish together; and the per-file
seconds that order comes from.

Rules:
- `scripts/test` runs pytest-xdist with ``--dist loadfile --no-loadscope-reorder``: a worker
  runs a whole file and takes the next one, in collection order, when it has two tests
  left. Ordered longest first (the LPT rule), a long file never starts last while the
  other worker idles: the files that come last are short ones that fill the gap.
  (xdist's own reorder sorts files by their number of tests, which puts a file of one
  60-second test at the very end.)
- A file's expected seconds: its measured seconds in tests/durations.json (setup, call and
  teardown summed over its tests in an earlier run), else its number of tests times the
  mean seconds per test of the measured files of its directory (a directory's tests share
  fixtures and upstreams), or of its kind (integration or unit) when none is. A row without a
  number of tests is a lower bound (its slowest tests only): the larger of it and the
  estimate counts. A file keeps its tests in their order and together (module fixtures
  are set up once).
- Recording: ``KCOORD_TEST_DURATIONS=<path>`` writes this run's per-file seconds there,
  merged into what the file holds (``KCOORD_TEST_DURATIONS=tests/durations.json
  ./scripts/test`` refreshes the table). Every run's summary prints each worker's busy
  seconds and when it ran its last test, which shows the balance, and the longest files.
- Only the controller (or a run without xdist) records: workers' reports reach it.
"""
from __future__ import annotations

import json
import os
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

TABLE = Path(__file__).resolve().parents[1] / "durations.json"
ENV_OUT = "KCOORD_TEST_DURATIONS"
# Means per test when the table has no measured file of a kind. CI at 66532f8 spent
# 2 x 1,579 s of worker time on 2,953 tests, ~460 of them integration; the unit tests run at
# ~0.05 s each (test_checked.py: 766 in 41.5 s), so an integration test took ~6.5 s.
DEFAULT_SECONDS = {"integration": 6.5, "unit": 0.05}


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _kind(path: str) -> str:
    return "integration" if "/integration/" in f"/{path}" else "unit"


def load(table: Path = TABLE) -> dict[str, dict[str, float]]:
    try:
        return json.loads(table.read_text())
    except (OSError, ValueError):
        return {}


def expected_seconds(counts: Counter, table: dict[str, dict[str, float]]) -> dict[str, float]:
    """path -> expected seconds for the files of this collection (``counts``: tests per file)."""
    measured: dict[str, list[dict[str, float]]] = defaultdict(list)
    for path, row in table.items():
        if row.get("tests"):
            measured[str(Path(path).parent)].append(row)

    def per_test(path: str) -> float:
        rows = measured.get(str(Path(path).parent))
        if rows:
            return sum(r["seconds"] for r in rows) / sum(r["tests"] for r in rows)
        return DEFAULT_SECONDS[_kind(path)]

    def cost(path: str, n: int) -> float:
        row = table.get(path)
        estimate = n * per_test(path)
        if row is None:
            return estimate
        # A row without its number of tests is a lower bound (a file's slowest tests only).
        return row["seconds"] if row.get("tests") else max(row["seconds"], estimate)
    return {path: cost(path, n) for path, n in counts.items()}


def longest_files_first(items: list[Any], table: dict[str, dict[str, float]] | None = None) -> None:
    """Reorder ``items`` in place: files by expected seconds, longest first; a file's tests
    stay together and in their order."""
    if not items:
        return
    counts = Counter(_file(item.nodeid) for item in items)
    cost = expected_seconds(counts, load() if table is None else table)
    first: dict[str, int] = {}
    for i, item in enumerate(items):
        first.setdefault(_file(item.nodeid), i)
    # sorted() is stable: within a file the tests keep their order
    items[:] = sorted(items, key=lambda item: (-cost[_file(item.nodeid)], first[_file(item.nodeid)]))


class Recorder:
    """Per-file and per-worker seconds of this run, from the test reports."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.files: dict[str, float] = defaultdict(float)
        self.tests: dict[str, set[str]] = defaultdict(set)
        self.where: dict[str, str] = {}
        self.busy: dict[str, float] = defaultdict(float)
        self.last: dict[str, float] = {}

    @staticmethod
    def _controller() -> bool:
        return not os.environ.get("PYTEST_XDIST_WORKER")

    def add(self, report: Any) -> None:
        if not self._controller():
            return
        gateway = getattr(getattr(report, "node", None), "gateway", None)
        worker = getattr(gateway, "id", "main")
        path = _file(report.nodeid)
        self.files[path] += report.duration
        self.tests[path].add(report.nodeid)
        self.where[path] = worker
        self.busy[worker] += report.duration
        self.last[worker] = time.monotonic() - self.started

    def summary(self, longest: int = 15) -> list[str]:
        if not self.files or not self._controller():
            return []
        lines = ["test seconds per worker (busy / last test done, since collection): " + ", ".join(
            f"{w} {self.busy[w]:.0f} / {self.last[w]:.0f}" for w in sorted(self.busy))]
        for path, seconds in sorted(self.files.items(), key=lambda kv: -kv[1])[:longest]:
            lines.append(f"  {seconds:7.1f} s  {len(self.tests[path]):4d} tests  {self.where[path]:5s} {path}")
        return lines

    def write(self) -> None:
        out = os.environ.get(ENV_OUT)
        if not out or not self.files or not self._controller():
            return
        table = load(Path(out))
        table.update({path: {"seconds": round(seconds, 1), "tests": len(self.tests[path])}
                      for path, seconds in self.files.items()})
        Path(out).write_text(json.dumps(dict(sorted(table.items())), indent=1) + "\n")
