"""Operations' answers released when the write they wait for is durable, grouped by write.

Rules (those of parked.py's `durable`, paid once per write rather than once per operation):
- An answer is released when the write holding its operation's records (or, with none,
  every earlier write) is acknowledged: the write's failure is the answer's, a cancelled
  write cancels it; past the write timeout it is COORDINATOR_NOT_AVAILABLE
  (offsets.commit.timeout.ms: Kafka maps REQUEST_TIMED_OUT so). The write goes on: its
  future is never cancelled here.
- The operations that wait for one write share one callback on it and one timer, however
  long the batch took to fill (a loop turn, or the turns while an earlier write was in
  flight): each answer keeps its own deadline, the timer fails the answers whose deadline
  has passed and is set again for the earliest left, so no answer times out before its own
  write timeout, and an operation costs no timer of its own.
- Each answer is an `Answer` (answer.py), not an asyncio future: the write's one callback
  completes them all in its own turn, and each hands its outcome on at once.
"""
from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from ..group.errors import ApiError
from .answer import Answer

# The loop runs a timer up to its clock's resolution early (BaseEventLoop._run_once): an
# answer this close to its deadline is due.
_EARLY_S = 0.001


class Releases:
    __slots__ = ("_partition", "_write", "_waiting")

    def __init__(self, partition: int) -> None:
        self._partition = partition
        self._write: asyncio.Future | None = None
        self._waiting: _Waiting | None = None

    def when_durable(self, write: asyncio.Future, response: Any, timeout_s: float) -> Answer:
        """The answer ``response`` will be, completed once ``write`` is, or failed after
        ``timeout_s`` (module rules)."""
        loop = write.get_loop()
        deadline = loop.time() + timeout_s
        waiting = self._waiting
        if write is not self._write or waiting is None or write.done():
            self._write = write
            waiting = self._waiting = _Waiting(self._partition, loop, deadline)
            write.add_done_callback(waiting.written)
        elif deadline < waiting.due:
            waiting.arm(deadline)
        answer = Answer()
        waiting.answers.append((answer, response, deadline))
        return answer


class _Waiting:
    """The answers waiting for one write, each with its deadline, and the write's one timer."""

    __slots__ = ("answers", "_partition", "_loop", "_timer", "due")

    def __init__(self, partition: int, loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        self.answers: list[tuple[Answer, Any, float]] = []
        self._partition = partition
        self._loop = loop
        self._timer: asyncio.TimerHandle | None = None
        self.due = deadline
        self.arm(deadline)

    def arm(self, due: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.due = due
        self._timer = self._loop.call_at(due, self._timed_out)

    def written(self, write: asyncio.Future) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        answers, self.answers = self.answers, []
        if write.cancelled():
            for answer, _, _ in answers:
                answer.cancel()
            return
        error = write.exception()
        for answer, response, _ in answers:
            if answer.done():
                continue      # timed out, or the caller went away
            if error is not None:
                answer.set_exception(error)
            else:
                answer.set_result(response)

    def _timed_out(self) -> None:
        self._timer = None
        now = self._loop.time()
        left = []
        for entry in self.answers:
            answer, _, deadline = entry
            if answer.done():
                continue
            if deadline <= now + _EARLY_S:
                answer.set_exception(ApiError(ErrorCode.coordinator_not_available,
                                              f"The write to state partition {self._partition} timed out."))
            else:
                left.append(entry)
        self.answers = left
        if left:
            self.arm(min(deadline for _, _, deadline in left))
