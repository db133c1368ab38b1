"""The asyncio shell around one shard: its state machine, and the door operations come in by
(Kafka: `CoordinatorRuntime`'s per-partition `CoordinatorContext` + `scheduleWriteOperation`;
docs/design/kafka-facts.md §1.1, §1.3).

Rules:
- Generic over a shard type (shard_protocol.py): nothing here knows a group, a record type
  or the record codec.
- An operation runs against the shard and returns a `Result`; its records are serialized,
  replayed at once (the next operation sees them) and handed to the writer (writer.py),
  which appends them in a batch. A response is released only after the upstream
  acknowledged the batch holding its records or, with no records, every earlier batch
  (`waitForPendingWrites`). Parked requests (JoinGroup/SyncGroup) are answered when the
  operation that answered them is durable.
- Only ACTIVE serves; LOADING answers COORDINATOR_LOAD_IN_PROGRESS, every other state
  NOT_COORDINATOR (shard_state.py; Kafka's `withActiveContextOrThrow`).
- If a write fails, every operation waiting on it fails with NOT_COORDINATOR and the shard
  reloads from the log, which holds exactly the acknowledged state (loader.py: backoff).
  If the write or the reload raises `ShardFenced` (another process took the shard), the
  waiters fail the same way but the shard unloads instead: `fenced` holds why, and
  `on_fenced(partition, error)` tells the owner of the membership.
- `generation` is bumped whenever the shard's state is thrown away (reload, unload): a write
  or a load that completes for an older generation must not touch the new one.
- The parts: `writer` (batches, offsets, write in flight), `loader` (load, reload, skip
  list), `timers` (timer_table.py), `txn` (clients' transactional writes, txn_writes.py).
  The public names below that only forward to a part are the contract the service,
  the state logs (load callbacks) and txn_offsets_log.TxnShardPort call.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from kio.schema.errors import ErrorCode

from .. import metrics
from ..group.errors import ApiError
from .loader import ShardLoader
from .shard_protocol import ShardProtocol
from .shard_state import ShardState
from .state_log import CorruptBatchError, ShardFenced, StateLog
from .timer_table import TimerTable
from .txn_log_reader import TxnLogReader
from .txn_writes import TxnWrites
from .writer import Batch, ShardWriter

log = logging.getLogger("kcoord.runtime")

Operation = Callable[[Any, int], Any]   # (shard, now_ms) -> Result

_ACTIVE = ShardState.ACTIVE
_LOADING = ShardState.LOADING


def release_when_durable(write: asyncio.Future | None, waiter: asyncio.Future, response: Any) -> None:
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


class _Part:
    """A runtime attribute that lives in one of its parts: read and written there."""

    def __init__(self, part: str, name: str) -> None:
        self.part, self.name = part, name

    def __get__(self, runtime: Any, owner: Any = None) -> Any:
        return self if runtime is None else getattr(getattr(runtime, self.part), self.name)

    def __set__(self, runtime: Any, value: Any) -> None:
        setattr(getattr(runtime, self.part), self.name, value)


class CoordinatorRuntime:
    def __init__(self, partition: int, protocol: ShardProtocol, state_topic: StateLog, *,
                 write_timeout_ms: int = 5000, max_batch_bytes: int = 4 * 1024 * 1024,
                 clock: Callable[[], int] = wall_ms, skip_offsets: frozenset[int] = frozenset(),
                 sleep: Callable[[float], Any] = asyncio.sleep) -> None:
        self.partition = partition
        self.protocol = protocol
        self._serialize = protocol.serialize
        self._records_written = protocol.records_written
        self.state_topic = state_topic
        self.write_timeout_s = write_timeout_ms / 1000
        self.clock = clock
        self._sleep = sleep
        self.generation = 0
        self.state = ShardState.LOADING
        metrics.set_shard_state(partition, self.state.value)
        self.shard = protocol.make_shard(partition)
        self._parked: dict[int, asyncio.Future] = {}
        self.timers = TimerTable(lambda: self.clock(), self._timer_due)   # the clock may be replaced
        self._timers = self.timers.table    # the same dict, for tools that read the timer keys
        # Offsets an append takes beyond its records (1 for a transactional log: the COMMIT
        # marker), added when a batch is closed to further records.
        self.writer = ShardWriter(self, max_batch_bytes, int(getattr(state_topic, "offsets_per_append", 0)))
        self.txn = TxnWrites(self)
        self._txn_free = self.txn.free
        self.loader = ShardLoader(self, skip_offsets)
        # Set when another process fenced this shard; it stays UNLOADED until a new load
        # (begin_load clears it).
        self.fenced: ShardFenced | None = None
        self.on_fenced: Callable[[int, ShardFenced], None] | None = None
        # A shard taken from another instance arms its members' session timers this much after
        # the load (the membership session), since they may still be finding the new owner
        # (docs/user/cluster.md).
        self.load_grace_ms = 0
        self._ops = 0                 # operations run, for sampling the event metrics

    # ----------------------------------------------------------------- state
    def _set_state(self, state: ShardState) -> None:
        if state is not self.state:
            self.state = state
            metrics.set_shard_state(self.partition, state.value)

    def is_active(self) -> bool:
        return self.state is _ACTIVE

    def check_active(self) -> None:
        if self.state is _ACTIVE:
            return
        if self.state is _LOADING:
            raise ApiError(ErrorCode.coordinator_load_in_progress,
                           f"The coordinator of state partition {self.partition} is loading.")
        raise ApiError(ErrorCode.not_coordinator,
                       f"The coordinator of state partition {self.partition} is {self.state.value}.")

    # ------------------------------------------------------------------ load
    def begin_load(self) -> int:
        """Start replaying from scratch; returns the load's generation."""
        self.generation += 1
        self.fenced = None
        self.shard = self.protocol.make_shard(self.partition)
        self.loader.begin()
        self.txn.load_began()
        self._set_state(ShardState.LOADING)
        return self.generation

    def load_dropped(self, cancel_timers: bool = True) -> None:
        """A load failed: what was replayed is thrown away and the shard answers
        NOT_COORDINATOR (FAILED)."""
        if cancel_timers:
            self.timers.cancel_all()
        self.shard = self.protocol.make_shard(self.partition)
        self._set_state(ShardState.FAILED)

    def finish_load(self, log_end_offset: int) -> None:
        if self.state is not _LOADING:
            return  # failed (already logged) or unloaded meanwhile
        if not self.loader.finish():
            return
        self.writer.next_offset = log_end_offset
        self._set_state(ShardState.ACTIVE)
        self.txn.load_finished(log_end_offset)
        self.loader.loaded()
        self.timers.apply(self.shard.on_loaded(self.clock() + self.load_grace_ms))
        unknown = dict(self.shard.unknown_record_types)
        log.debug("shard %d loaded: %s, offsets up to %d%s", self.partition, self.protocol.describe(self.shard),
                  log_end_offset, f", skipped unknown record types {unknown}" if unknown else "")
        self.loader.warn_unused_skips(log_end_offset)

    # The state logs' load callbacks (service lifecycle, loader.reload) and the loader's state.
    def load_reader(self, partition: int = -1) -> TxnLogReader:
        return self.loader.reader()

    def replay_raw(self, offset: int, key: bytes, value: bytes | None) -> None:
        self.loader.replay_raw(offset, key, value)

    def batch_unreadable(self, partition: int, error: CorruptBatchError) -> None:
        """A record batch the state log cannot read (CRC, decompression): the shard fails
        as for a record that does not decode; the other shards load on."""
        if self.state is _LOADING:
            self.loader.failed(error, error.offset)

    def load_abandoned(self, partition: int) -> bool:
        """Stop reading this shard's partition (its load failed, or it was unloaded)."""
        return self.state is not _LOADING

    async def reload(self) -> None:
        await self.loader.reload()

    def start_reload(self) -> None:
        self.loader.start_reload()

    def cancel_reload(self) -> None:
        self.loader.cancel_reload()

    # State kept by the parts, read (and in tests set) under the names the runtime had.
    _reload_task = _Part("loader", "reload_task")
    load_error = _Part("loader", "load_error")
    failed_offset = _Part("loader", "failed_offset")
    reload_attempts = _Part("loader", "reload_attempts")
    skip_offsets = _Part("loader", "skip_offsets")
    skipped = _Part("loader", "skipped")
    next_offset = _Part("writer", "next_offset")
    max_batch_bytes = _Part("writer", "max_batch_bytes")
    write_failures = _Part("writer", "write_failures")
    txn_log = _Part("txn", "log")
    _marker_poll = _Part("txn", "marker_poll")

    # ------------------------------------------------------------ operations
    async def run(self, op: Operation) -> Any:
        """Run a read or write operation and return its response once it is durable."""
        self._ops += 1
        sampled = self._ops % metrics.EVENT_SAMPLE == 0     # Kafka's event metrics, sampled
        if sampled:
            queued = time.perf_counter()
        while not self._txn_free.is_set():
            await self._txn_free.wait()   # a client's transactional batch is being appended
        self.check_active()
        try:
            if sampled:
                started = time.perf_counter()
                metrics.EVENT_QUEUE_SECONDS.observe(started - queued)
                response, fut, parked = self._execute(op)
                metrics.EVENT_PROCESSING_SECONDS.observe(time.perf_counter() - started)
            else:
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
            except TimeoutError:
                # offsets.commit.timeout.ms: REQUEST_TIMED_OUT maps to COORDINATOR_NOT_AVAILABLE.
                raise ApiError(ErrorCode.coordinator_not_available,
                               f"The write to state partition {self.partition} timed out.") from None
        return response

    def _execute(self, op: Operation) -> tuple[Any, asyncio.Future | None, asyncio.Future | None]:
        result = op(self.shard, self.clock())
        parked = None
        fut: asyncio.Future | None
        if result.parked is not None:
            parked = self._parked[result.parked] = asyncio.get_running_loop().create_future()
        writer = self.writer
        if result.records:
            encoded = self._serialize(result.records)
            size = sum(len(k) + (len(v) if v else 0) for k, v in encoded)
            batch = writer.batch_for(size)
            try:
                self.shard.apply(result, writer.next_offset)
            except Exception as e:  # a record contradicts the state: the shard is corrupt
                log.exception("shard %d: replay of a fresh result failed; reloading", self.partition)
                self.fail(e)
                raise ApiError(ErrorCode.not_coordinator, "The coordinator is reloading.") from e
            writer.next_offset += len(encoded)
            self._records_written(result.records)
            batch.records.extend(encoded)
            batch.size += size
            fut = batch.done
            writer.schedule_flush()
        else:
            fut = writer.last_pending()
        self.timers.apply(result.timers)
        for token, response in result.completions:
            waiter = self._parked.pop(token, None)
            if waiter is not None:
                release_when_durable(fut, waiter, response)
        return result.response, fut, parked

    def submit(self, op: Operation) -> None:
        """Run an operation nobody waits for (timer expiry); failures are logged."""
        if self.state is not _ACTIVE:
            return
        if not self._txn_free.is_set():
            asyncio.get_running_loop().create_task(self._submit_when_free(op))
            return
        try:
            self._execute(op)
        except ApiError as e:
            log.warning("shard %d: background operation failed: %s", self.partition, e)
        except Exception:
            log.exception("shard %d: background operation failed", self.partition)

    async def _submit_when_free(self, op: Operation) -> None:
        await self._txn_free.wait()
        self.submit(op)

    def _timer_due(self, key: tuple, payload: Any) -> None:
        """A due timer submits the shard's `on_timer` for its key."""
        self.submit(lambda shard, now: shard.on_timer(key, payload, now))

    # --------------------------------------------- clients' transactional writes
    # txn_offsets_log.TxnShardPort, served by the txn part (txn_writes.py).
    def now_ms(self) -> int:
        return self.clock()

    def exclusive_write(self) -> AbstractAsyncContextManager[None]:
        return self.txn.exclusive_write()

    async def caught_up(self, until: int | None = None) -> tuple[TxnLogReader, int]:
        return await self.txn.caught_up(until)

    def appended(self, write: Any, base_offset: int) -> None:
        self.txn.appended(write, base_offset)

    def resync(self) -> None:
        self.txn.resync_pending = True

    async def barrier(self) -> None:
        await self.txn.barrier()

    async def read_markers(self) -> None:
        await self.txn.read_markers()

    # -------------------------------------------------- failure, fence, unload
    def fail(self, error: Exception, batch: Batch | None = None, landed: bool = False) -> None:
        """Fail every waiter whose result is not known to be durable, and reload."""
        self._drop_pending(f"The write to state partition {self.partition} failed.", batch, landed)
        self.generation += 1
        self._set_state(ShardState.FAILED)
        self.loader.start_reload()

    def _drop_pending(self, message: str, batch: Batch | None = None, landed: bool = False) -> None:
        """Answer every waiter NOT_COORDINATOR (Kafka fails the current batch and the
        deferred events so on unload) and forget the batches and timers."""
        self.writer.drop(ApiError(ErrorCode.not_coordinator, message), batch, landed)
        self._fail_parked()
        self.timers.cancel_all()

    def fenced_by(self, error: ShardFenced, batch: Batch | None = None) -> None:
        """Another process owns the shard now: answer every waiter NOT_COORDINATOR and
        unload, never reload (a reload would take the shard back from its new owner)."""
        if self.loader.reload_task is asyncio.current_task():
            self.loader.reload_task = None    # returning from it: nothing to cancel
        if batch is not None and not batch.done.done():
            batch.done.set_exception(ApiError(ErrorCode.not_coordinator, str(error)))
            batch.done.exception()
        self.unload(f"fenced: {error.reason}")
        self.fenced = error
        metrics.SHARD_FENCED.inc()
        log.warning("shard %d: %s; its groups answer NOT_COORDINATOR and it is unloaded", self.partition, error)
        if self.on_fenced is not None:
            try:
                self.on_fenced(self.partition, error)
            except Exception:
                log.exception("shard %d: on_fenced callback failed", self.partition)

    async def drain(self, timeout_s: float) -> bool:
        """Wait (bounded) until no write of this shard is open or queued: a scale-down ends
        its transactions before leaving, so the new owner does not wait for them to time
        out (docs/user/cluster.md). True if drained."""
        return await self.writer.drain(timeout_s)

    def unload(self, reason: str) -> None:
        """Drop everything this shard holds and stop serving (Kafka's unload: CLOSED, pending
        events failed with NOT_COORDINATOR). Only a load brings it back."""
        self.loader.cancel_reload()
        self.generation += 1
        self.writer.write_failures = 0     # the next load starts from a topic checked anew
        self._drop_pending(f"The coordinator of state partition {self.partition} was unloaded: {reason}.")
        self.shard = self.protocol.make_shard(self.partition)
        self.loader.bulk = self.loader.new_bulk()
        self.writer.next_offset = 0
        self._set_state(ShardState.UNLOADED)

    def _fail_parked(self) -> None:
        """Kafka answers parked joins and syncs NOT_COORDINATOR when a shard unloads."""
        for waiter in self._parked.values():
            if not waiter.done():
                waiter.set_exception(ApiError(ErrorCode.not_coordinator, "The coordinator is reloading."))
                waiter.exception()
        self._parked.clear()

    def close(self) -> None:
        self.loader.cancel_reload()
        self.txn.close()
        self._set_state(ShardState.CLOSED)
        self._fail_parked()
        self.timers.cancel_all()

