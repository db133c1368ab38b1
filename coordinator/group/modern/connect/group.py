"""The `connect` group model (docs/design/connect-groups-spec.md §2): workers, targets, units.

Rules of this module:
- Only replay (modern/connect/replay.py) changes these objects; handlers read them and describe
  changes as records. Members are immutable values replaced with `dataclasses.replace`.
- A *unit* is a connector (task -1, Connect's `CONNECTOR_TASK`) or one of its tasks.
  `Units` = {connector: {task: assignment epoch}}: the shape of a consumer member's
  `Assignment` (topic -> partition -> epoch), so reconciliation.CurrentAssignmentBuilder
  is reused unchanged (modern/connect/reconcile.py) and revoke-before-assign comes with it.
- Epochs start at 1 as Kafka 4.3's consumer groups do (KAFKA-20268): with 0, a reconciled
  worker would heartbeat epoch 0, which means "join" (docs/design/connect-groups-spec.md §2).
- `client_assignment` (the round in flight, modern/client_assignment.py) is soft state, like a
  consumer group's `metadata_refresh_requested`: no record holds it, a reload loses it
  and `on_loaded` asks again (docs/design/client-assignors-spec.md §3).
- The group state is the consumer group's (Empty, Assigning, Reconciling, Stable):
  ListGroups shows it with group type and protocol type "connect".
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from types import MappingProxyType

from ..client_assignment import ClientAssignment, ClientAssignorSpec
from ..consumer.group import ConsumerGroupState, MemberState

_log = logging.getLogger("kcoord.group")

CONNECTOR_TASK = -1

# connector -> {task (CONNECTOR_TASK for the connector) -> epoch it was assigned at}
Units = dict[str, dict[int, int]]
# connector -> tasks, as an assigner installs them
TargetUnits = dict[str, frozenset[int]]
EMPTY_UNITS: Units = MappingProxyType({})  # type: ignore[assignment]


@dataclass(frozen=True, slots=True)
class ConnectTarget:
    """One worker's target: its units, and the assigner's per-worker metadata (for
    Connect, a ConnectProtocol Assignment: leader, leader url, config offset, delay)."""
    units: TargetUnits = field(default_factory=dict)
    version: int = -1
    metadata: bytes = b""


EMPTY_TARGET = ConnectTarget()


@dataclass(slots=True)
class ConnectMember:
    member_id: str
    instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    client_assignors: tuple[ClientAssignorSpec, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Units = field(default_factory=lambda: EMPTY_UNITS)
    pending_revocation: Units = field(default_factory=lambda: EMPTY_UNITS)
    # Copied from the target when the worker reaches the target's epoch (docs/design/client-assignors-spec.md §3).
    error: int = 0
    metadata_version: int = -1
    metadata: bytes = b""

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch

    def metadata_equals(self, other: ConnectMember) -> bool:
        """True when a ConnectGroupMemberMetadata record would carry the same fields."""
        return (self.instance_id == other.instance_id and self.client_id == other.client_id
                and self.client_host == other.client_host and self.rebalance_timeout_ms == other.rebalance_timeout_ms
                and self.client_assignors == other.client_assignors)

    def assignment_equals(self, other: ConnectMember) -> bool:
        return (self.member_epoch == other.member_epoch and self.previous_member_epoch == other.previous_member_epoch
                and self.state is other.state and self.assigned == other.assigned
                and self.pending_revocation == other.pending_revocation and self.error == other.error
                and self.metadata_version == other.metadata_version and self.metadata == other.metadata)


class ConnectGroup:
    group_type = "connect"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 1
        self.assignment_epoch = 1
        self.assignment_error = 0
        self.assignor_name: str | None = None
        self.assignment_timestamp_ms = 0
        self.members: dict[str, ConnectMember] = {}
        self.static_members: dict[str, str] = {}
        self.targets: dict[str, ConnectTarget] = {}
        # connector -> {task -> epoch of the worker owning it}: one owner per unit.
        self.unit_owner_epoch: dict[str, dict[int, int]] = {}
        self.client_assignment = ClientAssignment()

    # ------------------------------------------------------------------ queries
    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def is_empty(self) -> bool:
        return not self.members

    def static_member(self, instance_id: str) -> ConnectMember | None:
        member_id = self.static_members.get(instance_id)
        return self.members.get(member_id) if member_id is not None else None

    def target_of(self, member_id: str) -> ConnectTarget:
        return self.targets.get(member_id, EMPTY_TARGET)

    def unit_epoch(self, connector: str, task: int) -> int:
        return self.unit_owner_epoch.get(connector, {}).get(task, -1)

    def assignor_lists(self) -> dict[str, tuple[ClientAssignorSpec, ...]]:
        return {m.member_id: m.client_assignors for m in self.members.values()}

    # ---------------------------------------------------------- replay helpers
    def put_member(self, member: ConnectMember) -> None:
        old = self.members.get(member.member_id)
        if old is not None:
            self._unindex(old)
        self.members[member.member_id] = member
        self._index(member)

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is not None:
            self._unindex(old)

    def _index(self, m: ConnectMember) -> None:
        if m.instance_id is not None:
            self.static_members[m.instance_id] = m.member_id
        for units in (m.assigned, m.pending_revocation):
            for connector, tasks in units.items():
                owners = self.unit_owner_epoch.setdefault(connector, {})
                for t in tasks:
                    prev = owners.get(t)
                    if prev is not None and prev >= m.member_epoch:
                        # Two owners of one unit: say so loudly and keep serving (as the
                        # consumer group does for a partition, modern/consumer/group.py).
                        _log.error("connect group %s: unit %s/%d is owned at epoch %d and assigned again at "
                                   "epoch %d", self.group_id, connector, t, prev, m.member_epoch)
                    owners[t] = m.member_epoch

    def _unindex(self, m: ConnectMember) -> None:
        if m.instance_id is not None and self.static_members.get(m.instance_id) == m.member_id:
            del self.static_members[m.instance_id]
        for units in (m.assigned, m.pending_revocation):
            for connector, tasks in units.items():
                owners = self.unit_owner_epoch.get(connector)
                if owners is None:
                    continue
                for t in tasks:
                    if owners.get(t) == m.member_epoch:
                        del owners[t]
                if not owners:
                    del self.unit_owner_epoch[connector]
