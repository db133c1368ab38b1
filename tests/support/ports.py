"""Free loopback ports inside the range the harness may use.

Helpers and CI share this machine, so each test suite keeps to its own port range
(KCOORD_TEST_PORTS="LOW-HIGH", default 29200-29399). A port is "free" when a bind
succeeds; a port this process handed out is not handed out again for RECYCLE_AFTER_S,
so two brokers started back to back (or side by side, from threads) never race for
the same port, even once a long run has handed out every port of the range and
recycles the free ones.
"""
from __future__ import annotations

import os
import random
import socket
import threading
import time

DEFAULT_RANGE = (29200, 29399)   # 200 ports: a run on every upstream keeps ~15 for its brokers
_lock = threading.Lock()
_handed_out: dict[int, float] = {}      # port -> when it was handed out (monotonic)
# A port handed out this long ago and free now may be handed out again: whoever got it has
# bound it by then (a listener starts within seconds) or released it.
RECYCLE_AFTER_S = 120.0


def _available(port: int, now: float, host: str) -> bool:
    handed = _handed_out.get(port)
    return (handed is None or now - handed > RECYCLE_AFTER_S) and is_free(port, host)


def port_range() -> tuple[int, int]:
    spec = os.environ.get("KCOORD_TEST_PORTS")
    if not spec:
        return DEFAULT_RANGE
    low, _, high = spec.partition("-")
    return int(low), int(high)


def is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port in the range that nobody listens on and this process has not handed out
    (in the last RECYCLE_AFTER_S)."""
    low, high = port_range()
    candidates = list(range(low, high + 1))
    random.shuffle(candidates)
    with _lock:
        now = time.monotonic()
        for port in candidates:
            if _available(port, now, host):
                _handed_out[port] = now
                return port
    raise RuntimeError(f"no free loopback port in {low}-{high}")


def release(port: int) -> None:
    """Allow ``port`` to be handed out again (its listener has stopped)."""
    with _lock:
        _handed_out.pop(port, None)


def free_block(pool: range, count: int = 1, host: str = "127.0.0.1") -> int:
    """The first port P of ``count`` consecutive free ports inside ``pool`` that this process
    has not handed out (in the last RECYCLE_AFTER_S; a kcoord gateway takes P for bootstrap
    and P+1... per broker). The whole block is reserved, so threads starting gateways side
    by side never share a port."""
    with _lock:
        now = time.monotonic()
        for first in pool:
            span = range(first, first + count)
            if span[-1] in pool and all(_available(p, now, host) for p in span):
                for p in span:
                    _handed_out[p] = now
                return first
    raise RuntimeError(f"no {count} consecutive free ports in {pool.start}-{pool.stop - 1}")
