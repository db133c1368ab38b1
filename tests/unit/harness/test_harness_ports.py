"""The port allocator of the harness (tests/support/ports.py): once a long run has handed out
every port of its range, the least recently handed-out free block comes next, so gateways
started side by side never get the same block (recycling once ignored what it had just
handed out, and two gateways got the same block: `Address already in use` in a full run)."""
from __future__ import annotations

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
