"""wait_until and the event log's bounded waits."""
from __future__ import annotations

import threading
import time

import pytest

from support.consumer_events import ConsumerEventLog
from support.wait import WaitTimeout, wait_until


def test_wait_until_returns_the_truthy_value() -> None:
    calls = iter([0, None, "done"])
    assert wait_until(lambda: next(calls), timeout=1, interval=0.001) == "done"


def test_wait_until_times_out_with_message_and_last_value() -> None:
    started = time.monotonic()
    with pytest.raises(WaitTimeout, match=r"waiting for: the answer \(last value: 0\)"):
        wait_until(lambda: 0, timeout=0.1, interval=0.01, message=lambda: "the answer")
    assert 0.1 <= time.monotonic() - started < 1.0


def test_event_log_wait_wakes_on_new_event() -> None:
    log = ConsumerEventLog("m")
    timer = threading.Timer(0.05, lambda: log.emit("assigned", partitions=[["t", 3]]))
    timer.start()
    try:
        assert log.wait_for_assignment(lambda a: ("t", 3) in a, timeout=5) == frozenset({("t", 3)})
    finally:
        timer.cancel()


def test_event_log_wait_timeout_names_member_and_state() -> None:
    log = ConsumerEventLog("m-7")
    with pytest.raises(WaitTimeout, match="m-7: timed out .* a 'ready' event"):
        log.wait_for_event("ready", timeout=0.05)
