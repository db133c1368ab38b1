"""The pipeline's tables, computed from the batches of one or more offsets-topic partitions.

The PySpark job runs `partition_tables` inside mapPartitions (one task per offsets-topic
partition); the single-process path calls the same function, which is how the Spark
output is cross-checked. The state comes from the coordinator's replay (`OffsetsReplay`);
the history tables are what each replayed record says, in log order.

Tables (rows are tuples in the column order of `COLUMNS`):
- final_offsets: the committed offsets after the whole log (tombstones, markers applied).
- membership_history: one row per member event (join, assignment, leave), consumer,
  classic and connect groups alike; `epoch` is the member epoch or the classic generation.
  A connect worker's assignment reads `connector:tasks`, task -1 being the connector itself;
  a streams member's its active tasks, `subtopology:partitions` (KIP-1071).
- record_type_counts: records and tombstones per group and record type.
- commit_rate: offset commits per group per minute (record timestamps).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from coordinator.group.streams.model import MemberState as StreamsMemberState
from ops.describe import classic_assignment
from ops.downgrade import group_of_key
from ops.logsource import LogBatch
from ops.materialise import OffsetsReplay
from ops.recordjson import type_name
from records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    CoordinatorRecord,
    GroupMetadataKey,
    OffsetCommitKey,
    UnknownRecord,
)
from records.batch import RecordBatch
from records.connect_records import ConnectGroupCurrentMemberAssignmentKey, ConnectGroupMemberMetadataKey
from records.streams_records import StreamsGroupCurrentMemberAssignmentKey, StreamsGroupMemberMetadataKey

MINUTE_MS = 60_000

COLUMNS: dict[str, list[tuple[str, str]]] = {
    "final_offsets": [("group", "string"), ("topic", "string"), ("partition", "int"),
                      ("offset", "long"), ("leader_epoch", "int"), ("metadata", "string"),
                      ("commit_timestamp", "long"), ("expire_timestamp", "long"),
                      ("log_partition", "int")],
    "membership_history": [("group", "string"), ("member_id", "string"), ("log_partition", "int"),
                           ("log_offset", "long"), ("timestamp", "long"), ("protocol", "string"),
                           ("event", "string"), ("epoch", "int"), ("state", "string"),
                           ("assignment", "string")],
    "record_type_counts": [("group", "string"), ("log_partition", "int"), ("record_type", "string"),
                           ("records", "long"), ("tombstones", "long")],
    "commit_rate": [("group", "string"), ("minute", "long"), ("commits", "long")],
}
_STATES = {0: "STABLE", 1: "UNREVOKED_PARTITIONS", 2: "UNRELEASED_PARTITIONS"}


def assignment_text(a: dict[str, list[int]] | None) -> str:
    """`topic:0,1;other:3`, topics and partitions sorted (Kafka's tool prints the same)."""
    if not a:
        return ""
    return ";".join(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in sorted(a.items()) if ps)


class HistoryCollector:
    """The `on_record` hook of a replay: builds the history and count tables."""

    def __init__(self, topic_names: dict) -> None:
        self.names = topic_names
        self.history: list[tuple] = []
        self.types: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
        self.commits: dict[tuple[str, int], int] = {}
        self._commit_counts: dict[tuple[str, int], list[int]] = {}
        self._classic_members: dict[str, set[str]] = {}

    def _tps(self, tps) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for tp in tps:
            if tp.partitions:
                out.setdefault(self.names.get(tp.topic_id) or str(tp.topic_id), []).extend(tp.partitions)
        return out

    def observe(self, partition: int, record, offset: int, timestamp: int) -> None:
        rt = type(record)
        if rt is CoordinatorRecord and type(record.key) is OffsetCommitKey:
            # The hot path: offset commits are ~90 % of an offsets log.
            group = record.key.group
            counts = self._commit_counts.get((group, partition))
            if counts is None:
                counts = self._commit_counts[(group, partition)] = [0, 0]
            counts[0] += 1
            if record.value is None:
                counts[1] += 1
            else:
                k = (group, timestamp - timestamp % MINUTE_MS)
                self.commits[k] = self.commits.get(k, 0) + 1
            return
        if rt is RecordBatch:
            return
        if rt is UnknownRecord:
            counts = self.types[(group_of_key(record) or "", partition, "unknown")]
            counts[0] += 1
            counts[1] += record.value is None
            return
        key, value = record.key, record.value
        kc = type(key)
        group = key.group if kc is GroupMetadataKey else group_of_key(record)
        counts = self.types[(group, partition, type_name(key.record_type))]
        counts[0] += 1
        if value is None:
            counts[1] += 1
        row = (group, partition, offset, timestamp)
        if kc is ConsumerGroupMemberMetadataKey:
            self.history.append((row[0], key.member_id, *row[1:], "classic" if value is not None
                                 and value.classic_member_metadata is not None else "consumer",
                                 "leave" if value is None else "join_or_update", None, None, None))
        elif kc is ConsumerGroupCurrentMemberAssignmentKey:
            if value is None:
                self.history.append((row[0], key.member_id, *row[1:], "consumer", "fenced", -1,
                                     None, ""))
            else:
                self.history.append((row[0], key.member_id, *row[1:], "consumer", "assignment",
                                     value.member_epoch, _STATES.get(value.state, "UNKNOWN"),
                                     assignment_text(self._tps(value.assigned_partitions))))
        elif kc is GroupMetadataKey:
            self._classic(row, value)
        elif kc is ConnectGroupMemberMetadataKey:
            self.history.append((row[0], key.member_id, *row[1:], "connect",
                                 "leave" if value is None else "join_or_update", None, None, None))
        elif kc is ConnectGroupCurrentMemberAssignmentKey:
            if value is None:
                self.history.append((row[0], key.member_id, *row[1:], "connect", "fenced", -1, None, ""))
            else:
                self.history.append((row[0], key.member_id, *row[1:], "connect", "assignment",
                                     value.member_epoch, _STATES.get(value.state, "UNKNOWN"),
                                     assignment_text({u.connector: list(u.tasks) for u in value.assigned})))
        elif kc is StreamsGroupMemberMetadataKey:
            self.history.append((row[0], key.member_id, *row[1:], "streams",
                                 "leave" if value is None else "join_or_update", None, None, None))
        elif kc is StreamsGroupCurrentMemberAssignmentKey:
            if value is None:
                self.history.append((row[0], key.member_id, *row[1:], "streams", "fenced", -1, None, ""))
            else:
                self.history.append((row[0], key.member_id, *row[1:], "streams", "assignment",
                                     value.member_epoch, StreamsMemberState.from_byte(value.state).name,
                                     assignment_text({t.subtopology_id: list(t.partitions)
                                                      for t in value.active_tasks})))

    def _classic(self, row: tuple, value) -> None:
        group = row[0]
        before = self._classic_members.get(group, set())
        now = {m.member_id for m in value.members} if value is not None else set()
        for mid in sorted(before - now):
            self.history.append((group, mid, *row[1:], "classic", "leave", None, None, None))
        if value is not None:
            for m in value.members:
                a = classic_assignment(value.protocol_type, m.assignment)
                self.history.append((group, m.member_id, *row[1:], "classic", "assignment",
                                     value.generation, "STABLE",
                                     assignment_text(a) if a is not None else None))
        self._classic_members[group] = now


def partition_tables(batches: Iterable[LogBatch], problems=None,
                     topic_names: dict | None = None) -> dict[str, list[tuple]]:
    """All four tables for the batches given (any number of offsets-topic partitions).

    Consumer-group assignments name topics by `topic_names` (topic id -> name, e.g. from the
    cluster's metadata) and by id otherwise: names learned from the log itself would depend
    on which partitions one task happens to read."""
    collector = HistoryCollector(dict(topic_names or {}))
    replay = OffsetsReplay(problems, on_record=collector.observe)
    replay.feed_all(batches)
    offsets = []
    for p, shard in sorted(replay.shards.items()):
        for gid, topics in shard.offsets.offsets.items():
            for topic, parts in topics.items():
                for tp, o in parts.items():
                    offsets.append((gid, topic, tp, o.offset, o.leader_epoch, o.metadata,
                                    o.commit_timestamp, o.expire_timestamp, p))
    return {
        "final_offsets": offsets,
        "membership_history": collector.history,
        "record_type_counts": [(g, p, t, c[0], c[1]) for (g, p, t), c in collector.types.items()]
        + [(g, p, "OFFSET_COMMIT", c[0], c[1]) for (g, p), c in collector._commit_counts.items()],
        "commit_rate": [(g, m, n) for (g, m), n in collector.commits.items()],
        "_stats": [(replay.stats.records, replay.stats.batches,
                    replay.stats.commit_markers + replay.stats.abort_markers)],
    }
