"""The shell of TxnOffsetCommit (docs/design/transactions.md): append a
transactional commit's records to the group's state partition *as the client's producer*.

Rules:
- The batch carries the client's producer id and epoch and is transactional; the upstream's
  transaction coordinator then writes the COMMIT/ABORT marker into the state partition as into
  any partition of the transaction, and the shard's tail (txn_log_reader.py) applies it.
- Transactions v2 (TxnOffsetCommit v5, Kafka >= 4.0 with transaction.version=2): Produce v12
  with the transactional id, which "will also include the function for a AddPartitionsToTxn
  call" (ProduceRequest.json), so the partition joins the transaction implicitly. Transactions
  v1 (v0-4): the client's AddOffsetsToTxn was translated to AddPartitionsToTxn v3 for the
  state partition (`add_offsets_request`), so Produce v9 is enough ("without TV2 a client
  can't use produce request version higher than 11 within a transaction").
- kcoord owns the sequence of each (producer, epoch, partition): it is the only writer of the
  client's producer id into the state partition. The caller passes the sequence the log says
  comes next (`TxnLogReader.next_sequence`, read up to the high watermark after a takeover or
  an unknown outcome, never from memory). Transactions v2 bumps the epoch every transaction,
  so each starts at 0.
- A batch is sent again only while nothing was appended (leadership moved: the same batch,
  the same sequence) and before the client is answered, within the request's deadline.
- An answer at an offset below the log end the caller saw before the append is a duplicate:
  Kafka acknowledges a retried batch without writing it, with the first write's offset. It is
  success only if the batch there is ours (`duplicate` is set; the caller compares the records
  at that offset), else offsets would be dropped silently. DUPLICATE_SEQUENCE_NUMBER (Tansu)
  is the same case. OUT_OF_ORDER_SEQUENCE_NUMBER: the caller's sequence is stale; it re-reads
  the tail and answers COORDINATOR_LOAD_IN_PROGRESS, which clients retry at once.
- `txn_offset_commit_request` is the whole request (`TxnShardPort`: what the runtime gives
  it): validate, append in the shard's write order, replay as pending, prove ownership, answer.
- Errors map to TxnOffsetCommit's as Kafka maps its own write errors
  (`CoordinatorOperationExceptionHelper.handleOperationException`), plus the transaction
  errors of the implicit add passed through: INVALID_PRODUCER_EPOCH, PRODUCER_FENCED,
  INVALID_TXN_STATE, CONCURRENT_TRANSACTIONS, TRANSACTION_ABORTABLE (INVALID_TXN_STATE below
  TxnOffsetCommit v4, as Kafka's AddPartitionsToTxnManager does "for backward compatibility").
  kcoord's own missing rights (Topic WRITE on the state topic, TransactionalId WRITE on the
  client's id) are kcoord's configuration error, not the client's: UNKNOWN_SERVER_ERROR,
  logged with the ACL to add.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId, TopicName, TransactionalId
from kio.static.primitive import i16, i32, i32Timedelta

from records import encode_key, encode_value
from records.batch import build_batch

from ..group import error_responses
from ..group.errors import ApiError
from ..group.offsets.txn_commit import TxnOffsetWrite, transaction_abortable, txn_offset_commit
from ..protocol.apis import request_class
from .txn_log_reader import TxnLogReader

log = logging.getLogger("kcoord.txn_offsets")

_PRODUCE, _ADD_PARTITIONS = 0, 24

# Produce errors after which nothing was appended: the same batch may go again.
_RESEND = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.leader_not_available,
                     ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch,
                     ErrorCode.unknown_topic_or_partition, ErrorCode.not_enough_replicas})
# handleOperationException's table.
_KAFKA_WRITE_ERRORS = {
    ErrorCode.network_exception: ErrorCode.coordinator_load_in_progress,
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    ErrorCode.record_list_too_large: ErrorCode.unknown_server_error,
    ErrorCode.invalid_fetch_size: ErrorCode.unknown_server_error,
}
_PASSED_THROUGH = frozenset({ErrorCode.invalid_producer_epoch, ErrorCode.producer_fenced,
                             ErrorCode.invalid_txn_state, ErrorCode.concurrent_transactions,
                             ErrorCode.invalid_producer_id_mapping,
                             ErrorCode.not_enough_replicas_after_append})
_KCOORD_RIGHTS = {ErrorCode.topic_authorization_failed: "WRITE on the state topic",
                  ErrorCode.transactional_id_authorization_failed: "WRITE on the client's transactional id "
                                                                     "(TransactionalId prefix ACL)",
                  ErrorCode.cluster_authorization_failed: "IDEMPOTENT_WRITE on the cluster"}


class TxnAppendError(Exception):
    """The append failed; `code` is the TxnOffsetCommit answer. `resync`: the caller's view of
    the producer's sequence (or of the append's outcome) is no longer trustworthy: re-read the
    partition's tail up to the high watermark before the next append of this producer."""

    def __init__(self, code: ErrorCode, message: str, resync: bool = False) -> None:
        super().__init__(message)
        self.code, self.message, self.resync = code, message, resync


