"""`start_call` (the service's single-group requests): the shard's method called with (ctx,
req, now) gives what `start` of the same operation as a closure gives, on every path: at
once, sampled for the event metrics, behind a client's transactional append, on a shard that
cannot serve, and when the method raises."""
from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from coordinator import metrics
from coordinator.group.errors import ApiError
from coordinator.group.result import Result
from coordinator.runtime.coordinator_runtime import start_call, wall_ms
from coordinator.runtime.shard_runtime import ShardRuntime, ShardState

from .fakes import FakeStateTopic


class _Shard:
    """Answers its arguments; `broken` raises as a bug would."""

    def echo(self, ctx, req, now_ms: int) -> Result:
        return Result(response=(ctx, req, now_ms))

    def broken(self, ctx, req, now_ms: int) -> Result:
        raise KeyError("bug")

    def apply(self, result, base_offset: int = -1) -> None: ...


def _runtime() -> ShardRuntime:
    runtime = ShardRuntime(0, lambda partition: _Shard(), FakeStateTopic(1), clock=lambda: 1234)  # type: ignore[arg-type,return-value]
    runtime.set_state(ShardState.ACTIVE)
    return runtime


def test_every_path_answers_as_start_does():
    async def main():
        runtime = _runtime()
        assert start_call(runtime, "echo", "ctx", "req") == ("ctx", "req", 1234)
        assert runtime._ops == 1
        # the sampled operation goes through `start`, counted once
        runtime._ops = metrics.EVENT_SAMPLE - 1
        assert start_call(runtime, "echo", "c", "r") == ("c", "r", 1234)
        assert runtime._ops == metrics.EVENT_SAMPLE
        # a bug answers UNKNOWN_SERVER_ERROR, as through `start`
        with pytest.raises(ApiError) as raised:
            start_call(runtime, "broken", "c", "r")
        assert raised.value.code is ErrorCode.unknown_server_error
        # behind a client's transactional append: a task, answered once the append is done
        runtime.txn.free.clear()
        runtime.txn.busy = True
        ops = runtime._ops
        task = start_call(runtime, "echo", "c", "late")
        assert isinstance(task, asyncio.Task) and runtime._ops == ops
        runtime.txn.busy = False
        runtime.txn.free.set()
        assert await asyncio.wait_for(task, 5) == ("c", "late", 1234)
        # a shard that cannot serve raises start's error
        runtime.set_state(ShardState.LOADING)
        with pytest.raises(ApiError) as raised:
            start_call(runtime, "echo", "c", "r")
        assert raised.value.code is ErrorCode.coordinator_load_in_progress
        runtime.close()
    asyncio.run(main())


def test_the_default_clock_gives_wall_ms_and_a_replaced_one_its_own():
    async def main():
        runtime = ShardRuntime(0, lambda partition: _Shard(), FakeStateTopic(1))  # type: ignore[arg-type,return-value]
        runtime.set_state(ShardState.ACTIVE)
        assert runtime.clock is wall_ms
        before = wall_ms()
        _, _, now = start_call(runtime, "echo", "c", "r")
        assert before <= now <= wall_ms() and now.__class__ is int
        runtime.clock = lambda: 77
        assert start_call(runtime, "echo", "c", "r") == ("c", "r", 77)
        runtime.close()
    asyncio.run(main())
