"""The `classic` group type in the group-type registry (group_types.py): what the shared APIs
(ListGroups, DeleteGroups, offsets, retention) ask of a classic group."""
from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from .. import record_helpers as rh
from ..group_types import ACCEPT_ALL, BaseTime, PartitionCheck, commit_time
from ..result import ScheduleTimer
from ..timers import heartbeat_key
from .commit_validation import validate_classic_commit
from .group import ClassicGroup, ClassicGroupState

if TYPE_CHECKING:
    from records import CoordinatorRecord

    from ..image import MetadataImage
    from ..result import TimerOp


class ClassicGroupType:
    name = "classic"

    def state(self, group: ClassicGroup) -> str:
        return group.state.value

    def protocol_type(self, group: ClassicGroup) -> str:
        return group.protocol_type or ""

    def subscribed_topics(self, group: ClassicGroup) -> set[str]:
        """The topics in the members' ConsumerProtocol subscriptions of a `consumer` group."""
        if group.protocol_type != "consumer" or not group.members:
            return set()
        from ...protocol.consumer_protocol import MalformedProtocolData, decode_subscription
        topics: set[str] = set()
        for m in group.members.values():
            try:
                topics.update(decode_subscription(m.metadata_for(group.protocol_name)).topics)
            except MalformedProtocolData:
                continue
        return topics

    def tombstones(self, group: ClassicGroup) -> list[CoordinatorRecord]:
        return [rh.group_metadata_tombstone(group.group_id)]

    def delete_error(self, group: ClassicGroup) -> ErrorCode | None:
        if group.state is ClassicGroupState.DEAD:
            return ErrorCode.group_id_not_found
        if not group.is_empty() or group.state is not ClassicGroupState.EMPTY:
            return ErrorCode.non_empty_group
        return None

    def offset_expiration_base(self, group: ClassicGroup) -> BaseTime | None:
        if not group.protocol_type:
            return commit_time  # a simple group: only commits count
        if group.state is ClassicGroupState.EMPTY:
            state_ts = group.state_timestamp_ms
            return (lambda o: state_ts) if state_ts >= 0 else commit_time
        if group.protocol_type == "consumer" and group.state is ClassicGroupState.STABLE:
            return commit_time
        return None

    def metadata_expires(self, group: ClassicGroup) -> bool:
        return group.state is ClassicGroupState.EMPTY

    def validate_offset_fetch(self, group: ClassicGroup, member_id: str | None, member_epoch: int) -> None:
        return None     # Kafka's ClassicGroup.validateOffsetFetch checks nothing

    def offset_delete_error(self, group: ClassicGroup) -> ErrorCode | None:
        if group.state is ClassicGroupState.DEAD:
            return ErrorCode.group_id_not_found
        if not group.is_empty() and group.protocol_type != "consumer":
            return ErrorCode.non_empty_group
        return None

    def validate_offset_commit(self, group: ClassicGroup, image: MetadataImage, member_id: str,
                               instance_id: str | None, generation: int, api_version: int,
                               transactional: bool = False) -> PartitionCheck:
        validate_classic_commit(group, member_id, instance_id, generation, transactional=transactional)
        return ACCEPT_ALL

    def offset_commit_timers(self, group: ClassicGroup, member_id: str, now_ms: int) -> list[TimerOp]:
        """`rescheduleClassicGroupMemberHeartbeat`: a commit proves the member is alive."""
        member = group.members.get(member_id)
        if member is None or group.state not in (ClassicGroupState.STABLE, ClassicGroupState.PREPARING_REBALANCE):
            return []
        return [ScheduleTimer(heartbeat_key(group.group_id, member_id), now_ms + member.session_timeout_ms)]
