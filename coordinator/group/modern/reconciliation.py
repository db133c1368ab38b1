"""Member reconciliation: move a member's current assignment towards its target.

The rules are Kafka 4.3's `CurrentAssignmentBuilder` (docs/design/kafka-facts.md §4.4):
- a partition leaves a member first (UNREVOKED_PARTITIONS) and is only given to the
  next member once its current owner released it (UNRELEASED_PARTITIONS), so no
  partition is ever owned twice (KIP-848 "incremental reconciliation");
- KIP-1251: every owned partition remembers the epoch at which it was assigned, so
  offset commits can be fenced per partition.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from kio.schema.errors import ErrorCode

from ..errors import ApiError
from .group import EMPTY_ASSIGNMENT, Assignment, MemberState

# topic id -> partitions the member says it owns; None = not sent in this heartbeat
OwnedPartitions = Mapping[uuid.UUID, frozenset[int]] | None


class Reconciled(Protocol):
    """What the builder reads of a member (a consumer group member; a connect worker lends
    its units under these names, modern/connect/reconcile.py); a dataclass, for `replace`."""
    __dataclass_fields__: ClassVar[dict[str, Any]]
    member_id: str
    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned_partitions: Assignment
    partitions_pending_revocation: Assignment


R = TypeVar("R", bound=Reconciled)


class CurrentAssignmentBuilder(Generic[R]):
    def __init__(self, member: R, *, target_epoch: int,
                 target: Mapping[uuid.UUID, Collection[int]], subscribed_topic_ids: frozenset[uuid.UUID],
                 partition_epoch: Callable[[uuid.UUID, int], int],
                 owned: OwnedPartitions, subscription_changed: bool = False) -> None:
        self.member = member
        self.target_epoch = target_epoch
        self.target = target
        self.subscribed = subscribed_topic_ids
        self.partition_epoch = partition_epoch
        self.owned = owned
        self.subscription_changed = subscription_changed

    def build(self) -> R:
        m = self.member
        if m.state is MemberState.STABLE:
            if m.member_epoch != self.target_epoch:
                return self._compute_next(m.member_epoch)
            if self.subscription_changed:
                return self._update_current()
            return m
        if m.state is MemberState.UNREVOKED_PARTITIONS:
            if self._owns_any(m.partitions_pending_revocation):
                return self._update_current() if self.subscription_changed else m
            return self._compute_next(m.member_epoch)
        if m.state is MemberState.UNRELEASED_PARTITIONS:
            return self._compute_next(m.member_epoch)
        # UNKNOWN: a state written by a newer coordinator. Fence the member so it rejoins
        # with nothing and reconciles from scratch.
        if self.owned is None or any(self.owned.values()):
            raise ApiError(ErrorCode.fenced_member_epoch,
                           f"The member {m.member_id} is in an unknown state; it must rejoin.")
        return self._compute_next(self.target_epoch)

    def _owns_any(self, partitions: Assignment) -> bool:
        if self.owned is None:
            # An owned list that was not sent means "unchanged": assume still owned.
            return True
        for topic_id, parts in partitions.items():
            owned = self.owned.get(topic_id)
            if owned and any(p in owned for p in parts):
                return True
        return False

    def _compute_next(self, member_epoch: int) -> R:
        m = self.member
        assigned = m.assigned_partitions
        pending_own = m.partitions_pending_revocation
        new_assigned: Assignment = {}
        revoke: Assignment = {}
        to_assign: dict[uuid.UUID, list[int]] = {}
        has_unreleased = False
        for topic_id in set(self.target) | set(assigned):
            target_parts = self.target.get(topic_id, ()) if topic_id in self.subscribed else ()
            current = assigned.get(topic_id, {})
            kept = {p: e for p, e in current.items() if p in target_parts}
            if kept:
                new_assigned[topic_id] = kept
            gone = {p: e for p, e in current.items() if p not in kept}
            if gone:
                revoke[topic_id] = gone
            own_pending = pending_own.get(topic_id, {})
            assignable = []
            for p in target_parts:
                if p in kept:
                    continue
                # A partition still owned by someone else is unreleased, unless the owner is this
                # member itself (it is pending revocation here: only one owner exists at a time).
                if self.partition_epoch(topic_id, p) != -1 and p not in own_pending:
                    has_unreleased = True
                    continue
                assignable.append(p)
            if assignable:
                to_assign[topic_id] = assignable

        if revoke and self._owns_any(revoke):
            return replace(m, state=MemberState.UNREVOKED_PARTITIONS,
                           previous_member_epoch=m.member_epoch, member_epoch=member_epoch,
                           assigned_partitions=new_assigned, partitions_pending_revocation=revoke)
        if to_assign:
            for topic_id, parts in to_assign.items():
                epochs = dict(new_assigned.get(topic_id, {}))
                for p in parts:
                    epochs[p] = self.target_epoch
                new_assigned[topic_id] = epochs
        state = MemberState.UNRELEASED_PARTITIONS if has_unreleased else MemberState.STABLE
        return replace(m, state=state, previous_member_epoch=m.member_epoch,
                       member_epoch=self.target_epoch, assigned_partitions=new_assigned or EMPTY_ASSIGNMENT,
                       partitions_pending_revocation=EMPTY_ASSIGNMENT)

    def _update_current(self) -> R:
        """A subscription change inside the same epoch: drop unsubscribed topics at once."""
        m = self.member
        assigned = m.assigned_partitions
        if not self.subscribed and not m.partitions_pending_revocation:
            new_assigned: Assignment = {}
            pending = assigned
        else:
            new_assigned = assigned
            pending = {t: dict(ps) for t, ps in m.partitions_pending_revocation.items()}
            for topic_id, parts in assigned.items():
                if topic_id not in self.subscribed:
                    if new_assigned is assigned:
                        new_assigned = dict(assigned)
                    del new_assigned[topic_id]
                    pending.setdefault(topic_id, {}).update(parts)
        if new_assigned is assigned:
            return m
        if pending and self._owns_any(pending):
            return replace(m, state=MemberState.UNREVOKED_PARTITIONS,
                           assigned_partitions=new_assigned, partitions_pending_revocation=pending)
        return replace(m, assigned_partitions=new_assigned)
