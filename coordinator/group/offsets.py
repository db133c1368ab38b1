"""Committed offsets as replay builds them (Kafka: `OffsetMetadataManager`'s store).

Transactional offsets stay pending per producer id until the transaction's end
marker: COMMIT materialises them, ABORT drops them (reference §2.4).
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
        # producer id -> group -> topic -> partition -> pending offset
        self.pending_transactional: dict[int, dict[str, GroupOffsets]] = {}

    # ------------------------------------------------------------ queries
    def group(self, group_id: str) -> GroupOffsets:
        return self.offsets.get(group_id, {})

    def get(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self.offsets.get(group_id, {}).get(topic, {}).get(partition)

    def has_offsets(self, group_id: str) -> bool:
        return bool(self.offsets.get(group_id))

    def has_pending(self, group_id: str, topic: str, partition: int) -> bool:
        for groups in self.pending_transactional.values():
            if partition in groups.get(group_id, {}).get(topic, {}):
                return True
        return False

    # ------------------------------------------------------------- replay
    def put(self, group_id: str, topic: str, partition: int, value: OffsetAndMetadata,
            producer_id: int = -1) -> None:
        if producer_id == -1:
            self.offsets.setdefault(group_id, {}).setdefault(topic, {})[partition] = value
        else:
            (self.pending_transactional.setdefault(producer_id, {})
             .setdefault(group_id, {}).setdefault(topic, {}))[partition] = value

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
        for pid in list(self.pending_transactional):
            groups = self.pending_transactional[pid]
            parts = groups.get(group_id, {}).get(topic)
            if parts is not None:
                parts.pop(partition, None)

    def end_transaction(self, producer_id: int, committed: bool) -> None:
        pending = self.pending_transactional.pop(producer_id, None)
        if not pending or not committed:
            return
        for group_id, topics in pending.items():
            for topic, parts in topics.items():
                for partition, value in parts.items():
                    current = self.get(group_id, topic, partition)
                    if current is None or current.record_offset < value.record_offset:
                        self.put(group_id, topic, partition, value)

