"""eager.start: answers without a Task when the coroutine never waits, and a Task that
behaves like asyncio's own when it does."""
from __future__ import annotations

import asyncio

import pytest

from coordinator.gateway import eager
from coordinator.gateway.eager import Done


def run(coro_fn):
    return asyncio.run(coro_fn())


def test_a_coroutine_that_never_waits_is_done_at_once():
    async def answer():
        return 42

    async def main():
        return eager.start(answer(), asyncio.get_running_loop())

    outcome = run(main)
    assert isinstance(outcome, Done) and outcome.value == 42 and outcome.error is None


def test_an_exception_before_any_wait_is_returned_not_raised():
    async def fail():
        raise ValueError("boom")

    async def main():
        return eager.start(fail(), asyncio.get_running_loop())

    outcome = run(main)
    assert isinstance(outcome, Done) and isinstance(outcome.error, ValueError)


def test_a_coroutine_that_waits_finishes_in_a_task():
    steps = []

    async def slow(fut):
        steps.append("before")
        value = await fut
        steps.append("after")
        await asyncio.sleep(0)          # a bare yield
        return value + 1

    async def main():
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        outcome = eager.start(slow(fut), loop)
        assert steps == ["before"]       # the first step ran synchronously
        assert isinstance(outcome, asyncio.Task)
        loop.call_later(0.01, fut.set_result, 1)
        return await asyncio.wait_for(outcome, 5)

    assert run(main) == 2


def test_the_awaited_future_s_exception_reaches_the_coroutine():
    async def catches(fut):
        try:
            await fut
        except KeyError:
            return "caught"

    async def main():
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        task = eager.start(catches(fut), loop)
        fut.set_exception(KeyError("x"))
        return await task

    assert run(main) == "caught"


def test_wait_for_and_sleep_work_inside():
    async def waits():
        await asyncio.wait_for(asyncio.sleep(0.01), 5)
        return "ok"

    async def main():
        return await eager.start(waits(), asyncio.get_running_loop())

    assert run(main) == "ok"


def test_cancelling_the_task_cancels_the_coroutine():
    seen = []

    async def waits_forever(fut):
        try:
            await fut
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def main():
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        task = eager.start(waits_forever(fut), loop)
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return fut.cancelled()

    assert run(main) is True
    assert seen == ["cancelled"]
