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
- **Loading** fences first: the caller's ``fence`` step (the runtime's loader), or else the
  take (unless ``take_on_load=False``, a read-only reader),
  then fetches read_uncommitted from the log start to the high watermark with control
  batches visible (kcoord's own Fetch; a read_committed consumer's position stops at the
  last stable offset behind any open client transaction).
  Transactional data batches are held per producer id until their marker: COMMIT hands
  their records to ``sink`` (at the marker), ABORT drops them (``aborted_transactions``).
  After the fence every kcoord transaction is complete, so a transaction still open at the
  end of the log is a client's (TxnOffsetCommit written as the client's producer):
  it is kept in ``open_transactions[p][producer_id]`` for the tail/exactly-once offsets to resolve.

`fencing="epoch"` (epoch_producers.py, docs/design/fencing.md "fencing=epoch") keeps the
take and the load, but the take ends with a fence write and appends are idempotent batches
under the bumped epoch, no transaction per append (`offsets_per_append = 0`); its upkeep
(epoch_upkeep.py: keep-alive, refresh, barrier) is started by the runtime's loader.

The client is kcoord's own Kafka protocol over links the caller opens (``open_link``, the
same shape as coordinator.cluster.membership's: the service passes
``coordinator.upstream.client.opener(security, client_id)``, kcoord's one upstream client,
which brings TLS and SASL). Without one, ``coordinator.upstream.client.open_plain_link``
(PLAINTEXT).

