"""Answers released when their write is durable, one callback per write and one timer for
all of a shard's writes (coordinator/runtime/releases.py): the write's outcome is each
answer's, the timeout fails only the answers still waiting, and answers that join a write
later, or wait for a later write, keep their own deadline."""
from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from coordinator.group.errors import ApiError
from coordinator.runtime.answer import Answer
from coordinator.runtime.releases import Releases, WriteDone, _Waiting


def test_answers_of_one_write_share_its_outcome():
    async def main() -> None:
        loop = asyncio.get_running_loop()
        rel = Releases(3)
        write = loop.create_future()
        first, second = rel.when_durable(write, "a", 5), rel.when_durable(write, "b", 5)
        await asyncio.sleep(0)
        assert not first.done() and not second.done()
        write.set_result(None)
        assert await first == "a" and await second == "b"
        failing = loop.create_future()
        third = rel.when_durable(failing, "c", 5)
        failing.set_exception(ApiError(ErrorCode.not_coordinator, "the write failed"))
        with pytest.raises(ApiError) as failed:
            await third
        assert failed.value.code is ErrorCode.not_coordinator
        cancelled = loop.create_future()
        fourth = rel.when_durable(cancelled, "d", 5)
        cancelled.cancel()
        await asyncio.sleep(0)
        assert fourth.cancelled()
        late = rel.when_durable(write, "e", 5)    # the write is durable already
        assert await late == "e"
    asyncio.run(main())


def test_the_timeout_fails_the_waiting_answers_and_a_later_joiner_gets_its_own():
    async def main() -> None:
        loop = asyncio.get_running_loop()
        rel = Releases(7)
        write = loop.create_future()
        early = rel.when_durable(write, "a", 0.05)
        await asyncio.sleep(0.02)
        later = rel.when_durable(write, "b", 5)      # joins later, with its own deadline
        with pytest.raises(ApiError) as timed_out:
            await asyncio.wait_for(early, 5)
        assert timed_out.value.code is ErrorCode.coordinator_not_available and "partition 7" in str(timed_out.value)
        assert not later.done(), "its own write timeout has not passed"
        write.set_result(None)
        assert await later == "b"
        second = loop.create_future()
        patient = rel.when_durable(second, "c", 5)
        hasty = rel.when_durable(second, "d", 0.02)   # joins with an earlier deadline: the timer moves
        with pytest.raises(ApiError):
            await asyncio.wait_for(hasty, 5)
        assert not patient.done()
        second.set_result(None)
        assert await patient == "c"
    asyncio.run(main())


def test_a_completed_write_leaves_the_shared_timer_and_a_later_write_times_out_on_its_own_deadline():
    async def main() -> None:
        loop = asyncio.get_running_loop()
        rel = Releases(2)
        first = loop.create_future()
        quick = rel.when_durable(first, "a", 0.02)     # sets the timer for its deadline
        first.set_result(None)
        assert await quick == "a"
        second = loop.create_future()
        joined = loop.time()
        slow = rel.when_durable(second, "b", 0.1)
        # The timer set for the first answer fires, finds this one not due yet, and is set
        # again for its deadline: it fails then, never before its own write timeout.
        with pytest.raises(ApiError) as timed_out:
            await asyncio.wait_for(slow, 5)
        assert timed_out.value.code is ErrorCode.coordinator_not_available
        assert loop.time() >= joined + 0.1 - 0.001
        third = loop.create_future()
        after = rel.when_durable(third, "c", 5)       # no timer left: this one sets it again
        third.set_result(None)
        assert await after == "c"
    asyncio.run(main())


def test_a_batch_that_lands_releases_its_answers_in_the_same_call_and_a_failure_on_a_later_turn():
    async def main() -> None:
        loop = asyncio.get_running_loop()
        rel = Releases(2)
        write = WriteDone(loop=loop)
        first, second = rel.when_durable(write, "a", 5), rel.when_durable(write, "b", 5)
        write.land(17)
        assert first.result() == "a" and second.result() == "b", "no loop turn between the landing and them"
        assert write.result() == 17
        late = rel.when_durable(write, "c", 5)    # durable already: through a done-callback
        assert await late == "c"
        failing = WriteDone(loop=loop)
        third = rel.when_durable(failing, "d", 5)
        failing.set_exception(ApiError(ErrorCode.not_coordinator, "the write failed"))
        assert not third.done(), "a failure reaches the answers on a later turn, as a done-callback"
        with pytest.raises(ApiError):
            await third
        dropped = WriteDone(loop=loop)
        fourth = rel.when_durable(dropped, "e", 5)
        dropped.set_result(None)       # a batch that landed as the shard was dropped
        assert not fourth.done()
        assert await fourth == "e"
    asyncio.run(main())


