"""Reading a state partition that holds client transactions: which record is
replayed when, and with which producer id. Sans-IO: bytes of a Fetch response in, calls on a
`ReplayTarget` out, so the loader and the tail share it (and tests feed it built batches).

Rules (Kafka's coordinator loader replays `__consumer_offsets` the same way: every record at
its offset with its batch's producer id, and `replayEndTransactionMarker` at each marker):
- a plain (non-transactional) batch: each record at once, producer id -1;
- a transactional batch of OffsetCommit values only: each record at once, with its producer
  id. These become offsets pending for that producer (offsets.py). It is what TxnOffsetCommit
  appends as the client's producer, and also what kcoord's own transactional writer
  (fenced_state_log.py) appends for a plain OffsetCommit; for the latter, pending until its
  COMMIT and then applied under Kafka's "newer in the log" rule ends in the same state as
  the immediate replay the runtime did when it wrote them;
- any other transactional batch (kcoord's own writes: group records, tombstones) is held per
  producer id and replayed plain at its own offsets when its COMMIT marker comes, or dropped
  on ABORT. Kafka writes such records only outside transactions, so it has no rule for them;
  a tombstone or a group record of an aborted transaction must never be applied;
- a control batch (COMMIT/ABORT marker): the producer's held records (COMMIT), then
  `end_transaction`, which applies or drops its pending offsets;
- producer state: the epoch and last sequence of each producer's latest data batch
  (`producers`), so the appender continues a producer's sequence from the log, never from
  memory (Kafka's ProducerStateManager is rebuilt from batch headers the same way).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from records.batch import ControlMarker, iter_batches

_SEQUENCE_WRAP = 2**31      # Kafka's sequences wrap from Integer.MAX_VALUE to 0


class ReplayTarget(Protocol):
    def record(self, offset: int, key: bytes, value: bytes | None, producer_id: int) -> None: ...

    def end_transaction(self, offset: int, producer_id: int, committed: bool) -> None: ...


@dataclass(slots=True)
class ProducerState:
    epoch: int
    last_sequence: int
    last_offset: int


def is_offset_commit_value(key: bytes | None, value: bytes | None) -> bool:
    """An OffsetCommit record (key types 0 and 1) that is not a tombstone."""
    return key is not None and len(key) >= 2 and key[0] == 0 and key[1] in (0, 1) and value is not None


class TxnLogReader:
    """Batches of one partition in offset order -> replay calls (see the module rules)."""

    def __init__(self, target: ReplayTarget) -> None:
        self.target = target
        self.held: dict[int, list[tuple[int, bytes, bytes | None]]] = {}
        self.producers: dict[int, ProducerState] = {}
        self.markers = 0
        self.aborted = 0
        self.position = 0       # the next offset to replay, as feed goes (a bad batch starts there)

    def feed(self, data: bytes, offset: int, until: int | None = None) -> int:
        """Consume a Fetch response's records from `offset`, and none at or after `until`
        (when given); returns the next offset."""
        target = self.target
        self.position = offset
        for batch in iter_batches(data, allow_partial_tail=True):
            if batch.last_offset < offset:
                continue
            if until is not None and batch.base_offset >= until:
                break
            if batch.is_control_batch:
                self.markers += 1
                committed = batch.control_type == ControlMarker.COMMIT
                held = self.held.pop(batch.producer_id, None)
                if held and committed:
                    for o, k, v in held:
                        target.record(o, k, v, -1)
                if not committed:
                    self.aborted += 1
                target.end_transaction(batch.last_offset, batch.producer_id, committed)
            else:
                records = [r for r in batch.records if r.offset >= offset]
                if batch.producer_id >= 0:
                    self.producers[batch.producer_id] = ProducerState(
                        batch.producer_epoch, batch.base_sequence + len(batch.records) - 1, batch.last_offset)
                if not batch.is_transactional:
                    for r in records:
                        target.record(r.offset, r.key, r.value, -1)
                elif all(is_offset_commit_value(r.key, r.value) for r in records):
                    for r in records:
                        target.record(r.offset, r.key, r.value, batch.producer_id)
                else:
                    self.held.setdefault(batch.producer_id, []).extend((r.offset, r.key, r.value) for r in records)
            offset = self.position = batch.next_offset
        return offset

    def next_sequence(self, producer_id: int, epoch: int) -> int:
        """The sequence the producer's next batch in this partition must carry: the last one
        + 1 within the same epoch, 0 in a new epoch (transactions v2 bumps the epoch every
        transaction, so each starts at 0)."""
        state = self.producers.get(producer_id)
        if state is None or state.epoch != epoch:
            return 0
        return (state.last_sequence + 1) % _SEQUENCE_WRAP


class ShardTarget:
    """Replays into a shard record by record (`shard.replay`, `replay_end_transaction`)."""

    def __init__(self, shard, decode) -> None:
        self.shard, self.decode = shard, decode

    def record(self, offset: int, key: bytes, value: bytes | None, producer_id: int) -> None:
        self.shard.replay(self.decode(key, value, offset), offset, producer_id)

    def end_transaction(self, offset: int, producer_id: int, committed: bool) -> None:
        self.shard.replay_end_transaction(producer_id, committed, offset)


class BulkTarget:
    """Replays into a load's `BulkReplay` (group/bulk_replay.py)."""

    def __init__(self, loader) -> None:
        self.loader = loader

    def record(self, offset: int, key: bytes, value: bytes | None, producer_id: int) -> None:
        self.loader.add(key, value, offset, producer_id)

    def end_transaction(self, offset: int, producer_id: int, committed: bool) -> None:
        self.loader.end_transaction(producer_id, committed)
