"""The asyncio shell around one shard: it owns the clock, timers and the shard's
partition of the state topic (Kafka: `CoordinatorRuntime` + `CoordinatorContext`).

Write path (reference §1.3):
1. an operation runs against the shard and returns a `Result`;
2. its records are encoded, replayed at once (the next operation sees them) and added
   to the current batch;
3. one batch per shard is in flight at a time; operations arriving meanwhile join the
   next batch (Kafka's adaptive linger), so a burst costs one round trip;
4. a response is released only after the upstream acknowledged the batch holding its
   records, or, with no records, every earlier batch (`waitForPendingWrites`).
If a write fails, every operation waiting on it fails with NOT_COORDINATOR and the
shard reloads from the log, which holds exactly the acknowledged state.
"""
from __future__ import annotations

import asyncio
import enum
import heapq
import itertools
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from records import encode_key, encode_value

from ..group.bulk_replay import BulkReplay
from ..group.errors import ApiError
from ..group.result import CancelTimer, Result, ScheduleTimer
from ..group.shard import GroupCoordinatorShard
from . import metrics
from .state_topic import StateTopic

log = logging.getLogger("kcoord.runtime")

Operation = Callable[[GroupCoordinatorShard, int], Result]


class ShardState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"
    CLOSED = "closed"


_ACTIVE = ShardState.ACTIVE


class _Batch:
    __slots__ = ("base_offset", "records", "done", "size")

    def __init__(self, base_offset: int) -> None:
        self.base_offset = base_offset
        self.records: list[tuple[bytes, bytes | None]] = []
        self.done: asyncio.Future = asyncio.get_running_loop().create_future()
        self.size = 0


def _release_when_durable(write: asyncio.Future | None, waiter: asyncio.Future, response: Any) -> None:
    """Answer a parked request once the operation that answered it is durable."""
    if write is None:
        if not waiter.done():
            waiter.set_result(response)
        return

    def done(f: asyncio.Future) -> None:
        if waiter.done():
            return
        if f.cancelled() or f.exception() is not None:
            waiter.set_exception(ApiError(ErrorCode.not_coordinator, "The coordinator write failed."))
            waiter.exception()
        else:
            waiter.set_result(response)

    write.add_done_callback(done)


def wall_ms() -> int:
    return int(time.time() * 1000)


