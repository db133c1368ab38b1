"""Fencing by writing (`fencing=epoch`): the shard's transactional id is only an epoch
register; appends are plain idempotent batches under (producer id, epoch, sequence), no
transaction per append (docs/design/fencing.md, "fencing=epoch").

Rules:
- **Takeover** (`take`, the load's fence step): InitProducerId on the shard's transactional
  id bumps the epoch (and aborts an open transaction of a `fencing=transactional` owner:
  a rolling upgrade; CONCURRENT_TRANSACTIONS meanwhile is retried). Then the **fence write**:
  one kcoord-private record (`fence_record`) under the new epoch at sequence 0, acks=all.
  `take` returns only once the fence write is acknowledged, so the shard loads only then:
  the partition leader checks the epoch under its log lock, so every batch of an older
  epoch either landed before the fence (and is inside the load) or is refused after it.
- **Appends** are idempotent batches (not transactional, no transactional id on the
  Produce) at the session's next sequence; one at a time per shard (the session's lock);
  the waiting batches of all shards led by one broker go in one ProduceRequest
  (epoch_sender.py).
- **Answers** (`produce_outcome`): INVALID_PRODUCER_EPOCH, PRODUCER_FENCED, INVALID_TXN_STATE
  (and INVALID_PRODUCER_ID_MAPPING) mean a newer epoch exists: `ShardFenced`, the shard is
  unloaded. OUT_OF_ORDER_SEQUENCE_NUMBER, DUPLICATE_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID and
  a success without an offset (Tansu answers a duplicate so) leave the log's content unknown
  to us: `StateLogError`, the shard reloads (and re-takes: a new epoch, sequence 0). A
  not-leader answer resends the same batch (same sequence) to the new leader.
- **Refresh** (`mark_refresh`, against `transactional.id.expiration.ms`): the next append
  first re-inits the id with the KIP-360 fields (the expected producer id and epoch), so
  if another process took the shard meanwhile the answer is PRODUCER_FENCED and nothing is
  stolen; that append is then the fence write of the new epoch (sequence 0). Tansu 0.6
  answers those fields UNKNOWN_SERVER_ERROR: there the plain InitProducerId follows, after
  the same lease check.
- **Rotation**: when InitProducerId answers another producer id than the one this process
  held for the shard (the epoch was exhausted at 32,766, or the id expired), the new id
  fences nothing at the partition: a write under (old id, old epoch + 1, sequence 0) fences
  the old id first. A takeover that gets epoch 0 (a new producer id) did not hold the old
  one: it reads the partition for the last idempotent batch of another producer
  (`last_writer`) and fences that one the same way, before its own fence.
"""
from __future__ import annotations

import asyncio
import logging
import struct
import time
from typing import Any, Literal

from kio.schema.errors import ErrorCode

from records.batch import build_batch, iter_batches

from .epoch_sender import CoalescingSender
from .fenced_links import REFRESH, StateLogError
from .fenced_producers import ProducerSession, ShardProducers, TxnCallError
from .fenced_reads import LogReads
from .state_log import ShardFenced

log = logging.getLogger("kcoord.fenced_state_log")

# A kcoord-private record type (the private block of docs/design/client-assignors-spec.md §0,
# clear of Kafka's 0-23 and the connect records' 1000-1004). Kafka's loader and kcoord's
# `offsets` tools skip unknown types (KIP-915); kcoord's own loader drops it before replay.
# Key: type, partition (one key per partition: compaction keeps the latest fence only).
# Value: version 0, the producer id and epoch it fenced with.
FENCE_RECORD_TYPE = 1100
_FENCE_KEY = struct.Struct(">hi")
_FENCE_VALUE = struct.Struct(">hqh")
_FENCE_PREFIX = struct.pack(">h", FENCE_RECORD_TYPE)

# Kafka rotates the producer id once the epoch reaches Short.MAX_VALUE - 1.
MAX_EPOCH = 32767

UNLOAD = frozenset({ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch, ErrorCode.invalid_txn_state,
                    ErrorCode.invalid_producer_id_mapping})
RELOAD = frozenset({ErrorCode.out_of_order_sequence_number, ErrorCode.duplicate_sequence_number,
                    ErrorCode.unknown_producer_id})

Outcome = Literal["ok", "fenced", "reload", "resend", "error"]


def fence_record(partition: int, producer_id: int, epoch: int) -> tuple[bytes, bytes]:
    return _FENCE_KEY.pack(FENCE_RECORD_TYPE, partition), _FENCE_VALUE.pack(0, producer_id, epoch)


def is_fence_record(key: bytes | None) -> bool:
    return key is not None and key[:2] == _FENCE_PREFIX


def produce_outcome(code: ErrorCode, base_offset: int) -> Outcome:
    """What an idempotent Produce's partition answer means for the shard."""
    if code == ErrorCode.none:
        return "ok" if base_offset >= 0 else "reload"     # Tansu: a duplicate without an offset
    if code in UNLOAD:
        return "fenced"
    if code in RELOAD:
        return "reload"
    if code in REFRESH:
        return "resend"
    return "error"


