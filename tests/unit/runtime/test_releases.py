"""Answers released when their write is durable, one callback and one timer per write
(coordinator/runtime/releases.py): the write's outcome is each answer's, the timeout fails
only the answers still waiting, and answers that join a write later keep their own deadline."""
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
