"""The `consumer` group type (KIP-848) in the group-type registry (group_types.py): what the
shared APIs (ListGroups, DeleteGroups, offsets, retention) ask of a consumer group."""
from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from ... import record_helpers as rh
from ...errors import ApiError
from ...group_types import BaseTime, PartitionCheck, commit_time
from .commit_validation import validate_consumer_commit
from .group import ConsumerGroup

if TYPE_CHECKING:
    from records import CoordinatorRecord

    from ...image import MetadataImage
    from ...result import TimerOp


class ConsumerGroupType:
    name = "consumer"

    def state(self, group: ConsumerGroup) -> str:
        return group.state.value

    def protocol_type(self, group: ConsumerGroup) -> str:
        return "consumer"

    def subscribed_topics(self, group: ConsumerGroup) -> set[str]:
        names = set(group.subscribed_topic_names)
        for regex in group.regex_subscribers:
            resolved = group.resolved_regexes.get(regex)
            if resolved is not None:
                names |= resolved.topics
        return names

    def tombstones(self, group: ConsumerGroup) -> list[CoordinatorRecord]:
        gid = group.group_id
        records = [rh.current_assignment_tombstone(gid, m) for m in group.members]
        records += [rh.target_member_tombstone(gid, m) for m in group.members]
        records.append(rh.target_metadata_tombstone(gid))
        records += [rh.member_metadata_tombstone(gid, m) for m in group.members]
        records += [rh.regex_tombstone(gid, r) for r in group.resolved_regexes]
        records.append(rh.partition_metadata_tombstone(gid))
        records.append(rh.group_epoch_tombstone(gid))
        return records

    def delete_error(self, group: ConsumerGroup) -> ErrorCode | None:
        return None if group.is_empty() else ErrorCode.non_empty_group

    def offset_expiration_base(self, group: ConsumerGroup) -> BaseTime | None:
        return commit_time

    def metadata_expires(self, group: ConsumerGroup) -> bool:
        return group.is_empty()

    def validate_offset_fetch(self, group: ConsumerGroup, member_id: str | None, member_epoch: int) -> None:
        """A consumer-group member must fetch with its exact current epoch (KIP-848)."""
        if member_id is None and member_epoch < 0:
            return
        member = group.members.get(member_id or "")
        if member is None:
            raise ApiError(ErrorCode.unknown_member_id,
                           f"Member {member_id} is not a member of group {group.group_id}.")
        if member_epoch != member.member_epoch:
            code = ErrorCode.illegal_generation if member.uses_classic_protocol else ErrorCode.stale_member_epoch
            raise ApiError(code, f"The received member epoch {member_epoch} does not match the member "
                                 f"epoch {member.member_epoch}.")

    def offset_delete_error(self, group: ConsumerGroup) -> ErrorCode | None:
        return None     # subscribed topics are refused per partition instead

    def validate_offset_commit(self, group: ConsumerGroup, image: MetadataImage, member_id: str,
                               instance_id: str | None, generation: int, api_version: int,
                               transactional: bool = False) -> PartitionCheck:
        if transactional:
            return validate_consumer_commit(image, group, member_id, generation, api_version,
                                            transactional=True, instance_id=instance_id)
        return validate_consumer_commit(image, group, member_id, generation, api_version)

    def offset_commit_timers(self, group: ConsumerGroup, member_id: str, now_ms: int) -> list[TimerOp]:
        return []   # the heartbeat alone keeps a consumer-group member's session
