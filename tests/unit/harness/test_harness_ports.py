"""The port allocator of the harness (tests/support/ports.py): once a long run has handed out
every port of its range, the least recently handed-out free block comes next, so gateways
started side by side never get the same block (recycling once ignored what it had just
handed out, and two gateways got the same block: `Address already in use` in a full run)."""
from __future__ import annotations

import socket

import pytest

from support import ports


@pytest.fixture
def tiny_range(monkeypatch):
    monkeypatch.setenv("KCOORD_TEST_PORTS", "29480-29485")
    monkeypatch.setattr(ports, "_handed_out", {})
    clock = [1000.0]

    def tick() -> float:
        clock[0] += 1
        return clock[0]
    monkeypatch.setattr(ports.time, "monotonic", tick)


def test_blocks_are_recycled_least_recently_used_first(tiny_range):
    pool = range(29480, 29486)
    first = [ports.free_block(pool, 2) for _ in range(3)]
    assert first == [29480, 29482, 29484]
    # Every port handed out and none bound yet (gateways still starting): the oldest comes
    # back first, and two calls in a row never get the same block.
    again = [ports.free_block(pool, 2) for _ in range(3)]
    assert again == [29480, 29482, 29484]
    assert len(set(again)) == 3


def test_free_port_prefers_never_used_then_oldest_and_release_puts_a_port_first(tiny_range):
    got = [ports.free_port() for _ in range(6)]
    assert sorted(got) == list(range(29480, 29486))
    assert ports.free_port() == got[0]          # the oldest
    ports.release(got[3])
    assert ports.free_port() == got[3]          # released: as if never handed out


def test_the_pool_is_the_workers_own_range(monkeypatch):
    monkeypatch.setenv("KCOORD_TEST_PORTS", "29300-29399")      # worker gw1 of 2
    assert ports.pool() == range(29300, 29400)


def _time_wait(port: int) -> None:
    """Leave ``port`` held only by a closed connection in TIME_WAIT: the server closes first."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen()
        client = socket.create_connection(("127.0.0.1", port))
        served, _ = listener.accept()
        served.close()
        client.recv(1)      # the server's FIN has arrived: the server side is in FIN_WAIT_2
        client.close()      # ... and now in TIME_WAIT


def test_a_port_in_time_wait_is_handed_out_when_nothing_else_is_free(monkeypatch):
    """A plain bind is refused on a TIME_WAIT port; a listener's (SO_REUSEADDR) is not, so such
    a port still counts, after every port free to a plain bind. (Ports apart from the other
    tests': the TIME_WAIT outlives this test by a minute.)"""
    monkeypatch.setenv("KCOORD_TEST_PORTS", "29490-29490")
    monkeypatch.setattr(ports, "_handed_out", {})
    _time_wait(29490)
    assert not ports.is_free(29490)
    assert ports.is_free(29490, reuse=True)
    assert ports.free_block(range(29490, 29494), 2) == 29491     # free to a plain bind: first
    assert ports.free_block(range(29490, 29492), 2) == 29490     # then the TIME_WAIT port's block
    assert ports.free_port() == 29490
    with socket.socket() as listening:             # a listener is never "free", either way
        listening.bind(("127.0.0.1", 29493))
        listening.listen()
        assert not ports.is_free(29493, reuse=True)
