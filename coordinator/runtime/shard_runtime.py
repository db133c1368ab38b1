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
shard reloads from the log, which holds exactly the acknowledged state. If the write (or
the reload) raises `ShardFenced` (another process took the shard, issue 14), the waiters
fail the same way but the shard unloads instead: `fenced` holds why, and `on_fenced(partition,
error)` tells the owner of the membership, which drops the shard and rejoins.

Shard states (Kafka's `CoordinatorState`; reference §1.1):
- LOADING: replaying the log; group APIs answer COORDINATOR_LOAD_IN_PROGRESS.
- ACTIVE: serving.
- FAILED: a record did not load, or a write failed. A failed *load* stays failed: Kafka
  leaves the partition FAILED until its leadership changes, and kcoord until the operator
  restarts it (with `state.load.skip.corrupt.offsets` naming the record, or after fixing
  the log). A failed *write* reloads at once, retrying with a bounded, jittered backoff
  (0.1 s doubling to 5 s) while the upstream is down, so the shard comes back on its own;
  writes that fail again after each reload (no Write ACL) wait that backoff before reloading.
- UNLOADED: the state topic is gone (`GroupCoordinatorService.state_topic_lost`); the
  in-memory state was dropped, because it must never be served without the log behind it.
- CLOSED: shut down.
Every state but ACTIVE and LOADING answers NOT_COORDINATOR (`withActiveContextOrThrow`).

Clients' transactions (issue 16; `txn_offsets_log.TxnShardPort`): a client's offsets batch is
appended with no operation running and nothing of kcoord's open (`exclusive_write`), so log
order and replay order agree; the load's TxnLogReader stays on as a markers-only tail
(`caught_up`, `read_markers`); markers make kcoord's batches land later than predicted, which
moves its later batches instead of reloading, unless the gap holds data (a foreign write).
A load failure takes down only its own shard; the other shards load and serve.
"""
from __future__ import annotations

import asyncio
import contextlib
import enum
import heapq
import itertools
import logging
import random
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

from aiokafka.errors import TopicAuthorizationFailedError
from kio.schema.errors import ErrorCode

from records import (
    ConsumerGroupMetadataKey,
    GroupMetadataKey,
    RecordDecodeError,
    UnknownRecordVersionError,
    encode_key,
    encode_value,
)
from records.batch import iter_batches

from ..group.bulk_replay import BulkReplay
from ..group.consumer_group import IllegalStateError
from ..group.errors import ApiError
from ..group.result import CancelTimer, Result, ScheduleTimer
from ..group.shard import GroupCoordinatorShard
from ..group.txn_offset_commit import TxnOffsetWrite, replay_pending
from . import metrics
from .state_log import CorruptBatchError, ShardFenced, StateLog
from .txn_log_reader import TxnLogReader

log = logging.getLogger("kcoord.runtime")

Operation = Callable[[GroupCoordinatorShard, int], Result]


class ShardState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"
    UNLOADED = "unloaded"
    CLOSED = "closed"


_ACTIVE = ShardState.ACTIVE
_LOADING = ShardState.LOADING

# Reload after a failed write: first retry after RELOAD_BACKOFF_MIN_S, doubling up to
# RELOAD_BACKOFF_MAX_S, each delay jittered by +-20 % so that the shards of a process do
# not hit a recovering upstream in lockstep. One reload task per shard at most.
RELOAD_BACKOFF_MIN_S = 0.1
RELOAD_BACKOFF_MAX_S = 5.0
# While the upstream stays down, a failed reload attempt is logged at most this often.
RELOAD_LOG_INTERVAL_S = 60.0
# Failed writes: the first is logged at ERROR, then at most one line per this interval
# with the number of failures not logged (a lasting TopicAuthorizationFailed fails every
# write of every reload).
WRITE_ERROR_LOG_INTERVAL_S = 10.0
# Issue 16: while a shard holds clients' open transactions, it reads the markers written into
# its partition this often (OffsetFetch and TxnOffsetCommit read them at once anyway): the
# pending-offset metrics, group expiry and the memory bound then follow the log within this
# delay, as Kafka's coordinator learns of a marker when it is written.
MARKER_POLL_S = 1.0


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


def _expiry(key: tuple, payload: Any) -> Operation:
    """The operation a due timer submits: the shard's `on_timer` for that key."""
    return lambda shard, now: shard.on_timer(key, payload, now)


_CONSUMER_REBALANCES = metrics.REBALANCES.labels(type="consumer")
_CLASSIC_REBALANCES = metrics.REBALANCES.labels(type="classic")


def _count_rebalances(records) -> None:
    """A new group epoch (ConsumerGroupMetadata) or a classic generation with members
    (GroupMetadata): what Kafka's rebalance counts count. Only results with records get here,
    so a steady heartbeat pays nothing."""
    for r in records:
        key = r.key.__class__
        if key is ConsumerGroupMetadataKey and r.value is not None:
            _CONSUMER_REBALANCES.inc()
        elif key is GroupMetadataKey and r.value is not None and r.value.members:
            _CLASSIC_REBALANCES.inc()


class _LoadTarget:
    """TxnLogReader -> the load (BulkReplay), for one load generation."""

    def __init__(self, runtime: ShardRuntime, generation: int) -> None:
        self.runtime, self.generation = runtime, generation

    def record(self, offset: int, key: bytes, value: bytes | None, producer_id: int) -> None:
        rt = self.runtime
        if rt.state is not _LOADING or rt.generation != self.generation:
            return
        try:
            rt._loader.add(key, value, offset, producer_id)
        except Exception as e:
            rt._load_failed(e, offset)

    def end_transaction(self, offset: int, producer_id: int, committed: bool) -> None:
        rt = self.runtime
        if rt.state is not _LOADING or rt.generation != self.generation:
            return
        try:
            # Buffered commits before the marker apply first (BulkReplay keeps log order).
            rt._loader.end_transaction(producer_id, committed)
        except Exception as e:
            rt._load_failed(e, offset)


class _MarkerTarget:
    """The ACTIVE shard's tail: markers only. Its data records were replayed when written
    (kcoord's own by the write path, clients' by `appended`)."""

    def __init__(self, runtime: ShardRuntime) -> None:
        self.runtime = runtime

    def record(self, offset: int, key: bytes, value: bytes | None, producer_id: int) -> None:
        return

    def end_transaction(self, offset: int, producer_id: int, committed: bool) -> None:
        # With the marker's offset: the tail may read a marker after the producer's next
        # transaction has already appended offsets (see txn_offsets_log._markers_before).
        self.runtime.shard.replay_end_transaction(producer_id, committed, offset)


def wall_ms() -> int:
    return int(time.time() * 1000)


class ShardRuntime:
    def __init__(self, partition: int, make_shard: Callable[[int], GroupCoordinatorShard],
                 state_topic: StateLog, *, write_timeout_ms: int = 5000,
                 max_batch_bytes: int = 4 * 1024 * 1024, clock: Callable[[], int] = wall_ms,
                 skip_offsets: frozenset[int] = frozenset(),
                 sleep: Callable[[float], Any] = asyncio.sleep) -> None:
        self.partition = partition
        self._make_shard = make_shard
        self.state_topic = state_topic
        self.write_timeout_s = write_timeout_ms / 1000
        self.max_batch_bytes = max_batch_bytes
        self.clock = clock
        self._sleep = sleep
        # Offsets of this partition the operator chose to skip if they fail to load
        # (state.load.skip.corrupt.offsets); `skipped` holds the ones actually skipped.
        self.skip_offsets = frozenset(skip_offsets)
        self.skipped: set[int] = set()
        self.load_error: BaseException | None = None
        self.failed_offset: int | None = None
        self.load_failures = 0
        self.reload_attempts = 0
        # Bumped whenever the shard's state is thrown away (reload, unload): a write that
        # completes for an older generation must not touch the new one.
        self.generation = 0
        self._load_started = 0.0   # time.monotonic() of the current load's start
        self.state = ShardState.LOADING
        metrics.set_shard_state(partition, self.state.value)
        self.shard = make_shard(partition)
        self._loader = self._new_loader()
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
        # Writes failed since the last one that succeeded. The first failure reloads at once;
        # each further one waits the backoff before reloading, so a write that fails every
        # time (no Write ACL) cannot drive reload -> write -> fail -> reload at request rate.
        self.write_failures = 0
        self._write_error_logged = float("-inf")
        self._write_errors_suppressed = 0
        # Offsets an append takes beyond its records (1 for a transactional log: the COMMIT
        # marker), added when a batch is closed to further records.
        self._append_overhead = int(getattr(state_topic, "offsets_per_append", 0))
        # Issue 14: set when another process fenced this shard; it stays UNLOADED until a
        # new load (begin_load clears it).
        self.fenced: ShardFenced | None = None
        self.on_fenced: Callable[[int, ShardFenced], None] | None = None
        # Issue 14 §3: a shard taken from another instance arms its members' session timers
        # this much after the load (the membership session), since they may still be
        # finding the new owner.
        self.load_grace_ms = 0
        self._ops = 0                 # operations run, for sampling the event metrics
        # Issue 16 (TxnShardPort of txn_offsets_log.py): set when the state log reads its
        # partitions raw with TxnLogReader (`txn_offsets_supported`). `_txn_reader` is the
        # load's reader, kept after the load as the tail: producers' sequences come from the
        # log's batch headers, and it applies the markers the upstream's transaction
        # coordinator writes into the partition. `_txn_free` is cleared while a client's batch
        # is appended: no operation runs meanwhile (Kafka's runtime runs a partition's events
        # one at a time; the transactional write is one of them), so replay order = log order.
        self.txn_log: Any = None
        self._txn_reader: TxnLogReader | None = None
        self._txn_read_to = 0
        self._txn_lock = asyncio.Lock()
        self._txn_free = asyncio.Event()
        self._txn_free.set()
        self._txn_resync = False
        self._marker_poll: asyncio.Task | None = None

    # --------------------------------------------------------------- loading
    def _set_state(self, state: ShardState) -> None:
        if state is not self.state:
            self.state = state
            metrics.set_shard_state(self.partition, state.value)

    def _new_loader(self) -> BulkReplay:
        return BulkReplay(self.shard, topic=self.state_topic.topic, partition=self.partition,
                          on_error=self._on_bad_record)

    def begin_load(self) -> int:
        """Start replaying from scratch; returns the load's generation."""
        self.generation += 1
        self.fenced = None
        self.shard = self._make_shard(self.partition)
        self._loader = self._new_loader()
        self.load_error = self.failed_offset = None
        self.skipped = set()
        self._txn_reader = None
        self._txn_read_to = 0
        self._set_state(ShardState.LOADING)
        self._load_started = time.monotonic()
        return self.generation

    def load_reader(self, partition: int = -1) -> TxnLogReader:
        """The reader a txn-aware state log loads this shard with (kept as the tail)."""
        reader = self._txn_reader = TxnLogReader(_LoadTarget(self, self.generation))
        return reader

    def replay_raw(self, offset: int, key: bytes, value: bytes | None) -> None:
        if self.state is not _LOADING:
            return  # the load failed (or the shard was unloaded): the rest is not replayed
        try:
            self._loader.add(key, value, offset)
        except Exception as e:
            self._load_failed(e, offset)

    def _on_bad_record(self, error: Exception, source: object, position: object, offset: int) -> None:
        """BulkReplay's hook for a record that does not decode or contradicts the state.
        Kafka fails the load (`UnknownRecordVersionException` is not caught, reference
        §1.4); kcoord does the same unless the operator listed exactly this record."""
        if offset not in self.skip_offsets:
            raise error
        self.skipped.add(offset)
        metrics.LOAD_SKIPPED.labels(partition=str(self.partition)).inc()
        log.warning("shard %d: SKIPPED the record at topic %s, partition %d, offset %d, as "
                    "state.load.skip.corrupt.offsets=%d:%d asks: %s", self.partition,
                    self.state_topic.topic, self.partition, offset, self.partition, offset, error)

    def batch_unreadable(self, partition: int, error: CorruptBatchError) -> None:
        """The loader's hook for a record batch aiokafka cannot read (CRC, decompression):
        the shard fails as for a record that does not decode; the other shards load on."""
        if self.state is _LOADING:
            self._load_failed(error, error.offset)

    def load_abandoned(self, partition: int) -> bool:
        """The loader's hook: stop reading this shard's partition (its load failed, or it
        was unloaded meanwhile)."""
        return self.state is not _LOADING

    def _load_failed(self, error: BaseException, offset: int | None) -> None:
        """The shard cannot be loaded: drop what was replayed so far (it must never be
        served) and stay FAILED. Kafka does the same and keeps the partition failed until
        its leadership changes; kcoord until the operator restarts it."""
        where = getattr(error, "offset", None)
        if where is None:
            where = offset
        self.load_error, self.failed_offset = error, where
        self.load_failures += 1
        self._cancel_all_timers()
        self.shard = self._make_shard(self.partition)
        self._loader = self._new_loader()
        self._set_state(ShardState.FAILED)
        metrics.LOAD_FAILURES.labels(partition=str(self.partition)).inc()
        decode_error = isinstance(error, (RecordDecodeError, UnknownRecordVersionError, IllegalStateError,
                                          CorruptBatchError))
        inspect = (f"`kcoord offsets show --bootstrap HOST:PORT --topic {self.state_topic.topic} "
                   f"--partition {self.partition} --offset {where}`")
        if where is None:
            hint = ""
        elif isinstance(error, CorruptBatchError):
            # The batch never reaches the record decoder, so the skip list cannot name it.
            hint = (f"; a batch that fails its CRC or does not decompress cannot be skipped by "
                    f"state.load.skip.corrupt.offsets: inspect it with {inspect}")
        else:
            hint = (f"; to skip that record, restart with --config state.load.skip.corrupt.offsets="
                    f"{self.partition}:{where} (inspect it with {inspect})")
        log.error("shard %d FAILED to load: topic %s, partition %d, offset %s: %s: %s. Its groups "
                  "answer NOT_COORDINATOR until kcoord is restarted%s", self.partition,
                  self.state_topic.topic, self.partition, "?" if where is None else where,
                  type(error).__name__, error, hint, exc_info=None if decode_error else error)

    def finish_load(self, log_end_offset: int) -> None:
        if self.state is not _LOADING:
            return  # failed (already logged) or unloaded meanwhile
        try:
            self._loader.flush()
        except Exception as e:
            self._load_failed(e, None)
            return
        self.next_offset = log_end_offset
        if self._txn_reader is not None:
            self._txn_reader.target = _MarkerTarget(self)
            self._txn_read_to = log_end_offset
        self._set_state(ShardState.ACTIVE)
        if self.shard.offsets.open_transactions:
            self._poll_markers()
        loaded_in = time.monotonic() - self._load_started
        metrics.LOAD_SECONDS.observe(loaded_in)
        metrics.PARTITION_LAST_LOAD_SECONDS.labels(partition=str(self.partition)).set(loaded_in)
        self._apply_timers(self.shard.on_loaded(self.clock() + self.load_grace_ms))
        unknown = dict(self.shard.unknown_record_types)
        log.debug("shard %d loaded: %d groups, offsets up to %d%s", self.partition,
                  len(self.shard.groups), log_end_offset,
                  f", skipped unknown record types {unknown}" if unknown else "")
        for offset in sorted(self.skip_offsets - self.skipped):
            # Nothing is skipped silently, and an entry that did not apply is worth knowing:
            # the operator may have named the wrong record.
            log.warning("shard %d: state.load.skip.corrupt.offsets lists %d:%d, but that record "
                        "%s; nothing was skipped there", self.partition, self.partition, offset,
                        "loaded normally (or was compacted away)" if offset < log_end_offset
                        else f"is beyond the end of the log ({log_end_offset})")

    async def reload(self) -> None:
        """Reload this shard alone from its partition. Raises if the upstream cannot be read;
        a record that fails to load leaves the shard FAILED instead."""
        self._cancel_all_timers()
        generation = self.begin_load()
        loaded: list[int] = []
        extra: dict[str, Any] = {"readers": self.load_reader} if self.txn_log is not None else {}
        await self.state_topic.load([self.partition], lambda p, o, k, v: self.replay_raw(o, k, v),
                                    lambda p, leo: loaded.append(leo), on_corrupt=self.batch_unreadable,
                                    abandoned=self.load_abandoned, **extra)
        if generation == self.generation and loaded:
            self.finish_load(loaded[0])

    # ------------------------------------------------------------ operations
    def check_active(self) -> None:
        if self.state is _ACTIVE:
            return
        if self.state is _LOADING:
            raise ApiError(ErrorCode.coordinator_load_in_progress,
                           f"The coordinator of state partition {self.partition} is loading.")
        raise ApiError(ErrorCode.not_coordinator,
                       f"The coordinator of state partition {self.partition} is {self.state.value}.")

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
        now = self.clock()
        result = op(self.shard, now)
        parked = None
        fut: asyncio.Future | None
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
            _count_rebalances(result.records)
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
                self.next_offset += self._append_overhead
            batch = self._current = _Batch(self.next_offset)
        return batch

    def submit(self, op: Operation) -> None:
        """Run an operation nobody waits for (timer expiry); failures are logged."""
        if self.state is not ShardState.ACTIVE:
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

    # ------------------------------------ transactional offset commits (issue 16)
    # txn_offsets_log.TxnShardPort. The client's batch is appended while no operation of this
    # shard runs and no kcoord batch is open or in flight, so its real offsets and the
    # predicted offsets of kcoord's own records keep the log's order (Kafka's "newer in the
    # log" rule compares them at the marker).
    def now_ms(self) -> int:
        return self.clock()

    @contextlib.asynccontextmanager
    async def exclusive_write(self) -> AsyncIterator[None]:
        async with self._txn_lock:
            self._txn_free.clear()
            try:
                generation = self.generation
                if not await self.drain(self.write_timeout_s):
                    raise ApiError(ErrorCode.coordinator_not_available,
                                   f"The writes of state partition {self.partition} before a TxnOffsetCommit "
                                   f"did not complete within {self.write_timeout_s}s.")
                if generation != self.generation:
                    raise ApiError(ErrorCode.not_coordinator,
                                   f"The coordinator of state partition {self.partition} reloaded.")
                self.check_active()
                yield
            finally:
                self._txn_free.set()
                if self._txn_resync:
                    # The outcome of an append (or a producer's sequence) is unknown: re-read
                    # the partition from the log (a reload rebuilds pending offsets and
                    # sequences from the batches themselves).
                    self._txn_resync = False
                    if self.state is _ACTIVE:
                        log.warning("shard %d: a TxnOffsetCommit append's outcome is unknown; reloading",
                                    self.partition)
                        self._fail(RuntimeError("TxnOffsetCommit outcome unknown"))
                elif self._current is not None:
                    self._schedule_flush()

    async def caught_up(self, until: int | None = None) -> tuple[TxnLogReader, int]:
        """Read the partition up to its high watermark, or only up to offset `until` (markers
        applied, producers' states taken from batch headers); kcoord's own next offset moves
        past what was read."""
        self.check_active()
        reader, source = self._txn_reader, self.txn_log
        if reader is None or source is None:
            raise ApiError(ErrorCode.coordinator_not_available,
                           f"State partition {self.partition} is not read with client transactions.")
        generation = self.generation
        offset = self._txn_read_to
        deadline = time.monotonic() + self.write_timeout_s
        while True:
            try:
                data, high_watermark = await source.read_partition(self.partition, offset)
            except Exception as e:   # the upstream's answer, or none: the client retries
                raise ApiError(ErrorCode.coordinator_not_available,
                               f"State partition {self.partition} could not be read at offset {offset}: "
                               f"{type(e).__name__}: {e}") from None
            if generation != self.generation or reader is not self._txn_reader:
                raise ApiError(ErrorCode.not_coordinator,
                               f"The coordinator of state partition {self.partition} reloaded.")
            offset = reader.feed(data, offset, until)
            self._txn_read_to = offset
            if offset >= (high_watermark if until is None else min(until, high_watermark)):
                break
            if time.monotonic() > deadline:
                raise ApiError(ErrorCode.coordinator_not_available,
                               f"State partition {self.partition}: could not read up to offset {high_watermark}.")
        if offset > self.next_offset and self._inflight is None and not self._sealed and self._current is None:
            self.next_offset = offset
        return reader, offset

    def appended(self, write: TxnOffsetWrite, base_offset: int) -> None:
        replay_pending(self.shard, write, base_offset)
        self.next_offset = max(self.next_offset, base_offset + len(write.result.records))
        self._poll_markers()

    def _poll_markers(self) -> None:
        """Read markers every MARKER_POLL_S while clients' transactions are open (one task
        per shard; it ends when none is open, or the shard reloads or closes)."""
        if self._txn_reader is None or self.txn_log is None:
            return
        if self._marker_poll is None or self._marker_poll.done():
            self._marker_poll = asyncio.get_running_loop().create_task(self._marker_loop(self.generation))

    async def _marker_loop(self, generation: int) -> None:
        while generation == self.generation and self.state is _ACTIVE and self.shard.offsets.open_transactions:
            await asyncio.sleep(MARKER_POLL_S)
            if generation != self.generation or self.state is not _ACTIVE:
                return
            try:
                await self.read_markers()
            except Exception as e:     # the upstream is away: try again at the next tick
                log.debug("shard %d: markers not read: %s", self.partition, e)

    def resync(self) -> None:
        self._txn_resync = True

    async def barrier(self) -> None:
        """Prove this process still owns the shard after the client's append: a kcoord
        transaction begun now (fenced_state_log.barrier); ShardFenced -> NOT_COORDINATOR. A
        state log without fencing (one process) has nothing to prove."""
        barrier = getattr(self.state_topic, "barrier", None)
        if barrier is None:
            return
        try:
            await asyncio.wait_for(barrier(self.partition), self.write_timeout_s)
        except ShardFenced as e:
            self._on_fenced(e)
            raise ApiError(ErrorCode.not_coordinator, str(e)) from None
        except Exception as e:
            raise ApiError(ErrorCode.coordinator_not_available,
                           f"State partition {self.partition}: the ownership check after the append failed: "
                           f"{type(e).__name__}: {e}") from None

    async def read_markers(self) -> None:
        """Apply the markers written since the last read (before OffsetFetch answers a
        group with open transactions; see service._offset_fetch)."""
        if self._txn_reader is None or self.txn_log is None:
            return
        async with self._txn_lock:
            await self.caught_up()

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
            self.next_offset += self._append_overhead
        else:
            return
        self._inflight = batch
        asyncio.get_running_loop().create_task(self._write(batch))

    async def _write(self, batch: _Batch) -> None:
        started = time.perf_counter()
        generation = self.generation
        try:
            base = await self.state_topic.append(self.partition, batch.records, self.clock())
        except Exception as e:
            if generation != self.generation:
                return  # the shard was unloaded or reloaded meanwhile: its waiters are answered
            if isinstance(e, ShardFenced):
                self._inflight = None
                self._on_fenced(e, batch)
                return
            self.write_failures += 1
            self._log_write_failure(len(batch.records), e)
            self._inflight = None
            self._fail(e, batch)
            return
        metrics.WRITE_SECONDS.observe(time.perf_counter() - started)
        metrics.RECORDS_WRITTEN.inc(len(batch.records))
        if generation != self.generation:
            return  # unloaded meanwhile: the waiters already got NOT_COORDINATOR
        self._inflight = None
        self.write_failures = 0
        if base > batch.base_offset and self._txn_reader is not None:
            # Issue 16: the upstream's transaction coordinator writes markers of clients'
            # transactions into this partition whenever they end, so kcoord's batches land
            # later than predicted. The order of records is unchanged (clients' own batches
            # are appended only with nothing of kcoord's open: exclusive_write), so the later
            # batches move by the same amount and nothing reloads.
            delta = base - batch.base_offset
            self.next_offset += delta
            for later in (*self._sealed, self._current):
                if later is not None:
                    later.base_offset += delta
            # Only markers may fill the gap; anything else is a foreign write (the check
            # below reloads then, as for any unexpected offset).
            asyncio.get_running_loop().create_task(self._check_gap(batch.base_offset, base, generation))
        elif base != batch.base_offset:
            # Someone else wrote to our partition: our in-memory offsets are wrong. Kafka
            # fails the context and reloads it the same way.
            log.error("shard %d: batch landed at offset %d, expected %d; reloading",
                      self.partition, base, batch.base_offset)
            self._fail(RuntimeError("unexpected state topic offset"), batch, landed=True)
            return
        batch.done.set_result(base)
        self._flush()

    async def _check_gap(self, start: int, end: int, generation: int) -> None:
        """The offsets [start, end) before a batch that landed late hold control batches only
        (clients' markers); a data batch there was written by someone else: reload."""
        try:
            data, _ = await self.txn_log.read_partition(self.partition, start)
        except Exception as e:
            log.warning("shard %d: could not check offsets %d-%d of topic %s: %s", self.partition, start, end - 1,
                        self.state_topic.topic, e)
            return
        for b in iter_batches(data, allow_partial_tail=True):
            if b.base_offset >= end:
                return
            if b.last_offset < start or b.is_control_batch:
                continue
            if generation == self.generation and self.state is _ACTIVE:
                log.error("shard %d: a batch someone else wrote sits at offset %d of topic %s (producer %d); "
                          "reloading", self.partition, b.base_offset, self.state_topic.topic, b.producer_id)
                self._fail(RuntimeError("unexpected state topic offset"))
            return

    def _log_write_failure(self, records: int, error: Exception) -> None:
        now = time.monotonic()
        if now - self._write_error_logged < WRITE_ERROR_LOG_INTERVAL_S:
            self._write_errors_suppressed += 1
            return
        self._write_error_logged = now
        suppressed, self._write_errors_suppressed = self._write_errors_suppressed, 0
        hint = ""
        if isinstance(error, TopicAuthorizationFailedError):
            hint = (f"; the upstream refuses kcoord's principal Write on {self.state_topic.topic}: "
                    f"grant it (docs/reliability.md, 'The state topic belongs to kcoord')")
        log.error("shard %d: write of %d records to topic %s partition %d failed: %r (%d failed writes in "
                  "a row); its groups answer NOT_COORDINATOR and it reloads from the log%s%s", self.partition,
                  records, self.state_topic.topic, self.partition, error, self.write_failures, hint,
                  f" ({suppressed} more failed writes not logged in the last {WRITE_ERROR_LOG_INTERVAL_S:.0f}s)"
                  if suppressed else "")

    def _fail(self, error: Exception, batch: _Batch | None = None, landed: bool = False) -> None:
        """Fail every waiter whose result is not known to be durable, and reload."""
        self._drop_pending(f"The write to state partition {self.partition} failed.", batch, landed)
        self.generation += 1
        self._set_state(ShardState.FAILED)
        self.start_reload()

    def _drop_pending(self, message: str, batch: _Batch | None = None, landed: bool = False) -> None:
        """Answer every waiter NOT_COORDINATOR (Kafka fails the current batch and the
        deferred events so on unload) and forget the batches and timers."""
        exc = ApiError(ErrorCode.not_coordinator, message)
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
        self._cancel_all_timers()

    def start_reload(self) -> None:
        """Reload in the background until it succeeds (one task per shard, never more)."""
        if self._reload_task is None or self._reload_task.done():
            self._reload_task = asyncio.get_running_loop().create_task(self._reload_after_failure())

    def cancel_reload(self) -> None:
        task, self._reload_task = self._reload_task, None
        if task is not None and not task.done():
            task.cancel()

    async def _reload_after_failure(self) -> None:
        """Reload with a bounded, jittered exponential backoff: an upstream that is down is
        retried every few seconds, never in a hot loop, and the shard comes back on its own
        once the upstream answers. A record that fails to load ends the retries (the shard
        stays FAILED: retrying cannot change the log)."""
        delay = RELOAD_BACKOFF_MIN_S
        last_logged = float("-inf")
        failures = 0
        if self.write_failures > 1:
            # Writes keep failing although the reloads succeed: back off before reloading.
            wait = min(RELOAD_BACKOFF_MIN_S * 2 ** (self.write_failures - 2), RELOAD_BACKOFF_MAX_S)
            await self._sleep(wait * random.uniform(0.8, 1.2))
        while self.state is not ShardState.CLOSED and self.state is not ShardState.UNLOADED:
            self.reload_attempts += 1
            try:
                await self.reload()
            except asyncio.CancelledError:
                raise
            except ShardFenced as e:
                self._on_fenced(e)
                return
            except Exception as e:
                failures += 1
                now = time.monotonic()
                if now - last_logged >= RELOAD_LOG_INTERVAL_S:
                    last_logged = now
                    log.error("shard %d: reload from topic %s failed (%r), attempt %d; retrying with "
                              "backoff up to %.0fs (logged at most once a minute)", self.partition,
                              self.state_topic.topic, e, failures, RELOAD_BACKOFF_MAX_S)
                if self.state is _LOADING:
                    # Not serving a half-loaded shard: NOT_COORDINATOR until the next attempt.
                    self.shard = self._make_shard(self.partition)
                    self._set_state(ShardState.FAILED)
                await self._sleep(delay * random.uniform(0.8, 1.2))
                delay = min(delay * 2, RELOAD_BACKOFF_MAX_S)
                continue
            if failures and self.state is _ACTIVE:
                log.warning("shard %d: reloaded after %d failed attempts", self.partition, failures)
            return

    def _on_fenced(self, error: ShardFenced, batch: _Batch | None = None) -> None:
        """Another process owns the shard now: answer every waiter NOT_COORDINATOR and
        unload, never reload (a reload would take the shard back from its new owner)."""
        if self._reload_task is asyncio.current_task():
            self._reload_task = None    # returning from it: nothing to cancel
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
        out (issue 14 §1). True if drained."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self._inflight is not None or self._sealed or self._current is not None or self._flush_scheduled:
            batch = self._inflight or (self._sealed[0] if self._sealed else self._current)
            left = deadline - loop.time()
            if left <= 0:
                return False
            if batch is None or batch.done.done():
                await asyncio.sleep(0.01)   # a flush scheduled on the loop, or a batch being retired
                continue
            await asyncio.wait({batch.done}, timeout=left)
        return True

    def unload(self, reason: str) -> None:
        """Drop everything this shard holds and stop serving (Kafka's unload: CLOSED, pending
        events failed with NOT_COORDINATOR). Only a load brings it back."""
        self.cancel_reload()
        self.generation += 1
        self.write_failures = 0     # the next load starts from a topic checked anew
        self._drop_pending(f"The coordinator of state partition {self.partition} was unloaded: {reason}.")
        self.shard = self._make_shard(self.partition)
        self._loader = self._new_loader()
        self.next_offset = 0
        self._set_state(ShardState.UNLOADED)

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
            self.submit(_expiry(key, payload))
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
        self.cancel_reload()
        if self._marker_poll is not None:
            self._marker_poll.cancel()
        self._set_state(ShardState.CLOSED)
        self._fail_parked()
        self._cancel_all_timers()