class EpochProducers(ShardProducers):
    """`ShardProducers` with fencing by writing: one InitProducerId per takeover, then
    idempotent batches, every shard's sent together (epoch_sender.py)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sender = CoalescingSender(self.links, self.topic, self.request_timeout_s)
        self.unrotated: set[int] = set()     # partitions whose old producer id is not fenced yet

    async def take(self, partition: int) -> tuple[int, int]:
        """InitProducerId (a new epoch), then the fence write, acknowledged before this
        returns: from then on every older epoch's write is refused."""
        self.check_owned(partition)
        previous = self.sessions.pop(partition, None)
        shard = ProducerSession(partition, self.transactional_id(partition))
        deadline = time.monotonic() + self.take_timeout_s
        await self.init_producer_id(shard, -1, -1, deadline)
        async with shard.lock:
            if previous is not None:
                await self._rotate(shard, previous.producer_id, previous.epoch, deadline)
            elif shard.epoch == 0 or partition in self.unrotated:
                # A new producer id (a new transactional id, or the old one expired or its
                # epoch ran out): the id kcoord wrote with before is in the log, not here.
                # Until that write succeeded, later takes (epoch 1, 2, ...) look again.
                self.unrotated.add(partition)
                last = await self.last_writer(partition, shard.producer_id)
                if last is not None:
                    await self._rotate(shard, *last, deadline)
                self.unrotated.discard(partition)
            await self._fence(shard, deadline)
        self.sessions[partition] = shard
        self.log_taken(shard)
        return shard.producer_id, shard.epoch

    async def last_writer(self, partition: int, exclude: int) -> tuple[int, int] | None:
        """(producer id, epoch) of the partition's last idempotent, non-transactional batch
        of another producer than `exclude`: kcoord's own writer before this one (clients'
        TxnOffsetCommit batches are transactional). One read of the whole partition."""
        reads = LogReads(self.links, self.topic)
        offset = await self.links.log_start(partition)
        last = None
        while True:
            data, high_watermark = await reads.read_partition(partition, offset)
            start = offset
            for b in iter_batches(data, allow_partial_tail=True):
                if b.last_offset < offset:
                    continue
                if not b.is_control_batch and not b.is_transactional and b.producer_id >= 0 \
                        and b.producer_id != exclude:
                    last = b.producer_id, b.producer_epoch
                offset = b.next_offset
            if offset >= high_watermark or offset == start:
                return last

    def mark_refresh(self, partition: int) -> bool:
        """Re-init the shard's id (KIP-360) before its next append; False if not taken."""
        shard = self.sessions.get(partition)
        if shard is None:
            return False
        shard.refresh_due = True
        return True

    async def write(self, shard: ProducerSession, records: list[tuple[bytes, bytes | None]],
                    timestamp_ms: int) -> int:
        """One append (`ShardProducers.append` holds the lock and checks the lease): ONE
        idempotent batch under the shard's epoch, after the refresh when one is due."""
        deadline = time.monotonic() + self.request_timeout_s
        if shard.refresh_due:
            old = shard.producer_id, shard.epoch
            try:
                await self.init_producer_id(shard, *old, deadline)
            except TxnCallError as e:
                if e.code != ErrorCode.unknown_server_error:
                    raise
                # Tansu 0.6 refuses the KIP-360 fields so (and expires no
                # transactional id): the lease check above stands in for them.
                await self.init_producer_id(shard, -1, -1, deadline)
            await self._rotate(shard, *old, deadline)
            shard.refresh_due = False
            self.log_taken(shard, "refreshed")
        return await self._produce_as(shard, records, timestamp_ms, deadline)

    async def _fence(self, shard: ProducerSession, deadline: float) -> None:
        await self._produce_as(shard, [fence_record(shard.partition, shard.producer_id, shard.epoch)],
                               int(time.time() * 1000), deadline)

    async def _rotate(self, shard: ProducerSession, old_id: int, old_epoch: int, deadline: float) -> None:
        """The producer id changed: fence the old one at the partition with a write under
        (old id, old epoch + 1, sequence 0). A fencing answer means a higher epoch of the old
        id is there already: fenced as well."""
        if old_id < 0 or old_id == shard.producer_id or old_epoch + 1 > MAX_EPOCH:
            return
        old = ProducerSession(shard.partition, shard.txn_id)
        old.producer_id, old.epoch = old_id, old_epoch + 1
        try:
            await self._produce_as(old, [fence_record(shard.partition, old_id, old_epoch + 1)],
                                   int(time.time() * 1000), deadline)
        except ShardFenced:
            pass
        log.warning("state partition %d: transactional id %s now has producer id %d (was %d epoch %d, the "
                    "epoch was exhausted or the id expired); the old id was fenced at epoch %d", shard.partition,
                    shard.txn_id, shard.producer_id, old_id, old_epoch, old_epoch + 1)

    async def _produce_as(self, shard: ProducerSession, records: list[tuple[bytes, bytes | None]],
                          timestamp_ms: int, deadline: float) -> int:
        batch = build_batch(records, timestamp_ms=timestamp_ms, producer_id=shard.producer_id,
                            producer_epoch=shard.epoch, base_sequence=shard.sequence)
        while True:
            part = await self.sender.send(await self.links.leader(shard.partition), shard.partition, batch)
            code, base = part.error_code, int(part.base_offset)
            outcome = produce_outcome(code, base)
            if outcome == "ok":
                shard.sequence += len(records)
                return base
            where = (f"Produce to {self.topic}-{shard.partition} as producer {shard.producer_id} "
                     f"epoch {shard.epoch} sequence {shard.sequence}")
            if outcome == "fenced":
                raise ShardFenced(shard.partition, f"{where}: {code.name}")
            if outcome == "resend" and time.monotonic() < deadline:
                # Nothing was appended: the same batch (same sequence) goes to the new leader.
                self.links.forget_leader(shard.partition)
                await asyncio.sleep(0.05)
                continue
            if outcome == "reload" and code == ErrorCode.none:
                raise StateLogError(f"{where}: acknowledged without an offset (a duplicate): reload")
            raise StateLogError(f"{where}: {code.name}")
