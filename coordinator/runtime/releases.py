"""Operations' answers released when the write they wait for is durable, grouped by write.

Rules (those of parked.py's `durable`, paid once per write rather than once per operation):
- An answer is released when the write holding its operation's records (or, with none,
  every earlier write) is acknowledged: the write's failure is the answer's, a cancelled
  write cancels it; past the write timeout it is COORDINATOR_NOT_AVAILABLE
  (offsets.commit.timeout.ms: Kafka maps REQUEST_TIMED_OUT so). The write goes on: its
  future is never cancelled here.
- The operations that wait for one write within `SLACK_S` of each other share one callback
  on the write and one timer; a later one starts a group of its own, so no answer times out
  more than `SLACK_S` before its own write timeout (a batch fills over a loop turn, or over
  the few turns while an earlier write is in flight).
- Each answer is an `Answer` (answer.py), not an asyncio future: the write's one callback
  completes them all in its own turn, and each hands its outcome on at once.
"""
from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

from kio.schema.errors import ErrorCode

from ..group.errors import ApiError
from .answer import Answer

SLACK_S = 0.001


class Releases:
    __slots__ = ("_partition", "_write", "_started", "_waiting")

    def __init__(self, partition: int) -> None:
        self._partition = partition
        self._write: asyncio.Future | None = None
        self._started = 0.0
        self._waiting: list[tuple[Answer, Any]] = []

    def when_durable(self, write: asyncio.Future, response: Any, timeout_s: float) -> Answer:
        """The answer ``response`` will be, completed once ``write`` is, or failed after
        ``timeout_s`` (module rules)."""
        loop = write.get_loop()
        now = loop.time()
        if write is not self._write or now - self._started > SLACK_S or write.done():
            self._write, self._started = write, now
            waiting = self._waiting = []
            timer = loop.call_at(now + timeout_s, _timed_out, waiting, self._partition)
            write.add_done_callback(partial(_written, waiting, timer))
        answer = Answer()
        self._waiting.append((answer, response))
        return answer


def _written(waiting: list[tuple[Answer, Any]], timer: asyncio.TimerHandle, write: asyncio.Future) -> None:
    timer.cancel()
    if write.cancelled():
        for answer, _ in waiting:
            answer.cancel()
        return
    error = write.exception()
    for answer, response in waiting:
        if answer.done():
            continue      # timed out, or the caller went away
        if error is not None:
            answer.set_exception(error)
        else:
            answer.set_result(response)


def _timed_out(waiting: list[tuple[Answer, Any]], partition: int) -> None:
    for answer, _ in waiting:
        if not answer.done():
            answer.set_exception(ApiError(ErrorCode.coordinator_not_available,
                                          f"The write to state partition {partition} timed out."))
