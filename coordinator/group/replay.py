"""Replay: the only way group and offset state changes (Kafka:
`GroupMetadataManager.replay` / `OffsetMetadataManager.replay`).

Loading a shard, applying a freshly written result and tests all go through this module
(`Replayer.replay`; a fresh result through `replay_records`, which stores its offset commits
as `replay` does without two calls per record), so what is written is exactly what a reload
rebuilds.
Invariants follow docs/design/kafka-facts.md §2.4; tombstones for unknown groups or members are
ignored, a record that contradicts the state raises `IllegalStateError`.

Rules:
- one rule per record key type; the rules of a group type's records live in its folder
  (classic/replay.py, modern/consumer/replay.py, modern/connect/replay.py) and reach the
  `Replayer` through the shard's registry (group_types.Registry.replay_rules), so this
  module names no group type;
- offset commits (types 0 and 1) are replayed here: the store is the kernel's
  (offset_store.py); a commit for a group that does not exist creates the registry's
  "simple" group (Kafka's offsets-only classic group).
"""
from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from records import (
    CoordinatorRecord,
    LegacyOffsetCommitKey,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownRecord,
)

from .errors import IllegalStateError
from .group_types import group_type, group_type_of
from .offset_store import OffsetAndMetadata, OffsetStore

# `OffsetAndMetadata._make` without its Python frame (and without its length check: every
# caller here passes all seven fields).
_new_entry = tuple.__new__

log = logging.getLogger("kcoord.replay")


_TOPIC_IDS: dict = {}


def intern_topic_id(topic_id):
    """One shared UUID object per topic id: assignors key dicts by topic id, and a UUID
    compares by identity first, so shared objects make those look-ups much cheaper."""
    if len(_TOPIC_IDS) > 1_000_000:
        _TOPIC_IDS.clear()
    return _TOPIC_IDS.setdefault(topic_id, topic_id)


_SHARED: dict = {}


def shared(value):
    """One object per distinct client id, host or subscription: thousands of members of a
    group usually share them, and each decoded record would otherwise bring its own copy."""
    if value is None:
        return None
    if len(_SHARED) > 200_000:
        _SHARED.clear()
    return _SHARED.setdefault(value, value)


