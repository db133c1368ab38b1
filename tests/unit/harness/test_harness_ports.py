"""The port allocator of the harness (tests/support/ports.py): once a long run has handed out
every port of its range, free ports are recycled only after RECYCLE_AFTER_S, so gateways
started side by side never get the same block (the cause of an `Address already in use`
seen in a full run on every upstream)."""
from __future__ import annotations

import pytest

from support import ports


@pytest.fixture
def tiny_range(monkeypatch):
    monkeypatch.setenv("KCOORD_TEST_PORTS", "29480-29485")
    monkeypatch.setattr(ports, "_handed_out", {})
    clock = [1000.0]
    monkeypatch.setattr(ports.time, "monotonic", lambda: clock[0])
    return clock


def test_a_block_is_not_handed_out_twice_before_it_may_be_recycled(tiny_range):
    pool = range(29480, 29486)
    blocks = [ports.free_block(pool, 2) for _ in range(3)]
    assert sorted(blocks) == [29480, 29482, 29484]
    # Every port handed out, none bound yet (a gateway still starting): no block to give.
    with pytest.raises(RuntimeError, match="no 2 consecutive free ports"):
        ports.free_block(pool, 2)
    tiny_range[0] += ports.RECYCLE_AFTER_S + 1
    assert ports.free_block(pool, 2) == 29480          # recycled once the interval has passed


def test_free_port_recycles_after_the_interval_and_release_frees_at_once(tiny_range):
    got = {ports.free_port() for _ in range(6)}
    assert got == set(range(29480, 29486))
    with pytest.raises(RuntimeError):
        ports.free_port()
    ports.release(29483)
    assert ports.free_port() == 29483
    tiny_range[0] += ports.RECYCLE_AFTER_S + 1
    assert ports.free_port() in got
