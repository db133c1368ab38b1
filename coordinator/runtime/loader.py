"""One shard's load: fence, replay the partition, the skip list, reload with backoff
(Kafka: `CoordinatorLoaderImpl` + the runtime's load/unload transitions; docs/design/kafka-facts.md §1.4).

Rules:
- A load is "fence, then load". The fence step (`fence`) makes this process the partition's
  only writer before a record is replayed, so whatever a previous owner landed before the
  fence is inside the load: the state log's takeover (fenced_state_log: InitProducerId
  on the shard's transactional id bumps the epoch and aborts the old owner's transaction;
  with fencing=epoch, that plus a write acknowledged under the new epoch). A log without
  owners (one process) has no fence step. The state log runs the step per partition before
  replaying it (`load(..., fence=...)`), so a fence refused for one shard fails that shard only.
- A load starts from an empty shard (`begin`) and replays the partition in log order
  through the shard type's bulk load; only `finish` makes the shard ACTIVE, at the log end
  the state log reported.
- A record that does not decode or contradicts the state fails the load, as Kafka's
  loader does (`UnknownRecordVersionException` is not caught), unless the operator listed
  exactly that record (`state.load.skip.corrupt.offsets`, the skip list). A failed load
  drops what was replayed (it must never be served) and stays FAILED until a restart.
- A reload after a failed write retries with a bounded, jittered backoff (0.1 s doubling to
  5 s) while the upstream cannot be read; one reload task per shard, never more.
- A load (or its fence) that raises `ShardFenced` unloads the shard instead (the runtime's
  `fenced_by`): another process owns it now.
- Fence records (fencing=epoch, epoch_producers.fence_record) and partitioner markers are
  the log's, not a shard's (log_records.py): skipped, never replayed;
  a loaded shard of such a log starts its upkeep (keep-alive, refresh: epoch_upkeep.py).
- Replay callbacks of an older load generation are ignored: a load that was abandoned
  never writes into the shard of the next one.
"""
from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from typing import Any, Protocol

from .. import metrics
from .log_records import is_log_record
from .shard_protocol import BulkLoad, ShardProtocol
from .shard_state import ShardState
from .state_log import CorruptBatchError, Fence, ShardFenced
from .timer_table import TimerTable
from .txn_log_reader import TxnLogReader
from .writer import ShardWriter

log = logging.getLogger("kcoord.runtime")

# Reload after a failed write: first retry after RELOAD_BACKOFF_MIN_S, doubling up to
# RELOAD_BACKOFF_MAX_S, each delay jittered by +-20 % so that the shards of a process do
# not hit a recovering upstream in lockstep.
RELOAD_BACKOFF_MIN_S = 0.1
RELOAD_BACKOFF_MAX_S = 5.0
# While the upstream stays down, a failed reload attempt is logged at most this often.
RELOAD_LOG_INTERVAL_S = 60.0

_ACTIVE, _LOADING, _FAILED = ShardState.ACTIVE, ShardState.LOADING, ShardState.FAILED
_CLOSED, _UNLOADED = ShardState.CLOSED, ShardState.UNLOADED


class LoaderOwner(Protocol):
    """What the loader reads of its runtime (coordinator_runtime.py) and the transitions it
    asks of it."""

    partition: int
    generation: int
    state: ShardState
    shard: Any
    protocol: ShardProtocol
    state_topic: Any              # a StateLog (state_log.py), with `load` as StateTopic's
    txn: Any                      # txn.reader: the load's TxnLogReader, kept as the tail
    txn_log: Any
    timers: TimerTable
    writer: ShardWriter
    load_grace_ms: int
    clock: Callable[[], int]
    _sleep: Callable[[float], Any]

    def begin_load(self) -> int: ...

    def load_reader(self, partition: int = -1) -> TxnLogReader: ...

    def replay_raw(self, offset: int, key: bytes, value: bytes | None) -> None: ...

    def batch_unreadable(self, partition: int, error: CorruptBatchError) -> None: ...

    def load_abandoned(self, partition: int) -> bool: ...

    def finish_load(self, log_end_offset: int) -> None: ...

    def set_state(self, state: ShardState) -> None: ...

    def fenced_by(self, error: ShardFenced) -> None: ...


class _LoadTarget:
    """TxnLogReader -> the bulk load, for one load generation."""

    def __init__(self, loader: ShardLoader, generation: int) -> None:
        self.loader, self.generation = loader, generation

    def record(self, offset: int, key: bytes, value: bytes | None, producer_id: int) -> None:
        loader = self.loader
        if not loader.loading(self.generation) or is_log_record(key):
            return
        try:
            loader.bulk.add(key, value, offset, producer_id)
        except Exception as e:
            loader.failed(e, offset)

    def end_transaction(self, offset: int, producer_id: int, committed: bool) -> None:
        loader = self.loader
        if not loader.loading(self.generation):
            return
        try:
            # Buffered commits before the marker apply first (the bulk load keeps log order).
            loader.bulk.end_transaction(producer_id, committed)
        except Exception as e:
            loader.failed(e, offset)