class Replayer:
    def __init__(self, groups: dict[str, Any], offsets: OffsetStore,
                 rules: Mapping[type, Callable], simple_group_class: type) -> None:
        self.groups = groups
        self.offsets = offsets
        self.unknown_record_types: Counter[int] = Counter()
        # Offset commits are the kernel's (this module's rules), whatever a registry brings:
        # `replay_records` stores them without looking their rule up.
        self._rules = {**rules, LegacyOffsetCommitKey: Replayer._offset_commit,
                       OffsetCommitKey: Replayer._offset_commit}
        # the registry's type for a group that only holds offsets (classic/: Kafka's "simple" group)
        self._simple: Any = simple_group_class

    # ------------------------------------------------------------ dispatch
    def replay(self, record: CoordinatorRecord | UnknownRecord, offset: int = -1,
               producer_id: int = -1) -> None:
        # The rule is looked up first: an UnknownRecord's key is bytes, which has no rule.
        key = record.key
        handler = self._rules.get(key.__class__)
        if handler is not None:
            handler(self, key, record.value, offset, producer_id)
            return
        if isinstance(record, UnknownRecord):
            # KIP-915: skip unknown types (a downgrade leaves records of newer features behind).
            if record.record_type not in self.unknown_record_types:
                log.warning("skipping record of unknown type %d at offset %d; it could be a left "
                            "over from an aborted upgrade (KIP-915)", record.record_type, offset)
            self.unknown_record_types[record.record_type] += 1
            return
        raise IllegalStateError(f"no replay rule for record key {type(key).__name__}")

    def replay_records(self, records, base_offset: int = -1) -> None:
        """`replay` of each record in order, record i at `base_offset` + i (-1: not known): a
        fresh result's records. An offset commit with its value, what a commit writes for
        each partition, is stored here as `_offset_commit` and `_put_offset` store it, without
        their two calls per record, and the group's and the topic's entries are looked up
        once for a run of commits of one topic; every other record goes through `replay`
        (which may change any entry: the run ends there)."""
        groups, store = self.groups, self.offsets.offsets
        offset = base_offset
        # Record i is at base_offset + i, or all at -1: one addition per record, no test.
        step = 1 if base_offset >= 0 else 0
        group = topic = None
        partitions: dict[int, OffsetAndMetadata] = {}
        # Read per record: locals, not the module's globals.
        commit_key, commit_value = OffsetCommitKey, OffsetCommitValue
        new_entry, entry_class = _new_entry, OffsetAndMetadata
        for record in records:
            key = record.key
            value = record.value
            if key.__class__ is commit_key and value.__class__ is commit_value:
                if key.group != group or key.topic != topic:
                    group, topic = key.group, key.topic
                    if group not in groups:
                        # An offset commit for an unknown group creates a simple (offsets-only) group.
                        groups[group] = self._simple(group)
                    topics = store.get(group)
                    if topics is None:
                        topics = store[group] = {}
                    found = topics.get(topic)
                    if found is None:
                        found = topics[topic] = {}
                    partitions = found
                partitions[key.partition] = new_entry(entry_class, (
                    value.offset, value.leader_epoch, value.metadata or "", value.commit_timestamp,
                    value.expire_timestamp, value.topic_id, offset))
            else:
                self.replay(record, offset)
                group = topic = None
            offset += step

    def replay_end_transaction(self, producer_id: int, committed: bool, marker_offset: int | None = None) -> None:
        self.offsets.end_transaction(producer_id, committed, marker_offset)

    # ------------------------------------------------------------- helpers
    def group_as(self, group_id: str, group_class: type, create: bool):
        """The group of `group_class` a record of that type replays into (Kafka's
        `getOrMaybeCreatePersistedConsumerGroup`, for any registered group type):
        - the group, if it is of that type;
        - a new one in place of a "simple" group (offsets only), always;
        - a new one when there is none, or when the group is of another type, if `create`.
        The second of those: an upgrade or downgrade tombstones the old group before the new
        type's records, but once compaction removed those tombstones a record of the new
        type can follow the old type's directly (KAFKA-17306/KAFKA-21117 made Kafka's load
        fail here). The log is ordered: the later record is the truth."""
        group: Any = self.groups.get(group_id)
        if group.__class__ is group_class:
            return group
        if group is None:
            if not create:
                return None
        elif not (group.__class__ is self._simple and group.is_simple()):
            if not create:
                return None
            log.warning("group %s: a %s-group record replaces a %s group (compacted conversion)",
                        group_id, group_type_of(group_class).name, group_type(group).name)
        group = group_class(group_id)
        self.groups[group_id] = group
        return group

    # ------------------------------------------------------------- offsets
    def _offset_commit(self, key, value, offset, producer_id) -> None:
        if value.__class__ is OffsetCommitValue:    # the common case, without a fields tuple
            self._put_offset(key, _new_entry(OffsetAndMetadata, (
                value.offset, value.leader_epoch, value.metadata or "", value.commit_timestamp,
                value.expire_timestamp, value.topic_id, offset)), producer_id)
        elif value is None:
            self.replay_offset_commit(key, None, offset, producer_id)
        else:  # LegacyOffsetCommitValue (type 0): no leader epoch, no expiry, no topic id
            self.replay_offset_commit(key, (value.offset, -1, value.metadata or "",
                                            value.commit_timestamp, -1, None), offset, producer_id)

    def replay_offset_commit(self, key, fields: tuple | None, offset: int, producer_id: int = -1) -> None:
        """An offset commit (types 0 and 1) given as decoded fields (offset, leader epoch,
        metadata, commit timestamp, expire timestamp, topic id), or None for a tombstone.
        The bulk loader calls this directly; `replay` reaches it through `_offset_commit`."""
        if fields is None:
            self.offsets.delete(key.group, key.topic, key.partition)
            return
        self._put_offset(key, _new_entry(OffsetAndMetadata, (*fields, offset)), producer_id)

    def _put_offset(self, key, entry: OffsetAndMetadata, producer_id: int) -> None:
        group = key.group
        if group not in self.groups:
            # An offset commit for an unknown group creates a simple (offsets-only) group.
            self.groups[group] = self._simple(group)
        if producer_id != -1:
            self.offsets.put(group, key.topic, key.partition, entry, producer_id)
            return
        topics = self.offsets.offsets.get(group)
        if topics is None:
            topics = self.offsets.offsets[group] = {}
        partitions = topics.get(key.topic)
        if partitions is None:
            partitions = topics[key.topic] = {}
        partitions[key.partition] = entry
