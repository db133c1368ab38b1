"""The state log with exclusive writes by fencing (docs/design/kafka-facts.md §2.4 R2).

Each shard (state-topic partition p) writes through its own transactional id,
``<prefix>/<stateTopic>/<p>`` (prefix ``kcoord`` by default):

- **Taking a shard** is ``InitProducerId`` (v4; Tansu rejects v0-2) for that id, retried on
  CONCURRENT_TRANSACTIONS (and coordinator moves) within a bound. It bumps the epoch, which
  fences the previous owner, and aborts the previous owner's open transaction: when it
  returns, every kcoord transaction in p has its marker.
- **Each append is one transaction**: AddPartitionsToTxn v3 (p) + Produce v9 (one batch,
  transactional, sequence continuing within the epoch, acks=all) + EndTxn v3 (commit).
  ``append`` returns only once EndTxn succeeded: an operation issued after the records proves
  the epoch is still current, so a released response can never rest on a zombie's write.
  Transactions v1 requests only (Produce <= v11, EndTxn <= v4), which Kafka 4.x and Tansu
  both serve; a COMMIT marker takes one offset, hence ``offsets_per_append = 1``.
- A fencing answer (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING,
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED after a take) raises ``ShardFenced``: the runtime
  fails the parked responses with NOT_COORDINATOR and unloads the shard. Any other failure
  leaves the transaction in an unknown state: the shard must be taken again (the runtime's
  reload does it, since ``load`` takes first) before it writes again.
- **Loading** takes the shard first (unless ``take_on_load=False``, a read-only reader),
  then fetches read_uncommitted from the log start to the high watermark with control
  batches visible (kcoord's own Fetch, not aiokafka's read_committed consumer, whose
  position stops at the last stable offset behind any open client transaction).
  Transactional data batches are held per producer id until their marker: COMMIT hands
  their records to ``sink`` (at the marker), ABORT drops them (``aborted_transactions``).
  After the fence every kcoord transaction is complete, so a transaction still open at the
  end of the log is a client's (TxnOffsetCommit written as the client's producer):
  it is kept in ``open_transactions[p][producer_id]`` for the tail/exactly-once offsets to resolve.

The client is kcoord's own Kafka protocol over links the caller opens (``open_link``, the
same shape as coordinator.cluster.membership's: the service passes
``coordinator.gateway.upstream_client.UpstreamClient.connect``, which brings TLS and SASL;
the runtime may not import the gateway). Without one, kafka_link.open_plain_link (PLAINTEXT).
aiokafka's transactional producer is not used: it defines InitProducerId v0 only
(aiokafka/protocol/transaction.py), which Tansu 0.6 refuses (UNKNOWN_SERVER_ERROR), and it
hides the pid/epoch and the per-step errors the fencing argument is made of.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import timedelta
from typing import Any, Protocol

from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, ProducerId, TopicName, TransactionalId
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from records.batch import ControlMarker, build_batch, iter_batches
from records.batch import CorruptBatchError as _BatchError

from .. import metrics
from ..protocol.apis import request_class
from ..upstream.client import open_plain_link
from .state_log import CorruptBatchError, RecordSink, ShardFenced
from .txn_log_reader import TxnLogReader

log = logging.getLogger("kcoord.fenced_state_log")

_PRODUCE, _FETCH, _LIST_OFFSETS, _METADATA = 0, 1, 2, 3
_FIND_COORDINATOR, _INIT_PRODUCER_ID, _ADD_PARTITIONS, _END_TXN = 10, 22, 24, 26
_V = {_PRODUCE: 9, _FETCH: 12, _LIST_OFFSETS: 7, _METADATA: 9, _FIND_COORDINATOR: 4,
      _INIT_PRODUCER_ID: 4, _ADD_PARTITIONS: 3, _END_TXN: 3}

# Errors that mean a newer epoch of the shard's transactional id exists (or ours is gone).
FENCING_ERRORS = frozenset({ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch,
                            ErrorCode.invalid_producer_id_mapping})
_RETRY_TXN = frozenset({ErrorCode.concurrent_transactions, ErrorCode.coordinator_load_in_progress})
_REFIND = frozenset({ErrorCode.not_coordinator, ErrorCode.coordinator_not_available})
_REFRESH = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.leader_not_available,
                      ErrorCode.unknown_topic_or_partition, ErrorCode.fenced_leader_epoch,
                      ErrorCode.unknown_leader_epoch})


class Link(Protocol):
    async def request(self, request: Any, timeout: float = ...) -> Any: ...

    def close(self) -> None: ...

    @property
    def closed(self) -> bool: ...


OpenLink = Callable[[Sequence[tuple[str, int]]], Awaitable[Link]]


class CorruptRecordException(Exception):
    """A batch that fails its CRC or does not decode: Kafka's clients name this error so
    (org.apache.kafka.common.errors.CorruptRecordException), as aiokafka does; operators
    search logs for it."""


class StateLogError(Exception):
    """A request of the fenced state log failed (not a fence): the write's outcome is unknown."""


