"""The write path and timers of one ShardRuntime (Kafka: `CoordinatorRuntime`), over the
in-memory state topic of fakes.py, each test in its own event loop.

What is pinned here (issue 12, point 6):
- batch sealing: a burst joins one batch while a write is in flight; a batch is sealed when
  the next result would overflow `max_batch_bytes`, and one result is never split;
- durability: a response is released only once the batch holding its records is
  acknowledged, and a read-only response only once every earlier batch is;
- a failed write answers NOT_COORDINATOR to everything not yet durable and reloads, and the
  reloaded state is exactly the log (the failed write is gone);
- a batch that lands at another offset than expected (someone else wrote to the partition)
  is durable, and the shard reloads to take the foreign record in;
- timers: a deadline pushed later is requeued rather than fired early; a cancelled one
  never fires; one loop timer is armed for the earliest deadline.
"""
from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from coordinator.config import CoordinatorConfig
from coordinator.group.errors import ApiError
from coordinator.group.kio_util import schema
from coordinator.group.result import CancelTimer, Result, ScheduleTimer
from coordinator.runtime.shard_runtime import ShardRuntime, ShardState

from .fakes import FakeStateTopic, group_in
from .test_shard_failures import CLIENT, commit, commit_errors, committed, fetch, service_for, until

PARTITIONS = 2


def run(coro):
    return asyncio.run(coro)


async def started(topic: FakeStateTopic):
    service = service_for(topic)
    await service.start()
    return service


# ------------------------------------------------------------------ batching
def test_a_burst_during_a_write_joins_one_batch_and_offsets_are_contiguous():
    async def main():
        topic = FakeStateTopic(PARTITIONS)
        service = await started(topic)
        group = group_in(0, PARTITIONS)
        topic.hold_writes = asyncio.Event()
        first = asyncio.create_task(commit(service, group, "t", 0, 1))
        await until(lambda: topic.append_calls == 1, "the first write in flight")
        burst = [asyncio.create_task(commit(service, group, "t", p % 4, 10 + p)) for p in range(20)]
        for _ in range(50):
            await asyncio.sleep(0)
        assert topic.append_calls == 1, "the burst must wait for the write in flight"
        assert not any(t.done() for t in [first, *burst]), "no response before its write is acknowledged"
        topic.hold_writes.set()
        responses = await asyncio.gather(first, *burst)
        assert all(commit_errors(r) == {0} for r in responses)
        assert topic.append_calls == 2, f"{topic.append_calls} writes for 1 + a burst of 20"
        assert len(topic.logs[0]) == 21
        assert service.runtimes[0].next_offset == 21
    run(main())


def test_a_batch_is_sealed_before_it_would_overflow_and_one_result_is_never_split():
    async def main():
        topic = FakeStateTopic(PARTITIONS)
        sizes: list[int] = []
        real_append = topic.append

        async def recording_append(partition, records, timestamp_ms):
            sizes.append(len(records))
            return await real_append(partition, records, timestamp_ms)

        # Before the service is built: its writer binds the log's append once.
        topic.append = recording_append
        service = await started(topic)
        rt = service.runtimes[0]
        group = group_in(0, PARTITIONS)
        # Learn one commit's encoded size, then allow 3 per batch.
        await commit(service, group, "t", 0, 1)
        record_bytes = sum(len(k) + len(v or b"") for k, v in topic.logs[0])
        rt.max_batch_bytes = 3 * record_bytes
        topic.hold_writes = asyncio.Event()
        sizes.clear()
        blocker = asyncio.create_task(commit(service, group, "t", 1, 2))
        await until(lambda: sizes == [1], "one write in flight")
        tasks = [asyncio.create_task(commit(service, group, "t", p % 4, 100 + p)) for p in range(7)]
        for _ in range(20):
            await asyncio.sleep(0)
        topic.hold_writes.set()
        await asyncio.gather(blocker, *tasks)
        assert sizes == [1, 3, 3, 1], sizes
        assert committed(await fetch(service, group))[("t", 2)] == 106
    run(main())


def test_one_result_larger_than_the_limit_is_written_whole():
    async def main():
        topic = FakeStateTopic(PARTITIONS)
        service = await started(topic)
        service.runtimes[0].max_batch_bytes = 1          # every record overflows it
        group = group_in(0, PARTITIONS)
        mod = schema("offset_commit", 9, "request")
        parts = tuple(mod.OffsetCommitRequestPartition(partition_index=p, committed_offset=p, committed_leader_epoch=-1,
                                                       committed_metadata="") for p in range(4))
        req = mod.OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                      group_instance_id=None, topics=(mod.OffsetCommitRequestTopic(name="t", partitions=parts),))
        resp = await service.handle(8, 9, req, CLIENT)
        assert commit_errors(resp) == {0}
        assert topic.append_calls == 1 and len(topic.logs[0]) == 4, "a result is appended atomically"
    run(main())


