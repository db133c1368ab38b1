"""Hand-built offsets logs for the ops tests: records, transactions and markers as
Kafka's coordinator writes them, returned as segment bytes and LogBatches."""
from __future__ import annotations

import uuid

from ops.logsource import LogBatch, Problems
from ops.segment import iter_buffer
from records import (
    CoordinatorRecord, GroupMetadataKey, GroupMetadataValue, OffsetCommitKey, OffsetCommitValue,
    encode_key, encode_value,
)
from records.batch import ControlMarker, build_batch, build_control_batch

T0 = 1_767_225_600_000
TOPIC_ID = uuid.uuid5(uuid.NAMESPACE_URL, "kcoord-test/orders")


def commit(group: str, topic: str, partition: int, offset: int, *, version: int = 4,
           metadata: str = "", ts: int = T0, tags=()) -> CoordinatorRecord:
    value = OffsetCommitValue(offset=offset, leader_epoch=1, metadata=metadata, commit_timestamp=ts,
                              expire_timestamp=ts + 1000 if version == 1 else -1,
                              unknown_tagged_fields=tuple(tags))
    return CoordinatorRecord(OffsetCommitKey(group, topic, partition), value, version)


def offset_tombstone(group: str, topic: str, partition: int) -> CoordinatorRecord:
    return CoordinatorRecord(OffsetCommitKey(group, topic, partition), None, 0)


def empty_group(group: str, generation: int = 1) -> CoordinatorRecord:
    return CoordinatorRecord(GroupMetadataKey(group), GroupMetadataValue(
        protocol_type="consumer", generation=generation, protocol=None, leader=None,
        current_state_timestamp=T0, members=()), 3)


class LogBuilder:
    """Batches of one partition at consecutive offsets."""

    def __init__(self, compression: int = 0) -> None:
        self.batches: list[bytes] = []
        self.next_offset = 0
        self.compression = compression

    def write(self, *records, producer_id: int = -1, raw: list | None = None) -> LogBuilder:
        pairs = [(encode_key(r.key), encode_value(r.value, r.value_version)) for r in records]
        pairs += raw or []
        self.batches.append(build_batch(pairs, base_offset=self.next_offset,
                                        timestamp_ms=T0 + self.next_offset, compression=self.compression,
                                        producer_id=producer_id,
                                        producer_epoch=0 if producer_id >= 0 else -1,
                                        transactional=producer_id >= 0))
        self.next_offset += len(pairs)
        return self

    def marker(self, producer_id: int, committed: bool) -> LogBuilder:
        self.batches.append(build_control_batch(
            ControlMarker.COMMIT if committed else ControlMarker.ABORT, base_offset=self.next_offset,
            timestamp_ms=T0 + self.next_offset, producer_id=producer_id, producer_epoch=0))
        self.next_offset += 1
        return self

    def bytes(self) -> bytes:
        return b"".join(self.batches)

    def log_batches(self, partition: int = 0, problems: Problems | None = None) -> list[LogBatch]:
        buf = self.bytes()
        return list(iter_buffer(buf, len(buf), f"test-{partition}", partition, problems or Problems()))


def generated_batches(spec) -> list[LogBatch]:
    from ops.generator import generate
    out = []
    for p, batches in generate(spec).items():
        buf = b"".join(batches)
        out.extend(iter_buffer(buf, len(buf), f"gen-{p}", p, Problems()))
    return out
