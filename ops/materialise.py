"""Materialise an offsets log with the coordinator's own replay path.

One `GroupCoordinatorShard` per offsets-topic partition, fed exactly as kcoord's
loader (and Kafka's `CoordinatorLoaderImpl`, docs/design/kafka-facts.md §1.4) feeds it: data records
go through `records.decode_record` and `shard.replay(record, offset, producer_id)`;
COMMIT/ABORT control batches through `shard.replay_end_transaction`. Compaction
semantics, tombstones, unknown types (KIP-915) and transactional offsets are
therefore exactly the coordinator's, not a copy of them.

Per partition because that is how the coordinator sees the log: transactions and
their markers are per partition, and a group lives in one partition.

kcoord's own transactional batches (several processes: each shard writes through a transactional
id, and a fenced owner's open transaction is aborted by its successor) also hold group
records, which Kafka's loader would apply whatever their marker says. Here the group records
(every type but offset commits) of a transactional batch are held per producer id until
its marker: COMMIT applies them (before the transaction's pending offsets), ABORT drops
them, and those still open at the end of the log are never applied
(`ReplayStats.aborted_group_records` / `open_group_records`). Offset commits of a
transactional batch keep Kafka's rule: pending per producer id until the marker.
"""
from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from coordinator.config import CoordinatorConfig
from coordinator.group.bulk_replay import BulkReplay
from coordinator.group.image import EMPTY_IMAGE, MetadataImage, TopicImage
from coordinator.group.modern.consumer.group import IllegalStateError
from coordinator.group.shard import GroupCoordinatorShard
from coordinator.runtime.log_records import LOG_RECORD_TYPES
from ops.logsource import LogBatch, Problems
from ops.recordjson import type_name
from records import (
    ConsumerGroupPartitionMetadataKey,
    OffsetCommitKey,
    RecordDecodeError,
    UnknownRecordVersionError,
    decode_record,
)
from records.batch import ControlMarker

Decoder = Callable[[bytes, bytes | None], object]


@dataclass
class ReplayStats:
    batches: int = 0
    records: int = 0
    tombstones: int = 0
    commit_markers: int = 0
    abort_markers: int = 0
    aborted_group_records: int = 0    # group records of aborted transactions (not applied)
    open_group_records: int = 0       # group records of transactions without a marker yet
    by_record_type: Counter = field(default_factory=Counter)   # record type number -> n
    first_timestamp: int | None = None
    last_timestamp: int | None = None
    partitions: set[int] = field(default_factory=set)

    def by_type(self, unknown: Counter) -> dict[str, int]:
        out: Counter = Counter()
        for rtype, n in self.by_record_type.items():
            # Kafka's types and kcoord's private connect types (1000-1004, docs/design/connect-groups-spec.md) by name;
            # the others are counted once, as `unknown`, from the shards' skip counts.
            name = type_name(rtype)
            if name != "unknown":
                out[name] += n
        for rtype, n in unknown.items():
            name = type_name(rtype)
            if name == "unknown":
                out["unknown"] += n
            elif name not in out:   # the log's own records (the partitioner marker), skipped by
                out[name] += n      # the bulk loader before it counts a type
        return dict(sorted(out.items()))


