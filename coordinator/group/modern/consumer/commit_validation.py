"""Who may commit offsets to a consumer group (Kafka's `ConsumerGroup.validateOffsetCommit`).

Rules: the member and its epoch are checked with KIP-1251's relaxed rule: a member may commit
for a partition with any epoch between the partition's assignment epoch and its current
member epoch (docs/design/kafka-facts.md §4.8). The epoch check is per partition, so the
validator returns a `PartitionCheck`. A transactional commit with no member identity at
all is accepted (KIP-1251, rule 2 of §4.8). A group-level refusal raises ApiError.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from ...errors import ApiError
from ...group_types import ACCEPT_ALL, PartitionCheck, relaxed_epoch_check
from .group import ConsumerGroup

if TYPE_CHECKING:
    from ...image import MetadataImage


def validate_consumer_commit(image: MetadataImage, group: ConsumerGroup, member_id: str,
                              epoch: int, api_version: int, transactional: bool = False,
                              instance_id: str | None = None) -> PartitionCheck:
    """`ConsumerGroup.validateOffsetCommit` with KIP-1251 assignment epochs. A transactional
    commit (TxnOffsetCommit) without any member identity (epoch -1, member "", no instance)
    is accepted: KIP-1251 "Offset commits with member epoch or generation ID -1 are
    unconditionally accepted if the group is empty, or the commit is transactional"
    (docs/design/kafka-facts.md §4.8 rule 2); and it may use any TxnOffsetCommit version (rule 4 is for
    OffsetCommit only). The caller maps STALE_MEMBER_EPOCH for TxnOffsetCommit."""
    if epoch < 0 and not group.members:
        return ACCEPT_ALL
    if transactional and epoch == -1 and member_id == "" and instance_id is None:
        return ACCEPT_ALL
    member = group.members.get(member_id)
    if member is None:
        raise ApiError(ErrorCode.unknown_member_id,
                       f"Member {member_id} is not a member of group {group.group_id}.")
    classic = member.uses_classic_protocol      # a property: read once
    if not transactional and not classic and api_version < 9:
        raise ApiError(ErrorCode.unsupported_version,
                       "OffsetCommit version 9 or above must be used by members using the consumer "
                       "group protocol.")
    if epoch == member.member_epoch:
        # relaxed_epoch_check's first rule, taken before its per-partition check is built: a
        # member at its current epoch is what nearly every commit is.
        return ACCEPT_ALL
    stale = ErrorCode.illegal_generation if classic else ErrorCode.stale_member_epoch

    def given_at(topic_id, topic: str, partition: int) -> int | None:
        if topic_id is None:
            t = image.topics_by_name.get(topic)
            topic_id = t.topic_id if t is not None else None
        assignment_epoch = member.assigned_partitions.get(topic_id, {}).get(partition)
        if assignment_epoch is None:
            assignment_epoch = member.partitions_pending_revocation.get(topic_id, {}).get(partition)
        return assignment_epoch

    return relaxed_epoch_check(epoch, member.member_epoch, given_at, stale)
