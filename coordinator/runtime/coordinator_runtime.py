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
- Three kinds of write, as Kafka's runtime has: an operation (`run`, `submit`), a client's
  transactional write (`run_transactional`), and a client's transaction marker applied
  (`complete_transaction`). Each returns, or applies, a `Result` of the shard's.
- The parts: `writer` (batches, offsets, writes in flight), `loader` (fence, load, reload,
  skip list), `timers` (timer_table.py), `txn` (clients' transactional writes and the
  markers tail, txn_writes.py). The public names below that only forward to a part are
  the contract the service and the state logs (load callbacks) call.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from .. import metrics
from ..group.errors import ApiError
from .answer import Answer
from .loader import ShardLoader
from .parked import ParkedRequests, release_when_durable
from .partition_writer import PartitionWriter
from .parts import Forward
from .releases import Releases
from .shard_protocol import ShardProtocol
from .shard_state import ShardState
from .state_log import CorruptBatchError, ShardFenced, StateLog
from .timer_table import TimerTable
from .transactional_write import ClientAppend, TxnOperation
from .txn_log_reader import TxnLogReader
from .txn_writes import TxnWrites
from .writer import Batch, ShardWriter

log = logging.getLogger("kcoord.runtime")

Operation = Callable[[Any, int], Any]   # (shard, now_ms) -> Result

__all__ = ["CoordinatorRuntime", "Operation", "release_when_durable", "schedule", "start_call", "wall_ms"]

_ACTIVE = ShardState.ACTIVE
_LOADING = ShardState.LOADING
_EVENT_SAMPLE = metrics.EVENT_SAMPLE
_time_ns = time.time_ns


def wall_ms() -> int:
    # Integer arithmetic on the clock's nanoseconds: no int() of a float, a type's call
    # through C, per operation (System.currentTimeMillis' value, truncated as before).
    return time.time_ns() // 1_000_000


def _bug(partition: int, error: Exception) -> ApiError:
    """A bug must not close the client's connection: it answers UNKNOWN_SERVER_ERROR."""
    log.exception("shard %d: operation failed", partition)
    return ApiError(ErrorCode.unknown_server_error, f"{type(error).__name__}: {error}")


def schedule(runtime: CoordinatorRuntime, op: Operation) -> asyncio.Future | Answer:
    """`runtime.start` whose answer is always a future or an `Answer` (errors complete it
    exceptionally)."""
    loop = asyncio.get_running_loop()
    try:
        answer = runtime.start(op)
    except ApiError as e:
        answer = loop.create_future()
        answer.set_exception(e)
        return answer
    if isinstance(answer, (asyncio.Future, Answer)):
        return answer
    answered = loop.create_future()
    answered.set_result(answer)
    return answered


def start_call(runtime: CoordinatorRuntime, operation: str, ctx: Any, req: Any) -> Any:
    """`runtime.start` of the operation that calls the shard's method `operation` with (ctx,
    req, now): the service's single-group requests. The method is called here, not from a
    closure made per request (its function, its cells, its frame: a durable commit and a
    heartbeat pay that each time, docs/measurements/cpu-per-commit.md). The rest is
    `start`'s, the sampled, the waiting and the failing operations through it."""
    runtime._ops += 1
    if runtime._ops % _EVENT_SAMPLE and not runtime.txn.busy and runtime.state is _ACTIVE:
        try:
            clock = runtime.clock
            # wall_ms's one line, not a call to it, with the clock a runtime has unless a test
            # replaced it: a Python frame per heartbeat and per commit.
            now = _time_ns() // 1_000_000 if clock is wall_ms else clock()
            response, fut, parked = take_result(runtime, getattr(runtime.shard, operation)(ctx, req, now))
        except ApiError:
            raise
        except Exception as e:
            raise _bug(runtime.partition, e) from e
        if parked is not None:
            return parked
        if fut is not None:
            return runtime._releases.when_durable(fut, response, runtime.write_timeout_s)
        return response
    runtime._ops -= 1     # `start` counts it
    return runtime.start(lambda shard, now: getattr(shard, operation)(ctx, req, now))


