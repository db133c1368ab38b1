"""An operation's answer that waits for its write, completed by a plain callback instead of
through the event loop.

An asyncio.Future runs each done-callback in a later loop turn (a Handle, a trip through the
ready queue, a context run), and a chain of them (the runtime's answer, the service's
released answer, the connection's response slot) pays that once per link and per operation.
A write's one done-callback (releases.py) completes every `Answer` waiting on it, and each
answer hands its outcome straight to whoever waits for it: the connection's ordered response
queue (gateway/group_calls.py) fills its slot in the same turn.

Rules:
- Completed once: with a result, an exception, or cancelled (when its write was); a later
  completion is ignored (``done()`` tells).
- ``release``, when set (the service's: the request metrics, the membership lease, the
  audit), turns the operation's outcome into what leaves, once, at completion and before
  any callback: ``release(args, result, error)``, with the answer's ``args`` (the request's
  own values, set with the release), returns the result, or raises the answer's exception.
  A cancelled answer is not released. The request's values ride on the answer, not in a
  `functools.partial` made per request: a partial is a C object built and called through
  C, with its argument array allocated per call past five arguments
  (docs/measurements/cpu-per-commit.md).
- Its done-callbacks run when it completes, in the order they were added, each called with
  the answer; one added after that runs at once. A callback that raises is reported to the
  loop's exception handler, as asyncio reports a failed callback, and the others still run.
- It offers the part of asyncio.Future its readers use (done, cancelled, result, exception,
  add_done_callback, cancel) and is awaitable (a future is bridged only for an awaiting
  coroutine); it is not an asyncio future (``asyncio.isfuture`` is False).
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Generator
from functools import partial
from typing import Any

log = logging.getLogger("kcoord.runtime")

_PENDING, _DONE, _CANCELLED = 0, 1, 2

Release = Callable[[Any, Any, "BaseException | None"], Any]


class Answer:
    __slots__ = ("release", "args", "_state", "_result", "_error", "_callback", "_more")

    def __init__(self) -> None:
        self.release: Release | None = None
        self.args: Any = None
        self._state = _PENDING
        self._result: Any = None
        self._error: BaseException | None = None
        # The first callback (the one reader of most answers) and the others, if any.
        self._callback: Callable[[Answer], Any] | None = None
        self._more: list[Callable[[Answer], Any]] | None = None

    # ------------------------------------------------------------ completing
    def set_exception(self, error: BaseException) -> None:
        self._complete(None, error)

    def cancel(self) -> bool:
        if self._state:
            return False
        self._state = _CANCELLED
        self._run_callbacks()
        return True

    def _complete(self, result: Any, error: BaseException | None = None) -> None:
        if self._state:
            return
        release = self.release
        if release is not None:
            try:
                result, error = release(self.args, result, error), None
            except Exception as e:  # noqa: BLE001 - the answer's exception, read by whoever waits
                result, error = None, e
        self._state, self._result, self._error = _DONE, result, error
        callback = self._callback
        if callback is not None and self._more is None:
            # The usual case, written out: one reader, called here.
            self._callback = None
            try:
                callback(self)
            except Exception as e:  # noqa: BLE001 - reported as the loop reports a callback's error
                _report(callback, e)
        elif callback is not None:
            self._run_callbacks()

    # `_complete` itself, not a method calling it: a write's callback completes each of its
    # answers with this (releases.py), one Python call per operation fewer.
    set_result = _complete

    def add_done_callback(self, callback: Callable[[Answer], Any]) -> None:
        if self._state:
            _call(callback, self)
        elif self._callback is None and self._more is None:
            self._callback = callback
        elif self._more is None:
            self._more = [callback]
        else:
            self._more.append(callback)

    def _run_callbacks(self) -> None:
        first, more = self._callback, self._more
        self._callback = self._more = None
        if first is not None:
            _call(first, self)
        for callback in more or ():
            _call(callback, self)

    # --------------------------------------------------------------- reading
    def done(self) -> bool:
        return self._state != _PENDING

    def cancelled(self) -> bool:
        return self._state == _CANCELLED

    def result(self) -> Any:
        if self._state == _DONE and self._error is None:
            return self._result
        error = self.exception()
        if error is not None:
            raise error
        return self._result

    def exception(self) -> BaseException | None:
        if self._state == _DONE:
            return self._error
        if self._state == _CANCELLED:
            raise asyncio.CancelledError()
        raise asyncio.InvalidStateError("the answer is not ready")

    def __await__(self) -> Generator[Any, None, Any]:
        if not self._state:
            bridged = asyncio.get_running_loop().create_future()
            self.add_done_callback(partial(_settle, bridged))
            yield from bridged.__await__()
        return self.result()


def _call(callback: Callable[[Answer], Any], answer: Answer) -> None:
    try:
        callback(answer)
    except Exception as e:  # noqa: BLE001 - reported as the loop reports a callback's error
        _report(callback, e)


def _report(callback: Callable[[Answer], Any], error: Exception) -> None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        log.error("an answer's callback %r failed", callback, exc_info=error)
        return
    loop.call_exception_handler({"message": f"an answer's callback {callback!r} failed", "exception": error})


def _settle(future: asyncio.Future, answer: Answer) -> None:
    """Hand ``answer``'s outcome to a coroutine awaiting it (unless it stopped waiting)."""
    if future.done():
        return
    if answer.cancelled():
        future.cancel()
    elif answer._error is not None:
        future.set_exception(answer._error)
    else:
        future.set_result(answer._result)
