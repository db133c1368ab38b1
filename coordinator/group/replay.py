"""Replay: the only way group and offset state changes (Kafka:
`GroupMetadataManager.replay` / `OffsetMetadataManager.replay`).

Loading a shard, applying a freshly written result and tests all go through
`Replayer.replay`, so what is written is exactly what a reload rebuilds.
Invariants follow docs/design/kafka-facts.md §2.4; tombstones for unknown groups or members are
ignored, a record that contradicts the state raises `IllegalStateError`.
"""
from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Literal, overload

from records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    CoordinatorRecord,
    GroupMetadataKey,
    LegacyOffsetCommitKey,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownRecord,
)

from .assignors.partitions import partitions_of
from .classic.group import ClassicGroup, ClassicGroupMember, ClassicGroupState
from .errors import IllegalStateError
from .group_types import group_type, group_type_of
from .modern.client_assignment import specs_of
from .modern.consumer.group import (
    EMPTY_ASSIGNMENT,
    Assignment,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    ResolvedRegularExpression,
)
from .offsets.store import OffsetAndMetadata, OffsetStore

_new_offset = OffsetAndMetadata._make

log = logging.getLogger("kcoord.replay")

Group = ConsumerGroup | ClassicGroup


_TOPIC_IDS: dict = {}


def intern_topic_id(topic_id):
    """One shared UUID object per topic id: assignors key dicts by topic id, and a UUID
    compares by identity first, so shared objects make those look-ups much cheaper."""
    if len(_TOPIC_IDS) > 1_000_000:
        _TOPIC_IDS.clear()
    return _TOPIC_IDS.setdefault(topic_id, topic_id)


_SHARED: dict = {}


def _shared(value):
    """One object per distinct client id, host or subscription: thousands of members of a
    group usually share them, and each decoded record would otherwise bring its own copy."""
    if value is None:
        return None
    if len(_SHARED) > 200_000:
        _SHARED.clear()
    return _SHARED.setdefault(value, value)


def _assignment_from(tps, member_epoch: int) -> Assignment:
    """KIP-1251: epochs aligned with partitions; absent, null or misaligned epochs mean every
    partition was assigned at max(member epoch, 0) (`Utils.assignmentFromTopicPartitions`)."""
    if not tps:
        return EMPTY_ASSIGNMENT
    out: Assignment = {}
    default = max(member_epoch, 0)
    for tp in tps:
        epochs = tp.assignment_epochs
        if epochs and len(epochs) == len(tp.partitions):
            out[intern_topic_id(tp.topic_id)] = dict(zip(tp.partitions, epochs))
        else:
            if epochs:
                log.error("assignment epochs of topic %s do not align with its partitions; "
                          "using epoch %d", tp.topic_id, default)
            out[intern_topic_id(tp.topic_id)] = dict.fromkeys(tp.partitions, default)
    return out


