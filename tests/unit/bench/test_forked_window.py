"""bench/loadgen/procs.py's forked_window: forked workers start together once all are ready,
every worker's result comes back, and each server process's CPU and wait are read."""
from __future__ import annotations

import multiprocessing as mp
import os
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "bench"
sys.path.insert(0, str(BENCH))

from loadgen import procs  # noqa: E402


def _worker(n: int, ready, go, out) -> None:
    ready.put(n)
    start_at = go.get()
    out.put((n, start_at))


def test_every_worker_gets_one_start_time_and_its_result_comes_back():
    ctx = mp.get_context("fork")
    ready, go, out = ctx.Queue(), ctx.Queue(), ctx.Queue()
    workers = [ctx.Process(target=_worker, args=(n, ready, go, out)) for n in range(3)]
    window = procs.forked_window(workers, ready, go, out, [os.getpid()], warmup=0.05, seconds=0.3)
    assert sorted(n for n, _ in window.results) == [0, 1, 2]
    assert len({start for _, start in window.results}) == 1
    assert not any(p.is_alive() for p in workers)
    assert set(window.cpu_by_pid) == set(window.waiting_by_pid) == {os.getpid()}
    # Read at both ends of the window, per server process (this test process stands in for the
    # server; how much CPU it got on a shared machine is not the test's to say).
    assert all(v >= 0 for v in (*window.cpu_by_pid.values(), *window.waiting_by_pid.values()))
