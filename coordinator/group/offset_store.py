"""Committed offsets as replay builds them (Kafka: `OffsetMetadataManager`'s store).

Rules (reference kafka-coordinator.md §2.4, Kafka's `OffsetMetadataManager.replay`):
- a non-transactional commit (producer id -1) goes straight into `offsets`;
- a transactional commit (TxnOffsetCommit, written with the client's producer id) stays
  pending per producer id in `pending_transactional`, and its group is listed in
  `open_transactions` (Kafka's `openTransactionsByGroup`) until the producer's end marker;
- the end marker: COMMIT materialises each pending offset only if its record is newer in
  the log than the committed one (`record_offset` comparison: "we always keep the most
  recent committed offset when we have a mix of transactional and regular offset
  commits"), ABORT drops them. Either way the producer's open transaction ends;
- an offset tombstone removes the offset and every producer's pending offset for that
  partition; the producer stays in `open_transactions` until its marker, as in Kafka, so a
  group with an open transaction never expires.
Every change goes through these methods (replay.py and bulk_replay.py both call them), so
a sequential and a bulk load build identical stores.
"""
from __future__ import annotations

import uuid
from typing import NamedTuple


class OffsetAndMetadata(NamedTuple):
    """A committed offset. A tuple: loading a production log builds millions of these, and a
    tuple is several times cheaper to build than a frozen dataclass."""
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1
    topic_id: uuid.UUID | None = None
    # Offset of the record in the state topic; a transactional commit only replaces an
    # offset written before it (`recordOffset` comparison on COMMIT).
    record_offset: int = -1


# group -> topic -> partition -> offset
GroupOffsets = dict[str, dict[int, OffsetAndMetadata]]