The class is made of three parts, each stating its own rules: `links` (fenced_links.py: one
link per broker, leaders, transaction coordinators), `producers` (fenced_producers.py: the
producer sessions, the take and the transaction per append) and `reads` (fenced_reads.py:
fence then load, the tail's raw reads).
kcoord speaks the transaction protocol itself rather than through a library's
transactional producer: the fencing argument is made of the pid/epoch and the per-step
errors such a producer hides, and InitProducerId must be v4 or later (Tansu 0.6 refuses v0
with UNKNOWN_SERVER_ERROR).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..upstream.client import open_plain_link, parse_bootstrap
from .epoch_producers import EpochProducers
from .epoch_upkeep import EpochUpkeeps
from .fenced_links import Link, OpenLink, StateLogError, UpstreamLinks
from .fenced_producers import FENCING_ERRORS, ShardProducers
from .fenced_reads import CorruptRecordException, LogReads, _Reader
from .parts import Forward
from .state_log import CorruptBatchError, Fence, RecordSink, ShardFenced
from .txn_log_reader import TxnLogReader

__all__ = ["FENCING_ERRORS", "CorruptRecordException", "FencedStateLog", "Link", "OpenLink", "StateLogError",
           "_Reader"]

log = logging.getLogger("kcoord.fenced_state_log")


FENCING = ("transactional", "epoch")


class FencedStateLog:
    """The `state_log.StateLog` port with one transactional id per shard."""

    txn_offsets_supported = True     # loads with TxnLogReader (`readers`), raw reads, leader calls

    def __init__(self, bootstrap: str | Sequence[tuple[str, int]], topic: str, partitions: int,
                 open_link: OpenLink | None = None, *, transactional_id_prefix: str = "kcoord",
                 transaction_timeout_ms: int = 60_000, request_timeout_s: float = 30.0,
                 take_timeout_s: float = 60.0, take_on_load: bool = True,
                 owns: Callable[[int], bool] | None = None,
                 fetch_max_bytes: int = 8 * 1024 * 1024, fencing: str = "transactional",
                 producer_id_expiration_ms: int | None = None,
                 transactional_id_expiration_ms: int | None = None) -> None:
        if fencing not in FENCING:
            raise ValueError(f"fencing={fencing!r}: expected one of {', '.join(FENCING)}")
        if isinstance(bootstrap, str):
            bootstrap = parse_bootstrap(bootstrap)
        self.topic = topic
        self.partitions = partitions
        self.take_on_load = take_on_load
        self.links = UpstreamLinks(bootstrap, topic, open_link if open_link is not None else open_plain_link,
                                   request_timeout_s, fetch_max_bytes)
        # The membership's word (`owns`: is shard p assigned to this process?) is checked
        # before a take and before each append, so a process that lost a shard never fences
        # its new owner back by reloading it (a fence is only as good as the caller's restraint).
        self.fencing = fencing
        producers = EpochProducers if fencing == "epoch" else ShardProducers
        self.producers: ShardProducers = producers(
            self.links, topic, transactional_id_prefix, transaction_timeout_ms=transaction_timeout_ms,
            request_timeout_s=request_timeout_s, take_timeout_s=take_timeout_s, owns=owns)
        # Transactional: the COMMIT marker after each batch; epoch: nothing but the records.
        self.offsets_per_append = 1 if fencing == "transactional" else 0
        self.reads = LogReads(self.links, topic)
        self.on_write_error: Callable[[int, BaseException], None] | None = None
        # fencing=epoch: the shards' upkeep (epoch_upkeep.py) the runtime loader starts, and
        # the broker's expirations it keeps inside (read at start unless given).
        self.fence_upkeep = EpochUpkeeps(self.producers, producer_id_expiration_ms, transactional_id_expiration_ms) \
            if isinstance(self.producers, EpochProducers) else None

    # State kept by the parts, under the names callers, benches and tests use.
    bootstrap = Forward("links", "bootstrap")
    request_timeout_s = Forward("links", "request_timeout_s")
    fetch_max_bytes = Forward("links", "fetch_max_bytes")
    _coordinators = Forward("links", "coordinators")
    owns = Forward("producers", "owns")
    prefix = Forward("producers", "prefix")
    transaction_timeout_ms = Forward("producers", "transaction_timeout_ms")
    take_timeout_s = Forward("producers", "take_timeout_s")
    concurrent_retries = Forward("producers", "concurrent_retries")
    concurrent_wait_s = Forward("producers", "concurrent_wait_s")
    before_end_txn = Forward("producers", "before_end_txn")
    open_transactions = Forward("reads", "open_transactions")
    aborted_transactions = Forward("reads", "aborted_transactions")

    def transactional_id(self, partition: int) -> str:
        return self.producers.transactional_id(partition)

    def producer(self, partition: int) -> tuple[int, int] | None:
        """(producer id, epoch) this process holds for a taken shard, else None."""
        return self.producers.producer(partition)

    # ------------------------------------------------------------------ links
    async def start(self) -> None:
        await self.links.refresh_metadata()
        if self.fence_upkeep is not None:
            await self.fence_upkeep.read_upstream(self.links)

    async def stop(self) -> None:
        if self.fence_upkeep is not None:
            self.fence_upkeep.stop()
        self.links.close()
        self.producers.sessions.clear()

    async def _call(self, address: tuple[str, int], request: Any) -> Any:
        return await self.links.call(address, request)

    async def _leader(self, partition: int) -> tuple[str, int]:
        return await self.links.leader(partition)

    async def _coordinator(self, txn_id: str) -> tuple[str, int]:
        return await self.links.coordinator(txn_id)

    async def _fetch(self, partition: int, offset: int, max_wait_ms: int) -> Any:
        return await self.links.fetch(partition, offset, max_wait_ms)

    # ---------------------------------------------------------- taking, writing
    async def take(self, partition: int) -> tuple[int, int]:
        """Become the only writer of `partition`: InitProducerId for its transactional id,
        which fences every earlier epoch and aborts its open transaction. Returns
        (producer id, epoch). A load's fence step today (`load`)."""
        return await self.producers.take(partition)

    @property
    def takeover(self) -> Fence | None:
        """The fence step of a shard's load (loader.py): the take, or None for a read-only
        reader (`take_on_load=False`)."""
        return self.take if self.take_on_load else None

    async def append(self, partition: int, records: Iterable[tuple[bytes, bytes | None]],
                     timestamp_ms: int) -> int:
        """Append records as ONE batch in ONE transaction; return its base offset once the
        transaction is committed (EndTxn answered: the epoch was still current)."""
        try:
            return await self.producers.append(partition, list(records), timestamp_ms)
        except Exception as e:
            if self.on_write_error is not None and not isinstance(e, ShardFenced):
                try:
                    self.on_write_error(partition, e)
                except Exception:
                    log.exception("state topic %s: write-error callback failed", self.topic)
            raise

    async def barrier(self, partition: int) -> None:
        """Prove after a client's append that this process still owns the shard (exactly-once
        offsets; ShardFenced if not). Transactional: a transaction of the shard's own id with
        no records, one COMMIT marker. Epoch: a fence record acknowledged under the shard's
        epoch, written through the shard's own writer where it is loaded (epoch_upkeep.py)."""
        if self.fence_upkeep is not None:
            await self.fence_upkeep.barrier(partition)
        else:
            await self.append(partition, [], 0)

    # ---------------------------------------------- exactly-once offsets: the client-producer appender
    async def call_leader(self, partition: int, request: Any) -> Any:
        """Send `request` (a Produce of one partition) to the partition's leader; a
        not-leader answer forgets the cached leader so that a resend finds the new one."""
        return await self.links.call_leader(partition, request)

    async def call_transaction_coordinator(self, transactional_id: str, request: Any) -> Any:
        """Send `request` to the transaction coordinator of `transactional_id` (a client's:
        AddOffsetsToTxn translated). Raises StateLogError if none answers; the caller
        forgets a coordinator that answered NOT_COORDINATOR with `forget_coordinator`."""
        return await self.links.call_transaction_coordinator(transactional_id, request)

    def forget_coordinator(self, transactional_id: str) -> None:
        self.links.forget_coordinator(transactional_id)

    # ------------------------------------------------------------------ reading
    async def read_partition(self, partition: int, offset: int) -> tuple[bytes, int]:
        """(records from `offset`, high watermark), read_uncommitted with markers visible."""
        return await self.reads.read_partition(partition, offset)

    async def load(self, partitions: Iterable[int], sink: RecordSink,
                   on_loaded: Callable[[int, int], None],
                   progress: Callable[[int, int], None] | None = None,
                   on_corrupt: Callable[[int, CorruptBatchError], None] | None = None,
                   abandoned: Callable[[int], bool] | None = None,
                   readers: Callable[[int], TxnLogReader] | None = None,
                   fence: Fence | None = None) -> None:
        """Fence each partition, then replay it from its start to its high watermark: plain
        batches at once, transactional ones at their COMMIT marker, aborted ones never.
        `fence` is the caller's takeover step (the runtime loader's); without one, the take
        (`take_on_load`). With `readers`, partition p is read by `readers(p)` instead
        (txn_log_reader: client offset commits pending at their own offsets with their
        producer id, markers ending them; `sink` is not called)."""
        if fence is None and self.take_on_load:
            fence = self.take
        await self.reads.load(partitions, sink, on_loaded, progress, on_corrupt, abandoned, readers, fence)

    async def tail(self, partition: int, from_offset: int, sink: RecordSink, *, poll_ms: int = 500) -> None:
        """Follow one partition from `from_offset` (read_uncommitted, markers visible, the
        same rules as load) until cancelled."""
        await self.reads.tail(partition, from_offset, sink, poll_ms=poll_ms)