def txn_offset_commit_error(produce_error: ErrorCode, api_version: int) -> ErrorCode:
    """The TxnOffsetCommit answer for a failed Produce of its records (module rules)."""
    if produce_error is ErrorCode.transaction_abortable:
        return transaction_abortable(api_version)
    if produce_error in _KAFKA_WRITE_ERRORS:
        return _KAFKA_WRITE_ERRORS[produce_error]
    if produce_error in _PASSED_THROUGH:
        return produce_error
    if produce_error is ErrorCode.out_of_order_sequence_number:
        return ErrorCode.coordinator_load_in_progress
    return ErrorCode.unknown_server_error


def produce_version(txn_offset_commit_version: int) -> int:
    """Produce v12 adds the partition to a transactions-v2 transaction; v1 clients added it with
    AddOffsetsToTxn (translated), and must not see a v12 append (ProduceRequest.json)."""
    return 12 if txn_offset_commit_version >= 5 else 9


@dataclass(frozen=True, slots=True)
class Appended:
    base_offset: int
    duplicate: bool      # answered below the known log end: compare the batch there with ours


# Sends a request to the leader of the state partition (fenced_state_log's links); raises on a
# link failure (the outcome of the request is then unknown).
LeaderCall = Callable[[int, Any], Awaitable[Any]]


class ClientTxnAppender:
    def __init__(self, topic: str, leader_call: LeaderCall, *, request_timeout_ms: int = 30_000,
                 resend_backoff_s: float = 0.05) -> None:
        self.topic = topic
        self._call = leader_call
        self.request_timeout_ms = request_timeout_ms
        self.resend_backoff_s = resend_backoff_s

    def request(self, partition: int, transactional_id: str, batch: bytes, version: int) -> Any:
        cls = request_class(_PRODUCE, version)
        import importlib
        m = importlib.import_module(cls.__module__)
        return cls(transactional_id=TransactionalId(transactional_id), acks=i16(-1),
                   timeout=i32Timedelta.parse(timedelta(milliseconds=self.request_timeout_ms)),
                   topic_data=(m.TopicProduceData(name=TopicName(self.topic), partition_data=(
                       m.PartitionProduceData(index=i32(partition), records=batch),)),))

    async def append(self, partition: int, *, transactional_id: str, producer_id: int, producer_epoch: int,
                     base_sequence: int, records: Sequence[tuple[bytes, bytes | None]], timestamp_ms: int,
                     api_version: int, known_end: int, deadline: float) -> Appended:
        """Append `records` as one transactional batch of the client's producer. `known_end`:
        the partition's end offset as the caller read it before (duplicate detection);
        `deadline`: a monotonic time after which nothing is sent again."""
        batch = build_batch(list(records), timestamp_ms=timestamp_ms, producer_id=producer_id,
                            producer_epoch=producer_epoch, base_sequence=base_sequence, transactional=True)
        request = self.request(partition, transactional_id, batch, produce_version(api_version))
        where = f"{self.topic}-{partition} as producer {producer_id} epoch {producer_epoch} ({transactional_id!r})"
        while True:
            try:
                response = await self._call(partition, request)
            except Exception as e:   # a lost answer: the batch may or may not be in the log
                raise TxnAppendError(ErrorCode.coordinator_not_available,
                                     f"append to {where}: {type(e).__name__}: {e}", resync=True) from e
            part = response.responses[0].partition_responses[0]
            code = part.error_code
            if code is ErrorCode.none:
                base = int(part.base_offset)
                return Appended(base, duplicate=base < known_end)
            if code is ErrorCode.duplicate_sequence_number:
                # Tansu's answer to a retried batch; no offset to compare: re-read and check.
                raise TxnAppendError(ErrorCode.coordinator_load_in_progress,
                                     f"append to {where}: DUPLICATE_SEQUENCE_NUMBER at sequence {base_sequence}",
                                     resync=True)
            if code in _RESEND and time.monotonic() < deadline:
                await asyncio.sleep(self.resend_backoff_s)
                continue
            if code in _KCOORD_RIGHTS:
                log.error("TxnOffsetCommit: kcoord's principal lacks %s: append to %s refused with %s",
                          _KCOORD_RIGHTS[code], where, code.name)
            mapped = txn_offset_commit_error(code, api_version)
            raise TxnAppendError(mapped, f"append to {where}: {code.name}",
                                 resync=code is ErrorCode.out_of_order_sequence_number)


