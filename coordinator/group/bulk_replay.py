"""Replaying a whole log at load time, with compaction's rule for offset commits.

Most records of a live `__consumer_offsets` partition are offset commits that a later
commit of the same key supersedes; log compaction exists because only the last one
matters. This loader keeps the last non-transactional offset commit per raw key and
decodes and replays each key once, through the same `replay` code. Order is kept where
it changes the outcome:
- an offset commit for a group that does not exist creates a "simple" group, so before a
  group is deleted (a GroupMetadata or ConsumerGroupMetadata tombstone) its buffered
  commits are applied;
- an offset tombstone also drops the key's pending transactional offset, and a COMMIT
  only replaces offsets written before it, so a key's buffered commit is applied before
  a transactional record of that key. (A commit buffered after that record has a higher
  record offset, so it wins whether it is applied before or after the end marker.)
Any other group record may come before or after a commit of its group with the same
result, so it does not flush.

Consumer-group records are keyed the same way, and most are superseded too (every
rebalance rewrites the group epoch, the targets and the current assignments). The group
epoch (type 3, not its tombstone) and the member, target-metadata, target and
current-assignment records (types 5-8) are therefore buffered per group as well, last
record per key, and replayed in the order of each key's last record: exactly the log
that compaction would leave, which Kafka's replay rules (and ours) must load to the same
state. A group's buffered records are applied before any other record of that group
(classic metadata, subscription metadata, regular expressions, a transactional record,
the group's deletion) and before its buffered commits, so they only move among
themselves. The final state is the one a record-by-record replay gives
(tests/unit/group/test_bulk_replay.py checks it on generated logs).

kcoord's private connect-group types (1000-1004, the connect group spec; their key's first byte is 3)
are few and not buffered: each is replayed in place, after its group's buffered records
and commits, so it sees the group exactly as a record-by-record replay does.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from records import RecordDecodeError, UnknownRecordVersionError, decode_record
from records.codec import decode_offset_commit_fields, decode_offset_commit_key

from .errors import IllegalStateError
from .shard import GroupCoordinatorShard

ErrorHook = Callable[[Exception, object, object, int], None]


class _Record:
    __slots__ = ("key", "value", "offset")

    def __init__(self, key: bytes, value: bytes | None, offset: int) -> None:
        self.key, self.value, self.offset = key, value, offset
_BAD_RECORD = (RecordDecodeError, UnknownRecordVersionError, IllegalStateError)
GROUP_METADATA, CONSUMER_GROUP_METADATA = 2, 3
# Types whose key starts with the group id (all but offset commits and unknown types).
GROUP_KEYED = frozenset({2, 3, 4, 5, 6, 7, 8, 16})
# Buffered last-per-key (type 3 only when not a tombstone: a deletion flushes its group).
DEFERRED = frozenset({3, 5, 6, 7, 8})


class BulkReplay:
    def __init__(self, shard: GroupCoordinatorShard, *, topic: str | None = None,
                 partition: int | None = None, on_error: ErrorHook | None = None,
                 on_group_record: Callable[[object], None] | None = None) -> None:
        self.shard = shard
        self.topic = topic
        self.partition = partition
        # Without a hook a bad record fails the load (Kafka's behaviour); tools pass one to
        # report the record by its offset and go on. `source`/`position` name the input.
        self.on_error = on_error
        self.on_group_record = on_group_record
        self.source: object = None
        self.position: object = None
        self.records = 0
        self.tombstones = 0
        self.type_counts: dict[int, int] = {}
        # raw group id -> raw key -> the last record of that key (superseded ones are dropped)
        self._pending: dict[bytes, dict[bytes, Any]] = {}
        # the same for consumer-group records (DEFERRED), in the order of each key's last record
        self._deferred: dict[bytes, dict[bytes, Any]] = {}

    def add(self, key: bytes, value: bytes | None, offset: int, producer_id: int = -1) -> None:
        self.add_batch((_Record(key, value, offset),), producer_id)

    def add_batch(self, records: Iterable, producer_id: int = -1) -> None:
        """Records with `key`, `value` and `offset` attributes (aiokafka's, or `_Record`).
        The record objects themselves are buffered: reading their value and offset only
        for the commits that survive is what makes this loop cheap."""
        pending = self._pending
        deferred = self._deferred
        counts = self.type_counts
        n = commits = tombstones = 0
        for r in records:
            n += 1
            key = r.key
            if key is None or len(key) < 4 or key[0] != 0:
                if key is not None and len(key) >= 4 and 1000 <= ((key[0] << 8) | key[1]) <= 1004:
                    self._flush_group(key[2:4 + ((key[2] << 8) | key[3])])
                    counts[(key[0] << 8) | key[1]] = counts.get((key[0] << 8) | key[1], 0) + 1
                    tombstones += r.value is None
                self._one(key, r.value, r.offset, producer_id)
                continue
            rtype = key[1]
            if rtype == 1 and producer_id == -1:
                commits += 1
                if r.value is None:
                    tombstones += 1
                group = key[2:4 + ((key[2] << 8) | key[3])]
                buffered = pending.get(group)
                if buffered is None:
                    buffered = pending[group] = {}
                buffered[key] = r
                continue
            counts[rtype] = counts.get(rtype, 0) + 1
            value = r.value
            if value is None:
                tombstones += 1
            if rtype in DEFERRED and producer_id == -1 and (value is not None or rtype != CONSUMER_GROUP_METADATA):
                group = key[2:4 + ((key[2] << 8) | key[3])]
                buffered = deferred.get(group)
                if buffered is None:
                    buffered = deferred[group] = {}
                elif key in buffered:
                    del buffered[key]  # re-inserted below: its place is its last record's
                buffered[key] = r
                continue
            if rtype in GROUP_KEYED or rtype <= 1:
                group_records = deferred.pop(key[2:4 + ((key[2] << 8) | key[3])], None)
                if group_records:
                    self._apply_records(group_records)
            if producer_id != -1:
                if rtype <= 1:
                    self._flush_key(key)
                    self._apply({key: r}, producer_id)  # pending until its end marker
                    continue
                self.flush()
            elif rtype == 0:
                # Legacy commits (type 0) go through the same buffer, key for key.
                group = key[2:4 + ((key[2] << 8) | key[3])]
                pending.setdefault(group, {})[key] = r
                continue
            elif value is None and (rtype == GROUP_METADATA or rtype == CONSUMER_GROUP_METADATA):
                buffered = pending.pop(key[2:4 + ((key[2] << 8) | key[3])], None)
                if buffered:
                    self._apply(buffered)
            self._one(key, value, r.offset, producer_id)
        if commits:
            counts[1] = counts.get(1, 0) + commits
        self.records += n
        self.tombstones += tombstones

    def _one(self, key, value, offset: int, producer_id: int) -> None:
        try:
            record = decode_record(key, value, topic=self.topic, partition=self.partition, offset=offset)
            if self.on_group_record is not None:
                self.on_group_record(record)
            self.shard.replay(record, offset, producer_id)
        except _BAD_RECORD as e:
            if self.on_error is None:
                raise
            self.on_error(e, self.source, self.position, offset)

    def end_transaction(self, producer_id: int, committed: bool) -> None:
        self.shard.replay_end_transaction(producer_id, committed)

    def _flush_group(self, group: bytes) -> None:
        """Apply one group's buffered records, then its buffered commits."""
        records = self._deferred.pop(group, None)
        if records:
            self._apply_records(records)
        buffered = self._pending.pop(group, None)
        if buffered:
            self._apply(buffered)

    def _flush_key(self, key: bytes) -> None:
        group = key[2:4 + ((key[2] << 8) | key[3])]
        buffered = self._pending.get(group)
        if buffered is not None and key in buffered:
            self._apply({key: buffered.pop(key)})

    def flush(self) -> None:
        """Apply everything buffered: each group's records, then the commits."""
        deferred, self._deferred = self._deferred, {}
        for records in deferred.values():
            self._apply_records(records)
        pending, self._pending = self._pending, {}
        for buffered in pending.values():
            self._apply(buffered)

    def _apply_records(self, records: dict[bytes, Any]) -> None:
        for key, r in records.items():
            self._one(key, r.value, r.offset, -1)

    def _apply(self, buffered: dict[bytes, Any], producer_id: int = -1) -> None:
        replay = self.shard.replay_offset_commit
        topic, partition = self.topic, self.partition
        for key, r in buffered.items():
            value, offset = r.value, r.offset
            try:
                k = decode_offset_commit_key(key, topic=topic, partition=partition, offset=offset)
                replay(k, decode_offset_commit_fields(k, value, topic=topic, partition=partition,
                                                      offset=offset), offset, producer_id)
            except _BAD_RECORD as e:
                if self.on_error is None:
                    raise
                self.on_error(e, self.source, self.position, offset)
