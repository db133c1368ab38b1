"""coordinator.aio.within: a bounded wait that keeps a cancellation landing in the turn the
awaited operation completes (3.11's wait_for drops it), and that also runs outside any Task,
as the gateway's eager start steps coroutines (asyncio.timeout refuses to run there)."""
from __future__ import annotations

import asyncio

import pytest

from coordinator.aio import within


async def test_a_cancel_in_the_turn_the_result_lands_is_kept():
    for _ in range(100):
        fut = asyncio.get_running_loop().create_future()
        waiting = asyncio.create_task(within(fut, 5))
        await asyncio.sleep(0)
        fut.set_result(1)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting


async def test_the_bound_raises_timeout_error():
    with pytest.raises(TimeoutError):
        await within(asyncio.get_running_loop().create_future(), 0.01)


async def test_it_runs_outside_any_task_as_eager_start_steps_it():
    loop = asyncio.get_running_loop()
    outcome: asyncio.Future = loop.create_future()

    def step() -> None:      # a loop callback: no current task, as in eager.py
        assert asyncio.current_task() is None
        coro = within(asyncio.sleep(0.01, "done"), 5)
        try:
            yielded = coro.send(None)
        except BaseException as e:          # asyncio.timeout: "Timeout should be used inside a task"
            outcome.set_exception(e)
            return
        coro.close()
        outcome.set_result(yielded is not None)

    loop.call_soon(step)
    assert await outcome is True            # it suspended on the bounded wait, nothing raised
