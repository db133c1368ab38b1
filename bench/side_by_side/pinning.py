"""CPU sets for a fair side-by-side: the server side (Kafka, and kcoord in front of it) on
one set of cores, the load generators on another, with sched_setaffinity (what `taskset`
does); and the machine's load average over a run (``LoadAverage``), since the cores are
shared with whatever else runs.

Processes are started while this process is pinned to the server's set, so they inherit it
from their first instruction: the JVM sizes its GC and compiler threads from the CPUs it
may use, as it would under `taskset -c 0 kafka-server-start.sh`. Every thread they have
once started is pinned again (``pin_process``, `taskset -a -p`), in case one escaped.
"""
from __future__ import annotations

import os
import statistics
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def parse_cpus(text: str) -> set[int]:
    """"0", "0,2", "0-3" -> a set of CPU numbers, each one this machine has."""
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    missing = cpus - os.sched_getaffinity(0)
    if missing or not cpus:
        raise SystemExit(f"CPU set {text!r}: {sorted(missing) or 'empty'} not available to this process "
                         f"({sorted(os.sched_getaffinity(0))})")
    return cpus


def pin_process(pid: int, cpus: set[int]) -> int:
    """Pin every thread of ``pid``; returns how many."""
    n = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            os.sched_setaffinity(int(task.name), cpus)
            n += 1
        except (ProcessLookupError, FileNotFoundError):    # a thread that just ended
            pass
    return n


def thread_cpus(pid: int) -> dict[str, int]:
    """Where ``pid``'s threads may run: each thread's Cpus_allowed_list as the kernel writes it
    (e.g. "0", "0-1", "0-1,3") -> how many threads have it; to check a pinning took
    (``taskset -a -p`` in one line)."""
    out: dict[str, int] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except (ProcessLookupError, FileNotFoundError):    # a thread that just ended
            continue
        key = next(line.split(":", 1)[1].strip() for line in status.splitlines()
                   if line.startswith("Cpus_allowed_list:"))
        out[key] = out.get(key, 0) + 1
    return out


def start_pinned(cpus: set[int], back_to: set[int], start: Callable[[], T], pid: Callable[[T], int]) -> tuple[T, int]:
    """``start()`` while this process is on ``cpus`` (what it starts inherits them), then every
    thread of ``pid(started)`` pinned there, and this process's threads, some of which may have
    started meanwhile on ``cpus`` (a log reader, a client's), put back on ``back_to``. Returns
    what ``start`` returned and how many threads were pinned."""
    with running_on(cpus):
        got = start()
    n = pin_process(pid(got), cpus)
    pin_process(os.getpid(), back_to)
    return got, n


@contextmanager
def running_on(cpus: set[int]) -> Iterator[None]:
    """This process (and what it starts meanwhile) on ``cpus``; the previous set afterwards."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


class LoadAverage:
    """The 1-minute load average sampled every ``interval`` seconds in a daemon thread,
    from start() to stop(): what shared the cores while the run measured."""

    def __init__(self, interval: float = 10.0) -> None:
        self.samples: list[float] = []
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="load-average", daemon=True)

    def _run(self) -> None:
        while True:
            self.samples.append(os.getloadavg()[0])
            if self._stop.wait(self._interval):
                return

    def start(self) -> LoadAverage:
        self._thread.start()
        return self

    def stop(self) -> dict[str, float]:
        """min, median and max of the samples."""
        self._stop.set()
        self._thread.join()
        return {"min": min(self.samples), "median": statistics.median(self.samples), "max": max(self.samples),
                "samples": len(self.samples)}

    @staticmethod
    def text(summary: dict[str, float]) -> str:
        return (f"1-min load average during the run {summary['min']:.1f} to {summary['max']:.1f}, median "
                f"{summary['median']:.1f} ({summary['samples']:.0f} samples)")