class ShardLoader:
    def __init__(self, runtime: LoaderOwner, skip_offsets: frozenset[int]) -> None:
        self.rt = runtime
        # Offsets of this partition the operator chose to skip if they fail to load
        # (state.load.skip.corrupt.offsets); `skipped` holds the ones actually skipped.
        self.skip_offsets = frozenset(skip_offsets)
        self.skipped: set[int] = set()
        self.load_error: BaseException | None = None
        self.failed_offset: int | None = None
        self.load_failures = 0
        self.reload_attempts = 0
        self.reload_task: asyncio.Task | None = None
        self.started = 0.0   # time.monotonic() of the current load's start
        self.bulk: BulkLoad = self.new_bulk()
        # The fence step a log with owners brings (FencedStateLog.takeover), else None.
        self.fence: Fence | None = getattr(runtime.state_topic, "takeover", None)

    def load_steps(self) -> dict[str, Any]:
        """The steps this shard adds to a state log's load: its fence, and the marker-aware
        reader when clients' transactions share the partition."""
        rt = self.rt
        steps: dict[str, Any] = {"fence": self.fence} if self.fence is not None else {}
        if rt.txn_log is not None:
            steps["readers"] = rt.load_reader
        return steps

    def new_bulk(self) -> BulkLoad:
        rt = self.rt
        return rt.protocol.new_load(rt.shard, rt.state_topic.topic, rt.partition, self._on_bad_record)

    def loading(self, generation: int) -> bool:
        rt = self.rt
        return rt.state is _LOADING and rt.generation == generation

    # ------------------------------------------------------------------ load
    def begin(self) -> None:
        self.load_error = self.failed_offset = None
        self.skipped = set()
        self.bulk = self.new_bulk()
        self.started = time.monotonic()

    def reader(self) -> TxnLogReader:
        """The reader a txn-aware state log loads this shard with (kept as the tail)."""
        reader = self.rt.txn.reader = TxnLogReader(_LoadTarget(self, self.rt.generation))
        return reader

    def replay_raw(self, offset: int, key: bytes, value: bytes | None) -> None:
        if self.rt.state is not _LOADING or is_log_record(key):
            # The load failed (or the shard was unloaded): the rest is not replayed. A fence
            # record (fencing=epoch) is the log's, not the shard's.
            return
        try:
            self.bulk.add(key, value, offset)
        except Exception as e:
            self.failed(e, offset)

    def _on_bad_record(self, error: Exception, source: object, position: object, offset: int) -> None:
        """The bulk load's hook for a record that does not decode or contradicts the state."""
        if offset not in self.skip_offsets:
            raise error
        rt = self.rt
        self.skipped.add(offset)
        metrics.LOAD_SKIPPED.labels(partition=str(rt.partition)).inc()
        log.warning("shard %d: SKIPPED the record at topic %s, partition %d, offset %d, as "
                    "state.load.skip.corrupt.offsets=%d:%d asks: %s", rt.partition,
                    rt.state_topic.topic, rt.partition, offset, rt.partition, offset, error)

    def failed(self, error: BaseException, offset: int | None) -> None:
        """The shard cannot be loaded: drop what was replayed so far (it must never be
        served) and stay FAILED. Kafka does the same and keeps the partition failed until
        its leadership changes; kcoord until the operator restarts it."""
        rt = self.rt
        where = getattr(error, "offset", None)
        if where is None:
            where = offset
        self.load_error, self.failed_offset = error, where
        self.load_failures += 1
        self.dropped()
        self.bulk = self.new_bulk()
        metrics.LOAD_FAILURES.labels(partition=str(rt.partition)).inc()
        decode_error = isinstance(error, rt.protocol.decode_errors + (CorruptBatchError,))
        topic, partition = rt.state_topic.topic, rt.partition
        inspect = (f"`kcoord offsets show --bootstrap HOST:PORT --topic {topic} "
                   f"--partition {partition} --offset {where}`")
        if where is None:
            hint = ""
        elif isinstance(error, CorruptBatchError):
            # The batch never reaches the record decoder, so the skip list cannot name it.
            hint = (f"; a batch that fails its CRC or does not decompress cannot be skipped by "
                    f"state.load.skip.corrupt.offsets: inspect it with {inspect}")
        else:
            hint = (f"; to skip that record, restart with --config state.load.skip.corrupt.offsets="
                    f"{partition}:{where} (inspect it with {inspect})")
        log.error("shard %d FAILED to load: topic %s, partition %d, offset %s: %s: %s. Its groups "
                  "answer NOT_COORDINATOR until kcoord is restarted%s", partition,
                  topic, partition, "?" if where is None else where,
                  type(error).__name__, error, hint, exc_info=None if decode_error else error)

    def dropped(self, cancel_timers: bool = True) -> None:
        """A load failed: what was replayed is thrown away and the shard answers
        NOT_COORDINATOR (FAILED)."""
        rt = self.rt
        if cancel_timers:
            rt.timers.cancel_all()
        rt.shard = rt.protocol.make_shard(rt.partition)
        rt.set_state(_FAILED)

    def finished(self, log_end_offset: int) -> None:
        """Apply what the bulk load still buffers and serve from `log_end_offset`, with the
        timers the loaded state needs; a buffered record that fails fails the load."""
        rt = self.rt
        try:
            self.bulk.flush()
        except Exception as e:
            self.failed(e, None)
            return
        rt.writer.next_offset = log_end_offset
        rt.set_state(_ACTIVE)
        rt.txn.load_finished(log_end_offset)
        loaded_in = time.monotonic() - self.started
        metrics.LOAD_SECONDS.observe(loaded_in)
        metrics.PARTITION_LAST_LOAD_SECONDS.labels(partition=str(rt.partition)).set(loaded_in)
        rt.timers.apply(rt.shard.on_loaded(rt.clock() + rt.load_grace_ms))
        upkeep = getattr(rt.state_topic, "fence_upkeep", None)
        if upkeep is not None:
            upkeep.start(rt)      # fencing=epoch: keep-alive and refresh (epoch_upkeep.py)
        unknown = dict(rt.shard.unknown_record_types)
        log.debug("shard %d loaded: %s, offsets up to %d%s", rt.partition, rt.protocol.describe(rt.shard),
                  log_end_offset, f", skipped unknown record types {unknown}" if unknown else "")
        self.warn_unused_skips(log_end_offset)

    def warn_unused_skips(self, log_end_offset: int) -> None:
        rt = self.rt
        for offset in sorted(self.skip_offsets - self.skipped):
            # Nothing is skipped silently, and an entry that did not apply is worth knowing:
            # the operator may have named the wrong record.
            log.warning("shard %d: state.load.skip.corrupt.offsets lists %d:%d, but that record "
                        "%s; nothing was skipped there", rt.partition, rt.partition, offset,
                        "loaded normally (or was compacted away)" if offset < log_end_offset
                        else f"is beyond the end of the log ({log_end_offset})")

    async def reload(self) -> None:
        """Reload this shard alone from its partition. Raises if the upstream cannot be read;
        a record that fails to load leaves the shard FAILED instead."""
        rt = self.rt
        rt.timers.cancel_all()
        generation = rt.begin_load()
        loaded: list[int] = []
        await rt.state_topic.load([rt.partition], lambda p, o, k, v: rt.replay_raw(o, k, v),
                                  lambda p, leo: loaded.append(leo), on_corrupt=rt.batch_unreadable,
                                  abandoned=rt.load_abandoned, **self.load_steps())
        if generation == rt.generation and loaded:
            rt.finish_load(loaded[0])

    # ---------------------------------------------------------------- reload
    def start_reload(self) -> None:
        """Reload in the background until it succeeds (one task per shard, never more)."""
        if self.reload_task is None or self.reload_task.done():
            self.reload_task = asyncio.get_running_loop().create_task(self._reload_after_failure())

    def cancel_reload(self) -> None:
        task, self.reload_task = self.reload_task, None
        if task is not None and not task.done():
            task.cancel()

    async def _reload_after_failure(self) -> None:
        """Reload with a bounded, jittered exponential backoff: an upstream that is down is
        retried every few seconds, never in a hot loop, and the shard comes back on its own
        once the upstream answers. A record that fails to load ends the retries (the shard
        stays FAILED: retrying cannot change the log)."""
        rt = self.rt
        delay = RELOAD_BACKOFF_MIN_S
        last_logged = float("-inf")
        failures = 0
        write_failures = rt.writer.write_failures
        if write_failures > 1:
            # Writes keep failing although the reloads succeed: back off before reloading.
            wait = min(RELOAD_BACKOFF_MIN_S * 2 ** (write_failures - 2), RELOAD_BACKOFF_MAX_S)
            await rt._sleep(wait * random.uniform(0.8, 1.2))
        while rt.state is not _CLOSED and rt.state is not _UNLOADED:
            self.reload_attempts += 1
            try:
                await self.reload()
            except asyncio.CancelledError:
                raise
            except ShardFenced as e:
                rt.fenced_by(e)
                return
            except Exception as e:
                failures += 1
                now = time.monotonic()
                if now - last_logged >= RELOAD_LOG_INTERVAL_S:
                    last_logged = now
                    log.error("shard %d: reload from topic %s failed (%r), attempt %d; retrying with "
                              "backoff up to %.0fs (logged at most once a minute)", rt.partition,
                              rt.state_topic.topic, e, failures, RELOAD_BACKOFF_MAX_S)
                if rt.state is _LOADING:
                    # Not serving a half-loaded shard: NOT_COORDINATOR until the next attempt.
                    self.dropped(cancel_timers=False)
                await rt._sleep(delay * random.uniform(0.8, 1.2))
                delay = min(delay * 2, RELOAD_BACKOFF_MAX_S)
                continue
            if failures and rt.state is _ACTIVE:
                log.warning("shard %d: reloaded after %d failed attempts", rt.partition, failures)
            return

