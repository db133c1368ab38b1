"""Who may join or heartbeat as whom in a streams group (Kafka 4.4: `throwIfStreamsGroupIsFull`
and the static-membership checks of `streamsGroupHeartbeat`).

Rules:
- a join (epoch 0) of a member id the group does not know, into a group that has its maximum
  number of members (`group.streams.max.size`, Kafka's default 2^31-1), is
  GROUP_MAX_SIZE_REACHED "The streams group has reached its maximum capacity of N members.";
  a member the group knows may rejoin, and a static member whose instance id the group knows
  is not counted as new: it takes that member's place (one that left with -2), or is
  UNRELEASED_INSTANCE_ID (one still in the group), even in a full group (Kafka 4.4's tests
  `testStreamsStaticRejoinWithLeaveGroupStaticEpochAtMaxSizeSucceeds`,
  `testStreamsStaticJoinWithUnreleasedInstanceThrowsUnreleasedInstanceIdAtMaxSize`);
- a join with the instance id of a member still in the group is UNRELEASED_INSTANCE_ID;
- a heartbeat (epoch > 0) with an instance id the group gives to another member id is
  FENCED_INSTANCE_ID (Kafka's `throwIfInstanceIdIsFenced`).
"""
from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ..errors import ApiError
from .model import StreamsGroup, StreamsMember
from .responses import LEAVE_STATIC_EPOCH


def _static(group: StreamsGroup, instance_id: str | None) -> StreamsMember | None:
    if instance_id is None:
        return None
    return next((m for m in group.members.values() if m.instance_id == instance_id), None)


def check_capacity(group: StreamsGroup, req: Any, max_size: int) -> None:
    """GROUP_MAX_SIZE_REACHED for a new member of a full group (a join, epoch 0)."""
    if (len(group.members) >= max_size and req.member_id not in group.members
            and _static(group, req.instance_id) is None):
        raise ApiError(ErrorCode.group_max_size_reached,
                       f"The streams group has reached its maximum capacity of {max_size} members.")


def check_instance(group: StreamsGroup, req: Any) -> None:
    """FENCED_INSTANCE_ID for a heartbeat (epoch > 0) whose instance id is another member's."""
    owner = _static(group, req.instance_id)
    if owner is not None and owner.member_id != req.member_id:
        raise ApiError(ErrorCode.fenced_instance_id,
                       f"Static member {req.member_id} with instance id {req.instance_id} was fenced by member "
                       f"{owner.member_id}.")


def replaced_static_member(group: StreamsGroup, req: Any) -> StreamsMember | None:
    """The static member a joining member with its instance id replaces: one that left with
    -2 (its tasks kept for it); one still in the group is UNRELEASED_INSTANCE_ID."""
    old = _static(group, req.instance_id)
    if old is None:
        return None
    if old.member_epoch != LEAVE_STATIC_EPOCH:
        raise ApiError(ErrorCode.unreleased_instance_id,
                       f"Static member {req.member_id} with instance id {req.instance_id} cannot join the group "
                       f"because the instance id is owned by {old.member_id} member.")
    return old
