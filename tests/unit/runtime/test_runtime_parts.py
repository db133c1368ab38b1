"""The runtime's parts, each on its own, and the runtime over a shard type that is not a group.

- timer_table.TimerTable: deadline order, a deadline pushed later is requeued, a cancelled
  one never fires, `cancel_all` keeps the table's identity;
- writer.ShardWriter (behind a stub runtime): sealing before an overflow with the append
  overhead in the predicted offsets, what a read waits for, one write in flight, a failed
  or fenced write handed to the runtime, `drop` answering every waiter;
- coordinator_runtime.CoordinatorRuntime over a toy key/value shard type (shard_protocol.py):
  writes land in the log, a reload rebuilds the shard from it, the skip list and a failed
  load, all without the group coordinator;
- the generic modules import no group record type and no record codec;
- cut for the next write path: the writer keeps as many batches in flight as the process's
  writer takes (a queue at predicted offsets, acknowledged in order), and a load fences
  first (the log's fence step, run before the replay; a refused fence unloads the shard).
"""
from __future__ import annotations

import ast
import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from coordinator.group.errors import ApiError
from coordinator.group.result import CancelTimer, Result, ScheduleTimer
from coordinator.runtime.coordinator_runtime import CoordinatorRuntime, schedule
from coordinator.runtime.shard_protocol import ShardProtocol
from coordinator.runtime.shard_state import ShardState
from coordinator.runtime.state_log import ShardFenced
from coordinator.runtime.timer_table import TimerTable
from coordinator.runtime.writer import ShardWriter

from .fakes import FakeStateTopic, UpstreamDown

RUNTIME = Path(__file__).resolve().parents[3] / "coordinator" / "runtime"
GENERIC = ("coordinator_runtime.py", "writer.py", "loader.py", "timer_table.py", "txn_writes.py",
           "shard_protocol.py", "shard_state.py", "transactional_write.py", "partition_writer.py", "parked.py",
           "parts.py")


# ------------------------------------------------------------------ timers
def test_the_timer_table_fires_in_deadline_order_requeues_pushed_deadlines_and_skips_cancelled():
    async def main() -> None:
        now = [1000]
        fired: list[tuple[tuple, Any]] = []
        timers = TimerTable(lambda: now[0], lambda key, payload: fired.append((key, payload)))
        table = timers.table
        timers.apply([ScheduleTimer(("b",), 1020, "b"), ScheduleTimer(("a",), 1010, "a"),
                      ScheduleTimer(("gone",), 1005, "gone"), ScheduleTimer(("late",), 1015, "first")])
        timers.apply([CancelTimer(("gone",)), ScheduleTimer(("late",), 1050, "pushed")])
        assert timers.wakeup is not None
        now[0] = 1030
        timers.fire_due()
        assert fired == [(("a",), "a"), (("b",), "b")], "due in deadline order; cancelled and pushed ones wait"
        assert set(table) == {("late",)} and timers.wakeup is not None
        now[0] = 1050
        timers.fire_due()
        assert fired[-1] == (("late",), "pushed")
        timers.apply([ScheduleTimer(("x",), 2000)])
        timers.cancel_all()
        assert timers.table is table and table == {} and timers.heap == [] and timers.wakeup is None
    asyncio.run(main())


# ------------------------------------------------------------------ writer
class StubRuntime:
    """What the writer reads of its runtime, and what it hands back to it."""

    def __init__(self, topic: FakeStateTopic) -> None:
        self.state_topic, self.partition, self.generation = topic, 0, 1
        self.txn = SimpleNamespace(reader=None)
        self.txn_log = None
        self.failed: list[tuple[Exception, Any, bool]] = []
        self.fenced: list[ShardFenced] = []

    def clock(self) -> int:
        return 0

    def is_active(self) -> bool:
        return True

    def fail(self, error: Exception, batch: Any = None, landed: bool = False) -> None:
        self.failed.append((error, batch, landed))

    def fenced_by(self, error: ShardFenced, batch: Any = None) -> None:
        self.fenced.append(error)


def add(writer: ShardWriter, *records: tuple[bytes, bytes]) -> asyncio.Future:
    size = sum(len(k) + len(v) for k, v in records)
    batch = writer.batch_for(size)
    writer.next_offset += len(records)
    batch.records.extend(records)
    batch.size += size
    writer.schedule_flush()
    return batch.done