class OffsetsReplay:
    """Feed `LogBatch`es in log order; read `shards`, `groups()`, `stats` afterwards."""

    def __init__(self, problems: Problems | None = None, *, config: CoordinatorConfig | None = None,
                 decode: Decoder | None = None,
                 on_record: Callable[[int, object, int, int], None] | None = None,
                 topic_names: dict[uuid.UUID, str] | None = None) -> None:
        self.problems = problems if problems is not None else Problems()
        self.config = config or CoordinatorConfig()
        self._shards: dict[int, GroupCoordinatorShard] = {}
        # The bulk path (coordinator/group/bulk_replay.py): used unless a per-record hook or a
        # custom decoder needs every record decoded.
        self._loaders: dict[int, BulkReplay] | None = {} if (decode is None and on_record is None) else None
        self.stats = ReplayStats()
        self.topic_names: dict[uuid.UUID, str] = {} if topic_names is None else topic_names
        self._decode = decode or decode_record
        # on_record(partition, record, offset, timestamp) after each replayed record: the
        # hook the history tables and the HTML report use (None on the fast path).
        self._on_record = on_record
        # (partition, producer id) -> [(LogBatch, group records)] waiting for their marker
        self._held: dict[tuple[int, int], list[tuple[LogBatch, list]]] = {}

    def shard(self, partition: int) -> GroupCoordinatorShard:
        shard = self._shards.get(partition)
        if shard is None:
            shard = self._shards[partition] = GroupCoordinatorShard(partition, self.config)
            self.stats.partitions.add(partition)
            if self._loaders is not None:
                self._loaders[partition] = BulkReplay(shard, partition=partition, on_error=self._bulk_error,
                                                      on_group_record=self._learn_record)
        return shard

    @property
    def shards(self) -> dict[int, GroupCoordinatorShard]:
        """The replayed shards (buffered offset commits applied first)."""
        self.finish()
        return self._shards

    def finish(self) -> None:
        self.stats.open_group_records = sum(len(recs) for held in self._held.values() for _, recs in held)
        if self._loaders is None:
            return
        counts: Counter = Counter()
        for loader in self._loaders.values():
            loader.flush()
            counts.update(loader.type_counts)
        self.stats.by_record_type = counts

    def feed_all(self, batches: Iterable[LogBatch]) -> OffsetsReplay:
        for lb in batches:
            self.feed(lb)
        self.finish()
        return self

    def _bulk_error(self, e: Exception, source, position, offset: int) -> None:
        self.problems.report(source, position, _reason(e), offset=offset, skipped="record")

    def feed(self, lb: LogBatch) -> None:
        b = lb.batch
        stats = self.stats
        stats.batches += 1
        shard = self._shards.get(lb.partition) or self.shard(lb.partition)
        if b.is_control_batch:
            self._marker(lb, shard)
            return
        records = b.records
        if not records:
            return
        if b.is_transactional:
            held = [r for r in records if not _is_offset_commit(r.key)]
            if held:
                self._held.setdefault((lb.partition, b.producer_id), []).append((lb, held))
                records = [r for r in records if _is_offset_commit(r.key)]
                if not records:
                    return
        self._feed_records(lb, shard, records, b.producer_id if b.is_transactional else -1)

    def _feed_records(self, lb: LogBatch, shard: GroupCoordinatorShard, records: list, pid: int) -> None:
        b = lb.batch
        stats = self.stats
        if stats.first_timestamp is None:
            stats.first_timestamp = records[0].timestamp
        stats.last_timestamp = records[-1].timestamp
        # Kafka passes the batch's producer id; only transactional batches carry pending
        # offsets (pid -1 otherwise, and for the held group records of a committed batch).
        if self._loaders is not None:
            self._feed_bulk(lb, self._loaders[lb.partition], records, pid)
            return
        replay, decode, counts = shard.replay, self._decode, stats.by_record_type
        on_record = self._on_record
        n = tombstones = 0
        for r in records:
            try:
                rec = decode(r.key, r.value)
                key = rec.key
                kc = type(key)
                counts[rec.record_type if kc is bytes else key.record_type] += 1
                if rec.value is None:
                    tombstones += 1
                elif kc is not OffsetCommitKey and kc is not bytes:
                    self._learn(key, rec.value)
                replay(rec, r.offset, pid)
                if on_record is not None:
                    on_record(lb.partition, rec, r.offset, r.timestamp)
            except (RecordDecodeError, UnknownRecordVersionError, IllegalStateError) as e:
                # Kafka fails the load on these; we name the record, and skip it only if asked.
                self.problems.report(lb.source, b.position, _reason(e), offset=r.offset,
                                     skipped="record")
            n += 1
        stats.records += n
        stats.tombstones += tombstones

    def _feed_bulk(self, lb: LogBatch, loader: BulkReplay, batch_records: list, pid: int) -> None:
        """Hand the batch to the bulk loader, which decodes only the offset commits that are
        not superseded later in the log (counts come from the raw keys)."""
        stats = self.stats
        records, tombstones = loader.records, loader.tombstones
        loader.source, loader.position = lb.source, lb.batch.position
        loader.add_batch(batch_records, pid)
        stats.records += loader.records - records
        stats.tombstones += loader.tombstones - tombstones

    def _marker(self, lb: LogBatch, shard: GroupCoordinatorShard) -> None:
        b = lb.batch
        if b.control_type == ControlMarker.COMMIT:
            self.stats.commit_markers += 1
        elif b.control_type == ControlMarker.ABORT:
            self.stats.abort_markers += 1
        else:
            self.problems.report(lb.source, b.position, f"control batch of unknown type "
                                 f"{b.control_type}", offset=b.base_offset)
            return
        committed = b.control_type == ControlMarker.COMMIT
        for held_lb, held in self._held.pop((lb.partition, b.producer_id), ()):
            if committed:
                self._feed_records(held_lb, shard, held, -1)
            else:
                self.stats.aborted_group_records += len(held)
        if self._loaders is not None:
            self._loaders[lb.partition].end_transaction(b.producer_id, committed)
        else:
            shard.replay_end_transaction(b.producer_id, committed)
        if self._on_record is not None:
            self._on_record(lb.partition, b, b.base_offset,
                            b.records[0].timestamp if b.records else -1)

    def _learn_record(self, record) -> None:
        if record.value is not None:
            self._learn(record.key, record.value)

    def _learn(self, key, value) -> None:
        """Topic ids the log itself names (the pre-4.1 subscription metadata record)."""
        if type(key) is ConsumerGroupPartitionMetadataKey:
            for t in value.topics:
                self.topic_names.setdefault(t.topic_id, t.topic_name)

    # ------------------------------------------------------------- results
    def groups(self) -> dict[str, tuple[int, object]]:
        """group id -> (partition, ConsumerGroup | ClassicGroup), over all partitions."""
        out: dict[str, tuple[int, object]] = {}
        self.finish()
        for p in sorted(self._shards):
            for gid, group in self.shards[p].groups.items():
                if gid in out:
                    self.problems.report(f"partition {p}", None, f"group {gid!r} also lives in "
                                         f"partition {out[gid][0]}: the partitions are mixed up",
                                         skipped="nothing")
                out[gid] = (p, group)
        return out

    def unknown_record_types(self) -> Counter:
        """Types replay skipped as unknown, without the state log's own records (the fence and
        the partitioner marker, coordinator/runtime/log_records.py), which a load skips too."""
        total = self.skipped_record_types()
        for own in LOG_RECORD_TYPES:
            total.pop(own, None)
        return total

    def skipped_record_types(self) -> Counter:
        """Every type replay skipped, the state log's own records included."""
        total: Counter = Counter()
        for shard in self.shards.values():
            total.update(shard.unknown_record_types)
        return total

    def learn_offset_topic_ids(self) -> None:
        """OffsetCommit v4 values name the topic id of the committed topic (KIP-848)."""
        for shard in self.shards.values():
            for topics in shard.offsets.offsets.values():
                for topic, parts in topics.items():
                    for o in parts.values():
                        tid = o.topic_id
                        if tid is not None and tid.int:
                            self.topic_names.setdefault(tid, topic)
                        break

    def image(self, extra: MetadataImage | None = None) -> MetadataImage:
        """A metadata image naming every topic id known from the log (and from `extra`)."""
        self.learn_offset_topic_ids()
        topics = {tid: TopicImage(tid, name, -1) for tid, name in self.topic_names.items()}
        if extra is not None:
            for t in extra.topics_by_id.values():
                topics[t.topic_id] = t
        return MetadataImage.of(topics.values()) if topics else EMPTY_IMAGE

    def use_image(self, image: MetadataImage) -> None:
        for shard in self.shards.values():
            shard.image = image


def _reason(e: Exception) -> str:
    if isinstance(e, IllegalStateError):
        return f"record contradicts the replayed state (Kafka: IllegalStateException): {e}"
    return str(e)


def _is_offset_commit(key: bytes | None) -> bool:
    """Record types 0 and 1 (offset commits): a big-endian int16 version 0 or 1 first."""
    return key is not None and len(key) >= 2 and key[0] == 0 and key[1] <= 1
