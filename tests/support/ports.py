"""Free loopback ports inside the range the harness may use.

Helpers and CI share this machine, so each test suite keeps to its own port range
(KCOORD_TEST_PORTS="LOW-HIGH", default 29200-29399). A port is "free" when a bind
succeeds. Ports this process never handed out go first, then the ones it handed out
longest ago (least recently used), so two brokers or gateways started back to back (or
side by side, from threads) never get the same port, even once a long run has handed out
every port of the range.

A port whose only user is a closed connection in TIME_WAIT (a server that closed first,
as a gateway does on hostile input) refuses a plain bind for a minute, but not the bind
of a listener that sets SO_REUSEADDR, and every listener the suite starts does (asyncio's
create_server and kcoord's listeners, the JDK's server sockets, tokio's in Tansu). So a
port is looked for twice: free to a plain bind first, then free to such a listener. A
full run once ran a worker's 100 ports out this way (`no 4 consecutive free ports`).
"""
from __future__ import annotations

import os
import random
import socket
import threading
import time

DEFAULT_RANGE = (29200, 29399)   # 200 ports: a run on every upstream keeps ~15 for its brokers
_lock = threading.Lock()
_handed_out: dict[int, float] = {}      # port -> when it was last handed out (monotonic)
_NEVER = float("-inf")


def port_range() -> tuple[int, int]:
    spec = os.environ.get("KCOORD_TEST_PORTS")
    if not spec:
        return DEFAULT_RANGE
    low, _, high = spec.partition("-")
    return int(low), int(high)


def narrow_for_xdist_worker() -> None:
    """Under pytest-xdist, give worker ``gwN`` of K the N-th of K equal slices of the range,
    and put it in KCOORD_TEST_PORTS so the processes the worker starts (brokers, kcoord,
    rehearsal drivers) inherit it: two workers never race for the same port."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if not worker.startswith("gw") or count <= 1:
        return
    index = int(worker[2:])
    low, high = port_range()
    size = (high - low + 1) // count
    if size < 30:   # one worker on every upstream needs ~15 broker ports plus its gateways
        raise RuntimeError(f"KCOORD_TEST_PORTS={low}-{high} is too small for {count} xdist workers "
                           f"({size} ports each; give each at least 30)")
    start = low + index * size
    os.environ["KCOORD_TEST_PORTS"] = f"{start}-{start + size - 1}"


def pool() -> range:
    """Every port of the range (this worker's own under xdist): what a suite's brokers and
    gateways share. Suites never keep a fixed pool of their own: every xdist worker would
    share it, and two workers picking "the first free block" both pick it before either
    binds it."""
    low, high = port_range()
    return range(low, high + 1)


def is_free(port: int, host: str = "127.0.0.1", reuse: bool = False) -> bool:
    """A plain bind succeeds; with ``reuse``, a bind with SO_REUSEADDR (as a listener does),
    which also succeeds on a port held only by connections in TIME_WAIT, never on one that
    something listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        if reuse:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port in the range that nobody listens on: one this process never handed out if
    there is one, else the one it handed out longest ago."""
    low, high = port_range()
    candidates = list(range(low, high + 1))
    random.shuffle(candidates)
    with _lock:
        ordered = sorted(candidates, key=lambda p: _handed_out.get(p, _NEVER))
        for reuse in (False, True):
            for port in ordered:
                if is_free(port, host, reuse):
                    _handed_out[port] = time.monotonic()
                    return port
    raise RuntimeError(f"no free loopback port in {low}-{high}")


def release(port: int) -> None:
    """Allow ``port`` to be handed out again first (its listener has stopped)."""
    with _lock:
        _handed_out.pop(port, None)


def free_block(pool: range, count: int = 1, host: str = "127.0.0.1") -> int:
    """The first port P of ``count`` consecutive free ports inside ``pool`` (a kcoord gateway
    takes P for bootstrap and P+1... per broker): a block this process never handed out if
    there is one, else the one handed out longest ago. The whole block is marked, so threads
    starting gateways side by side never get the same block: the next caller gets an older
    one (recycling used to ignore the marks, and two gateways got the same block)."""
    with _lock:
        starts = [first for first in pool if first + count - 1 in pool]
        starts.sort(key=lambda first: max(_handed_out.get(p, _NEVER) for p in range(first, first + count)))
        for reuse in (False, True):
            for first in starts:
                span = range(first, first + count)
                if all(is_free(p, host, reuse) for p in span):
                    now = time.monotonic()
                    for p in span:
                        _handed_out[p] = now
                    return first
    raise RuntimeError(f"no {count} consecutive free ports in {pool.start}-{pool.stop - 1}")