# ---------------------------------------------------------------- transactions v1
def add_offsets_request(req: Any, topic: str, partition: int) -> Any:
    """AddOffsetsToTxn(group) becomes AddPartitionsToTxn v3 (the client form; "versions 3 and
    below will be exclusively used by clients") for the group's state partition, sent on
    kcoord's own upstream link: the exact analogue of Kafka adding __consumer_offsets-k."""
    cls = request_class(_ADD_PARTITIONS, 3)
    import importlib
    m = importlib.import_module(cls.__module__)
    return cls(v3_and_below_transactional_id=TransactionalId(req.transactional_id),
               v3_and_below_producer_id=ProducerId(req.producer_id),
               v3_and_below_producer_epoch=i16(req.producer_epoch),
               v3_and_below_topics=(m.AddPartitionsToTxnTopic(name=TopicName(topic), partitions=(i32(partition),)),))


def add_offsets_error(response: Any, api_version: int) -> ErrorCode:
    """AddPartitionsToTxn's answer for the one state partition, as AddOffsetsToTxn's error (the
    transaction coordinator's errors pass through; TRANSACTION_ABORTABLE is known from
    AddOffsetsToTxn v4, KIP-890)."""
    code = ErrorCode.none
    for t in response.results_by_topic_v3_and_below:
        for p in t.results_by_partition:
            if p.partition_error_code is not ErrorCode.none:
                code = p.partition_error_code
    if code is ErrorCode.transaction_abortable and api_version < 4:
        return ErrorCode.invalid_txn_state
    if code in _KCOORD_RIGHTS and code is not ErrorCode.transactional_id_authorization_failed:
        log.error("AddOffsetsToTxn: kcoord's principal lacks %s (%s)", _KCOORD_RIGHTS[code], code.name)
        return ErrorCode.unknown_server_error
    return code


# AddOffsetsToTxn errors after which kcoord finds the transaction coordinator again and
# resends (within the request's deadline); the client would retry them itself.
_ADD_REFIND = frozenset({ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
                         ErrorCode.coordinator_load_in_progress})


class TransactionLinks(Protocol):
    async def call_transaction_coordinator(self, transactional_id: str, request: Any) -> Any: ...

    def forget_coordinator(self, transactional_id: str) -> None: ...


async def add_offsets_to_txn(links: TransactionLinks, req: Any, topic: str, partition: int, api_version: int,
                             timeout_s: float) -> ErrorCode:
    """AddOffsetsToTxn end to end (transactions v1): AddPartitionsToTxn v3 of the group's state
    partition to the client's transaction coordinator on kcoord's own link; its error as
    AddOffsetsToTxn's. A lost answer is COORDINATOR_NOT_AVAILABLE: the client retries, and
    adding a partition twice to the same transaction is harmless."""
    request = add_offsets_request(req, topic, partition)
    deadline = time.monotonic() + timeout_s
    delay = 0.01
    while True:
        try:
            response = await links.call_transaction_coordinator(req.transactional_id, request)
        except Exception as e:
            log.info("AddOffsetsToTxn of %r for group %s: %s", req.transactional_id, req.group_id, e)
            links.forget_coordinator(req.transactional_id)
            return ErrorCode.coordinator_not_available
        code = add_offsets_error(response, api_version)
        if code in _ADD_REFIND:
            links.forget_coordinator(req.transactional_id)
            if time.monotonic() + delay < deadline:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.5)
                continue
        return code