# ---------------------------------------------------------------- durability
def test_a_read_waits_for_every_earlier_write():
    async def main():
        topic = FakeStateTopic(PARTITIONS)
        service = await started(topic)
        group = group_in(0, PARTITIONS)
        topic.hold_writes = asyncio.Event()
        write = asyncio.create_task(commit(service, group, "t", 0, 5))
        await until(lambda: topic.append_calls == 1, "the write in flight")
        read = asyncio.create_task(fetch(service, group))
        for _ in range(50):
            await asyncio.sleep(0)
        # Kafka's waitForPendingWrites: the read saw the uncommitted offset, so it must not
        # be answered before that offset is durable.
        assert not read.done(), "a read answered before the write it observed was acknowledged"
        topic.hold_writes.set()
        assert committed(await read) == {("t", 0): 5}
        assert commit_errors(await write) == {0}
    run(main())


def test_a_failed_write_answers_not_coordinator_and_reloads_exactly_the_log():
    async def main():
        topic = FakeStateTopic(PARTITIONS)
        service = await started(topic)
        group = group_in(0, PARTITIONS)
        assert commit_errors(await commit(service, group, "t", 0, 1)) == {0}
        topic.fail_writes = ConnectionError("broker gone")
        resp = await commit(service, group, "t", 0, 2)
        assert commit_errors(resp) == {ErrorCode.not_coordinator}
        topic.fail_writes = None
        rt = service.runtimes[0]
        await until(lambda: rt.state is ShardState.ACTIVE and rt.reload_attempts >= 1, "the reload")
        assert committed(await fetch(service, group)) == {("t", 0): 1}, "the failed write must not survive"
        assert len(topic.logs[0]) == 1
        assert service.runtimes[1].state is ShardState.ACTIVE and service.runtimes[1].reload_attempts == 0
    run(main())


def test_a_batch_landing_at_another_offset_is_durable_and_the_shard_reloads_the_foreign_record():
    async def main():
        topic = FakeStateTopic(PARTITIONS)
        service = await started(topic)
        group = group_in(0, PARTITIONS)
        topic.hold_writes = asyncio.Event()
        ours = asyncio.create_task(commit(service, group, "t", 0, 7))
        await until(lambda: topic.append_calls == 1, "our write in flight")
        topic.commit(group, "t", 1, 99)                   # another writer appends first
        topic.hold_writes.set()
        assert commit_errors(await ours) == {0}, "our batch was acknowledged: it is durable"
        rt = service.runtimes[0]
        await until(lambda: rt.state is ShardState.ACTIVE and rt.reload_attempts >= 1, "the reload")
        assert committed(await fetch(service, group)) == {("t", 0): 7, ("t", 1): 99}
        assert rt.next_offset == 2
    run(main())


def test_a_write_that_never_returns_times_out_as_coordinator_not_available():
    async def main():
        topic = FakeStateTopic(PARTITIONS)
        service = await started(topic)
        service.runtimes[0].write_timeout_s = 0.05
        topic.hold_writes = asyncio.Event()          # never set
        resp = await commit(service, group_in(0, PARTITIONS), "t", 0, 1)
        # offsets.commit.timeout.ms: Kafka maps REQUEST_TIMED_OUT to COORDINATOR_NOT_AVAILABLE.
        assert commit_errors(resp) == {ErrorCode.coordinator_not_available}
        topic.hold_writes.set()
    run(main())


# -------------------------------------------------------------------- timers
class TimerShard:
    """A stand-in shard for the timer table: it records expiries and writes nothing."""

    def __init__(self, partition: int) -> None:
        self.fired: list[tuple[tuple, object, int]] = []
        self.groups: dict = {}
        self.unknown_record_types: dict = {}

    def on_timer(self, key, payload, now_ms) -> Result:
        self.fired.append((key, payload, now_ms))
        return Result()

    def on_loaded(self, now_ms):
        return []


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def timer_runtime(clock: Clock) -> ShardRuntime:
    rt = ShardRuntime(0, TimerShard, FakeStateTopic(1), clock=clock)  # type: ignore[arg-type]
    rt.state = ShardState.ACTIVE
    return rt


