"""The transactional write, one request end to end over a shard's port (Kafka:
`CoordinatorRuntime.scheduleTransactionalWriteOperation`; docs/design/transactions.md).

Rules:
- Generic over the shard type: the operation returns a `TransactionalWrite` (a `Result` and
  the client's producer), the caller's `append` step puts the serialized records into the
  partition as that producer, and the port (`TxnShardPort`, the runtime's txn part) gives
  the write order, the log's tail and the replay.
- The operation runs once outside the write order (what needs no write is answered at once)
  and once more inside it, against the state every earlier write left.
- The producer's next sequence and the log end come from the log (`caught_up`), never from
  memory. An append acknowledged below that log end is a duplicate of an older batch: not
  ours, so the shard re-reads and the client retries (COORDINATOR_LOAD_IN_PROGRESS).
- What landed between the read and the append (typically the end marker of the producer's
  previous transaction) is read before the appended records become pending, so replay
  order stays log order.
- A failed append raises `ApiError` with the code the append step chose; `resync` on it
  makes the shard re-read (reload) when the write order is released.
- The response is released only after the port proved the shard is still owned here
  (`barrier`).
"""
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from ..group.errors import ApiError
from ..group.result import Result
from .txn_log_reader import TxnLogReader

log = logging.getLogger("kcoord.runtime")


class TxnAppendError(Exception):
    """The append failed; `code` is the answer to the client. `resync`: the caller's view of
    the producer's sequence (or of the append's outcome) is no longer trustworthy: re-read the
    partition's tail up to the high watermark before the next append of this producer."""

    def __init__(self, code: ErrorCode, message: str, resync: bool = False) -> None:
        super().__init__(message)
        self.code, self.message, self.resync = code, message, resync


@dataclass(frozen=True, slots=True)
class Appended:
    base_offset: int
    duplicate: bool      # answered below the known log end: compare the batch there with ours


class TransactionalWrite(Protocol):
    """What a transactional operation returns (the group's is txn_offset_commit.TxnOffsetWrite)."""

    @property
    def result(self) -> Result: ...

    @property
    def producer_id(self) -> int: ...

    @property
    def producer_epoch(self) -> int: ...


# (shard, now_ms) -> the write; runs twice (see the module rules).
TxnOperation = Callable[[Any, int], Any]
# (write, serialized records, base sequence, timestamp_ms, known log end) -> where it landed;
# raises TxnAppendError.
ClientAppend = Callable[[Any, Sequence[tuple[bytes, bytes | None]], int, int, int], Awaitable[Appended]]
Serialize = Callable[[Sequence[Any]], list[tuple[bytes, bytes | None]]]


class TxnShardPort(Protocol):
    """What one shard gives a transactional write (the runtime's txn part, txn_writes.py)."""

    @property
    def shard(self) -> Any: ...

    def check_active(self) -> None:
        """Raise ApiError (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS) unless serving."""
        ...

    def now_ms(self) -> int: ...

    def exclusive_write(self) -> AbstractAsyncContextManager[Any]:
        """Flush the shard's current batch, wait for the batch in flight, and let nothing else
        write until exit: Kafka's runtime gives a transactional write its own batch after
        flushing the current one, so log order and replay order agree."""
        ...

    async def caught_up(self, until: int | None = None) -> tuple[TxnLogReader, int]:
        """The partition's reader, having read the log up to its high watermark, or only up to
        offset `until` (the producers' sequences and the log end come from the log)."""
        ...

    def appended(self, write: Any, base_offset: int) -> None:
        """The batch landed at `base_offset`: replay it as pending records of the producer and
        move the shard's next offset past it."""
        ...

    def resync(self) -> None:
        """The producer's sequence or an append's outcome is unknown: re-read before the next."""
        ...

    async def barrier(self) -> None:
        """Prove the shard is still owned here (ShardFenced -> NOT_COORDINATOR)."""
        ...


async def transactional_write(port: TxnShardPort, op: TxnOperation, append: ClientAppend,
                              serialize: Serialize) -> Any:
    """Run `op`, append its records as the client's producer in the shard's write order,
    replay them as pending, prove ownership, and return the response (module rules)."""
    port.check_active()
    write = op(port.shard, port.now_ms())
    if not write.result.records:
        return write.result.response
    async with port.exclusive_write():
        reader, log_end = await port.caught_up()
        write = op(port.shard, port.now_ms())
        if not write.result.records:
            return write.result.response
        try:
            appended = await append(write, serialize(write.result.records),
                                    reader.next_sequence(write.producer_id, write.producer_epoch),
                                    port.now_ms(), log_end)
        except TxnAppendError as e:
            if e.resync:
                port.resync()
            raise ApiError(e.code, e.message) from None
        if appended.duplicate:
            # Acknowledged below the log end we had read: an older batch of this producer, not
            # ours. Our records are not in the log; the client retries after the re-read.
            port.resync()
            raise ApiError(ErrorCode.coordinator_load_in_progress,
                           f"the append was acknowledged as a duplicate at offset {appended.base_offset}")
        if appended.base_offset > log_end:
            await _markers_before(port, write, appended.base_offset)
        port.appended(write, appended.base_offset)
    await port.barrier()
    return write.result.response


async def _markers_before(port: TxnShardPort, write: Any, base_offset: int) -> None:
    """Replay what landed between the read before the append and the append itself, before
    the appended offsets become pending. That is typically the end marker of this producer's
    previous transaction: the upstream answers the implicit add CONCURRENT_TRANSACTIONS until
    that marker is written, so it can land just after our read. Replayed after these
    offsets, a COMMIT would apply them and an ABORT would drop them, while this transaction
    is still open (seen with Kafka's TransactionalMessageCopier: an aborted transaction's
    offsets became committed). Kafka's own loader never meets this: it replays in log order.
    If the read fails the shard reloads from the log, which replays everything in order."""
    try:
        await port.caught_up(until=base_offset)
    except ApiError as e:
        log.info("transactional write of producer %d: the records before offset %d were not read (%s); "
                 "the shard reloads", write.producer_id, base_offset, e.message)
        port.resync()
