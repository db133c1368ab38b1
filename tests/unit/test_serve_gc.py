"""`kcoord serve` raises the collector's youngest threshold and keeps the older ratios
(coordinator/cli.py says why)."""
from __future__ import annotations

import gc

import pytest

from coordinator import cli


@pytest.fixture
def thresholds():
    before = gc.get_threshold()
    yield before
    gc.set_threshold(*before)


def test_tune_gc_raises_only_the_youngest_threshold(thresholds):
    gc.set_threshold(700, 10, 10)
    cli.tune_gc()
    assert gc.get_threshold() == (cli.GC_YOUNG_THRESHOLD, 10, 10)
    assert cli.GC_YOUNG_THRESHOLD > 700


def test_serve_tunes_the_collector_before_it_starts(thresholds, monkeypatch):
    import uvloop
    monkeypatch.setattr(uvloop, "install", lambda: None)   # main() would set the process's loop policy
    seen = []
    monkeypatch.setattr(cli.asyncio, "run", lambda coro: (coro.close(), seen.append(gc.get_threshold()[0]), 0)[2])
    monkeypatch.setattr(cli, "configure_logging", lambda *a: None)
    gc.set_threshold(700, 10, 10)
    cli.main(["serve"])
    assert seen == [cli.GC_YOUNG_THRESHOLD]
