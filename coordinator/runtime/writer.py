"""One shard's writes: the batch accumulator, offset prediction and the write in flight
(Kafka: `CoordinatorRuntime`'s `CoordinatorBatch` handling + the `PartitionWriter` it calls;
docs/design/kafka-facts.md §1.3).

Rules:
- Records join the current batch after they were replayed (the runtime replays a fresh
  result at `next_offset` before `batch_for` keeps it); a result is never split across
  batches (Kafka appends a result atomically). A batch that would grow past
  `max_batch_bytes` is sealed and a new one opened.
- `next_offset` predicts where the next record lands: records + `append_overhead` per
  append (1 for a transactional log: its COMMIT marker).
- Batches in flight (`inflight`) are a queue in log order, each with its predicted base
  offset; at most `max_inflight` of them, as the process's writer allows (today 1). The next
  is flushed when one completes, so operations arriving meanwhile share one round trip
  (Kafka's adaptive linger). Where the process's writer offers `flush_before_send`, the
  open batch is flushed in the writer's next send that can carry it, not on a loop turn of
  its own: while the writer could not send it anyway, it keeps taking operations. Every
  read of `inflight`, `sealed` and `current` outside this class goes through a method here
  (`last_pending`, `idle`, `oldest_open`, `flush_open`, `drop`).
- The append itself is the process's `PartitionWriter` (partition_writer.py), which every
  shard's writer hands its closed batches to; it completes one partition's appends in order.
- A batch completes only after the upstream acknowledged it, at the predicted offset (the
  process's writer acknowledges one partition's appends in log order). It may land later
  than predicted only on a partition that clients' transactions also write (markers); the
  later batches then move by the same amount, and the gap is checked to hold control
  batches only. Any other surprise,
  a failure or a fence is the runtime's (`fail`, `fenced`): the waiters are answered there,
  never here.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Protocol

from records.batch import iter_batches

from .. import metrics
from .fenced_links import StateLogError
from .partition_writer import PartitionWriter
from .releases import WriteDone
from .state_log import ShardFenced, StateLog, TopicAuthorizationFailed

log = logging.getLogger("kcoord.runtime")

# Failed writes: the first is logged at ERROR, then at most one line per this interval
# with the number of failures not logged (a lasting TopicAuthorizationFailed fails every
# write of every reload).
WRITE_ERROR_LOG_INTERVAL_S = 10.0


class WriterOwner(Protocol):
    """What the writer reads of its runtime (coordinator_runtime.py), and hands back to it."""

    partition: int
    generation: int
    state_topic: StateLog
    txn_log: Any
    txn: Any                      # txn.reader: set while clients' transactions share the partition
    clock: Callable[[], int]

    def is_active(self) -> bool: ...

    def fail(self, error: Exception, batch: Batch | None = None, landed: bool = False) -> None: ...

    def fenced_by(self, error: ShardFenced, batch: Batch | None = None) -> None: ...


class Batch:
    __slots__ = ("base_offset", "records", "done", "size")

    def __init__(self, base_offset: int) -> None:
        self.base_offset = base_offset
        self.records: list[tuple[bytes, bytes | None]] = []
        # Its Releases' answers are completed in the turn it lands (releases.py).
        self.done: WriteDone = WriteDone(loop=asyncio.get_running_loop())
        self.size = 0


class ShardWriter:
    def __init__(self, runtime: WriterOwner, max_batch_bytes: int, append_overhead: int,
                 partition_writer: PartitionWriter | None = None) -> None:
        self.rt = runtime
        self.max_batch_bytes = max_batch_bytes
        self.append_overhead = append_overhead
        # None: each batch is one append of the runtime's state log (partition_writer.LogWriter).
        self.partition_writer = partition_writer
        self.max_inflight = 1 if partition_writer is None else partition_writer.max_inflight
        # The writer's append_then where it offers one: the outcome handed straight to `_written`.
        self.append_then = None if partition_writer is None else getattr(partition_writer, "append_then", None)
        # The writer's flush_before_send where it offers one: the flush runs in its next send.
        self.flush_before_send = None if partition_writer is None else getattr(
            partition_writer, "flush_before_send", None)
        self.next_offset = 0
        self.current: Batch | None = None
        self.sealed: deque[Batch] = deque()
        self.inflight: deque[Batch] = deque()     # sent, in log order
        self.flush_scheduled = False
        # Writes failed since the last one that succeeded. The first failure reloads at once;
        # each further one waits the backoff before reloading (loader.py), so a write that
        # fails every time (no Write ACL) cannot drive reload -> write -> fail -> reload at
        # request rate.
        self.write_failures = 0
        self._error_logged = float("-inf")
        self._errors_suppressed = 0

    # ------------------------------------------------------------ accumulate
    def batch_for(self, size: int) -> Batch:
        """The open batch, or a new one when this result would overflow it."""
        batch = self.current
        if batch is None or (batch.records and batch.size + size > self.max_batch_bytes):
            if batch is not None:
                self.sealed.append(batch)
                self.next_offset += self.append_overhead
            batch = self.current = Batch(self.next_offset)
        return batch

    def last_pending(self) -> asyncio.Future | None:
        """What an operation with no records waits for: the last batch open, sealed or in
        flight (Kafka's `waitForPendingWrites`), or None when nothing is pending."""
        pending = self.current or (self.sealed[-1] if self.sealed else None) or (
            self.inflight[-1] if self.inflight else None)
        return pending.done if pending is not None else None

    def idle(self) -> bool:
        """Nothing open, sealed or in flight (a flush may still be scheduled)."""
        return not self.inflight and not self.sealed and self.current is None

    def flush_open(self) -> None:
        """Write the open batch (held back while a client's transactional batch was appended)."""
        if self.current is not None:
            self.schedule_flush()

    def oldest_open(self) -> Batch | None:
        if self.inflight:
            return self.inflight[0]
        return self.sealed[0] if self.sealed else self.current

    def drop(self, exc: BaseException, batch: Batch | None = None, landed: bool = False) -> None:
        """Answer every batch's waiters with `exc` (except `batch` when it `landed`: its
        records are in the log) and forget them."""
        for b in (batch, *self.inflight, *self.sealed, self.current):
            if b is not None and not b.done.done():
                if landed and b is batch:
                    b.done.set_result(None)
                else:
                    b.done.set_exception(exc)
                    b.done.exception()  # mark retrieved: nobody may be waiting
        self.current = None
        self.inflight.clear()
        self.sealed.clear()

    # ----------------------------------------------------------------- write
    def schedule_flush(self) -> None:
        if len(self.inflight) < self.max_inflight and not self.flush_scheduled:
            self.flush_scheduled = True
            before = self.flush_before_send
            if before is not None:
                # In the writer's next send that can carry the batch (partition_writer.py):
                # until then the batch stays open, and one loop handle serves every shard.
                before(self.rt.partition, self.flush)
            else:
                # Flush after the operations already queued on the loop had their turn.
                asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        """Send closed batches, then the open one, while the writer takes more in flight."""
        self.flush_scheduled = False
        if not self.rt.is_active():
            return
        while len(self.inflight) < self.max_inflight:
            if self.sealed:
                batch = self.sealed.popleft()
            elif self.current is not None:
                batch, self.current = self.current, None
                self.next_offset += self.append_overhead
            else:
                return
            self.inflight.append(batch)
            self._send(batch)

    def _send(self, batch: Batch) -> None:
        """Hand the batch to the writer: its `append_then` where it offers one
        (partition_writer.py), else its `append`. A future (the lean writer's) is followed by a
        done-callback, not a task awaiting it: a write per commit when commits do not share
        batches. Anything else awaitable (a coroutine of a fenced log's) gets a task. A
        writer that raises at once fails the batch on a later turn, as an awaited failure."""
        rt = self.rt
        started = time.perf_counter()
        generation = rt.generation
        then = self.append_then
        if then is not None:
            try:
                then(rt.partition, batch.records, rt.clock(), partial(self._written, batch, generation, started))
            except Exception as e:
                asyncio.get_running_loop().call_soon(self._failed, batch, generation, e)
            return
        writer = self.partition_writer
        try:
            written = (rt.state_topic.append if writer is None else writer.append)(
                rt.partition, batch.records, rt.clock())
        except Exception as e:
            written = asyncio.get_running_loop().create_future()
            written.set_exception(e)
        if isinstance(written, asyncio.Future):
            written.add_done_callback(partial(self._done, batch, generation, started))
        else:
            asyncio.get_running_loop().create_task(self._write(batch, written, generation, started))

    async def _write(self, batch: Batch, written: Awaitable[int], generation: int, started: float) -> None:
        try:
            base = await written
        except Exception as e:
            self._failed(batch, generation, e)
            return
        self._landed(batch, generation, started, base)

    def _written(self, batch: Batch, generation: int, started: float, base: int,
                 error: BaseException | None) -> None:
        """The writer's `append_then` outcome, handed over from the callback that read the
        upstream's answer."""
        if error is not None:
            self._failed(batch, generation, error if isinstance(error, Exception) else StateLogError(repr(error)))
            return
        rt = self.rt
        metrics.WRITE_SECONDS.observe(time.perf_counter() - started)
        metrics.RECORDS_WRITTEN.inc(len(batch.records))
        if generation != rt.generation:
            return  # unloaded meanwhile: the waiters already got NOT_COORDINATOR
        if base != batch.base_offset:
            self._placed(batch, base)
            return
        # `_landed` written out for a batch at its predicted offset (a batch often holds
        # one commit end to end).
        inflight = self.inflight
        if inflight and inflight[0] is batch:
            inflight.popleft()
        else:
            self._retire(batch)
        self.write_failures = 0
        batch.done.land(base)
        if self.sealed or self.current is not None:
            self.flush()

    def _done(self, batch: Batch, generation: int, started: float, written: asyncio.Future) -> None:
        # Cancelled (nothing cancels the lean writer's futures today): a failed write, so
        # its waiters are answered and the shard reloads; returning would keep the batch in
        # flight and the shard would never send again (one batch in flight).
        error = StateLogError("the state-topic write was cancelled") if written.cancelled() else written.exception()
        if error is None:
            self._landed(batch, generation, started, written.result())
        elif isinstance(error, Exception):
            self._failed(batch, generation, error)
        else:
            raise error

    def _failed(self, batch: Batch, generation: int, e: Exception) -> None:
        rt = self.rt
        if generation != rt.generation:
            return  # the shard was unloaded or reloaded meanwhile: its waiters are answered
        self._retire(batch)
        if isinstance(e, ShardFenced):
            rt.fenced_by(e, batch)
            return
        self.write_failures += 1
        self._log_failure(len(batch.records), e)
        rt.fail(e, batch)

    def _landed(self, batch: Batch, generation: int, started: float, base: int) -> None:
        metrics.WRITE_SECONDS.observe(time.perf_counter() - started)
        metrics.RECORDS_WRITTEN.inc(len(batch.records))
        if generation != self.rt.generation:
            return  # unloaded meanwhile: the waiters already got NOT_COORDINATOR
        self._placed(batch, base)

    def _placed(self, batch: Batch, base: int) -> None:
        """A batch of this generation landed at `base`."""
        rt = self.rt
        self._retire(batch)
        self.write_failures = 0
        if base > batch.base_offset and rt.txn.reader is not None:
            # The upstream's transaction coordinator writes markers of clients' transactions
            # into this partition whenever they end, so kcoord's batches land later than
            # predicted. The order of records is unchanged (clients' own batches are appended
            # only with nothing of kcoord's open: exclusive_write), so the later batches move
            # by the same amount and nothing reloads.
            delta = base - batch.base_offset
            self.next_offset += delta
            for later in (*self.inflight, *self.sealed, self.current):
                if later is not None:
                    later.base_offset += delta
            # Only markers may fill the gap; anything else is a foreign write (the check
            # below reloads then, as for any unexpected offset).
            asyncio.get_running_loop().create_task(self._check_gap(batch.base_offset, base, rt.generation))
        elif base != batch.base_offset:
            # Someone else wrote to our partition: our in-memory offsets are wrong. Kafka
            # fails the context and reloads it the same way.
            log.error("shard %d: batch landed at offset %d, expected %d; reloading",
                      rt.partition, base, batch.base_offset)
            rt.fail(RuntimeError("unexpected state topic offset"), batch, landed=True)
            return
        batch.done.land(base)
        self.flush()

    def _retire(self, batch: Batch) -> None:
        """A batch's append answered: it leaves the queue in flight (the head, since a
        partition's appends complete in order)."""
        if self.inflight and self.inflight[0] is batch:
            self.inflight.popleft()
        elif batch in self.inflight:
            self.inflight.remove(batch)

    async def _check_gap(self, start: int, end: int, generation: int) -> None:
        """The offsets [start, end) before a batch that landed late hold control batches only
        (clients' markers); a data batch there was written by someone else: reload."""
        rt = self.rt
        try:
            data, _ = await rt.txn_log.read_partition(rt.partition, start)
        except Exception as e:
            log.warning("shard %d: could not check offsets %d-%d of topic %s: %s", rt.partition, start, end - 1,
                        rt.state_topic.topic, e)
            return
        for b in iter_batches(data, allow_partial_tail=True):
            if b.base_offset >= end:
                return
            if b.last_offset < start or b.is_control_batch:
                continue
            if generation == rt.generation and rt.is_active():
                log.error("shard %d: a batch someone else wrote sits at offset %d of topic %s (producer %d); "
                          "reloading", rt.partition, b.base_offset, rt.state_topic.topic, b.producer_id)
                rt.fail(RuntimeError("unexpected state topic offset"))
            return

    def _log_failure(self, records: int, error: Exception) -> None:
        now = time.monotonic()
        if now - self._error_logged < WRITE_ERROR_LOG_INTERVAL_S:
            self._errors_suppressed += 1
            return
        self._error_logged = now
        suppressed, self._errors_suppressed = self._errors_suppressed, 0
        rt = self.rt
        topic = rt.state_topic.topic
        hint = ""
        if isinstance(error, TopicAuthorizationFailed):
            hint = (f"; the upstream refuses kcoord's principal Write on {topic}: "
                    f"grant it (docs/user/reliability.md, 'The state topic belongs to kcoord')")
        log.error("shard %d: write of %d records to topic %s partition %d failed: %r (%d failed writes in "
                  "a row); its groups answer NOT_COORDINATOR and it reloads from the log%s%s", rt.partition,
                  records, topic, rt.partition, error, self.write_failures, hint,
                  f" ({suppressed} more failed writes not logged in the last {WRITE_ERROR_LOG_INTERVAL_S:.0f}s)"
                  if suppressed else "")

    async def drain(self, timeout_s: float) -> bool:
        """Wait (bounded) until no write is open or queued. True if drained."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not self.idle() or self.flush_scheduled:
            batch = self.oldest_open()
            left = deadline - loop.time()
            if left <= 0:
                return False
            if batch is None or batch.done.done():
                await asyncio.sleep(0.01)   # a flush scheduled on the loop, or a batch being retired
                continue
            await asyncio.wait({batch.done}, timeout=left)
        return True

