"""The toy group's model, its two record types and their replay rules, and its `GroupType`."""
from __future__ import annotations

from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from coordinator.group.group_types import ACCEPT_ALL
from records import CoordinatorRecord


@dataclass
class ToyGroup:
    group_id: str
    members: dict[str, int] = field(default_factory=dict)   # member id -> its heartbeat count

    def is_empty(self) -> bool:
        return not self.members


@dataclass(frozen=True)
class ToyGroupKey:
    group_id: str
    record_type = 1100      # private types, as the connect group's 1000-1004


@dataclass(frozen=True)
class ToyGroupValue:
    pass


@dataclass(frozen=True)
class ToyMemberKey:
    group_id: str
    member_id: str
    record_type = 1101


@dataclass(frozen=True)
class ToyMemberValue:
    heartbeats: int


def group_record(group_id: str, tombstone: bool = False) -> CoordinatorRecord:
    return CoordinatorRecord(ToyGroupKey(group_id), None if tombstone else ToyGroupValue(), value_version=0)


def member_record(group_id: str, member_id: str, heartbeats: int | None) -> CoordinatorRecord:
    """The member's record; `heartbeats` None writes its tombstone."""
    value = None if heartbeats is None else ToyMemberValue(heartbeats)
    return CoordinatorRecord(ToyMemberKey(group_id, member_id), value, value_version=0)


def replay_group(replayer, key: ToyGroupKey, value: ToyGroupValue | None, offset: int, producer_id: int) -> None:
    """The group record creates the group; its tombstone deletes it (an empty group stays)."""
    if value is not None:
        replayer.group_as(key.group_id, ToyGroup, create=True)
    elif isinstance(replayer.groups.get(key.group_id), ToyGroup):
        del replayer.groups[key.group_id]


def replay_member(replayer, key: ToyMemberKey, value: ToyMemberValue | None, offset: int, producer_id: int) -> None:
    group = replayer.group_as(key.group_id, ToyGroup, create=False)
    if group is None:
        return   # a tombstone after its group's, or a record of a deleted group
    if value is None:
        group.members.pop(key.member_id, None)
    else:
        group.members[key.member_id] = value.heartbeats


class ToyGroupType:
    name = "toy"

    def state(self, group: ToyGroup) -> str:
        return "Empty" if group.is_empty() else "Stable"

    def protocol_type(self, group: ToyGroup) -> str:
        return "toy"

    def subscribed_topics(self, group: ToyGroup) -> set[str]:
        return set()

    def tombstones(self, group: ToyGroup) -> list[CoordinatorRecord]:
        return [member_record(group.group_id, m, None) for m in group.members] + [group_record(group.group_id, True)]

    def delete_error(self, group: ToyGroup) -> ErrorCode | None:
        return None if group.is_empty() else ErrorCode.non_empty_group

    def offset_expiration_base(self, group: ToyGroup):
        return None

    def metadata_expires(self, group: ToyGroup) -> bool:
        return False

    def validate_offset_fetch(self, group: ToyGroup, member_id, member_epoch) -> None:
        return None

    def offset_delete_error(self, group: ToyGroup) -> None:
        return None

    def validate_offset_commit(self, group: ToyGroup, image, member_id, instance_id, generation, api_version,
                               transactional=False):
        return ACCEPT_ALL

    def offset_commit_timers(self, group: ToyGroup, member_id: str, now_ms: int) -> list:
        return []