def test_a_deadline_pushed_later_is_requeued_not_fired_early():
    async def main():
        clock = Clock()
        rt = timer_runtime(clock)
        key = ("session", "g", "m")
        rt.timers.apply([ScheduleTimer(key, clock.now + 100, "first")])
        rt.timers.apply([ScheduleTimer(key, clock.now + 500, "pushed")])   # a heartbeat pushes it
        clock.now += 100
        rt.timers.fire_due()
        assert rt.shard.fired == [], "fired at the old deadline"
        assert rt.timers.wakeup is not None, "the requeued deadline must be armed"
        clock.now += 400
        rt.timers.fire_due()
        assert rt.shard.fired == [(key, "pushed", clock.now)]
        clock.now += 1000
        rt.timers.fire_due()
        assert len(rt.shard.fired) == 1, "a timer fires once"
        rt.close()
    run(main())


def test_a_cancelled_timer_never_fires_and_an_earlier_one_rearms_the_loop_timer():
    async def main():
        clock = Clock()
        rt = timer_runtime(clock)
        late, early, gone = ("k", 1), ("k", 2), ("k", 3)
        rt.timers.apply([ScheduleTimer(late, clock.now + 1000), ScheduleTimer(gone, clock.now + 10)])
        rt.timers.apply([CancelTimer(gone), ScheduleTimer(early, clock.now + 50)])
        assert rt.timers.heap[0][0] == clock.now + 10          # lazily pruned: still queued, not in the table
        clock.now += 60
        rt.timers.fire_due()
        assert [f[0] for f in rt.shard.fired] == [early]
        clock.now += 1000
        rt.timers.fire_due()
        assert [f[0] for f in rt.shard.fired] == [early, late]
        assert rt.timers.table == {} and rt.timers.wakeup is None
        rt.close()
    run(main())


def test_timers_fire_on_the_loop_in_deadline_order():
    async def main():
        clock = Clock()
        rt = timer_runtime(clock)
        rt.clock = lambda: clock.now
        keys = [("k", i) for i in range(5)]
        rt.timers.apply([ScheduleTimer(k, clock.now - 10 + i, i) for i, k in reversed(list(enumerate(keys)))])
        await until(lambda: len(rt.shard.fired) == 5, "every due timer fired by the loop")
        assert [f[0] for f in rt.shard.fired] == keys
        rt.close()
    run(main())


def test_operations_on_a_loading_shard_answer_coordinator_load_in_progress():
    async def main():
        rt = ShardRuntime(0, TimerShard, FakeStateTopic(1))  # type: ignore[arg-type]
        with pytest.raises(ApiError) as e:
            await rt.run(lambda shard, now: Result())
        assert e.value.code == ErrorCode.coordinator_load_in_progress
        rt.close()
        with pytest.raises(ApiError) as e:
            await rt.run(lambda shard, now: Result())
        assert e.value.code == ErrorCode.not_coordinator
    run(main())


def test_config_defaults_match_the_runtime_write_timeout():
    # The service hands offsets.commit.timeout.ms to every runtime.
    topic = FakeStateTopic(PARTITIONS)
    service = service_for(topic)
    assert all(rt.write_timeout_s == CoordinatorConfig().offsets_commit_timeout_ms / 1000 for rt in service.runtimes)


def test_start_waits_a_bounded_time_for_a_state_topic_that_is_not_there_yet():
    """kcoord creates its state topic at start; the broker's metadata names it a moment later
    (seconds for thousands of partitions): the first loads find no topic."""
    from coordinator.runtime.state_log import StateTopicUnavailable

    class LateTopic(FakeStateTopic):
        def __init__(self, partitions: int, missing_loads: int) -> None:
            super().__init__(partitions)
            self.missing_loads = missing_loads

        async def load(self, *args, **kwargs):
            if self.missing_loads > 0:
                self.missing_loads -= 1
                raise StateTopicUnavailable(f"state topic {self.topic} does not exist upstream")
            return await super().load(*args, **kwargs)

    async def main():
        service = service_for(LateTopic(PARTITIONS, missing_loads=2))
        await service.start(missing_topic_wait_s=5)
        assert all(rt.state is ShardState.ACTIVE for rt in service.runtimes)
        never = service_for(LateTopic(PARTITIONS, missing_loads=10**6))
        with pytest.raises(StateTopicUnavailable):
            await never.start(missing_topic_wait_s=0.2)
        with pytest.raises(StateTopicUnavailable):
            await service_for(LateTopic(PARTITIONS, missing_loads=1)).start()   # no wait by default
    run(main())
