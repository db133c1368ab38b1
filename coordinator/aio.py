"""Waiting with a bound without losing a cancellation.

Rules:
- `within(aw, timeout)` awaits `aw` for at most `timeout` seconds and raises TimeoutError
  after, as `asyncio.wait_for` does, but keeps the caller's cancellation. On Python 3.11
  `wait_for` returns the result and drops a cancel that lands in the loop turn where `aw`
  completes (CPython gh-86296; 3.12 rebuilt `wait_for` on `asyncio.timeout`), so a loop
  stopped by `cancel()` ran on: the cluster membership's side heartbeats did
  (docs/measurements/ci.md, "The flaky paused-serve tests").
- Inside a Task it bounds the wait with `asyncio.timeout`. Outside one, a coroutine stepped
  by the gateway's eager start (coordinator/gateway/eager.py) before any Task exists,
  `asyncio.timeout` refuses to run; there `wait_for` bounds it, and there is no Task whose
  cancel could be dropped.
- Shipped code bounds its waits through here: ruff bans `asyncio.wait_for` elsewhere
  (pyproject.toml, TID251).
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def within(aw: Awaitable[T], timeout: float | None) -> T:
    """`aw`'s result, or TimeoutError after `timeout` seconds (None: no bound)."""
    if asyncio.current_task() is None:
        return await asyncio.wait_for(aw, timeout)  # noqa: TID251 (no Task: no cancel to drop; timeout() refuses)
    async with asyncio.timeout(timeout):
        return await aw