def take_result(rt: CoordinatorRuntime, result: Any) -> tuple[Any, asyncio.Future | None, asyncio.Future | None]:
    """An operation's `Result` taken in: replayed, its records batched, its timers set. The
    writer's open batch and its scheduled flush are read here, its methods called only to
    open a batch or schedule the flush: a commit pays two calls fewer (the same rules,
    writer.py's `batch_for` and `schedule_flush`)."""
    parked = None
    fut: asyncio.Future | None
    if result.parked is not None:
        parked = rt.parked.park(result.parked)
    writer = rt.writer
    if result.records:
        encoded = rt._serialize(result.records)
        size = 0
        for k, v in encoded:    # a loop: no generator to resume per record
            size += len(k) + len(v) if v is not None else len(k)
        batch = writer.current
        if batch is None or batch.size + size > writer.max_batch_bytes:
            batch = writer.batch_for(size)
        try:
            rt.shard.apply(result, writer.next_offset)
        except Exception as e:  # a record contradicts the state: the shard is corrupt
            log.exception("shard %d: replay of a fresh result failed; reloading", rt.partition)
            rt.fail(e)
            raise ApiError(ErrorCode.not_coordinator, "The coordinator is reloading.") from e
        writer.next_offset += len(encoded)
        rt._records_written(result.records)
        batch.records.extend(encoded)
        batch.size += size
        fut = batch.done
        if not writer.flush_scheduled:
            writer.schedule_flush()
    else:
        fut = writer.last_pending()
    if result.timers:     # most operations change no timer: no call then
        rt.timers.apply(result.timers)
    if result.completions:
        rt.parked.answer(result.completions, fut)
    return result.response, fut, parked


