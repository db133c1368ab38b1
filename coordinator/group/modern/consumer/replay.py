"""Replay of the consumer group's records (types 3-8 and 16): the only way a ConsumerGroup
changes (Kafka: `GroupMetadataManager.replay` for the consumer group records).

Rules (those of replay.py, docs/design/kafka-facts.md §2.4):
- each key type has one rule, in `REPLAY_RULES`, which the consumer contribution hands to
  the shard's registry (contribution.py);
- a record creates its group when it has a value (`Replayer.group_as`); a tombstone for an
  unknown group or member is ignored; a tombstone out of Kafka's order (compaction at work)
  is logged and applied.
"""
from __future__ import annotations

import logging
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
)

from ...assignors.partitions import partitions_of
from ...replay import Replayer, intern_topic_id, shared
from ..client_assignment import specs_of
from .group import (
    EMPTY_ASSIGNMENT,
    Assignment,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    ResolvedRegularExpression,
)

log = logging.getLogger("kcoord.replay")


@overload
def _group(replayer: Replayer, group_id: str, create: Literal[True]) -> ConsumerGroup: ...


@overload
def _group(replayer: Replayer, group_id: str, create: bool) -> ConsumerGroup | None: ...


def _group(replayer: Replayer, group_id: str, create: bool) -> ConsumerGroup | None:
    return replayer.group_as(group_id, ConsumerGroup, create)


def _member_or_new(group: ConsumerGroup, member_id: str) -> ConsumerGroupMember:
    m = group.members.get(member_id)
    return m if m is not None else ConsumerGroupMember(member_id=member_id)


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


def _group_epoch(replayer: Replayer, key, value, offset: int, producer_id: int) -> None:
    if value is None:
        group = _group(replayer, key.group_id, False)
        if group is None:
            return
        if group.members or group.target_assignment or group.assignment_epoch != -1:
            # Kafka throws here (KAFKA-17306: a compacted log tripped it on failover). The
            # tombstone is the newest word on the group: drop it with what is left.
            log.warning("group %s: ConsumerGroupMetadata tombstone while %d members remain; "
                        "removing the group", key.group_id, len(group.members))
        del replayer.groups[key.group_id]
        return
    group = _group(replayer, key.group_id, True)
    group.group_epoch = value.epoch
    group.metadata_hash = value.metadata_hash

def _partition_metadata(replayer: Replayer, key, value, offset: int, producer_id: int) -> None:
    group = _group(replayer, key.group_id, value is not None)
    if group is not None:
        group.has_partition_metadata_record = value is not None

def _member_metadata(replayer: Replayer, key, value, offset: int, producer_id: int) -> None:
    if value is None:
        group = _group(replayer, key.group_id, False)
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
    group = _group(replayer, key.group_id, True)
    m = _member_or_new(group, key.member_id)
    group.put_member(replace(
        m, instance_id=value.instance_id, rack_id=shared(value.rack_id), client_id=shared(value.client_id),
        client_host=shared(value.client_host),
        subscribed_topic_names=shared(tuple(value.subscribed_topic_names)),
        subscribed_topic_regex=value.subscribed_topic_regex or "",
        rebalance_timeout_ms=value.rebalance_timeout_ms, server_assignor=value.server_assignor,
        classic_member_metadata=value.classic_member_metadata,
        client_assignors=specs_of(value.client_assignors)))

def _target_metadata(replayer: Replayer, key, value, offset: int, producer_id: int) -> None:
    group = _group(replayer, key.group_id, value is not None)
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

def _target_member(replayer: Replayer, key, value, offset: int, producer_id: int) -> None:
    group = _group(replayer, key.group_id, value is not None)
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

def _current_assignment(replayer: Replayer, key, value, offset: int, producer_id: int) -> None:
    group = _group(replayer, key.group_id, value is not None)
    if group is None:
        return
    if value is None:
        m = group.members.get(key.member_id)
        if m is not None:
            group.put_member(replace(m, member_epoch=-1, previous_member_epoch=-1,
                                     state=MemberState.STABLE, assigned_partitions=EMPTY_ASSIGNMENT,
                                     partitions_pending_revocation=EMPTY_ASSIGNMENT))
        return
    m = _member_or_new(group, key.member_id)
    group.put_member(replace(
        m, member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
        state=MemberState.from_byte(value.state),
        assigned_partitions=_assignment_from(value.assigned_partitions, value.member_epoch),
        partitions_pending_revocation=_assignment_from(value.partitions_pending_revocation,
                                                       value.member_epoch),
        assignment_error=value.error, assignment_metadata_version=value.metadata_version,
        assignment_metadata_bytes=value.metadata_bytes))

def _regex(replayer: Replayer, key, value, offset: int, producer_id: int) -> None:
    group = _group(replayer, key.group_id, value is not None)
    if group is None:
        return
    if value is None:
        group.resolved_regexes.pop(key.regular_expression, None)
    else:
        group.resolved_regexes[key.regular_expression] = ResolvedRegularExpression(
            topics=frozenset(value.topics), version=value.version, timestamp_ms=value.timestamp)


REPLAY_RULES = {
    ConsumerGroupMetadataKey: _group_epoch,
    ConsumerGroupPartitionMetadataKey: _partition_metadata,
    ConsumerGroupMemberMetadataKey: _member_metadata,
    ConsumerGroupTargetAssignmentMetadataKey: _target_metadata,
    ConsumerGroupTargetAssignmentMemberKey: _target_member,
    ConsumerGroupCurrentMemberAssignmentKey: _current_assignment,
    ConsumerGroupRegularExpressionKey: _regex,
}
