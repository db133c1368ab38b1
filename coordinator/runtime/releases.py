"""Operations' answers released when the write they wait for is durable, grouped by write.

Rules (those of parked.py's `durable`, paid once per write rather than once per operation):
- An answer is released when the write holding its operation's records (or, with none,
  every earlier write) is acknowledged: the write's failure is the answer's, a cancelled
  write cancels it; past the write timeout it is COORDINATOR_NOT_AVAILABLE
  (offsets.commit.timeout.ms: Kafka maps REQUEST_TIMED_OUT so). The write goes on: its
  future is never cancelled here.
- The operations that wait for one write share one callback on it, however long the batch
  took to fill (a loop turn, or the turns while an earlier write was in flight), and every
  write of the shard shares one timer: each answer keeps its own deadline, the timer fails
  the answers whose deadline has passed and is set again for the earliest left, so no
  answer times out before its own write timeout, and neither an operation nor a write
  costs a timer of its own. A write that completes leaves the timer as it is (it fires,
  finds nothing due, and is set again only while answers wait): end to end a write often
  carries one commit, and setting and cancelling a timer per write cost more than that.
- Each answer is an `Answer` (answer.py), not an asyncio future: the write's one callback
  completes them all in its own turn, and each hands its outcome on at once.
- A shard's batch's future is a `WriteDone`: its writer completes it with `land` when the
  batch landed where predicted, which completes the answers waiting for it in that same
  call, not through a done-callback on a later loop turn (a batch often holds one commit
  end to end). Any other completion (a failure, a drop) reaches them on a later
  turn, as a done-callback would: the runtime completes those inside loops over its batches.
- A `WriteDone` is never cancelled from outside: its batch's outcome is every answer's in
  it, and the writer's alone to decide. Its `cancel` refuses, and a task awaiting it directly
  awaits it shielded, so that task's cancellation (a client gone, an `asyncio.timeout` run
  out) cancels the task alone, at once, and never the answers that share the batch. Await
  it directly, through `within` in a Task, or with `asyncio.wait`; never through `wait_for`
  or `gather`, which end by cancelling what they wait for and, refused, wait for the batch
  to land instead (CPython 3.11's `wait_for` returns its result after the timeout).
"""
from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import Any

from kio.schema.errors import ErrorCode

from ..group.errors import ApiError
from .answer import _PENDING, Answer

# The loop runs a timer up to its clock's resolution early (BaseEventLoop._run_once): an
# answer this close to its deadline is due.
_EARLY_S = 0.001