class CoordinatorRuntime:
    def __init__(self, partition: int, protocol: ShardProtocol, state_topic: StateLog, *,
                 write_timeout_ms: int = 5000, max_batch_bytes: int = 4 * 1024 * 1024,
                 clock: Callable[[], int] = wall_ms, skip_offsets: frozenset[int] = frozenset(),
                 sleep: Callable[[float], Any] = asyncio.sleep,
                 partition_writer: PartitionWriter | None = None) -> None:
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
        self.parked = ParkedRequests()
        self._releases = Releases(partition)     # answers waiting for their write (releases.py)
        self.timers = TimerTable(lambda: self.clock(), self._timer_due)   # the clock may be replaced
        self._timers = self.timers.table    # the same dict, for tools that read the timer keys
        # Offsets an append takes beyond its records (1 for a transactional log: the COMMIT
        # marker), added when a batch is closed to further records.
        self.writer = ShardWriter(self, max_batch_bytes, int(getattr(state_topic, "offsets_per_append", 0)),
                                  partition_writer)
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
    def set_state(self, state: ShardState) -> None:
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
        self.set_state(ShardState.LOADING)
        return self.generation

    def finish_load(self, log_end_offset: int) -> None:
        """The log is replayed up to `log_end_offset`: serve (loader.finished), unless the
        load failed (already logged) or the shard was unloaded meanwhile."""
        if self.state is _LOADING:
            self.loader.finished(log_end_offset)

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

    # Kept by the parts, called, read (and in tests set) under the names the runtime had.
    reload = Forward("loader", "reload")                # async: the shard reloaded from its log
    start_reload = Forward("loader", "start_reload")
    cancel_reload = Forward("loader", "cancel_reload")
    _reload_task = Forward("loader", "reload_task")
    load_error = Forward("loader", "load_error")
    failed_offset = Forward("loader", "failed_offset")
    reload_attempts = Forward("loader", "reload_attempts")
    skip_offsets = Forward("loader", "skip_offsets")
    skipped = Forward("loader", "skipped")
    next_offset = Forward("writer", "next_offset")
    max_batch_bytes = Forward("writer", "max_batch_bytes")
    write_failures = Forward("writer", "write_failures")
    txn_log = Forward("txn", "log")
    _marker_poll = Forward("txn", "marker_poll")

    # ------------------------------------------------------------ operations
    async def run(self, op: Operation) -> Any:
        """Run a read or write operation and return its response once it is durable."""
        self._ops += 1
        queued = time.perf_counter() if self._ops % _EVENT_SAMPLE == 0 else 0.0
        while not self._txn_free.is_set():
            await self._txn_free.wait()   # a client's transactional batch is being appended
        response, fut, parked = self._run_now(op, queued)
        if parked is not None:
            # A parked JoinGroup/SyncGroup waits for another operation to answer it; clients
            # expect that to take up to a rebalance timeout, so no write timeout applies.
            return await parked
        if fut is not None:
            return await self._releases.when_durable(fut, response, self.write_timeout_s)
        return response

    def start(self, op: Operation) -> Any:
        """`run` without a coroutine: the operation's response when it may be released at
        once, else the `Answer` of it (answer.py: completed once it is durable, by the one
        callback on its batch, with the same write timeout), a parked request's own future,
        or, behind a client's transactional append, a Task. A caller that completes an
        ordered response queue from the answer's callback thus needs no Task, no future and
        no loop turn per operation. Raises ApiError when the shard cannot run it; the answer
        fails so later."""
        if self.txn.busy:
            return asyncio.get_running_loop().create_task(self.run(op))   # waits behind a client's append
        self._ops += 1
        if self._ops % _EVENT_SAMPLE:
            # `_run_now` written out for the operations not sampled: one call less per request.
            if self.state is not _ACTIVE:
                self.check_active()
            try:
                response, fut, parked = self._written(op(self.shard, self.clock()))
            except ApiError:
                raise
            except Exception as e:
                raise _bug(self.partition, e) from e
        else:
            response, fut, parked = self._run_now(op, time.perf_counter())
        if parked is not None:
            return parked
        if fut is not None:
            return self._releases.when_durable(fut, response, self.write_timeout_s)
        return response

    def _run_now(self, op: Operation, queued: float) -> tuple[Any, asyncio.Future | None, asyncio.Future | None]:
        """Execute an operation in this turn; `queued` (perf_counter, 0 when not sampled)
        feeds Kafka's event metrics. Raises ApiError only."""
        self.check_active()
        try:
            if queued:
                started = time.perf_counter()
                metrics.EVENT_QUEUE_SECONDS.observe(started - queued)
                answer = self._written(op(self.shard, self.clock()))
                metrics.EVENT_PROCESSING_SECONDS.observe(time.perf_counter() - started)
                return answer
            return self._written(op(self.shard, self.clock()))
        except ApiError:
            raise
        except Exception as e:
            raise _bug(self.partition, e) from e

    # An operation's `Result` taken in (a module function, kept out of the class's length).
    _written = take_result

    def submit(self, op: Operation) -> None:
        """Run an operation nobody waits for (timer expiry); failures are logged."""
        if self.state is not _ACTIVE:
            return
        if not self._txn_free.is_set():
            asyncio.get_running_loop().create_task(self._submit_when_free(op))
            return
        try:
            self._written(op(self.shard, self.clock()))
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

    # ------------------------------------------ the second and third kinds
    async def run_transactional(self, op: TxnOperation, append: ClientAppend) -> Any:
        """A client's transactional write (Kafka's `scheduleTransactionalWriteOperation`):
        `op(shard, now)` returns its `Result` with the client's producer, `append` puts the
        records into the partition as that producer; the response once it is durable and
        the shard proved it is still owned here (txn_writes.py, transactional_write.py)."""
        return await self.txn.write(op, append)

    def complete_transaction(self, producer_id: int, committed: bool, offset: int) -> None:
        """A client's transaction marker (COMMIT or ABORT) read at `offset` of the partition
        ends that producer's pending records (Kafka's `scheduleTransactionCompletion`); run
        on the loop between operations, never during one."""
        self.shard.replay_end_transaction(producer_id, committed, offset)

    async def read_markers(self) -> None:
        await self.txn.read_markers()

    # -------------------------------------------------- failure, fence, unload
    def fail(self, error: Exception, batch: Batch | None = None, landed: bool = False) -> None:
        """Fail every waiter whose result is not known to be durable, and reload."""
        self._drop_pending(f"The write to state partition {self.partition} failed.", batch, landed)
        self.generation += 1
        self.set_state(ShardState.FAILED)
        self.loader.start_reload()

    def _drop_pending(self, message: str, batch: Batch | None = None, landed: bool = False) -> None:
        """Answer every waiter NOT_COORDINATOR (Kafka fails the current batch and the
        deferred events so on unload) and forget the batches and timers."""
        self.writer.drop(ApiError(ErrorCode.not_coordinator, message), batch, landed)
        self.parked.fail_all()
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
        self.set_state(ShardState.UNLOADED)

    def close(self) -> None:
        self.loader.cancel_reload()
        self.txn.close()
        self.set_state(ShardState.CLOSED)
        self.parked.fail_all()
        self.timers.cancel_all()

