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
- TxnOffsetCommit is the runtime's transactional write (transactional_write.py):
  `txn_offset_commit_write` binds the group's operation and this append to it, and
  `txn_offset_commit_request` runs it over any `TxnShardPort`.
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
from datetime import timedelta
from typing import Any, Protocol

from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId, TopicName, TransactionalId
from kio.static.primitive import i16, i32, i32Timedelta

from records.batch import build_batch

from ..group import error_responses
from ..group.errors import ApiError
from ..group.offsets.txn_commit import TxnOffsetWrite, transaction_abortable, txn_offset_commit
from ..protocol.apis import request_class
from .shard_runtime import serialize_records
from .transactional_write import (
    Appended,
    ClientAppend,
    TxnAppendError,
    TxnOperation,
    TxnShardPort,
    transactional_write,
)

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


# ------------------------------------------------------------------ the request
def txn_offset_commit_write(appender: ClientTxnAppender, partition: int, ctx: Any, req: Any,
                            timeout_s: float) -> tuple[TxnOperation, ClientAppend]:
    """TxnOffsetCommit as the runtime's transactional write: the operation (the sans-IO
    core's validation and records) and the append as the client's producer into `partition`,
    sent again after a leadership move only within `timeout_s` of now."""
    deadline = time.monotonic() + timeout_s

    def op(shard: Any, now_ms: int) -> TxnOffsetWrite:
        return txn_offset_commit(shard, ctx, req, now_ms)

    async def append(write: TxnOffsetWrite, records: Sequence[tuple[bytes, bytes | None]], base_sequence: int,
                     timestamp_ms: int, known_end: int) -> Appended:
        try:
            return await appender.append(
                partition, transactional_id=write.transactional_id, producer_id=write.producer_id,
                producer_epoch=write.producer_epoch, base_sequence=base_sequence, records=records,
                timestamp_ms=timestamp_ms, api_version=ctx.api_version, known_end=known_end, deadline=deadline)
        except TxnAppendError as e:
            log.info("TxnOffsetCommit of group %s: %s", write.group_id, e.message)
            raise

    return op, append


async def txn_offset_commit_request(port: TxnShardPort, appender: ClientTxnAppender, ctx: Any, req: Any,
                                    timeout_s: float) -> Any:
    """TxnOffsetCommit end to end over a port (the runtime's `run_transactional` does the
    same over its own): validate, append as the client's producer in the shard's write
    order, replay the records as pending, then prove the shard still owns the partition
    before answering; a refusal is TxnOffsetCommit's error response. Never sent again once
    answered."""
    op, append = txn_offset_commit_write(appender, port.shard.partition, ctx, req, timeout_s)
    try:
        return await transactional_write(port, op, append, serialize_records)
    except ApiError as e:
        return error_responses.txn_offset_commit(ctx.api_version, e, req)
