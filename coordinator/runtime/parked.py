"""Responses held until durable: the requests a shard parked (JoinGroup, SyncGroup),
answered by a later operation and released once that operation
is durable (Kafka: the deferred event queue completed up to the high watermark, and the
coordinator's pending join and sync futures).

An operation's own response is released by releases.py (one callback and one timer per
write, shared by every answer waiting on it).

Rules:
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
