"""The fenced state log's producer sessions: taking a shard (the epoch bump that fences the
previous owner) and appending as the shard's producer, one transaction per append (part of
fenced_state_log.py's `FencedStateLog`, which states the protocol).

Rules:
- A session is (transactional id, producer id, epoch, next sequence) for one shard; `take`
  makes a new one (InitProducerId), and only a taken shard appends.
- The membership's word (`owns`) is checked before a take and before each append: a process
  that lost a shard never fences its new owner back.
- One transaction per shard at a time (the session's lock). A transaction that failed
  half-way leaves the session `broken`: the shard must be taken again before it writes.
- Requests to the transaction coordinator are retried within a bound while it moves or the
  previous transaction's markers are written (CONCURRENT_TRANSACTIONS); a fencing answer
  raises `ShardFenced` and forgets the session, anything else `StateLogError`.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId, TopicName, TransactionalId
from kio.static.primitive import i16, i32

from records.batch import build_batch

from .. import metrics
from .fenced_links import (
    ADD_PARTITIONS,
    END_TXN,
    INIT_PRODUCER_ID,
    PRODUCE,
    REFRESH,
    CoordinatorError,
    StateLogError,
    UpstreamLinks,
    duration_ms,
    make_request,
    request_module,
)
from .state_log import ShardFenced

log = logging.getLogger("kcoord.fenced_state_log")

# Errors that mean a newer epoch of the shard's transactional id exists (or ours is gone).
FENCING_ERRORS = frozenset({ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch,
                            ErrorCode.invalid_producer_id_mapping})
_RETRY_TXN = frozenset({ErrorCode.concurrent_transactions, ErrorCode.coordinator_load_in_progress})
_REFIND = frozenset({ErrorCode.not_coordinator, ErrorCode.coordinator_not_available})


class TxnCallError(StateLogError):
    """The transaction coordinator answered an error that is neither a fence nor retried."""

    def __init__(self, message: str, code: ErrorCode) -> None:
        super().__init__(message)
        self.code = code


class ProducerSession:
    __slots__ = ("partition", "txn_id", "producer_id", "epoch", "sequence", "broken", "lock", "refresh_due")

    def __init__(self, partition: int, txn_id: str) -> None:
        self.partition = partition
        self.txn_id = txn_id
        self.producer_id = -1
        self.epoch = -1
        self.sequence = 0
        self.broken = False          # a write failed half-way: take again before writing
        self.lock = asyncio.Lock()
        self.refresh_due = False     # fencing=epoch: re-init the id before the next write


class ShardProducers:
    def __init__(self, links: UpstreamLinks, topic: str, prefix: str, *, transaction_timeout_ms: int,
                 request_timeout_s: float, take_timeout_s: float, owns: Callable[[int], bool] | None) -> None:
        self.links = links
        self.topic = topic
        self.prefix = prefix
        self.transaction_timeout_ms = transaction_timeout_ms
        self.request_timeout_s = request_timeout_s
        self.take_timeout_s = take_timeout_s
        self.owns = owns
        self.sessions: dict[int, ProducerSession] = {}
        # Figures for bench/bench_fencing.py: time spent retrying CONCURRENT_TRANSACTIONS
        # (transactions v1: the previous transaction's markers are not written yet).
        self.concurrent_retries = 0
        self.concurrent_wait_s = 0.0
        # Test hook: awaited between Produce and EndTxn (a crash or a pause mid-transaction).
        self.before_end_txn: Callable[[int], Awaitable[None]] | None = None

    def transactional_id(self, partition: int) -> str:
        return f"{self.prefix}/{self.topic}/{partition}"

    def producer(self, partition: int) -> tuple[int, int] | None:
        """(producer id, epoch) this process holds for a taken shard, else None."""
        session = self.sessions.get(partition)
        return None if session is None else (session.producer_id, session.epoch)

    def check_owned(self, partition: int) -> None:
        if self.owns is not None and not self.owns(partition):
            self.sessions.pop(partition, None)
            raise ShardFenced(partition, "this process may not write the shard (not assigned here, "
                                          "or its membership lease ran out)")

    async def txn_call(self, shard: ProducerSession, make: Callable[[], Any],
                       error_of: Callable[[Any], ErrorCode], what: str, deadline: float,
                       probe: Callable[[], Awaitable[None]] | None = None) -> Any:
        """A request to the shard's transaction coordinator, retried (bounded) while the
        coordinator moves or the previous transaction completes; a fencing error raises
        ShardFenced, any other StateLogError."""
        links = self.links
        # CONCURRENT_TRANSACTIONS after an EndTxn means the markers are being written (a
        # few ms on Kafka, transactions v1): retry soon, then back off (Java: 20 ms flat).
        delay = 0.001
        while True:
            try:
                address = await links.coordinator(shard.txn_id)
                response = await links.call(address, make())
                code = error_of(response)
            except CoordinatorError as r:
                code = r.code
            except StateLogError as e:
                log.debug("%s for %s failed: %s", what, shard.txn_id, e)
                links.forget_coordinator(shard.txn_id)
                if time.monotonic() > deadline:
                    raise
                if probe is not None:
                    # Tansu 0.6 closes the connection instead of answering EndTxn with
                    # PRODUCER_FENCED: ask a question it does answer (raises ShardFenced).
                    try:
                        await probe()
                    except StateLogError:
                        pass
                code = ErrorCode.coordinator_not_available
            if code == ErrorCode.none:
                return response
            if code in FENCING_ERRORS:
                raise ShardFenced(shard.partition, f"{what}: {code.name} (transactional id {shard.txn_id}, "
                                                   f"producer {shard.producer_id} epoch {shard.epoch})")
            if code not in _RETRY_TXN and code not in _REFIND:
                raise TxnCallError(f"{what} for {shard.txn_id}: {code.name}", code)
            log.debug("%s for %s: %s, retrying", what, shard.txn_id, code.name)
            if code in _REFIND:
                links.forget_coordinator(shard.txn_id)
            if time.monotonic() > deadline:
                raise StateLogError(f"{what} for {shard.txn_id}: still {code.name} after the retry bound")
            if code == ErrorCode.concurrent_transactions:
                # Transactions v1: the previous transaction's markers are not written yet.
                self.concurrent_retries += 1
                self.concurrent_wait_s += delay
                metrics.CONCURRENT_TRANSACTIONS_RETRIES.inc()
                metrics.CONCURRENT_TRANSACTIONS_SECONDS.inc(delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)

    # ------------------------------------------------------------------ taking
    async def take(self, partition: int) -> tuple[int, int]:
        """Become the only writer of `partition`: InitProducerId for its transactional id,
        which fences every earlier epoch and aborts its open transaction. Returns
        (producer id, epoch)."""
        self.check_owned(partition)
        shard = ProducerSession(partition, self.transactional_id(partition))
        await self.init_producer_id(shard, -1, -1, time.monotonic() + self.take_timeout_s)
        self.sessions[partition] = shard
        self.log_taken(shard)
        return shard.producer_id, shard.epoch

    @staticmethod
    def log_taken(shard: ProducerSession, what: str = "taken") -> None:
        log.info("state partition %d %s: transactional id %s, producer %d epoch %d", shard.partition, what,
                 shard.txn_id, shard.producer_id, shard.epoch)

    async def init_producer_id(self, shard: ProducerSession, producer_id: int, epoch: int, deadline: float) -> None:
        """InitProducerId for the shard's transactional id: a new epoch (or a new producer id
        once the epoch is exhausted) into `shard`. With an expected (producer id, epoch)
        (KIP-360, `producer_id` >= 0) the upstream answers PRODUCER_FENCED if another
        process bumped it meanwhile: ShardFenced, nothing taken."""
        response = await self.txn_call(
            shard, lambda: make_request(INIT_PRODUCER_ID, transactional_id=TransactionalId(shard.txn_id),
                                        transaction_timeout=duration_ms(self.transaction_timeout_ms),
                                        producer_id=ProducerId(producer_id), producer_epoch=i16(epoch)),
            lambda r: r.error_code, "InitProducerId", deadline)
        shard.producer_id, shard.epoch = int(response.producer_id), int(response.producer_epoch)
        shard.sequence = 0

    # ------------------------------------------------------------------ writing
    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]], timestamp_ms: int) -> int:
        """Append records as ONE batch (`write`: here in ONE transaction); return its base
        offset once the transaction is committed (EndTxn answered: the epoch was still current)."""
        shard = self.sessions.get(partition)
        if shard is None:
            raise ShardFenced(partition, "not taken by this process (take or load it first)")
        async with shard.lock:
            self.check_owned(partition)
            if shard.broken:
                raise StateLogError(f"state partition {partition}: an earlier write failed (half-way); "
                                    f"the shard must be taken again (reload)")
            shard.broken = True
            try:
                base = await self.write(shard, records, timestamp_ms)
            except ShardFenced:
                self.sessions.pop(partition, None)
                raise
            shard.broken = False
            return base

    async def write(self, shard: ProducerSession, records: list[tuple[bytes, bytes | None]],
                    timestamp_ms: int) -> int:
        """One append of a taken, owned shard, under its lock: here one transaction."""
        return await self._transaction(shard, records, timestamp_ms)

    async def _transaction(self, shard: ProducerSession, records: list[tuple[bytes, bytes | None]],
                           timestamp_ms: int) -> int:
        deadline = time.monotonic() + self.request_timeout_s
        txn = TransactionalId(shard.txn_id)
        pid, epoch = ProducerId(shard.producer_id), i16(shard.epoch)
        add = request_module(ADD_PARTITIONS)

        def add_error(response: Any) -> ErrorCode:
            for t in response.results_by_topic_v3_and_below:
                for p in t.results_by_partition:
                    if p.partition_error_code != ErrorCode.none:
                        return p.partition_error_code
            return ErrorCode.none

        def add_partition() -> Any:
            return make_request(ADD_PARTITIONS, v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid,
                                v3_and_below_producer_epoch=epoch, v3_and_below_topics=(add.AddPartitionsToTxnTopic(
                                    name=TopicName(self.topic), partitions=(i32(shard.partition),)),))

        async def still_current() -> None:
            response = await self.links.call(await self.links.coordinator(shard.txn_id), add_partition())
            code = add_error(response)
            if code in FENCING_ERRORS:
                raise ShardFenced(shard.partition, f"EndTxn(commit): connection closed, then AddPartitionsToTxn: "
                                                   f"{code.name} (producer {shard.producer_id} epoch {shard.epoch})")

        await self.txn_call(shard, add_partition, add_error, "AddPartitionsToTxn", deadline)

        base = -1
        if records:     # none: a barrier, the transaction proves the epoch alone
            batch = build_batch(records, timestamp_ms=timestamp_ms, producer_id=shard.producer_id,
                                producer_epoch=shard.epoch, base_sequence=shard.sequence, transactional=True)
            base = await self._produce(shard, batch, deadline)
            shard.sequence += len(records)
        if self.before_end_txn is not None:
            await self.before_end_txn(shard.partition)
        await self.txn_call(shard, lambda: make_request(
            END_TXN, transactional_id=txn, producer_id=pid, producer_epoch=epoch, committed=True),
            lambda r: r.error_code, "EndTxn(commit)", deadline, probe=still_current)
        return base

    async def _produce(self, shard: ProducerSession, batch: bytes, deadline: float) -> int:
        request = produce_request(self.topic, [(shard.partition, batch)], shard.txn_id, self.request_timeout_s)
        while True:
            response = await self.links.call(await self.links.leader(shard.partition), request)
            part = response.responses[0].partition_responses[0]
            code = part.error_code
            if code == ErrorCode.none:
                return int(part.base_offset)
            if code in FENCING_ERRORS:
                raise ShardFenced(shard.partition, f"Produce: {code.name} (producer {shard.producer_id} "
                                                   f"epoch {shard.epoch})")
            if code in REFRESH and time.monotonic() < deadline:
                # Nothing was appended: the same batch (same sequence) is sent again.
                self.links.forget_leader(shard.partition)
                await asyncio.sleep(0.05)
                continue
            raise StateLogError(f"Produce to {self.topic}-{shard.partition}: {code.name}")


def produce_request(topic: str, batches: Iterable[tuple[int, bytes]], transactional_id: str | None,
                    timeout_s: float) -> Any:
    """A Produce (acks=all) of one batch per partition of the state topic; a transactional
    id only for a transactional batch (idempotent ones carry none)."""
    m = request_module(PRODUCE)
    return make_request(PRODUCE, transactional_id=None if transactional_id is None else TransactionalId(
        transactional_id), acks=i16(-1), timeout=duration_ms(int(timeout_s * 1000)),
        topic_data=(m.TopicProduceData(name=TopicName(topic), partition_data=tuple(
            m.PartitionProduceData(index=i32(p), records=batch) for p, batch in batches)),))