class MarkerTopic(FakeStateTopic):
    """A transactional log: each append ends with its COMMIT marker (one more offset)."""

    async def append(self, partition: int, records: Any, timestamp_ms: int) -> int:
        base = await super().append(partition, records, timestamp_ms)
        self.logs[partition].append((b"marker", None))
        return base


def test_the_writer_seals_before_an_overflow_predicts_offsets_and_keeps_one_write_in_flight():
    async def main() -> None:
        topic = MarkerTopic(1)
        topic.hold_writes = asyncio.Event()
        writer = ShardWriter(StubRuntime(topic), max_batch_bytes=4, append_overhead=1)   # type: ignore[arg-type]
        assert writer.last_pending() is None and writer.idle()
        first = add(writer, (b"k", b"1"))
        await asyncio.sleep(0)                          # the flush: first is in flight
        assert len(writer.inflight) == 1 and writer.current is None
        assert writer.last_pending() is first, "a read waits for the batch in flight"
        second = add(writer, (b"k", b"2"), (b"k", b"3"))   # 4 bytes: fits one batch whole
        third = add(writer, (b"k", b"4"))                  # would overflow: the second is sealed
        assert [b.base_offset for b in writer.sealed] == [2] and writer.current is not None
        assert writer.current.base_offset == 5, "records + one marker per closed append"
        assert writer.last_pending() is third
        topic.hold_writes.set()
        assert await asyncio.wait_for(third, 5) is not None
        assert (first.result(), second.result(), third.result()) == (0, 2, 5)
        assert topic.append_calls == 3 and writer.idle() and await writer.drain(1)
    asyncio.run(main())


def test_a_failed_or_fenced_write_goes_to_the_runtime_and_drop_answers_every_waiter():
    async def main() -> None:
        topic = FakeStateTopic(1)
        rt = StubRuntime(topic)
        writer = ShardWriter(rt, max_batch_bytes=100, append_overhead=0)   # type: ignore[arg-type]
        topic.fail_writes = UpstreamDown("down")
        add(writer, (b"k", b"1"))
        for _ in range(5):
            await asyncio.sleep(0)
        assert len(rt.failed) == 1 and writer.write_failures == 1 and not writer.inflight
        topic.fail_writes = ShardFenced(0, "another owner")
        add(writer, (b"k", b"2"))
        for _ in range(5):
            await asyncio.sleep(0)
        assert len(rt.fenced) == 1 and writer.write_failures == 1, "a fence is no write failure"
        topic.fail_writes = None
        topic.hold_writes = asyncio.Event()
        landed = add(writer, (b"k", b"3"))
        await asyncio.sleep(0)
        waiting = add(writer, (b"k", b"4"))
        writer.drop(ApiError(ErrorCode.not_coordinator, "gone"), writer.inflight[0], landed=True)
        assert landed.result() is None, "a batch known to be in the log is not failed"
        with pytest.raises(ApiError):
            waiting.result()
        assert writer.idle()
    asyncio.run(main())


# --------------------------------------- the runtime over a toy shard type
class KvShard:
    """A shard type that is not a group: a key/value map replayed from the log."""

    def __init__(self, partition: int) -> None:
        self.data: dict[bytes, bytes | None] = {}
        self.unknown_record_types: dict[Any, int] = {}

    def apply(self, result: Result, offset: int) -> None:
        records: Any = result.records    # this shard type's records are (key, value) pairs
        for key, value in records:
            self.data[key] = value

    def on_timer(self, key: tuple, payload: Any, now_ms: int) -> Result:
        return Result()

    def on_loaded(self, now_ms: int) -> list:
        return []

    def replay_end_transaction(self, producer_id: int, committed: bool, offset: int) -> None:
        pass


class KvLoad:
    def __init__(self, shard: KvShard, on_error: Any) -> None:
        self.shard, self.on_error = shard, on_error

    def add(self, key: bytes, value: bytes | None, offset: int, producer_id: int = -1) -> None:
        if value == b"bad":
            try:
                raise ValueError(f"bad value at {offset}")
            except ValueError as e:
                self.on_error(e, None, None, offset)
                return
        self.shard.data[key] = value

    def end_transaction(self, producer_id: int, committed: bool) -> None:
        pass

    def flush(self) -> None:
        pass


