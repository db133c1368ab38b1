"""Free loopback ports inside the range the harness may use.

Helpers and CI share this machine, so each test suite keeps to its own port range
(KCOORD_TEST_PORTS="LOW-HIGH", default 29200-29299). A port is "free" when a bind
succeeds; ports handed out by this process are not handed out again, so two
brokers started back to back never race for the same port.
"""
from __future__ import annotations

import os
import random
import socket
import threading

DEFAULT_RANGE = (29200, 29299)
_lock = threading.Lock()
_handed_out: set[int] = set()


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
    """A port in the range that nobody listens on and this process has not handed out."""
    low, high = port_range()
    candidates = list(range(low, high + 1))
    random.shuffle(candidates)
    with _lock:
        for port in candidates:
            if port not in _handed_out and is_free(port, host):
                _handed_out.add(port)
                return port
        # Every port was handed out once: recycle the ones that are free again.
        for port in candidates:
            if is_free(port, host):
                return port
    raise RuntimeError(f"no free loopback port in {low}-{high}")


def release(port: int) -> None:
    """Allow ``port`` to be handed out again (its listener has stopped)."""
    with _lock:
        _handed_out.discard(port)


def free_block(pool: range, count: int = 1, host: str = "127.0.0.1") -> int:
    """The first port P of ``count`` consecutive free ports inside ``pool`` that this process
    has not handed out (a kcoord gateway takes P for bootstrap and P+1... per broker). The
    whole block is reserved, so threads starting gateways side by side never share a port."""
    with _lock:
        for recycle in (False, True):
            for first in pool:
                span = range(first, first + count)
                if span[-1] in pool and (recycle or not _handed_out.intersection(span)) \
                        and all(is_free(p, host) for p in span):
                    _handed_out.update(span)
                    return first
            # Every block was handed out once: recycle the ones that are free again.
    raise RuntimeError(f"no {count} consecutive free ports in {pool.start}-{pool.stop - 1}")