def _req(api_key: int, **fields: Any) -> Any:
    return request_class(api_key, _V[api_key])(**fields)


def _module(api_key: int) -> Any:
    import importlib
    return importlib.import_module(request_class(api_key, _V[api_key]).__module__)


def _ms(ms: int) -> i32Timedelta:
    return i32Timedelta.parse(timedelta(milliseconds=ms))


class _Shard:
    __slots__ = ("partition", "txn_id", "producer_id", "epoch", "sequence", "broken", "lock")

    def __init__(self, partition: int, txn_id: str) -> None:
        self.partition = partition
        self.txn_id = txn_id
        self.producer_id = -1
        self.epoch = -1
        self.sequence = 0
        self.broken = False          # a write failed half-way: take again before writing
        self.lock = asyncio.Lock()


class FencedStateLog:
    """The `state_log.StateLog` port with one transactional id per shard."""

    offsets_per_append = 1           # the COMMIT marker after each batch

    def __init__(self, bootstrap: str | Sequence[tuple[str, int]], topic: str, partitions: int,
                 open_link: OpenLink | None = None, *, transactional_id_prefix: str = "kcoord",
                 transaction_timeout_ms: int = 60_000, request_timeout_s: float = 30.0,
                 take_timeout_s: float = 60.0, take_on_load: bool = True,
                 owns: Callable[[int], bool] | None = None,
                 fetch_max_bytes: int = 8 * 1024 * 1024) -> None:
        if isinstance(bootstrap, str):
            bootstrap = [(h, int(port)) for h, _, port in (a.strip().rpartition(":") for a in bootstrap.split(","))]
        self.bootstrap = list(bootstrap)
        self.topic = topic
        self.partitions = partitions
        self._open: OpenLink = open_link if open_link is not None else open_plain_link
        self.prefix = transactional_id_prefix
        self.transaction_timeout_ms = transaction_timeout_ms
        self.request_timeout_s = request_timeout_s
        self.take_timeout_s = take_timeout_s
        self.take_on_load = take_on_load
        # The membership's word: is shard p assigned to this process? Checked before a take
        # and before each append, so a process that lost a shard never fences its new owner
        # back by reloading it (a fence is only as good as the caller's restraint).
        self.owns = owns
        self.fetch_max_bytes = fetch_max_bytes
        self._shards: dict[int, _Shard] = {}
        self._links: dict[tuple[str, int], Link] = {}
        self._brokers: dict[int, tuple[str, int]] = {}
        self._leaders: dict[int, int] = {}
        self._coordinators: dict[str, tuple[str, int]] = {}
        self.open_transactions: dict[int, dict[int, list[tuple[int, bytes, bytes | None]]]] = {}
        self.aborted_transactions: dict[int, int] = {}
        # Figures for bench/bench_fencing.py: time spent retrying CONCURRENT_TRANSACTIONS
        # (transactions v1: the previous transaction's markers are not written yet).
        self.concurrent_retries = 0
        self.concurrent_wait_s = 0.0
        self.on_write_error: Callable[[int, BaseException], None] | None = None
        # Test hook: awaited between Produce and EndTxn (a crash or a pause mid-transaction).
        self.before_end_txn: Callable[[int], Awaitable[None]] | None = None

    def transactional_id(self, partition: int) -> str:
        return f"{self.prefix}/{self.topic}/{partition}"

    def producer(self, partition: int) -> tuple[int, int] | None:
        """(producer id, epoch) this process holds for a taken shard, else None."""
        shard = self._shards.get(partition)
        return None if shard is None else (shard.producer_id, shard.epoch)

    # ------------------------------------------------------------------ links
    async def start(self) -> None:
        await self._refresh_metadata()

    async def stop(self) -> None:
        links, self._links = self._links, {}
        for link in links.values():
            link.close()
        self._shards.clear()

    async def _link(self, address: tuple[str, int]) -> Link:
        link = self._links.get(address)
        if link is None or link.closed:
            link = self._links[address] = await self._open([address])
        return link

    def _drop(self, address: tuple[str, int] | None) -> None:
        if address is not None:
            link = self._links.pop(address, None)
            if link is not None:
                link.close()

    async def _call(self, address: tuple[str, int], request: Any) -> Any:
        try:
            link = await self._link(address)
            return await link.request(request, self.request_timeout_s)
        except Exception as e:   # the link's own errors (UpstreamError), OSError, a timeout
            self._drop(address)
            raise StateLogError(f"{type(request).__name__} to {address[0]}:{address[1]}: {e}") from e

    async def _bootstrap_call(self, request: Any) -> Any:
        errors = []
        for address in list(self._brokers.values()) + self.bootstrap:
            try:
                return await self._call(address, request)
            except StateLogError as e:
                errors.append(str(e))
        raise StateLogError("no upstream broker answered: " + "; ".join(errors[-3:]))

    async def _refresh_metadata(self) -> None:
        m = _module(_METADATA)
        response = await self._bootstrap_call(_req(
            _METADATA, topics=(m.MetadataRequestTopic(name=TopicName(self.topic)),),
            allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False))
        self._brokers = {int(b.node_id): (b.host, int(b.port)) for b in response.brokers}
        for t in response.topics:
            if t.name != self.topic:
                continue
            if t.error_code != ErrorCode.none:
                raise StateLogError(f"state topic {self.topic}: metadata error {t.error_code.name}")
            self._leaders = {int(p.partition_index): int(p.leader_id) for p in t.partitions}

    async def _leader(self, partition: int) -> tuple[str, int]:
        leader = self._leaders.get(partition, -1)
        if leader < 0 or leader not in self._brokers:
            await self._refresh_metadata()
            leader = self._leaders.get(partition, -1)
            if leader not in self._brokers:
                raise StateLogError(f"state topic {self.topic} partition {partition} has no leader")
        return self._brokers[leader]

    async def _coordinator(self, txn_id: str) -> tuple[str, int]:
        address = self._coordinators.get(txn_id)
        if address is not None:
            return address
        response = await self._bootstrap_call(_req(_FIND_COORDINATOR, key_type=i8(1), coordinator_keys=(txn_id,)))
        c = response.coordinators[0]
        if c.error_code != ErrorCode.none:
            raise _Retry(c.error_code)
        address = self._coordinators[txn_id] = (c.host, int(c.port))
        return address

    async def _txn_call(self, shard: _Shard, make: Callable[[], Any],
                        error_of: Callable[[Any], ErrorCode], what: str, deadline: float,
                        probe: Callable[[], Awaitable[None]] | None = None) -> Any:
        """A request to the shard's transaction coordinator, retried (bounded) while the
        coordinator moves or the previous transaction completes; a fencing error raises
        ShardFenced, any other StateLogError."""
        # CONCURRENT_TRANSACTIONS after an EndTxn means the markers are being written (a
        # few ms on Kafka, transactions v1): retry soon, then back off (Java: 20 ms flat).
        delay = 0.001
        while True:
            address = None
            try:
                address = await self._coordinator(shard.txn_id)
                response = await self._call(address, make())
                code = error_of(response)
            except _Retry as r:
                code = r.code
            except StateLogError as e:
                log.debug("%s for %s failed: %s", what, shard.txn_id, e)
                self._coordinators.pop(shard.txn_id, None)
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
                raise StateLogError(f"{what} for {shard.txn_id}: {code.name}")
            log.debug("%s for %s: %s, retrying", what, shard.txn_id, code.name)
            if code in _REFIND:
                self._coordinators.pop(shard.txn_id, None)
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
    def _check_owned(self, partition: int) -> None:
        if self.owns is not None and not self.owns(partition):
            self._shards.pop(partition, None)
            raise ShardFenced(partition, "the shard is not assigned to this process")

    async def take(self, partition: int) -> tuple[int, int]:
        """Become the only writer of `partition`: InitProducerId for its transactional id,
        which fences every earlier epoch and aborts its open transaction. Returns
        (producer id, epoch)."""
        self._check_owned(partition)
        shard = _Shard(partition, self.transactional_id(partition))
        deadline = time.monotonic() + self.take_timeout_s
        response = await self._txn_call(
            shard, lambda: _req(_INIT_PRODUCER_ID, transactional_id=TransactionalId(shard.txn_id),
                                transaction_timeout=_ms(self.transaction_timeout_ms),
                                producer_id=ProducerId(-1), producer_epoch=i16(-1)),
            lambda r: r.error_code, "InitProducerId", deadline)
        shard.producer_id, shard.epoch = int(response.producer_id), int(response.producer_epoch)
        self._shards[partition] = shard
        log.info("state partition %d taken: transactional id %s, producer %d epoch %d", partition,
                 shard.txn_id, shard.producer_id, shard.epoch)
        return shard.producer_id, shard.epoch

    # ------------------------------------------------------------------ writing
    async def append(self, partition: int, records: Iterable[tuple[bytes, bytes | None]],
                     timestamp_ms: int) -> int:
        """Append records as ONE batch in ONE transaction; return its base offset once the
        transaction is committed (EndTxn answered: the epoch was still current)."""
        try:
            return await self._append(partition, list(records), timestamp_ms)
        except Exception as e:
            if self.on_write_error is not None and not isinstance(e, ShardFenced):
                try:
                    self.on_write_error(partition, e)
                except Exception:
                    log.exception("state topic %s: write-error callback failed", self.topic)
            raise

    async def _append(self, partition: int, records: list[tuple[bytes, bytes | None]], timestamp_ms: int) -> int:
        shard = self._shards.get(partition)
        if shard is None:
            raise ShardFenced(partition, "not taken by this process (take or load it first)")
        async with shard.lock:
            self._check_owned(partition)
            if shard.broken:
                raise StateLogError(f"state partition {partition}: an earlier write failed half-way; "
                                    f"the shard must be taken again (reload)")
            shard.broken = True
            try:
                base = await self._transaction(shard, records, timestamp_ms)
            except ShardFenced:
                self._shards.pop(partition, None)
                raise
            shard.broken = False
            return base

    async def _transaction(self, shard: _Shard, records: list[tuple[bytes, bytes | None]],
                           timestamp_ms: int) -> int:
        deadline = time.monotonic() + self.request_timeout_s
        txn = TransactionalId(shard.txn_id)
        pid, epoch = ProducerId(shard.producer_id), i16(shard.epoch)
        add = _module(_ADD_PARTITIONS)

        def add_error(response: Any) -> ErrorCode:
            for t in response.results_by_topic_v3_and_below:
                for p in t.results_by_partition:
                    if p.partition_error_code != ErrorCode.none:
                        return p.partition_error_code
            return ErrorCode.none

        def add_partition() -> Any:
            return _req(_ADD_PARTITIONS, v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid,
                        v3_and_below_producer_epoch=epoch, v3_and_below_topics=(add.AddPartitionsToTxnTopic(
                            name=TopicName(self.topic), partitions=(i32(shard.partition),)),))

        async def still_current() -> None:
            response = await self._call(await self._coordinator(shard.txn_id), add_partition())
            code = add_error(response)
            if code in FENCING_ERRORS:
                raise ShardFenced(shard.partition, f"EndTxn(commit): connection closed, then AddPartitionsToTxn: "
                                                   f"{code.name} (producer {shard.producer_id} epoch {shard.epoch})")

        await self._txn_call(shard, add_partition, add_error, "AddPartitionsToTxn", deadline)

        base = -1
        if records:     # none: a barrier, the transaction proves the epoch alone
            batch = build_batch(records, timestamp_ms=timestamp_ms, producer_id=shard.producer_id,
                                producer_epoch=shard.epoch, base_sequence=shard.sequence, transactional=True)
            base = await self._produce(shard, batch, deadline)
            shard.sequence += len(records)
        if self.before_end_txn is not None:
            await self.before_end_txn(shard.partition)
        await self._txn_call(shard, lambda: _req(
            _END_TXN, transactional_id=txn, producer_id=pid, producer_epoch=epoch, committed=True),
            lambda r: r.error_code, "EndTxn(commit)", deadline, probe=still_current)
        return base

    async def barrier(self, partition: int) -> None:
        """A transaction of the shard's own id with no records, begun now and committed
        (exactly-once offsets: proves after a client's append that this process still owns the shard;
        ShardFenced if not). It writes one COMMIT marker into the partition."""
        await self.append(partition, [], 0)

    # ---------------------------------------------- exactly-once offsets: the client-producer appender
    txn_offsets_supported = True    # loads with TxnLogReader (`readers`), raw reads, leader calls

    async def call_leader(self, partition: int, request: Any) -> Any:
        """Send `request` (a Produce of one partition) to the partition's leader; a
        not-leader answer forgets the cached leader so that a resend finds the new one."""
        response = await self._call(await self._leader(partition), request)
        try:
            code = response.responses[0].partition_responses[0].error_code
        except (AttributeError, IndexError):
            code = ErrorCode.none
        if code in _REFRESH:
            self._leaders.pop(partition, None)
        return response

    async def call_transaction_coordinator(self, transactional_id: str, request: Any) -> Any:
        """Send `request` to the transaction coordinator of `transactional_id` (a client's:
        AddOffsetsToTxn translated). Raises StateLogError if none answers; the caller
        forgets a coordinator that answered NOT_COORDINATOR with `forget_coordinator`."""
        try:
            address = await self._coordinator(transactional_id)
        except _Retry as e:
            raise StateLogError(f"FindCoordinator(transaction {transactional_id!r}): {e.code.name}") from e
        return await self._call(address, request)

    def forget_coordinator(self, transactional_id: str) -> None:
        self._coordinators.pop(transactional_id, None)

    async def read_partition(self, partition: int, offset: int) -> tuple[bytes, int]:
        """(records from `offset`, high watermark), read_uncommitted with markers visible."""
        for attempt in range(50):
            # Tansu answers no partition at all to a Fetch with a short wait on an empty
            # partition (see `_fetch`); a longer wait with min_bytes 1 gets its high watermark.
            part = await self._fetch(partition, offset, 10 if attempt == 0 else 100)
            if part is None:
                continue
            if part.error_code in _REFRESH:
                self._leaders.pop(partition, None)
                await asyncio.sleep(0.05)
                continue
            if part.error_code != ErrorCode.none:
                raise StateLogError(f"Fetch {self.topic}-{partition} at {offset}: {part.error_code.name}")
            return part.records or b"", int(part.high_watermark)
        raise StateLogError(f"Fetch {self.topic}-{partition} at {offset}: no usable answer")

    async def _produce(self, shard: _Shard, batch: bytes, deadline: float) -> int:
        m = _module(_PRODUCE)
        request = _req(_PRODUCE, transactional_id=TransactionalId(shard.txn_id), acks=i16(-1),
                       timeout=_ms(int(self.request_timeout_s * 1000)),
                       topic_data=(m.TopicProduceData(name=TopicName(self.topic), partition_data=(
                           m.PartitionProduceData(index=i32(shard.partition), records=batch),)),))
        while True:
            address = await self._leader(shard.partition)
            response = await self._call(address, request)
            part = response.responses[0].partition_responses[0]
            code = part.error_code
            if code == ErrorCode.none:
                return int(part.base_offset)
            if code in FENCING_ERRORS:
                raise ShardFenced(shard.partition, f"Produce: {code.name} (producer {shard.producer_id} "
                                                   f"epoch {shard.epoch})")
            if code in _REFRESH and time.monotonic() < deadline:
                # Nothing was appended: the same batch (same sequence) is sent again.
                self._leaders.pop(shard.partition, None)
                await asyncio.sleep(0.05)
                continue
            raise StateLogError(f"Produce to {self.topic}-{shard.partition}: {code.name}")

    # ------------------------------------------------------------------ reading
    async def load(self, partitions: Iterable[int], sink: RecordSink,
                   on_loaded: Callable[[int, int], None],
                   progress: Callable[[int, int], None] | None = None,
                   on_corrupt: Callable[[int, CorruptBatchError], None] | None = None,
                   abandoned: Callable[[int], bool] | None = None,
                   readers: Callable[[int], TxnLogReader] | None = None) -> None:
        """Take each partition (fence), then replay it from its start to its high watermark:
        plain batches at once, transactional ones at their COMMIT marker, aborted ones never.
        With `readers`, partition p is read by `readers(p)` instead (txn_log_reader:
        client offset commits pending at their own offsets with their producer id, markers
        ending them; `sink` is not called)."""
        parts = sorted(set(partitions))
        if not parts:
            return
        if not self._brokers:
            await self._refresh_metadata()
        records = [0]
        done = [0]

        async def one(p: int) -> None:
            if self.take_on_load:
                await self.take(p)
            end = await self._replay(p, sink, on_corrupt, abandoned, records,
                                     readers(p) if readers is not None else None)
            done[0] += 1
            if end is not None:
                on_loaded(p, end)
            if progress is not None:
                progress(records[0], done[0])

        # Every partition is taken and replayed even if another one fails (a refused take
        # raises ShardFenced for its partition only); the first error is raised at the end.
        results = await asyncio.gather(*(one(p) for p in parts), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _fetch(self, partition: int, offset: int, max_wait_ms: int) -> Any:
        m = _module(_FETCH)
        request = _req(_FETCH, cluster_id=None, replica_id=BrokerId(-1), max_wait=_ms(max_wait_ms),
                       min_bytes=i32(0 if max_wait_ms <= 50 else 1), max_bytes=i32(self.fetch_max_bytes),
                       isolation_level=i8(0),
                       session_id=i32(0), session_epoch=i32(-1),
                       topics=(m.FetchTopic(topic=TopicName(self.topic), partitions=(m.FetchPartition(
                           partition=i32(partition), current_leader_epoch=i32(-1), fetch_offset=i64(offset),
                           last_fetched_epoch=i32(-1), log_start_offset=i64(-1),
                           partition_max_bytes=i32(self.fetch_max_bytes)),)),),
                       forgotten_topics_data=(), rack_id="")
        address = await self._leader(partition)
        response = await self._call(address, request)
        if response.error_code != ErrorCode.none:
            raise StateLogError(f"Fetch {self.topic}-{partition}: {response.error_code.name}")
        if not response.responses or not response.responses[0].partitions:
            return None    # Tansu answers an empty response to max_wait 0 on an empty partition
        return response.responses[0].partitions[0]

    async def _log_start(self, partition: int) -> int:
        m = _module(_LIST_OFFSETS)
        response = await self._call(await self._leader(partition), _req(
            _LIST_OFFSETS, replica_id=BrokerId(-1), isolation_level=i8(0), topics=(m.ListOffsetsTopic(
                name=TopicName(self.topic), partitions=(m.ListOffsetsPartition(
                    partition_index=i32(partition), current_leader_epoch=i32(-1), timestamp=i64(-2)),)),)))
        part = response.topics[0].partitions[0]
        if part.error_code != ErrorCode.none:
            raise StateLogError(f"ListOffsets {self.topic}-{partition}: {part.error_code.name}")
        return int(part.offset)

    async def _replay(self, partition: int, sink: RecordSink,
                      on_corrupt: Callable[[int, CorruptBatchError], None] | None,
                      abandoned: Callable[[int], bool] | None, counter: list[int],
                      txn_reader: TxnLogReader | None = None) -> int | None:
        reader: Any = _Reader(partition, sink) if txn_reader is None else _TxnReaderAdapter(txn_reader)
        offset = 0
        refreshes = empties = 0
        while True:
            if abandoned is not None and abandoned(partition):
                return None
            part = await self._fetch(partition, offset, 10 if empties == 0 else 100)
            if part is None:
                empties += 1
                if empties > 100:
                    raise StateLogError(f"Fetch {self.topic}-{partition} at {offset}: no answer for the partition")
                continue
            empties = 0
            code = part.error_code
            if code == ErrorCode.offset_out_of_range:
                offset = await self._log_start(partition)
                continue
            if code in _REFRESH and refreshes < 50:
                refreshes += 1
                self._leaders.pop(partition, None)
                await asyncio.sleep(0.05)
                continue
            if code != ErrorCode.none:
                raise StateLogError(f"Fetch {self.topic}-{partition} at {offset}: {code.name}")
            hw = int(part.high_watermark)
            try:
                offset = reader.feed(part.records or b"", offset)
            except _BatchError as e:
                error = CorruptBatchError(self.topic, partition, offset, CorruptRecordException(str(e)))
                if on_corrupt is None:
                    raise error from e
                on_corrupt(partition, error)
                return None
            counter[0] += reader.delivered
            reader.delivered = 0
            if offset >= hw:
                break
        self.aborted_transactions[partition] = reader.aborted
        self.open_transactions[partition] = reader.held
        if reader.held:
            log.warning("state partition %d: %d transaction(s) still open at offset %d (producer ids %s): "
                        "not kcoord's (those were completed by the fence); kept pending", partition,
                        len(reader.held), offset, sorted(reader.held))
        return offset

    async def tail(self, partition: int, from_offset: int, sink: RecordSink, *, poll_ms: int = 500) -> None:
        """Follow one partition from `from_offset` (read_uncommitted, markers visible, the
        same rules as load) until cancelled. A transaction that began before `from_offset`
        is not seen whole: start the tail where a load ended."""
        reader = _Reader(partition, sink)
        offset = from_offset
        while True:
            part = await self._fetch(partition, offset, poll_ms)
            if part is None:
                continue
            if part.error_code in _REFRESH:
                self._leaders.pop(partition, None)
                await asyncio.sleep(0.2)
                continue
            if part.error_code != ErrorCode.none:
                raise StateLogError(f"Fetch {self.topic}-{partition} at {offset}: {part.error_code.name}")
            offset = reader.feed(part.records or b"", offset)


class _TxnReaderAdapter:
    """A TxnLogReader with _Reader's counters (the load's progress and its open/aborted
    figures): `held` is only kcoord's own held records; a client's open transaction is
    pending in the shard, not here."""

    def __init__(self, reader: TxnLogReader) -> None:
        self.reader = reader
        self.delivered = 0

    @property
    def held(self) -> dict[int, list[tuple[int, bytes, bytes | None]]]:
        return self.reader.held

    @property
    def aborted(self) -> int:
        return self.reader.aborted

    def feed(self, data: bytes, offset: int) -> int:
        return self.reader.feed(data, offset)


class _Retry(Exception):
    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


class _Reader:
    """Batches of one partition in offset order -> committed records to the sink."""

    def __init__(self, partition: int, sink: RecordSink) -> None:
        self.partition = partition
        self.sink = sink
        self.held: dict[int, list[tuple[int, bytes, bytes | None]]] = {}
        self.aborted = 0
        self.delivered = 0

    def feed(self, data: bytes, offset: int) -> int:
        """Consume a fetch response's records from `offset`; returns the next offset."""
        p, sink = self.partition, self.sink
        for batch in iter_batches(data, allow_partial_tail=True):
            if batch.last_offset < offset:
                continue
            if batch.is_control_batch:
                held = self.held.pop(batch.producer_id, None)
                if held is not None:
                    if batch.control_type == ControlMarker.COMMIT:
                        for o, k, v in held:
                            sink(p, o, k, v)
                        self.delivered += len(held)
                    else:
                        self.aborted += 1
            elif batch.is_transactional:
                self.held.setdefault(batch.producer_id, []).extend(
                    (r.offset, r.key, r.value) for r in batch.records if r.offset >= offset)
            else:
                for r in batch.records:
                    if r.offset >= offset:
                        sink(p, r.offset, r.key, r.value)
                        self.delivered += 1
            offset = batch.next_offset
        return offset
