"""The group-type registry: what the shared group APIs need to know about each type of group.

Kafka gives every group type the same `Group` interface (type, state, protocol type,
`isSubscribedToTopic`, `createGroupTombstoneRecords`, `offsetExpirationCondition`,
`validateDeleteGroup`, ...), and ListGroups, DescribeGroups, DeleteGroups, offset expiry and
the tools ask it instead of testing the class. Here each type registers a `GroupType` for
its group class; `group_type(group)` finds it. A new type (the `connect` type of the connect group spec)
adds its class, a `GroupType`, and `register(...)`: nothing in the shared code changes.

Rules:
- one `GroupType` per group class, registered once at import (a second registration of
  the same class or name is an error);
- the methods are pure reads of the group (and, for tombstones, record builders): they
  never change it.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode

from . import record_helpers as rh
from .classic.group import ClassicGroup, ClassicGroupState
from .errors import ApiError
from .modern.consumer.group import ConsumerGroup
from .offsets.commit_validation import ACCEPT_ALL, PartitionCheck, validate_classic_commit, validate_consumer_commit
from .result import ScheduleTimer, TimerOp
from .timers import heartbeat_key

if TYPE_CHECKING:
    from records import CoordinatorRecord

    from .image import MetadataImage
    from .offsets.store import OffsetAndMetadata

# An offset's expiry base time (Kafka's `OffsetExpirationCondition`), or None: not now.
BaseTime = Callable[["OffsetAndMetadata"], int]


class GroupType(Protocol):
    name: str                  # ListGroups' GroupType ("consumer", "classic", ...)

    def state(self, group: Any) -> str: ...

    def protocol_type(self, group: Any) -> str: ...

    def subscribed_topics(self, group: Any) -> set[str]:
        """Kafka's `isSubscribedToTopic` set: OffsetDelete refuses these topics and
        retention never expires their offsets."""
        ...

    def tombstones(self, group: Any) -> list[CoordinatorRecord]:
        """Kafka's `createGroupTombstoneRecords`: every record of the group, deleted."""
        ...

    def delete_error(self, group: Any) -> ErrorCode | None:
        """Why DeleteGroups refuses the group (Kafka's `validateDeleteGroup`), or None."""
        ...

    def offset_expiration_base(self, group: Any) -> BaseTime | None:
        """`offsetExpirationCondition`: the time an offset's retention counts from."""
        ...

    def metadata_expires(self, group: Any) -> bool:
        """Whether the group itself is deleted once its last offset expired."""
        ...

    def validate_offset_fetch(self, group: Any, member_id: str | None, member_epoch: int) -> None:
        """Kafka's `validateOffsetFetch` (OffsetFetch v9+): raises ApiError if refused."""
        ...

    def offset_delete_error(self, group: Any) -> ErrorCode | None:
        """Kafka's `validateOffsetDelete`: why OffsetDelete refuses the group, or None."""
        ...

    def validate_offset_commit(self, group: Any, image: MetadataImage, member_id: str, instance_id: str | None,
                               generation: int, api_version: int) -> PartitionCheck:
        """Kafka's `validateOffsetCommit` (offsets/commit_validation.py): raises ApiError for a
        group-level refusal, else returns the per-partition check."""
        ...

    def offset_commit_timers(self, group: Any, member_id: str, now_ms: int) -> list[TimerOp]:
        """Timers an accepted commit re-arms (a classic member's commit proves it alive)."""
        ...


_BY_CLASS: dict[type, GroupType] = {}


def register(group_class: type, group_type: GroupType) -> None:
    if group_class in _BY_CLASS or any(t.name == group_type.name for t in _BY_CLASS.values()):
        raise ValueError(f"group type {group_type.name!r} ({group_class.__name__}) is registered twice")
    _BY_CLASS[group_class] = group_type


def group_type(group: Any) -> GroupType:
    try:
        return _BY_CLASS[type(group)]
    except KeyError:
        raise TypeError(f"{type(group).__name__} is not a registered group type") from None


def group_type_of(group_class: type) -> GroupType:
    return _BY_CLASS[group_class]


def registered() -> dict[type, GroupType]:
    return dict(_BY_CLASS)


def _commit_time(o: OffsetAndMetadata) -> int:
    return o.commit_timestamp


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
        return _commit_time

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
                               instance_id: str | None, generation: int, api_version: int) -> PartitionCheck:
        return validate_consumer_commit(image, group, member_id, generation, api_version)

    def offset_commit_timers(self, group: ConsumerGroup, member_id: str, now_ms: int) -> list[TimerOp]:
        return []   # the heartbeat alone keeps a consumer-group member's session


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
        from ..protocol.consumer_protocol import MalformedProtocolData, decode_subscription
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
            return _commit_time  # a simple group: only commits count
        if group.state is ClassicGroupState.EMPTY:
            state_ts = group.state_timestamp_ms
            return (lambda o: state_ts) if state_ts >= 0 else _commit_time
        if group.protocol_type == "consumer" and group.state is ClassicGroupState.STABLE:
            return _commit_time
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
                               instance_id: str | None, generation: int, api_version: int) -> PartitionCheck:
        validate_classic_commit(group, member_id, instance_id, generation, transactional=False)
        return ACCEPT_ALL

    def offset_commit_timers(self, group: ClassicGroup, member_id: str, now_ms: int) -> list[TimerOp]:
        """`rescheduleClassicGroupMemberHeartbeat`: a commit proves the member is alive."""
        member = group.members.get(member_id)
        if member is None or group.state not in (ClassicGroupState.STABLE, ClassicGroupState.PREPARING_REBALANCE):
            return []
        return [ScheduleTimer(heartbeat_key(group.group_id, member_id), now_ms + member.session_timeout_ms)]


register(ConsumerGroup, ConsumerGroupType())
register(ClassicGroup, ClassicGroupType())
