"""Build `__consumer_offsets` records from the group model (Kafka:
`GroupCoordinatorRecordHelpers`). Every consumer-group value is written at
version 0; offset commits at version 4, or 1 when they carry an expire timestamp.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from records import (
    ZERO_UUID,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    TopicPartitions,
)
from records.codec import offset_commit_key

# The consumer group's model (modern/consumer/group.py) as these builders read it: the kernel
# names no folder, so the member and the resolved regex are typed by their fields' use only.
Assignment = Mapping[Any, Mapping[int, int]]     # topic id -> partition -> assignment epoch
ConsumerGroupMember = Any
ResolvedRegularExpression = Any


# Each builder calls CoordinatorRecord(key, value, value_version) itself, positionally: a
# shared helper cost one Python frame per record, and the offset commit builds one record per
# partition (docs/measurements/instruction-counts.md). A tombstone is (key, None, 0).


# ----------------------------------------------------------------- members
def member_metadata_record(group_id: str, m: ConsumerGroupMember) -> CoordinatorRecord:
    return CoordinatorRecord(
        ConsumerGroupMemberMetadataKey(group_id=group_id, member_id=m.member_id),
        ConsumerGroupMemberMetadataValue(
            instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
            client_host=m.client_host, subscribed_topic_names=tuple(sorted(m.subscribed_topic_names)),
            subscribed_topic_regex=m.subscribed_topic_regex,
            rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor,
            classic_member_metadata=m.classic_member_metadata), 0)


def member_metadata_tombstone(group_id: str, member_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupMemberMetadataKey(group_id=group_id, member_id=member_id), None, 0)


def _with_epochs(assignment: Assignment) -> tuple[TopicPartitions, ...]:
    """KIP-1251: the writer always fills AssignmentEpochs, aligned with Partitions."""
    out = []
    for topic_id, parts in assignment.items():
        ps = sorted(parts)
        out.append(TopicPartitions(topic_id=topic_id, partitions=tuple(ps),
                                   assignment_epochs=tuple(parts[p] for p in ps)))
    return tuple(out)


def current_assignment_record(group_id: str, m: ConsumerGroupMember) -> CoordinatorRecord:
    return CoordinatorRecord(
        ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=m.member_id),
        ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
            state=int(m.state), assigned_partitions=_with_epochs(m.assigned_partitions),
            partitions_pending_revocation=_with_epochs(m.partitions_pending_revocation)), 0)


def current_assignment_tombstone(group_id: str, member_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member_id), None, 0)


# ------------------------------------------------------------------- group
def group_epoch_record(group_id: str, epoch: int, metadata_hash: int) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupMetadataKey(group_id=group_id),
                             ConsumerGroupMetadataValue(epoch=epoch, metadata_hash=metadata_hash), 0)


def group_epoch_tombstone(group_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupMetadataKey(group_id=group_id), None, 0)


def partition_metadata_tombstone(group_id: str) -> CoordinatorRecord:
    # KIP-1101 (4.1) replaced subscription metadata by the metadata hash; a group that
    # still has the old record gets it tombstoned on its next metadata update.
    return CoordinatorRecord(ConsumerGroupPartitionMetadataKey(group_id=group_id), None, 0)


def target_member_record(group_id: str, member_id: str,
                         target: Mapping[uuid.UUID, Iterable[int]]) -> CoordinatorRecord:
    tps = tuple(TopicPartitions(topic_id=t, partitions=tuple(sorted(ps)), assignment_epochs=())
                for t, ps in target.items())
    return CoordinatorRecord(ConsumerGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id),
                             ConsumerGroupTargetAssignmentMemberValue(topic_partitions=tps), 0)


def target_member_tombstone(group_id: str, member_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id), None, 0)


def target_metadata_record(group_id: str, epoch: int, timestamp_ms: int) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id),
                             ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch,
                                                                        assignment_timestamp=timestamp_ms), 0)


def target_metadata_tombstone(group_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id), None, 0)


def regex_record(group_id: str, regex: str, resolved: ResolvedRegularExpression) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupRegularExpressionKey(group_id=group_id, regular_expression=regex),
                             ConsumerGroupRegularExpressionValue(topics=tuple(sorted(resolved.topics)),
                                                                 version=resolved.version,
                                                                 timestamp=resolved.timestamp_ms), 0)


def regex_tombstone(group_id: str, regex: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupRegularExpressionKey(group_id=group_id, regular_expression=regex), None, 0)


def remove_member_records(group_id: str, member_id: str) -> list[CoordinatorRecord]:
    """Kafka's `removeMember`: the replay order requires CurrentAssignment first, then the
    target, then the member itself (docs/design/kafka-facts.md §2.4)."""
    return [current_assignment_tombstone(group_id, member_id),
            target_member_tombstone(group_id, member_id),
            member_metadata_tombstone(group_id, member_id)]


# ----------------------------------------------------------------- offsets
def offset_commit_record(group_id: str, topic: str, partition: int, offset: int, leader_epoch: int,
                         metadata: str, commit_timestamp: int, expire_timestamp: int = -1,
                         topic_id: uuid.UUID | None = None) -> CoordinatorRecord:
    """The commit's record (txn_commit calls it positionally, once per partition: keyword
    arguments cost more per call; offsets/ops.py's offset_commit builds the same records in
    its loop, without the call). Its key is the shared one of (group, topic, partition),
    already encoded (`records.codec.offset_commit_key`)."""
    # Kafka writes version 1 only when the commit carries a retention time (expireTimestamp).
    if expire_timestamp == -1:
        version = 4
        if topic_id is None:
            topic_id = ZERO_UUID
    else:
        version = 1
        topic_id = ZERO_UUID
    key = offset_commit_key(group_id, topic, partition)
    # Positional, in OffsetCommitValue's field order (offset, leader epoch, metadata, commit
    # and expire timestamps, topic id).
    return CoordinatorRecord(key, OffsetCommitValue(offset, leader_epoch, metadata, commit_timestamp,
                                                    expire_timestamp, topic_id), version)


def offset_tombstone(group_id: str, topic: str, partition: int) -> CoordinatorRecord:
    return CoordinatorRecord(OffsetCommitKey(group=group_id, topic=topic, partition=partition), None, 0)


def group_metadata_tombstone(group_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(GroupMetadataKey(group=group_id), None, 0)


# ----------------------------------------------------------------- classic
def group_metadata_record(group, assignments: Mapping[str, bytes]) -> CoordinatorRecord:
    """GroupMetadataValue at version 3 (`newGroupMetadataRecord`): each member's metadata for
    the selected protocol and its assignment from SyncGroup."""
    members = []
    for m in group.members.values():
        members.append(MemberMetadata(
            member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
            client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms,
            session_timeout=m.session_timeout_ms, subscription=m.metadata_for(group.protocol_name),
            assignment=assignments.get(m.member_id, b"")))
    value = GroupMetadataValue(protocol_type=group.protocol_type or "", generation=group.generation_id,
                               protocol=group.protocol_name, leader=group.leader_id,
                               current_state_timestamp=group.state_timestamp_ms, members=tuple(members))
    return CoordinatorRecord(GroupMetadataKey(group=group.group_id), value, 3)