class Releases:
    __slots__ = ("_partition", "_write", "_waiting", "_open", "_timer", "_due")

    def __init__(self, partition: int) -> None:
        self._partition = partition
        self._write: asyncio.Future | None = None
        self._waiting: _Waiting | None = None
        self._open: dict[_Waiting, None] = {}     # the writes with answers waiting, oldest first
        self._timer: asyncio.TimerHandle | None = None
        self._due = 0.0

    def when_durable(self, write: asyncio.Future, response: Any, timeout_s: float) -> Answer:
        """The answer ``response`` will be, completed once ``write`` is, or failed after
        ``timeout_s`` (module rules)."""
        loop = write.get_loop()
        deadline = loop.time() + timeout_s
        waiting = self._waiting
        if write is not self._write or waiting is None or write.done():
            self._write = write
            # Built without _Waiting.__init__ (both its slots set here), as the answer below:
            # end to end a write often carries one commit, and this is one per write.
            waiting = self._waiting = _new_object(_Waiting)
            waiting.answers = []
            waiting._open = self._open
            self._open[waiting] = None
            if type(write) is WriteDone and write.waiting is None and not write.done():
                write.waiting = waiting
            else:
                write.add_done_callback(waiting.written)
        if self._timer is None or deadline < self._due:
            self._arm(loop, deadline)
        # Built without Answer.__init__, every slot set here instead: a type's __init__ is
        # reached through C and enters a new interpreter loop, once per durable operation
        # (docs/measurements/cpu-per-commit.md). tests/unit/runtime/test_releases.py fails
        # if a slot of Answer's is left unset here.
        answer = _new_object(Answer)
        answer.release = None
        answer.args = None
        answer._state = _PENDING
        answer._result = None
        answer._error = None
        answer._callback = None
        answer._more = None
        waiting.answers.append((answer, response, deadline))
        return answer

    def _arm(self, loop: asyncio.AbstractEventLoop, due: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._due = due
        self._timer = loop.call_at(due, self._timed_out, loop)

    def _timed_out(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        now = loop.time()
        earliest = None
        for waiting in list(self._open):     # a failed answer's callback may start another write
            left = []
            for entry in waiting.answers:
                answer, _, deadline = entry
                if answer.done():
                    continue
                if deadline <= now + _EARLY_S:
                    answer.set_exception(ApiError(ErrorCode.coordinator_not_available,
                                                  f"The write to state partition {self._partition} timed out."))
                else:
                    left.append(entry)
                    if earliest is None or deadline < earliest:
                        earliest = deadline
            waiting.answers = left
        # An answer's callback above may have started a write and armed the timer already;
        # keep whichever is earlier, so no answer times out after its own deadline.
        if earliest is not None and (self._timer is None or earliest < self._due):
            self._arm(loop, earliest)


class _Waiting:
    """The answers waiting for one write, each with its deadline."""

    __slots__ = ("answers", "_open")

    def __init__(self, open_writes: dict[_Waiting, None]) -> None:
        self.answers: list[tuple[Answer, Any, float]] = []
        self._open = open_writes

    def written(self, write: asyncio.Future) -> None:
        self._open.pop(self, None)
        answers, self.answers = self.answers, []
        if write.cancelled():
            for answer, _, _ in answers:
                answer.cancel()
            return
        error = write.exception()
        for answer, response, _ in answers:
            if answer._state:
                continue      # timed out, or the caller went away (answer.done(), without the call)
            if error is not None:
                answer.set_exception(error)
            else:
                answer.set_result(response)


class WriteDone(asyncio.Future):
    """A shard's batch's future (writer.py's `Batch.done`), telling the answers waiting for
    it (`waiting`, set by `Releases.when_durable`) without a done-callback (module rules)."""

    # A class default, not a slot set in an __init__ of its own: asyncio.Future's C __init__
    # alone makes one as cheaply as loop.create_future(), a Python __init__ doubles it.
    waiting: _Waiting | None = None

    def land(self, base: int) -> None:
        """The batch landed at `base`: completed, and its answers released in this call.
        Already done (dropped with its shard): nothing more, so the writer goes on."""
        if self.done():
            return
        asyncio.Future.set_result(self, base)
        waiting = self.waiting
        if waiting is not None:
            # `_Waiting.written` of a batch that landed, written out here: neither cancelled
            # nor failed, so neither is asked, and no call per batch (often one commit).
            self.waiting = None
            waiting._open.pop(waiting, None)
            answers, waiting.answers = waiting.answers, []
            for answer, response, _ in answers:
                if not answer._state:     # else timed out, or the caller went away
                    answer.set_result(response)

    def set_result(self, result: Any) -> None:
        super().set_result(result)
        self._later()

    def set_exception(self, exception: Any) -> None:
        super().set_exception(exception)
        self._later()

    def cancel(self, msg: Any = None) -> bool:
        """Refused (module rules): the batch's outcome is its writer's (landed, failed or
        dropped), shared by every answer in it."""
        return False

    def __await__(self) -> Generator[Any, None, Any]:
        # Shielded while pending: a task awaiting this future is cancelled through what it
        # awaits (Task.cancel cancels its `_fut_waiter`), here shield's own outer future.
        if self.done():
            return asyncio.Future.__await__(self)
        return asyncio.shield(self).__await__()

    __iter__ = __await__

    def _later(self) -> None:
        waiting = self.waiting
        if waiting is not None:
            self.waiting = None
            self.get_loop().call_soon(waiting.written, self)


_new_object = object.__new__
