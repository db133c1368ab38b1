"""Answers released when their write is durable, one callback per write and one timer for
all of a shard's writes (coordinator/runtime/releases.py): the write's outcome is each
answer's, the timeout fails only the answers still waiting, and answers that join a write
later, or wait for a later write, keep their own deadline."""
from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from coordinator.group.errors import ApiError
from coordinator.runtime.releases import Releases


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
