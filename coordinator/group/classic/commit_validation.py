"""Who may commit offsets to a classic group (Kafka's `ClassicGroup.validateOffsetCommit`).

Rules: member id, static instance id and generation are checked; a transactional commit
skips the checks a transaction coordinator has no way to satisfy. A group-level refusal
raises ApiError.
"""
from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..errors import ApiError
from .group import ClassicGroup, ClassicGroupState


def validate_classic_commit(group: ClassicGroup, member_id: str, instance_id: str | None,
                             generation: int, transactional: bool) -> None:
    """`ClassicGroup.validateOffsetCommit`."""
    if group.state is ClassicGroupState.DEAD:
        raise ApiError(ErrorCode.coordinator_not_available)
    if generation < 0 and group.state is ClassicGroupState.EMPTY:
        return  # the admin client, or a consumer that assigns partitions itself
    if generation >= 0 or member_id or instance_id is not None:
        _validate_classic_member(group, member_id, instance_id)
        if generation != group.generation_id:
            raise ApiError(ErrorCode.illegal_generation,
                           f"The generation {generation} is not the group's generation "
                           f"{group.generation_id}.")
    elif not transactional and group.state is not ClassicGroupState.EMPTY:
        raise ApiError(ErrorCode.unknown_member_id,
                       "Offset commits without a member id are only accepted from an empty group.")
    if not transactional and group.state is ClassicGroupState.COMPLETING_REBALANCE:
        raise ApiError(ErrorCode.rebalance_in_progress)


def _validate_classic_member(group: ClassicGroup, member_id: str, instance_id: str | None) -> None:
    if instance_id is not None:
        owner = next((m.member_id for m in group.members.values()
                      if m.group_instance_id == instance_id), None)
        if owner is None:
            raise ApiError(ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown.")
        if owner != member_id:
            raise ApiError(ErrorCode.fenced_instance_id,
                           f"Instance id {instance_id} is used by another member.")
    elif member_id not in group.members:
        raise ApiError(ErrorCode.unknown_member_id, f"Member {member_id} is unknown.")