async def _markers_before(port: TxnShardPort, write: TxnOffsetWrite, base_offset: int) -> None:
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
        log.info("TxnOffsetCommit of group %s: the records before offset %d were not read (%s); "
                 "the shard reloads", write.group_id, base_offset, e.message)
        port.resync()


# ------------------------------------------------------------------ the request
class TxnShardPort(Protocol):
    """What one shard's runtime gives a TxnOffsetCommit (shard_runtime.py implements it; the
    names are the contract, docs/design/transactions.md "Wiring")."""

    @property
    def shard(self) -> Any: ...

    def check_active(self) -> None:
        """Raise ApiError (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS) unless serving."""
        ...

    def now_ms(self) -> int: ...

    def exclusive_write(self) -> AbstractAsyncContextManager[None]:
        """Flush the shard's current batch, wait for the batch in flight, and let nothing else
        write until exit: Kafka's runtime gives a transactional write its own batch after
        flushing the current one, so log order and replay order agree."""
        ...

    async def caught_up(self, until: int | None = None) -> tuple[TxnLogReader, int]:
        """The partition's reader, having read the log up to its high watermark, or only up to
        offset `until` (the producers' sequences and the log end come from the log, never
        from memory)."""
        ...

    def appended(self, write: TxnOffsetWrite, base_offset: int) -> None:
        """The batch landed at `base_offset`: replay it as pending offsets of the producer
        (`replay_pending`) and move the runtime's next offset past it."""
        ...

    def resync(self) -> None:
        """The producer's sequence or an append's outcome is unknown: re-read before the next."""
        ...

    async def barrier(self) -> None:
        """Commit a kcoord transaction on the shard's own transactional id, begun after this
        call: it fails (ShardFenced -> NOT_COORDINATOR) on a fenced shard."""
        ...


async def txn_offset_commit_request(port: TxnShardPort, appender: ClientTxnAppender, ctx: Any, req: Any,
                                    timeout_s: float) -> Any:
    """TxnOffsetCommit end to end: validate (the sans-IO core), append as the client's producer
    in the shard's write order, replay the records as pending, then prove the shard still owns
    the partition before answering. Never sent again once answered."""
    port.check_active()
    deadline = time.monotonic() + timeout_s
    write = txn_offset_commit(port.shard, ctx, req, port.now_ms())
    if not write.result.records:
        return write.result.response
    async with port.exclusive_write():
        reader, log_end = await port.caught_up()
        # Validated again: the group may have moved on while earlier writes were flushed.
        write = txn_offset_commit(port.shard, ctx, req, port.now_ms())
        if not write.result.records:
            return write.result.response
        records = [(encode_key(r.key), encode_value(r.value, r.value_version)) for r in write.result.records]
        try:
            appended = await appender.append(
                port.shard.partition, transactional_id=write.transactional_id, producer_id=write.producer_id,
                producer_epoch=write.producer_epoch,
                base_sequence=reader.next_sequence(write.producer_id, write.producer_epoch), records=records,
                timestamp_ms=port.now_ms(), api_version=ctx.api_version, known_end=log_end, deadline=deadline)
        except TxnAppendError as e:
            log.info("TxnOffsetCommit of group %s: %s", write.group_id, e.message)
            if e.resync:
                port.resync()
            return error_responses.txn_offset_commit(ctx.api_version, ApiError(e.code, e.message), req)
        if appended.duplicate:
            # Acknowledged below the log end we had read: an older batch of this producer, not
            # ours. Our offsets are not in the log; the client retries after the re-read.
            port.resync()
            return error_responses.txn_offset_commit(ctx.api_version, ApiError(
                ErrorCode.coordinator_load_in_progress,
                f"the append was acknowledged as a duplicate at offset {appended.base_offset}"), req)
        if appended.base_offset > log_end:
            await _markers_before(port, write, appended.base_offset)
        port.appended(write, appended.base_offset)
    await port.barrier()
    return write.result.response
