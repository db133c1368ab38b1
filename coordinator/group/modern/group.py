"""What the modern group types share (Kafka: `ModernGroup`, `ModernGroupMember`, `MemberState`,
`Assignment`): members that heartbeat with epochs towards a target, a group epoch and an
assignment epoch, static members, and one owner per assigned unit at a time.

Streams groups will not fit this base: in Kafka, `StreamsGroup` implements `Group` directly
(tasks, not partitions; process ids; a topology). A streams type reuses only the generic
pieces (epoch fencing, the assignment-epoch commit validator, timers), not this class.

Rules:
- only replay changes a group: `put_member` and `remove_member` are the only writers of
  `members`, and each subclass keeps its own indexes in `_index`/`_unindex`;
- members are immutable values (`dataclasses.replace`), so indexes are updated by removing
  the old value and adding the new one;
- an owner index maps a key (topic id, connector) to {unit: epoch of its owner}: a unit is
  given only once its previous owner released it, and a second owner is logged, not fatal
  (a compacted log can reach it; Kafka fails the whole load there).
"""
from __future__ import annotations

import enum
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from kio.schema.errors import ErrorCode

from ..errors import ApiError, unknown_member

_log = logging.getLogger("kcoord.group")

# topic id -> {partition: assignment epoch} (KIP-1251 keeps one epoch per owned partition);
# a connect group keys the same shape by connector name, task -> epoch.
Assignment = dict[uuid.UUID, dict[int, int]]

# Members are immutable values whose assignments are replaced, never changed in place, so
# every empty assignment can share one read-only mapping (10,000 idle members would
# otherwise hold 30,000 empty dicts).
EMPTY_ASSIGNMENT: Assignment = MappingProxyType({})  # type: ignore[assignment]


class MemberState(enum.IntEnum):
    """`MemberState`: byte values as written in ConsumerGroupCurrentMemberAssignmentValue.State."""
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @classmethod
    def from_byte(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


class ConsumerGroupState(enum.Enum):
    """Kafka's `ConsumerGroup.ConsumerGroupState`; connect groups show the same states."""
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ClientAssignorSpec:
    """Client-side assignors (modern/client_assignment.py has the rules): one entry of a member's ClientAssignors
    (000:L439-454; int16 versions, docs/design/client-assignors-spec.md §7 #2)."""
    name: str
    minimum_version: int
    maximum_version: int
    version: int
    reason: int = 0
    metadata: bytes = b""

    def covers(self, version: int) -> bool:
        return self.minimum_version <= version <= self.maximum_version

    def without_reason(self) -> ClientAssignorSpec:
        return ClientAssignorSpec(self.name, self.minimum_version, self.maximum_version, self.version,
                                  0, self.metadata)


class ModernMember:
    """Kafka's `ModernGroupMember`: what a reconciled member is (a mixin of slotted dataclasses)."""
    __slots__ = ()
    member_id: str
    member_epoch: int
    instance_id: str | None
    state: MemberState

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch


M = TypeVar("M", bound=ModernMember)


class ModernGroup(Generic[M]):
    """Kafka's `ModernGroup`: epochs, members, static members, and the state derived from them."""

    group_type = ""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        # KAFKA-20268 (4.3): groups start at epoch 1 with target assignment (1, 0),
        # so the first member's join bumps the group to epoch 2.
        self.group_epoch = 1
        self.assignment_epoch = 1
        self.assignment_timestamp_ms = 0
        self.members: dict[str, M] = {}
        self.static_members: dict[str, str] = {}

    # ------------------------------------------------------------------ queries
    @property
    def state(self) -> ConsumerGroupState:
        """`maybeUpdateGroupState`, evaluated on demand."""
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if not m.is_reconciled_to(self.assignment_epoch):
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def is_empty(self) -> bool:
        return not self.members

    def static_member(self, instance_id: str) -> M | None:
        member_id = self.static_members.get(instance_id)
        return self.members.get(member_id) if member_id is not None else None

    def leaving_member(self, member_id: str, instance_id: str | None, noun: str = "member") -> M:
        """The member a leave heartbeat (epoch -1 or -2) names; a static one must be the
        instance's current member (KIP-345)."""
        if instance_id is None:
            member = self.members.get(member_id)
            if member is None:
                raise unknown_member(self.group_id, member_id)
            return member
        member = self.static_member(instance_id)
        if member is None:
            raise ApiError(ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown.")
        if member.member_id != member_id:
            raise ApiError(ErrorCode.fenced_instance_id, f"Static {noun} {member_id} with instance id "
                                                         f"{instance_id} was fenced by {noun} {member.member_id}.")
        return member

    # ---------------------------------------------------------- replay helpers
    def put_member(self, member: M) -> None:
        old = self.members.get(member.member_id)
        if old is not None:   # replaced in place: the members keep their order
            if old.instance_id is not None and self.static_members.get(old.instance_id) == old.member_id:
                del self.static_members[old.instance_id]
            self._unindex(old)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._index(member)

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is not None:
            if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
                del self.static_members[old.instance_id]
            self._unindex(old)

    def _index(self, m: M) -> None:
        """The subclass's own indexes of a member just put (replay's hot path: no super call)."""

    def _unindex(self, m: M) -> None:
        """The subclass's own indexes of a member being replaced or removed."""


def add_owner_epochs(owners_by_key: dict[Any, dict[int, int]], assignment: Mapping[Any, Any], epoch: int,
                     group_id: str, unit: str) -> None:
    """Record `epoch` as the owner of every unit in `assignment` (a second owner is logged)."""
    for key, units in assignment.items():
        owners = owners_by_key.setdefault(key, {})
        for u in units:
            prev = owners.get(u)
            if prev is not None and prev >= epoch:
                # Two owners of one unit: Kafka throws and fails the whole load. A compacted
                # log can reach this; keep serving and say so loudly instead.
                _log.error("group %s: %s %s-%d is owned at epoch %d and assigned again at epoch %d",
                           group_id, unit, key, u, prev, epoch)
            owners[u] = epoch


def remove_owner_epochs(owners_by_key: dict[Any, dict[int, int]], assignment: Mapping[Any, Any],
                        epoch: int) -> None:
    """Release the units of `assignment` that `epoch` still owns."""
    for key, units in assignment.items():
        owners = owners_by_key.get(key)
        if owners is None:
            continue
        for u in units:
            if owners.get(u) == epoch:
                del owners[u]
        if not owners:
            del owners_by_key[key]