def test_a_cancelled_awaiter_of_a_batch_leaves_the_answers_sharing_it_alone():
    """A task that awaits a batch's future directly and is then cancelled (its client went
    away) is cancelled at once, alone: the batch goes on, and the other answers in it are
    released when it lands. A direct `cancel` of the batch's future is refused."""
    async def main() -> None:
        loop = asyncio.get_running_loop()
        rel = Releases(2)
        write = WriteDone(loop=loop)
        first, second = rel.when_durable(write, "a", 5), rel.when_durable(write, "b", 5)

        async def awaiting() -> int:
            return await write

        gone = loop.create_task(awaiting())
        staying = loop.create_task(awaiting())
        await asyncio.sleep(0)
        gone.cancel()
        for _ in range(3):
            await asyncio.sleep(0)
        assert gone.cancelled(), "the awaiter is cancelled at once, not when the batch lands"
        assert not write.done() and not first.done() and not second.done()
        assert not write.cancel() and not write.done(), "the batch's outcome is its writer's"
        write.land(9)
        assert first.result() == "a" and second.result() == "b"
        assert await staying == 9 and await write == 9
    asyncio.run(main())


def test_answers_of_one_batch_waiting_in_two_groups_are_all_released():
    """A shard's second write can come between two answers of its first (an operation with no
    records waits for the last pending batch): the first batch then has two groups waiting."""
    async def main() -> None:
        loop = asyncio.get_running_loop()
        rel = Releases(2)
        first, second = WriteDone(loop=loop), WriteDone(loop=loop)
        a = rel.when_durable(first, "a", 5)
        b = rel.when_durable(second, "b", 5)
        c = rel.when_durable(first, "c", 5)
        first.land(0)
        assert a.result() == "a" and await c == "c" and not b.done()
        second.land(1)
        assert b.result() == "b"
    asyncio.run(main())


def test_an_answer_built_without_init_has_every_slot_answer_init_sets():
    async def main() -> None:
        loop = asyncio.get_running_loop()
        rel = Releases(3)
        answer = rel.when_durable(loop.create_future(), "a", 5)
        assert answer.__class__ is Answer
        # when_durable builds its answer without Answer.__init__: a slot Answer gains that it
        # does not set is unset, and reading it raises AttributeError.
        slots = set(Answer.__slots__)
        reference = Answer()
        assert {name for name in slots if hasattr(reference, name)} == slots
        assert {name for name in slots if not hasattr(answer, name)} == set()
        assert {name: getattr(answer, name) for name in slots} == \
            {name: getattr(reference, name) for name in slots}
        # Its write's _Waiting too: built without __init__, each of its slots set.
        waiting = rel._waiting
        assert {name for name in _Waiting.__slots__ if not hasattr(waiting, name)} == set()
        assert waiting.answers == [(answer, "a", waiting.answers[0][2])] and waiting._open is rel._open
    asyncio.run(main())


def test_a_batch_that_lands_leaves_an_answer_already_done_as_it_is_and_forgets_its_answers():
    async def main() -> None:
        loop = asyncio.get_running_loop()
        rel = Releases(2)
        write = WriteDone(loop=loop)
        gone, timed_out, kept = (rel.when_durable(write, x, 5) for x in "abc")
        gone.cancel()       # the caller went away
        timed_out.set_exception(ApiError(ErrorCode.coordinator_not_available, "timed out"))
        write.land(3)
        assert gone.cancelled() and kept.result() == "c"
        with pytest.raises(ApiError) as failed:
            timed_out.result()
        assert failed.value.code is ErrorCode.coordinator_not_available
        # Nothing left waiting: the shared timer finds no answer of this write when it fires.
        assert not rel._open and write.waiting is None
    asyncio.run(main())
