"""The runtime's Answer (coordinator/runtime/answer.py): completed once, released once before
its callbacks, callbacks run at completion in order (one that raises does not stop the
others), awaitable; and the answers of one write all complete in that write's callback."""
from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from coordinator.group.errors import ApiError
from coordinator.runtime.answer import Answer
from coordinator.runtime.releases import Releases


def test_callbacks_run_at_completion_in_order_with_the_released_outcome():
    seen: list[tuple[str, object]] = []
    answer = Answer()
    answer.release = lambda args, result, error: ("released", result, error)
    answer.add_done_callback(lambda a: seen.append(("first", a.result())))
    answer.add_done_callback(lambda a: seen.append(("second", a.result())))
    assert not answer.done() and seen == []
    with pytest.raises(asyncio.InvalidStateError):
        answer.result()
    answer.set_result("r")
    assert seen == [("first", ("released", "r", None)), ("second", ("released", "r", None))]
    answer.set_result("again")
    answer.set_exception(RuntimeError("late"))
    assert answer.result() == ("released", "r", None), "completed once"
    answer.add_done_callback(lambda a: seen.append(("late", a.result())))
    assert seen[-1] == ("late", ("released", "r", None)), "added once done: runs at once"


def test_a_release_that_raises_is_the_answer_s_exception_and_a_cancelled_answer_is_not_released():
    def release(args, result, error):
        if error is not None:
            raise error
        return result

    failed = Answer()
    failed.release = release
    failed.set_exception(ApiError(ErrorCode.not_coordinator, "the write failed"))
    assert isinstance(failed.exception(), ApiError) and failed.exception().code is ErrorCode.not_coordinator
    with pytest.raises(ApiError):
        failed.result()
    released: list[object] = []
    cancelled = Answer()
    cancelled.release = lambda args, result, error: released.append(result)
    assert cancelled.cancel() and cancelled.cancelled() and not cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        cancelled.exception()
    assert released == []


def test_a_callback_that_raises_is_reported_and_the_others_still_run():
    async def main() -> None:
        reported: list[dict] = []
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: reported.append(context))
        answer = Answer()
        ran: list[str] = []
        answer.add_done_callback(lambda a: 1 / 0)
        answer.add_done_callback(lambda a: ran.append("after"))
        answer.set_result(None)
        assert ran == ["after"]
        assert len(reported) == 1 and isinstance(reported[0]["exception"], ZeroDivisionError)
    asyncio.run(main())


def test_awaitable_and_a_waiter_that_stops_waiting_leaves_it_pending():
    async def main() -> None:
        answer = Answer()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(answer, 0.01)
        assert not answer.done(), "the waiter's timeout is not the answer's"
        asyncio.get_running_loop().call_soon(answer.set_result, 7)
        assert await answer == 7 and await answer == 7
        failing = Answer()
        asyncio.get_running_loop().call_soon(failing.set_exception, RuntimeError("x"))
        with pytest.raises(RuntimeError):
            await failing
    asyncio.run(main())


def test_the_answers_of_one_write_complete_in_its_callback_without_a_turn_each():
    async def main() -> None:
        write = asyncio.get_running_loop().create_future()
        releases = Releases(0)
        order: list[str] = []
        answers = [releases.when_durable(write, name, 5) for name in ("a", "b", "c")]
        for answer in answers:
            answer.add_done_callback(lambda a: order.append(a.result()))
        write.set_result(0)
        await asyncio.sleep(0)     # the write's one callback: every answer and its callback
        assert order == ["a", "b", "c"]
    asyncio.run(main())
