"""Responses held until durable: an operation's own (`durable`) and the requests a shard
parked (JoinGroup, SyncGroup), answered by a later operation and released once that operation
is durable (Kafka: the deferred event queue completed up to the high watermark, and the
coordinator's pending join and sync futures).

Rules:
- An operation's response is released when the write holding its records (or every earlier
  write, when it had none) is acknowledged, through one callback on that write's future and
  one timer: no Task, no `wait_for`, no shield. The write's failure is the response's; past
  the write timeout it is COORDINATOR_NOT_AVAILABLE (offsets.commit.timeout.ms: Kafka maps
  REQUEST_TIMED_OUT so). The write itself goes on: its future is never cancelled here.
- An operation's `Result.parked` token parks its own request; another operation's
  `Result.completions` answer parked tokens with their responses.
- A completed request is released when the write holding the answering operation's records
  (or every earlier write, when it had none) is acknowledged; if that write fails, the
  request answers NOT_COORDINATOR instead.
- When the shard unloads or reloads, every parked request answers NOT_COORDINATOR, as Kafka
  answers them when a coordinator partition unloads.
"""
from __future__ import annotations

import asyncio
from collections.abc import Iterable
from functools import partial
from typing import Any

from kio.schema.errors import ErrorCode

from ..group.errors import ApiError


def release_when_durable(write: asyncio.Future | None, waiter: asyncio.Future, response: Any) -> None:
    """Answer a parked request once the operation that answered it is durable."""
    if write is None:
        if not waiter.done():
            waiter.set_result(response)
        return

    def done(f: asyncio.Future) -> None:
        if waiter.done():
            return
        if f.cancelled() or f.exception() is not None:
            waiter.set_exception(ApiError(ErrorCode.not_coordinator, "The coordinator write failed."))
            waiter.exception()
        else:
            waiter.set_result(response)

    write.add_done_callback(done)


def durable(write: asyncio.Future, response: Any, timeout_s: float, partition: int) -> asyncio.Future:
    """The future of `response`, completed once `write` is (module rules)."""
    loop = asyncio.get_running_loop()
    answer = loop.create_future()
    timer = loop.call_later(timeout_s, _timed_out, answer, partition)
    write.add_done_callback(partial(_written, answer, timer, response))
    return answer


def _written(answer: asyncio.Future, timer: asyncio.TimerHandle, response: Any, write: asyncio.Future) -> None:
    timer.cancel()
    if answer.done():
        return      # timed out, or the caller went away
    if write.cancelled():
        answer.cancel()
        return
    error = write.exception()
    if error is not None:
        answer.set_exception(error)
    else:
        answer.set_result(response)


def _timed_out(answer: asyncio.Future, partition: int) -> None:
    if not answer.done():
        answer.set_exception(ApiError(ErrorCode.coordinator_not_available,
                                      f"The write to state partition {partition} timed out."))


class ParkedRequests:
    __slots__ = ("waiters",)

    def __init__(self) -> None:
        self.waiters: dict[int, asyncio.Future] = {}

    def park(self, token: int) -> asyncio.Future:
        waiter = self.waiters[token] = asyncio.get_running_loop().create_future()
        return waiter

    def answer(self, completions: Iterable[tuple[int, Any]], write: asyncio.Future | None) -> None:
        """Release each completed token's response once `write` is durable."""
        waiters = self.waiters
        for token, response in completions:
            waiter = waiters.pop(token, None)
            if waiter is not None:
                release_when_durable(write, waiter, response)

    def fail_all(self) -> None:
        for waiter in self.waiters.values():
            if not waiter.done():
                waiter.set_exception(ApiError(ErrorCode.not_coordinator, "The coordinator is reloading."))
                waiter.exception()
        self.waiters.clear()