class OffsetStore:
    def __init__(self) -> None:
        self.offsets: dict[str, GroupOffsets] = {}
        # producer id -> group -> topic -> partition -> pending offset. A group's entry stays
        # (possibly empty) until the producer's marker: it names the producer's open groups.
        self.pending_transactional: dict[int, dict[str, GroupOffsets]] = {}
        # group -> producer ids with an open transaction in it (Kafka's openTransactionsByGroup)
        self.open_transactions: dict[str, set[int]] = {}
        # producer id -> number of pending partitions, all groups (the hostile-client bound),
        # and their sum (read on every TxnOffsetCommit: kept, not summed)
        self.pending_counts: dict[int, int] = {}
        self._pending_total = 0

    # ------------------------------------------------------------ queries
    def group(self, group_id: str) -> GroupOffsets:
        return self.offsets.get(group_id, {})

    def get(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self.offsets.get(group_id, {}).get(topic, {}).get(partition)

    def has_offsets(self, group_id: str) -> bool:
        return bool(self.offsets.get(group_id))

    def has_pending(self, group_id: str, topic: str, partition: int) -> bool:
        """Kafka's `hasPendingTransactionalOffsets`: OffsetFetch(require_stable) answers
        UNSTABLE_OFFSET_COMMIT and retention keeps the offset while this holds."""
        for pid in self.open_transactions.get(group_id, ()):
            if partition in self.pending_transactional[pid][group_id].get(topic, {}):
                return True
        return False

    def has_open_transactions(self, group_id: str) -> bool:
        """A producer has written transactional offsets to the group and its marker has not
        come yet (Kafka does not expire such a group)."""
        return group_id in self.open_transactions

    def pending_partitions(self, group_id: str) -> set[tuple[str, int]]:
        """(topic, partition) with a pending offset in the group, any producer."""
        out: set[tuple[str, int]] = set()
        for pid in self.open_transactions.get(group_id, ()):
            for topic, parts in self.pending_transactional[pid][group_id].items():
                out.update((topic, p) for p in parts)
        return out

    def deletable_partitions(self, group_id: str) -> list[tuple[str, int]]:
        """What deleting the group tombstones (Kafka's `deleteAllOffsets`): every committed
        offset, then every pending one that has no committed offset (one tombstone each)."""
        committed = [(t, p) for t, parts in self.offsets.get(group_id, {}).items() for p in parts]
        seen = set(committed)
        return committed + sorted(tp for tp in self.pending_partitions(group_id) if tp not in seen)

    def partitions_of_topics(self, topics: set[str]) -> list[tuple[str, str, int]]:
        """(group, topic, partition) of offsets, committed or pending, of these topics (Kafka's
        `onPartitionsDeleted` tombstones both)."""
        out = {(g, t, p) for g, by_topic in self.offsets.items() for t, parts in by_topic.items()
               if t in topics for p in parts}
        for groups in self.pending_transactional.values():
            out.update((g, t, p) for g, by_topic in groups.items() for t, parts in by_topic.items()
                       if t in topics for p in parts)
        return sorted(out)

    def pending_in(self, producer_id: int, group_id: str) -> dict[str, dict[int, OffsetAndMetadata]]:
        return self.pending_transactional.get(producer_id, {}).get(group_id, {})

    def pending_total(self) -> int:
        return self._pending_total

    def oldest_pending_commit_ms(self) -> int | None:
        """The commit time of the oldest pending offset (a hanging transaction holds the
        state partition's last stable offset: exported as an age metric)."""
        oldest = None
        # read at scrape time on another thread (coordinator/runtime/txn_metrics.py): copies
        for groups in list(self.pending_transactional.values()):
            for topics in list(groups.values()):
                for parts in list(topics.values()):
                    for o in list(parts.values()):
                        if oldest is None or o.commit_timestamp < oldest:
                            oldest = o.commit_timestamp
        return oldest

    # ------------------------------------------------------------- replay
    def put(self, group_id: str, topic: str, partition: int, value: OffsetAndMetadata,
            producer_id: int = -1) -> None:
        if producer_id == -1:
            self.offsets.setdefault(group_id, {}).setdefault(topic, {})[partition] = value
            return
        parts = (self.pending_transactional.setdefault(producer_id, {})
                 .setdefault(group_id, {}).setdefault(topic, {}))
        if partition not in parts:
            self.pending_counts[producer_id] = self.pending_counts.get(producer_id, 0) + 1
            self._pending_total += 1
        parts[partition] = value
        self.open_transactions.setdefault(group_id, set()).add(producer_id)

    def delete(self, group_id: str, topic: str, partition: int) -> None:
        """An offset tombstone removes the offset and any pending transactional one."""
        topics = self.offsets.get(group_id)
        if topics is not None:
            parts = topics.get(topic)
            if parts is not None:
                parts.pop(partition, None)
                if not parts:
                    del topics[topic]
            if not topics:
                del self.offsets[group_id]
        for pid in self.open_transactions.get(group_id, ()):
            pending = self.pending_transactional[pid][group_id]
            parts = pending.get(topic)
            if parts is not None and parts.pop(partition, None) is not None:
                self.pending_counts[pid] -= 1
                self._pending_total -= 1
                if not parts:
                    del pending[topic]

    def end_transaction(self, producer_id: int, committed: bool, marker_offset: int | None = None) -> None:
        """Kafka's `replayEndTransactionMarker`; a marker of a producer without pending
        offsets here is ignored (its transaction wrote to other partitions only).

        `marker_offset` (the marker's place in the log, when known) ends only the offsets
        written before it. Kafka replays in log order, so a marker never meets a later
        transaction's offsets there; kcoord replays a client's offsets when their append is
        acknowledged and reads markers from its tail, so this guard keeps a later
        transaction's offsets pending until their own marker."""
        pending = self.pending_transactional.pop(producer_id, None)
        if pending is None:
            return
        later = _written_after(pending, marker_offset) if marker_offset is not None else {}
        kept = sum(len(parts) for topics in later.values() for parts in topics.values())
        self._pending_total -= self.pending_counts.pop(producer_id, 0) - kept
        if later:
            self.pending_transactional[producer_id] = later
            self.pending_counts[producer_id] = kept
        for group_id in pending:
            pids = self.open_transactions.get(group_id)
            if pids is not None and group_id not in later:
                pids.discard(producer_id)
                if not pids:
                    del self.open_transactions[group_id]
        if not committed:
            return
        for group_id, topics in pending.items():
            for topic, parts in topics.items():
                for partition, value in parts.items():
                    if later and partition in later.get(group_id, {}).get(topic, {}):
                        continue
                    current = self.get(group_id, topic, partition)
                    if current is None or current.record_offset < value.record_offset:
                        self.put(group_id, topic, partition, value)


def _written_after(pending: dict[str, GroupOffsets], marker_offset: int) -> dict[str, GroupOffsets]:
    """The pending offsets whose records lie after `marker_offset` in the log."""
    later: dict[str, GroupOffsets] = {}
    for group_id, topics in pending.items():
        for topic, parts in topics.items():
            for partition, value in parts.items():
                if value.record_offset > marker_offset:
                    later.setdefault(group_id, {}).setdefault(topic, {})[partition] = value
    return later
