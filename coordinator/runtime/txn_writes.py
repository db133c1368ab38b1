"""Clients' transactional writes in one shard: the second and third kinds of runtime write
(Kafka: `CoordinatorRuntime.scheduleTransactionalWriteOperation` and
`scheduleTransactionCompletion`; docs/design/transactions.md "Wiring").

Rules:
- A transactional write (`transactional_write`, the runtime's `run_transactional`) is an
  operation like any other: it runs against the shard and returns the response of its
  `Result`, or raises `ApiError`. Its records are appended *as the client's producer* by the
  `append` step the caller gives (the shard type's binding: txn_offsets_log.py), never by the
  shard's own writer, and replayed as that producer's pending records where they landed.
- A client's batch is appended with no operation of the shard running and nothing of
  kcoord's open or in flight (`exclusive_write`), so its real offsets and the predicted
  offsets of kcoord's own records keep the log's order (Kafka's "newer in the log" rule
  compares them at the marker). Kafka's runtime runs a partition's events one at a time and
  the transactional write is one of them; `free` is that turn: cleared while the client's
  batch is appended, and `run`/`submit` wait on it. The operation runs twice: once to
  refuse at once what needs no write, once again inside the turn (the group may have moved
  on while earlier writes were flushed).
- Applying a marker (COMMIT or ABORT) is the third kind (`complete_transaction` on the
  runtime): markers come only from the partition, which the upstream's transaction
  coordinator writes them into. The load's `TxnLogReader` stays on after the load as a
  markers-only tail: producers' sequences come from the log's batch headers, and each marker
  read (`caught_up`, `read_markers`) is handed to the runtime, synchronously on the loop, so
  no operation interleaves.
- While clients' transactions are open, the tail polls every MARKER_POLL_S, so metrics,
  group expiry and the memory bound follow the log within that delay, as Kafka's
  coordinator learns of a marker when it is written.
- An append whose outcome is unknown (`resync`) reloads the shard when the exclusive write
  ends: the reload rebuilds pending offsets and sequences from the batches themselves. An
  answer below the log end read before the append is a duplicate of an older batch: the
  records are not in the log, the client retries after the re-read.
- After the append the shard proves it is still the partition's owner (`barrier`) before
  the response is released.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from ..aio import within
from ..group.errors import ApiError
from .shard_protocol import ShardProtocol
from .shard_state import ShardState
from .state_log import ShardFenced, StateLog
from .transactional_write import ClientAppend, TxnOperation, transactional_write
from .txn_log_reader import TxnLogReader
from .writer import ShardWriter

log = logging.getLogger("kcoord.runtime")

# While a shard holds clients' open transactions, it reads the markers written into its
# partition this often (OffsetFetch and TxnOffsetCommit read them at once anyway).
MARKER_POLL_S = 1.0

_ACTIVE = ShardState.ACTIVE


class TxnOwner(Protocol):
    """What the transactional part reads of its runtime (coordinator_runtime.py)."""

    partition: int
    generation: int
    state: ShardState
    shard: Any
    protocol: ShardProtocol
    state_topic: StateLog
    writer: ShardWriter
    write_timeout_s: float
    clock: Any

    def check_active(self) -> None: ...

    def complete_transaction(self, producer_id: int, committed: bool, offset: int) -> None: ...

    async def drain(self, timeout_s: float) -> bool: ...

    def fail(self, error: Exception) -> None: ...

    def fenced_by(self, error: ShardFenced) -> None: ...


class _MarkerTarget:
    """The ACTIVE shard's tail: markers only, each handed to the runtime's third kind of
    write. Its data records were replayed when written (kcoord's own by the write path,
    clients' by `appended`)."""

    def __init__(self, runtime: TxnOwner) -> None:
        self.runtime = runtime

    def record(self, offset: int, key: bytes, value: bytes | None, producer_id: int) -> None:
        return

    def end_transaction(self, offset: int, producer_id: int, committed: bool) -> None:
        # With the marker's offset: the tail may read a marker after the producer's next
        # transaction has already appended offsets (see transactional_write._markers_before).
        self.runtime.complete_transaction(producer_id, committed, offset)


class TxnWrites:
    """The runtime's transactional part; it is the `TxnShardPort` its writes run over."""

    def __init__(self, runtime: TxnOwner) -> None:
        self.rt = runtime
        # Set when the state log reads its partitions raw with TxnLogReader
        # (`txn_offsets_supported`); `reader` is the load's reader, kept as the tail.
        self.log: Any = None
        self.reader: TxnLogReader | None = None
        self.read_to = 0
        self.lock = asyncio.Lock()
        self.free = asyncio.Event()
        self.free.set()
        self.busy = False     # `free` cleared, as a plain attribute: the runtime's `start` reads it per operation
        self.resync_pending = False
        self.marker_poll: asyncio.Task | None = None

    def load_began(self) -> None:
        self.reader = None
        self.read_to = 0

    def load_finished(self, log_end_offset: int) -> None:
        if self.reader is not None:
            self.reader.target = _MarkerTarget(self.rt)
            self.read_to = log_end_offset
        if self.rt.protocol.open_transactions(self.rt.shard):
            self.poll_markers()

    # ------------------------------------------------- the transactional write
    async def write(self, op: TxnOperation, append: ClientAppend) -> Any:
        """The second kind of write (transactional_write.py), over this part as its port."""
        return await transactional_write(self, op, append, self.rt.protocol.serialize)

    @property
    def shard(self) -> Any:
        return self.rt.shard

    def check_active(self) -> None:
        self.rt.check_active()

    def now_ms(self) -> int:
        return self.rt.clock()

    def resync(self) -> None:
        self.resync_pending = True

    @contextlib.asynccontextmanager
    async def exclusive_write(self) -> AsyncIterator[None]:
        rt = self.rt
        async with self.lock:
            self.free.clear()
            self.busy = True
            try:
                generation = rt.generation
                if not await rt.drain(rt.write_timeout_s):
                    raise ApiError(ErrorCode.coordinator_not_available,
                                   f"The writes of state partition {rt.partition} before a TxnOffsetCommit "
                                   f"did not complete within {rt.write_timeout_s}s.")
                if generation != rt.generation:
                    raise ApiError(ErrorCode.not_coordinator,
                                   f"The coordinator of state partition {rt.partition} reloaded.")
                rt.check_active()
                yield
            finally:
                self.free.set()
                self.busy = False
                if self.resync_pending:
                    self.resync_pending = False
                    if rt.state is _ACTIVE:
                        log.warning("shard %d: a TxnOffsetCommit append's outcome is unknown; reloading",
                                    rt.partition)
                        rt.fail(RuntimeError("TxnOffsetCommit outcome unknown"))
                else:
                    rt.writer.flush_open()

    async def caught_up(self, until: int | None = None) -> tuple[TxnLogReader, int]:
        """Read the partition up to its high watermark, or only up to offset `until` (markers
        applied, producers' states taken from batch headers); kcoord's own next offset moves
        past what was read."""
        rt = self.rt
        rt.check_active()
        reader, source = self.reader, self.log
        if reader is None or source is None:
            raise ApiError(ErrorCode.coordinator_not_available,
                           f"State partition {rt.partition} is not read with client transactions.")
        generation = rt.generation
        offset = self.read_to
        deadline = time.monotonic() + rt.write_timeout_s
        while True:
            try:
                data, high_watermark = await source.read_partition(rt.partition, offset)
            except Exception as e:   # the upstream's answer, or none: the client retries
                raise ApiError(ErrorCode.coordinator_not_available,
                               f"State partition {rt.partition} could not be read at offset {offset}: "
                               f"{type(e).__name__}: {e}") from None
            if generation != rt.generation or reader is not self.reader:
                raise ApiError(ErrorCode.not_coordinator,
                               f"The coordinator of state partition {rt.partition} reloaded.")
            offset = reader.feed(data, offset, until)
            self.read_to = offset
            if offset >= (high_watermark if until is None else min(until, high_watermark)):
                break
            if time.monotonic() > deadline:
                raise ApiError(ErrorCode.coordinator_not_available,
                               f"State partition {rt.partition}: could not read up to offset {high_watermark}.")
        writer = rt.writer
        if offset > writer.next_offset and writer.idle():
            writer.next_offset = offset
        return reader, offset

    def appended(self, write: Any, base_offset: int) -> None:
        rt = self.rt
        records = rt.protocol.replay_transactional(rt.shard, write, base_offset)
        rt.writer.next_offset = max(rt.writer.next_offset, base_offset + records)
        self.poll_markers()

    def poll_markers(self) -> None:
        """Read markers every MARKER_POLL_S while clients' transactions are open (one task
        per shard; it ends when none is open, or the shard reloads or closes)."""
        if self.reader is None or self.log is None:
            return
        if self.marker_poll is None or self.marker_poll.done():
            self.marker_poll = asyncio.get_running_loop().create_task(self._marker_loop(self.rt.generation))

    async def _marker_loop(self, generation: int) -> None:
        rt = self.rt
        open_transactions = rt.protocol.open_transactions
        while generation == rt.generation and rt.state is _ACTIVE and open_transactions(rt.shard):
            await asyncio.sleep(MARKER_POLL_S)
            if generation != rt.generation or rt.state is not _ACTIVE:
                return
            try:
                await self.read_markers()
            except Exception as e:     # the upstream is away: try again at the next tick
                log.debug("shard %d: markers not read: %s", rt.partition, e)

    async def barrier(self) -> None:
        """Prove this process still owns the shard after the client's append: a kcoord
        transaction begun now (fenced_state_log.barrier); ShardFenced -> NOT_COORDINATOR. A
        state log without fencing (one process) has nothing to prove."""
        rt = self.rt
        barrier = getattr(rt.state_topic, "barrier", None)
        if barrier is None:
            return
        try:
            await within(barrier(rt.partition), rt.write_timeout_s)
        except ShardFenced as e:
            rt.fenced_by(e)
            raise ApiError(ErrorCode.not_coordinator, str(e)) from None
        except ApiError:
            raise           # the fenced log's own answer: NOT_COORDINATOR for a zombie, as Kafka answers it
        except Exception as e:
            raise ApiError(ErrorCode.coordinator_not_available,
                           f"State partition {rt.partition}: the ownership check after the append failed: "
                           f"{type(e).__name__}: {e}") from None

    async def read_markers(self) -> None:
        """Apply the markers written since the last read (before OffsetFetch answers a
        group with open transactions)."""
        if self.reader is None or self.log is None:
            return
        async with self.lock:
            await self.caught_up()

    def close(self) -> None:
        if self.marker_poll is not None:
            self.marker_poll.cancel()
