"""The memory a call allocates, for the tests that bound what a decoder takes for a hostile
count. tracemalloc counts every thread's allocations, and an xdist worker has others
(execnet's reader, threads an earlier file's brokers left): a CI run once saw a 256 KiB
peak around ProduceResponse's reader that no run of the reader alone shows."""
from __future__ import annotations

import sys
import tracemalloc
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def _traced(call: Callable[[], T], reset: Callable[[], object] | None) -> tuple[T, int]:
    if reset is not None:
        reset()
    # A long switch interval keeps the other threads off the GIL for the call's microseconds.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(10.0)
    # Already tracing (PYTHONTRACEMALLOC, or a caller's own): the peak is taken from here, over
    # what was traced before, and tracing is left on for its owner.
    owned = not tracemalloc.is_tracing()
    if owned:
        tracemalloc.start()
    else:
        tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    try:
        result = call()
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        if owned:
            tracemalloc.stop()
        sys.setswitchinterval(interval)
    return result, peak


def allocation_peak(call: Callable[[], T], bound: int,
                    reset: Callable[[], object] | None = None) -> tuple[T, int]:
    """``call()``'s result and the peak memory traced while it ran. A deterministic call
    allocates the same on every run and another thread only adds, so when the first peak is
    at or past ``bound`` the least of three is the call's own. ``reset``, called before each
    run (untraced), empties what would make a rerun cheaper than the first (a decoder's
    caches), so the least of three cannot hide an over-allocation. ``call`` should not raise."""
    result, peak = _traced(call, reset)
    if peak >= bound:
        peak = min(peak, *(_traced(call, reset)[1] for _ in range(2)))
    return result, peak