class Replayer:
    def __init__(self, groups: dict[str, Group], offsets: OffsetStore) -> None:
        self.groups = groups
        self.offsets = offsets
        self.unknown_record_types: Counter[int] = Counter()

    # ------------------------------------------------------------ dispatch
    def replay(self, record: CoordinatorRecord | UnknownRecord, offset: int = -1,
               producer_id: int = -1) -> None:
        if isinstance(record, UnknownRecord):
            # KIP-915: skip unknown types (a downgrade leaves records of newer features behind).
            if record.record_type not in self.unknown_record_types:
                log.warning("skipping record of unknown type %d at offset %d; it could be a left "
                            "over from an aborted upgrade (KIP-915)", record.record_type, offset)
            self.unknown_record_types[record.record_type] += 1
            return
        handler = _HANDLERS.get(type(record.key))
        if handler is None:
            raise IllegalStateError(f"no replay rule for record key {type(record.key).__name__}")
        handler(self, record.key, record.value, offset, producer_id)

    def replay_end_transaction(self, producer_id: int, committed: bool, marker_offset: int | None = None) -> None:
        self.offsets.end_transaction(producer_id, committed, marker_offset)

    # ------------------------------------------------------------- helpers
    @overload
    def _consumer_group(self, group_id: str, create: Literal[True]) -> ConsumerGroup: ...

    @overload
    def _consumer_group(self, group_id: str, create: bool) -> ConsumerGroup | None: ...

    def _consumer_group(self, group_id: str, create: bool) -> ConsumerGroup | None:
        return self.group_as(group_id, ConsumerGroup, create)

    def group_as(self, group_id: str, group_class: type, create: bool):
        """The group of `group_class` a record of that type replays into (Kafka's
        `getOrMaybeCreatePersistedConsumerGroup`, for any registered group type):
        - the group, if it is of that type;
        - a new one in place of a "simple" classic group (offsets only), always;
        - a new one when there is none, or when the group is of another type, if `create`.
        The second of those: an upgrade or downgrade tombstones the old group before the new
        type's records, but once compaction removed those tombstones a record of the new
        type can follow the old type's directly (KAFKA-17306/KAFKA-21117 made Kafka's load
        fail here). The log is ordered: the later record is the truth."""
        group = self.groups.get(group_id)
        if group.__class__ is group_class:
            return group
        if group is None:
            if not create:
                return None
        elif not (isinstance(group, ClassicGroup) and group.is_simple()):
            if not create:
                return None
            log.warning("group %s: a %s-group record replaces a %s group (compacted conversion)",
                        group_id, group_type_of(group_class).name, group_type(group).name)
        group = group_class(group_id)
        self.groups[group_id] = group
        return group

    def _member_or_new(self, group: ConsumerGroup, member_id: str) -> ConsumerGroupMember:
        m = group.members.get(member_id)
        return m if m is not None else ConsumerGroupMember(member_id=member_id)

    # ------------------------------------------------------------- offsets
    def _offset_commit(self, key, value, offset, producer_id) -> None:
        if value is None:
            self.replay_offset_commit(key, None, offset, producer_id)
        elif type(value) is OffsetCommitValue:
            self.replay_offset_commit(key, (value.offset, value.leader_epoch, value.metadata or "",
                                            value.commit_timestamp, value.expire_timestamp,
                                            value.topic_id), offset, producer_id)
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
        group = key.group
        if group not in self.groups:
            # An offset commit for an unknown group creates a simple classic group.
            self.groups[group] = ClassicGroup(group)
        entry = _new_offset((*fields, offset))
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

    # ------------------------------------------------------------- classic
    def _group_metadata(self, key, value, offset, producer_id) -> None:
        group_id = key.group
        if value is None:
            existing = self.groups.get(group_id)
            if isinstance(existing, ClassicGroup):
                del self.groups[group_id]
            return
        state = ClassicGroupState.STABLE if value.members else ClassicGroupState.EMPTY
        group = ClassicGroup(group_id, state, value.current_state_timestamp)
        group.protocol_type = value.protocol_type
        for mm in value.members:
            group.add(ClassicGroupMember(
                member_id=mm.member_id, group_instance_id=mm.group_instance_id,
                client_id=mm.client_id, client_host=mm.client_host,
                # A record without a rebalance timeout (v0) means "the session timeout".
                rebalance_timeout_ms=mm.rebalance_timeout if mm.rebalance_timeout != -1 else mm.session_timeout,
                session_timeout_ms=mm.session_timeout, protocol_type=value.protocol_type,
                supported_protocols=[(value.protocol or "", mm.subscription)], assignment=mm.assignment))
        group.protocol_type = value.protocol_type
        group.protocol_name = value.protocol
        group.generation_id = value.generation
        group.leader_id = value.leader
        existing = self.groups.get(group_id)
        if existing is not None and existing.__class__ is not ClassicGroup and not existing.is_empty():
            # A downgrade tombstones the consumer group first; compaction can drop those
            # tombstones. The later classic record wins (see group_as).
            log.warning("group %s: classic GroupMetadata replaces a %s group (compacted conversion)",
                        group_id, group_type(existing).name)
        self.groups[group_id] = group

    # ------------------------------------------------------- consumer group
    def _group_epoch(self, key, value, offset, producer_id) -> None:
        if value is None:
            group = self._consumer_group(key.group_id, create=False)
            if group is None:
                return
            if group.members or group.target_assignment or group.assignment_epoch != -1:
                # Kafka throws here (KAFKA-17306: a compacted log tripped it on failover). The
                # tombstone is the newest word on the group: drop it with what is left.
                log.warning("group %s: ConsumerGroupMetadata tombstone while %d members remain; "
                            "removing the group", key.group_id, len(group.members))
            del self.groups[key.group_id]
            return
        group = self._consumer_group(key.group_id, create=True)
        group.group_epoch = value.epoch
        group.metadata_hash = value.metadata_hash

    def _partition_metadata(self, key, value, offset, producer_id) -> None:
        group = self._consumer_group(key.group_id, create=value is not None)
        if group is not None:
            group.has_partition_metadata_record = value is not None

    def _member_metadata(self, key, value, offset, producer_id) -> None:
        if value is None:
            group = self._consumer_group(key.group_id, create=False)
            if group is None or key.member_id not in group.members:
                return
            m = group.members[key.member_id]
            if m.member_epoch != -1 or key.member_id in group.target_assignment:
                # Out of Kafka's order (current assignment, target, member): compaction at work.
                log.warning("group %s: member %s removed before its assignments were tombstoned",
                            key.group_id, key.member_id)
                group.remove_target(key.member_id)
            group.remove_member(key.member_id)
            return
        group = self._consumer_group(key.group_id, create=True)
        m = self._member_or_new(group, key.member_id)
        group.put_member(replace(
            m, instance_id=value.instance_id, rack_id=_shared(value.rack_id), client_id=_shared(value.client_id),
            client_host=_shared(value.client_host),
            subscribed_topic_names=_shared(tuple(value.subscribed_topic_names)),
            subscribed_topic_regex=value.subscribed_topic_regex or "",
            rebalance_timeout_ms=value.rebalance_timeout_ms, server_assignor=value.server_assignor,
            classic_member_metadata=value.classic_member_metadata,
            client_assignors=specs_of(value.client_assignors)))

    def _target_metadata(self, key, value, offset, producer_id) -> None:
        group = self._consumer_group(key.group_id, create=value is not None)
        if group is None:
            return
        if value is None:
            if group.target_assignment:
                log.warning("group %s: target assignment metadata tombstone while member targets remain",
                            key.group_id)
            group.assignment_epoch, group.assignment_timestamp_ms = -1, 0
        else:
            group.assignment_epoch = value.assignment_epoch
            group.assignment_timestamp_ms = value.assignment_timestamp
        # the client-side assignor spec (tags >= 1000): absent on every target the server assignor computed
        group.assignment_error = value.assignment_error if value is not None else 0
        group.client_assignor_name = value.client_assignor_name if value is not None else None

    def _target_member(self, key, value, offset, producer_id) -> None:
        group = self._consumer_group(key.group_id, create=value is not None)
        if group is None:
            return
        if value is None:
            group.remove_target(key.member_id)
        else:
            # Canonical partition sets, so an unchanged target compares equal to what the
            # assignor returns and no record is written for it.
            target = {intern_topic_id(tp.topic_id): partitions_of(tp.partitions)
                      for tp in value.topic_partitions if tp.partitions}
            group.set_target(key.member_id, target or EMPTY_ASSIGNMENT)  # type: ignore[arg-type]  # EMPTY_ASSIGNMENT is the shared empty mapping
            if value.metadata_version != -1 or value.metadata_bytes is not None:   # the client-side assignor spec tags
                group.target_metadata[key.member_id] = (value.metadata_version, value.metadata_bytes)
            elif group.target_metadata:
                group.target_metadata.pop(key.member_id, None)

    def _current_assignment(self, key, value, offset, producer_id) -> None:
        group = self._consumer_group(key.group_id, create=value is not None)
        if group is None:
            return
        if value is None:
            m = group.members.get(key.member_id)
            if m is not None:
                group.put_member(replace(m, member_epoch=-1, previous_member_epoch=-1,
                                         state=MemberState.STABLE, assigned_partitions=EMPTY_ASSIGNMENT,
                                         partitions_pending_revocation=EMPTY_ASSIGNMENT))
            return
        m = self._member_or_new(group, key.member_id)
        group.put_member(replace(
            m, member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
            state=MemberState.from_byte(value.state),
            assigned_partitions=_assignment_from(value.assigned_partitions, value.member_epoch),
            partitions_pending_revocation=_assignment_from(value.partitions_pending_revocation,
                                                           value.member_epoch),
            assignment_error=value.error, assignment_metadata_version=value.metadata_version,
            assignment_metadata_bytes=value.metadata_bytes))

    def _regex(self, key, value, offset, producer_id) -> None:
        group = self._consumer_group(key.group_id, create=value is not None)
        if group is None:
            return
        if value is None:
            group.resolved_regexes.pop(key.regular_expression, None)
        else:
            group.resolved_regexes[key.regular_expression] = ResolvedRegularExpression(
                topics=frozenset(value.topics), version=value.version, timestamp_ms=value.timestamp)


def register_replay(key_type: type, handler) -> None:
    """A group type's replay rule for its own record key type: `handler(replayer, key,
    value, offset, producer_id)`, changing state only through the replayer's `groups`
    (with `group_as`) and `offsets`. A key type has one rule."""
    if key_type in _HANDLERS:
        raise ValueError(f"record key {key_type.__name__} already has a replay rule")
    _HANDLERS[key_type] = handler


_HANDLERS: dict[type, Callable] = {
    LegacyOffsetCommitKey: Replayer._offset_commit,
    OffsetCommitKey: Replayer._offset_commit,
    GroupMetadataKey: Replayer._group_metadata,
    ConsumerGroupMetadataKey: Replayer._group_epoch,
    ConsumerGroupPartitionMetadataKey: Replayer._partition_metadata,
    ConsumerGroupMemberMetadataKey: Replayer._member_metadata,
    ConsumerGroupTargetAssignmentMetadataKey: Replayer._target_metadata,
    ConsumerGroupTargetAssignmentMemberKey: Replayer._target_member,
    ConsumerGroupCurrentMemberAssignmentKey: Replayer._current_assignment,
    ConsumerGroupRegularExpressionKey: Replayer._regex,
}
