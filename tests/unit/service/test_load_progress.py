"""The shard load's progress for a person reading the start-up (service/lifecycle.py,
LoadProgress): a short load says nothing until its summary line; a long one off a terminal
gets an INFO line at most every LONG_LOAD_S; each step stays at DEBUG."""
from __future__ import annotations

import io
import logging
import time

from coordinator.service import lifecycle
from coordinator.service.lifecycle import LoadProgress


def _info(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]


def test_a_short_load_logs_no_step_at_info(caplog):
    caplog.set_level(logging.DEBUG, logger="kcoord.service")
    progress = LoadProgress("__kcoord_offsets", 50, time.monotonic())
    for done in range(1, 51):
        progress(done * 10, done)
    progress.close()
    assert _info(caplog) == []
    assert sum(r.levelno == logging.DEBUG for r in caplog.records) == 50
    assert (progress.records, progress.done) == (500, 50)


def test_a_long_load_off_a_terminal_logs_a_line_now_and_then(caplog, monkeypatch):
    monkeypatch.setattr(lifecycle.sys, "stderr", io.StringIO())      # not a terminal, even under -s
    caplog.set_level(logging.INFO, logger="kcoord.service")
    progress = LoadProgress("__kcoord_offsets", 50, time.monotonic() - 3 * LoadProgress.LONG_LOAD_S)
    for done in range(1, 51):          # all within one LONG_LOAD_S: one line, not 50
        progress(done, done)
    progress.close()
    lines = _info(caplog)
    assert len(lines) == 1 and "1/50 partitions loaded" in lines[0], lines