class ShardRuntime:
    def __init__(self, partition: int, make_shard: Callable[[int], GroupCoordinatorShard],
                 state_topic: StateTopic, *, write_timeout_ms: int = 5000,
                 max_batch_bytes: int = 4 * 1024 * 1024, clock: Callable[[], int] = wall_ms) -> None:
        self.partition = partition
        self._make_shard = make_shard
        self.state_topic = state_topic
        self.write_timeout_s = write_timeout_ms / 1000
        self.max_batch_bytes = max_batch_bytes
        self.clock = clock
        self.state = ShardState.LOADING
        self.shard = make_shard(partition)
        self._loader = BulkReplay(self.shard, topic=state_topic.topic, partition=partition)
        self.next_offset = 0
        self._current: _Batch | None = None
        self._sealed: deque[_Batch] = deque()
        self._parked: dict[int, asyncio.Future] = {}
        self._inflight: _Batch | None = None
        self._flush_scheduled = False
        self._timers: dict[tuple, list] = {}        # key -> [deadline_ms, payload, queued deadline_ms]
        self._heap: list[tuple[int, int, tuple]] = []   # (deadline_ms, seq, key), lazily pruned
        self._seq = itertools.count()
        self._wakeup: asyncio.TimerHandle | None = None
        self._reload_task: asyncio.Task | None = None

    # --------------------------------------------------------------- loading
    def begin_load(self) -> None:
        self.state = ShardState.LOADING
        self.shard = self._make_shard(self.partition)
        self._loader = BulkReplay(self.shard, topic=self.state_topic.topic, partition=self.partition)

    def replay_raw(self, offset: int, key: bytes, value: bytes | None) -> None:
        self._loader.add(key, value, offset)

    def finish_load(self, log_end_offset: int) -> None:
        self._loader.flush()
        self.next_offset = log_end_offset
        self.state = ShardState.ACTIVE
        self._apply_timers(self.shard.on_loaded(self.clock()))
        unknown = dict(self.shard.unknown_record_types)
        log.info("shard %d loaded: %d groups, offsets up to %d%s", self.partition,
                 len(self.shard.groups), log_end_offset,
                 f", skipped unknown record types {unknown}" if unknown else "")
        metrics.SHARD_STATE.labels(partition=str(self.partition)).set(1)

    async def reload(self) -> None:
        self._cancel_all_timers()
        self.begin_load()
        metrics.SHARD_STATE.labels(partition=str(self.partition)).set(0)
        loaded: list[int] = []
        await self.state_topic.load([self.partition], lambda p, o, k, v: self.replay_raw(o, k, v),
                                    lambda p, leo: loaded.append(leo))
        self.finish_load(loaded[0])

    # ------------------------------------------------------------ operations
    def check_active(self) -> None:
        if self.state is _ACTIVE:
            return
        if self.state is ShardState.LOADING:
            raise ApiError(ErrorCode.coordinator_load_in_progress,
                           f"The coordinator of state partition {self.partition} is loading.")
        if self.state is not ShardState.ACTIVE:
            raise ApiError(ErrorCode.not_coordinator,
                           f"The coordinator of state partition {self.partition} is not active.")

    async def run(self, op: Operation) -> Any:
        """Run a read or write operation and return its response once it is durable."""
        self.check_active()
        try:
            response, fut, parked = self._execute(op)
        except ApiError:
            raise
        except Exception as e:
            # A bug must not close the client's connection: answer UNKNOWN_SERVER_ERROR.
            log.exception("shard %d: operation failed", self.partition)
            raise ApiError(ErrorCode.unknown_server_error, f"{type(e).__name__}: {e}") from e
        if parked is not None:
            # A parked JoinGroup/SyncGroup waits for another operation to answer it; clients
            # expect that to take up to a rebalance timeout, so no write timeout applies.
            return await parked
        if fut is not None:
            try:
                await asyncio.wait_for(asyncio.shield(fut), self.write_timeout_s)
            except asyncio.TimeoutError:
                # offsets.commit.timeout.ms: REQUEST_TIMED_OUT maps to COORDINATOR_NOT_AVAILABLE.
                raise ApiError(ErrorCode.coordinator_not_available,
                               f"The write to state partition {self.partition} timed out.") from None
        return response

    def _execute(self, op: Operation) -> tuple[Any, asyncio.Future | None, asyncio.Future | None]:
        now = self.clock()
        result = op(self.shard, now)
        parked = None
        if result.parked is not None:
            parked = self._parked[result.parked] = asyncio.get_running_loop().create_future()
        if result.records:
            encoded = [(encode_key(r.key), encode_value(r.value, r.value_version)) for r in result.records]
            size = sum(len(k) + (len(v) if v else 0) for k, v in encoded)
            batch = self._batch_for(size)
            try:
                self.shard.apply(result, self.next_offset)
            except Exception as e:  # a record contradicts the state: the shard is corrupt
                log.exception("shard %d: replay of a fresh result failed; reloading", self.partition)
                self._fail(e)
                raise ApiError(ErrorCode.not_coordinator, "The coordinator is reloading.") from e
            self.next_offset += len(encoded)
            batch.records.extend(encoded)
            batch.size += size
            fut = batch.done
            self._schedule_flush()
        else:
            pending = self._current or (self._sealed[-1] if self._sealed else None) or self._inflight
            fut = pending.done if pending is not None else None
        self._apply_timers(result.timers)
        for token, response in result.completions:
            waiter = self._parked.pop(token, None)
            if waiter is not None:
                _release_when_durable(fut, waiter, response)
        return result.response, fut, parked

    def _batch_for(self, size: int) -> _Batch:
        """The open batch, or a new one when this result would overflow it (a single result is
        never split: Kafka appends a result atomically)."""
        batch = self._current
        if batch is None or (batch.records and batch.size + size > self.max_batch_bytes):
            if batch is not None:
                self._sealed.append(batch)
            batch = self._current = _Batch(self.next_offset)
        return batch

    def submit(self, op: Operation) -> None:
        """Run an operation nobody waits for (timer expiry); failures are logged."""
        if self.state is not ShardState.ACTIVE:
            return
        try:
            self._execute(op)
        except ApiError as e:
            log.warning("shard %d: background operation failed: %s", self.partition, e)
        except Exception:
            log.exception("shard %d: background operation failed", self.partition)

    # ----------------------------------------------------------------- writes
    def _schedule_flush(self) -> None:
        if self._inflight is None and not self._flush_scheduled:
            self._flush_scheduled = True
            # Flush after the operations already queued on the loop had their turn.
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._inflight is not None or self.state is not ShardState.ACTIVE:
            return
        if self._sealed:
            batch = self._sealed.popleft()
        elif self._current is not None:
            batch, self._current = self._current, None
        else:
            return
        self._inflight = batch
        asyncio.get_running_loop().create_task(self._write(batch))

    async def _write(self, batch: _Batch) -> None:
        started = time.perf_counter()
        try:
            base = await self.state_topic.append(self.partition, batch.records, self.clock())
        except Exception as e:
            log.error("shard %d: write of %d records failed: %r", self.partition, len(batch.records), e)
            self._inflight = None
            self._fail(e, batch)
            return
        metrics.WRITE_SECONDS.observe(time.perf_counter() - started)
        metrics.RECORDS_WRITTEN.inc(len(batch.records))
        self._inflight = None
        if base != batch.base_offset:
            # Someone else wrote to our partition: our in-memory offsets are wrong. Kafka
            # fails the context and reloads it the same way.
            log.error("shard %d: batch landed at offset %d, expected %d; reloading",
                      self.partition, base, batch.base_offset)
            self._fail(RuntimeError("unexpected state topic offset"), batch, landed=True)
            return
        batch.done.set_result(base)
        self._flush()

    def _fail(self, error: Exception, batch: _Batch | None = None, landed: bool = False) -> None:
        """Fail every waiter whose result is not known to be durable, and reload."""
        exc = ApiError(ErrorCode.not_coordinator, f"The write to state partition {self.partition} failed.")
        for b in (batch, self._inflight, *self._sealed, self._current):
            if b is not None and not b.done.done():
                if landed and b is batch:
                    b.done.set_result(None)
                else:
                    b.done.set_exception(exc)
                    b.done.exception()  # mark retrieved: nobody may be waiting
        self._inflight = self._current = None
        self._sealed.clear()
        self._fail_parked()
        self.state = ShardState.FAILED
        self._cancel_all_timers()
        if self._reload_task is None or self._reload_task.done():
            self._reload_task = asyncio.get_running_loop().create_task(self._reload_after_failure())

    async def _reload_after_failure(self) -> None:
        delay = 0.1
        while self.state is not ShardState.CLOSED:
            try:
                await self.reload()
                return
            except Exception as e:
                log.error("shard %d: reload failed (%r); retrying in %.1fs", self.partition, e, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    # ----------------------------------------------------------------- timers
    def _apply_timers(self, ops) -> None:
        """Timers live in a table (key -> [deadline, payload, queued deadline]) and a lazy
        heap, with ONE loop timer for the earliest heap entry. A heartbeat pushes its
        member's session deadline later: that is a store into the table, not a cancel and a
        new loop timer; the heap entry already queued comes due first and requeues the key
        at its current deadline (Kafka's timer wheel does the same job)."""
        table, heap = self._timers, self._heap
        for t in ops:
            key = t.key
            if t.__class__ is ScheduleTimer:
                deadline = t.deadline_ms
                entry = table.get(key)
                if entry is None:
                    entry = table[key] = [deadline, t.payload, None]
                else:
                    entry[0], entry[1] = deadline, t.payload
                queued = entry[2]
                if queued is None or deadline < queued:
                    entry[2] = deadline
                    heapq.heappush(heap, (deadline, next(self._seq), key))
                    if heap[0][2] is key:
                        self._arm()
            elif t.__class__ is CancelTimer:
                table.pop(key, None)
            else:
                raise TypeError(f"unknown timer operation {t!r}")

    def _arm(self) -> None:
        if self._wakeup is not None:
            self._wakeup.cancel()
            self._wakeup = None
        if self._heap:
            delay = max(0.0, (self._heap[0][0] - self.clock()) / 1000)
            self._wakeup = asyncio.get_running_loop().call_later(delay, self._fire_due)

    def _fire_due(self) -> None:
        self._wakeup = None
        now = self.clock()
        table, heap = self._timers, self._heap
        while heap and heap[0][0] <= now:
            queued, _, key = heapq.heappop(heap)
            entry = table.get(key)
            if entry is None or entry[2] != queued:
                continue                        # cancelled, or an older entry of a requeued key
            deadline, payload, _ = entry
            if deadline > now:                  # pushed later meanwhile: requeue at the new deadline
                entry[2] = deadline
                heapq.heappush(heap, (deadline, next(self._seq), key))
                continue
            del table[key]
            self.submit(lambda shard, now, key=key, payload=payload: shard.on_timer(key, payload, now))
        self._arm()

    def _cancel_all_timers(self) -> None:
        if self._wakeup is not None:
            self._wakeup.cancel()
            self._wakeup = None
        self._timers.clear()
        self._heap.clear()

    def _fail_parked(self) -> None:
        """Kafka answers parked joins and syncs NOT_COORDINATOR when a shard unloads."""
        for waiter in self._parked.values():
            if not waiter.done():
                waiter.set_exception(ApiError(ErrorCode.not_coordinator, "The coordinator is reloading."))
                waiter.exception()
        self._parked.clear()

    def close(self) -> None:
        self.state = ShardState.CLOSED
        self._fail_parked()
        self._cancel_all_timers()