KV = ShardProtocol(
    make_shard=KvShard, new_load=lambda shard, topic, partition, on_error: KvLoad(shard, on_error),
    serialize=list, records_written=lambda records: None, decode_errors=(ValueError,),
    replay_transactional=lambda shard, write, base: 0, open_transactions=lambda shard: False,
    describe=lambda shard: f"{len(shard.data)} keys")


def put(key: bytes, value: bytes) -> Any:
    records: Any = [(key, value)]
    return lambda shard, now: Result(response=shard.data.get(key), records=records)


def test_the_runtime_serves_a_toy_shard_type_writes_through_the_log_and_reloads_from_it():
    async def main() -> None:
        topic = FakeStateTopic(1)
        rt = CoordinatorRuntime(0, KV, topic)   # type: ignore[arg-type]
        await rt.reload()
        assert rt.state is ShardState.ACTIVE
        assert await rt.run(put(b"a", b"1")) is None
        assert await rt.run(put(b"a", b"2")) == b"1", "the second operation sees the first's replay"
        assert topic.logs[0] == [(b"a", b"1"), (b"a", b"2")] and rt.next_offset == 2
        before = rt.shard
        await rt.reload()
        assert rt.shard is not before and rt.shard.data == {b"a": b"2"}, "rebuilt from the log"
        rt.close()
    asyncio.run(main())


def test_the_loader_skips_only_listed_records_and_a_bad_record_fails_the_load():
    async def main() -> None:
        topic = FakeStateTopic(1)
        topic.logs[0] = [(b"a", b"1"), (b"b", b"bad"), (b"c", b"3")]
        strict = CoordinatorRuntime(0, KV, topic)   # type: ignore[arg-type]
        await strict.reload()
        assert strict.state is ShardState.FAILED and strict.failed_offset == 1
        assert strict.shard.data == {}, "what was replayed before the bad record is dropped"
        with pytest.raises(ApiError) as answer:
            strict.check_active()
        assert answer.value.code == ErrorCode.not_coordinator
        lenient = CoordinatorRuntime(0, KV, topic, skip_offsets=frozenset({1}))   # type: ignore[arg-type]
        await lenient.reload()
        assert lenient.state is ShardState.ACTIVE and lenient.skipped == {1}
        assert lenient.shard.data == {b"a": b"1", b"c": b"3"}
        for rt in (strict, lenient):
            rt.close()
    asyncio.run(main())


# ------------------------------------------------------------------ layering
def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            names.add("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


@pytest.mark.parametrize("module", GENERIC)
def test_the_generic_runtime_imports_no_group_record_type_and_no_record_codec(module: str):
    imports = imported_modules(RUNTIME / module)
    group = {m for m in imports if m.startswith("..group")}
    assert group <= {"..group.result", "..group.errors"}, group
    assert not {m for m in imports if m == "records" or (m.startswith("records.") and m != "records.batch")}


# ------------------------------------------- cut for the next write path
class PipelinedWriter:
    """A process writer that takes three batches of a partition in flight and acknowledges
    them in order when released."""

    max_inflight = 3

    def __init__(self, topic: FakeStateTopic) -> None:
        self.topic, self.release = topic, asyncio.Event()
        self.in_flight = 0

    async def append(self, partition: int, records: Any, timestamp_ms: int) -> int:
        base = len(self.topic.logs[partition])
        self.topic.logs[partition].extend(records)      # the log's order is the order received
        self.in_flight += 1
        await self.release.wait()
        self.in_flight -= 1
        return base


def test_the_writer_keeps_as_many_batches_in_flight_as_the_process_writer_takes_at_predicted_offsets():
    async def main() -> None:
        topic = FakeStateTopic(1)
        process_writer = PipelinedWriter(topic)
        writer = ShardWriter(StubRuntime(topic), max_batch_bytes=2, append_overhead=0,   # type: ignore[arg-type]
                             partition_writer=process_writer)
        waits = [add(writer, (b"k", bytes([i]))) for i in range(4)]   # 2 bytes each: one batch each
        await asyncio.sleep(0)
        assert [b.base_offset for b in writer.inflight] == [0, 1, 2], "three in flight, in log order"
        assert writer.current is not None and writer.current.base_offset == 3, "the fourth waits its turn"
        assert writer.last_pending() is waits[3]
        assert writer.oldest_open() is writer.inflight[0]
        for _ in range(3):
            await asyncio.sleep(0)
        assert process_writer.in_flight == 3, "the three appends reached the process writer together"
        process_writer.release.set()
        assert [await asyncio.wait_for(w, 5) for w in waits] == [0, 1, 2, 3]
        assert topic.logs[0] == [(b"k", bytes([i])) for i in range(4)]
        assert writer.idle() and await writer.drain(1)
    asyncio.run(main())


class OwnedTopic(FakeStateTopic):
    """A log with owners: its loads run the caller's fence step per partition first."""

    def __init__(self, partitions: int) -> None:
        super().__init__(partitions)
        self.steps: list[str] = []
        self.refuse: set[int] = set()

    async def takeover(self, partition: int) -> None:
        self.steps.append(f"fence {partition}")
        if partition in self.refuse:
            raise ShardFenced(partition, "a newer epoch took it")

    async def load(self, partitions: Any, sink: Any, on_loaded: Any, progress: Any = None, on_corrupt: Any = None,
                   abandoned: Any = None, fence: Any = None) -> None:
        for p in partitions:
            if fence is not None:
                await fence(p)
            self.steps.append(f"replay {p}")
            await super().load([p], sink, on_loaded, progress, on_corrupt, abandoned)


def test_a_load_fences_first_and_a_refused_fence_unloads_the_shard():
    async def main() -> None:
        topic = OwnedTopic(2)
        topic.logs[1] = [(b"a", b"1")]
        rt = CoordinatorRuntime(1, KV, topic)   # type: ignore[arg-type]
        assert rt.loader.fence == topic.takeover, "the log's fence step is the loader's"
        await rt.reload()
        assert topic.steps == ["fence 1", "replay 1"] and rt.state is ShardState.ACTIVE
        assert rt.shard.data == {b"a": b"1"}
        topic.steps.clear()
        topic.refuse.add(1)
        rt.start_reload()
        await asyncio.wait_for(rt._reload_task, 5)
        assert topic.steps == ["fence 1"], "nothing is replayed without the fence"
        assert rt.state is ShardState.UNLOADED and rt.fenced is not None
        plain = CoordinatorRuntime(0, KV, FakeStateTopic(1))   # type: ignore[arg-type]
        assert plain.loader.fence is None and plain.loader.load_steps() == {}, "one process: no fence step"
        for r in (rt, plain):
            r.close()
    asyncio.run(main())


def test_schedule_hands_back_the_response_future_completed_by_the_write_with_the_write_timeout():
    async def main() -> None:
        topic = FakeStateTopic(1)
        rt = CoordinatorRuntime(0, KV, topic, write_timeout_ms=50)   # type: ignore[arg-type]
        await rt.reload()
        topic.hold_writes = asyncio.Event()
        first = schedule(rt, put(b"a", b"1"))
        second = schedule(rt, put(b"a", b"2"))
        assert not first.done() and rt.shard.data == {b"a": b"2"}, "run in this turn, answered when durable"
        topic.hold_writes.set()
        assert await asyncio.wait_for(first, 5) is None and await second == b"1"
        read = schedule(rt, lambda shard, now: Result(response=shard.data[b"a"]))
        assert read.done() and read.result() == b"2", "nothing pending: answered at once"
        topic.hold_writes = asyncio.Event()
        late = schedule(rt, put(b"b", b"1"))
        with pytest.raises(ApiError) as timed_out:
            await asyncio.wait_for(late, 5)
        assert timed_out.value.code is ErrorCode.coordinator_not_available
        topic.hold_writes.set()
        topic.fail_writes = UpstreamDown("down")
        failing = schedule(rt, put(b"c", b"1"))
        with pytest.raises(ApiError) as failed:
            await asyncio.wait_for(failing, 5)
        assert failed.value.code is ErrorCode.not_coordinator
        rt.unload("moved")
        refused = schedule(rt, put(b"d", b"1"))
        assert refused.done() and isinstance(refused.exception(), ApiError), "not active: refused at once"
        rt.close()
    asyncio.run(main())
