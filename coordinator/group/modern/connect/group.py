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

from dataclasses import dataclass, field
from types import MappingProxyType

from ..client_assignment import ClientAssignment
from ..group import ClientAssignorSpec, MemberState, ModernGroup, ModernMember, add_owner_epochs, remove_owner_epochs

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
class ConnectMember(ModernMember):
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


class ConnectGroup(ModernGroup[ConnectMember]):
    group_type = "connect"

    def __init__(self, group_id: str) -> None:
        super().__init__(group_id)
        self.assignment_error = 0
        self.assignor_name: str | None = None
        self.targets: dict[str, ConnectTarget] = {}
        # connector -> {task -> epoch of the worker owning it}: one owner per unit.
        self.unit_owner_epoch: dict[str, dict[int, int]] = {}
        self.client_assignment = ClientAssignment()

    # ------------------------------------------------------------------ queries
    def target_of(self, member_id: str) -> ConnectTarget:
        return self.targets.get(member_id, EMPTY_TARGET)

    def unit_epoch(self, connector: str, task: int) -> int:
        return self.unit_owner_epoch.get(connector, {}).get(task, -1)

    def assignor_lists(self) -> dict[str, tuple[ClientAssignorSpec, ...]]:
        return {m.member_id: m.client_assignors for m in self.members.values()}

    # ---------------------------------------------------------- replay helpers
    def _index(self, m: ConnectMember) -> None:
        for units in (m.assigned, m.pending_revocation):
            add_owner_epochs(self.unit_owner_epoch, units, m.member_epoch, self.group_id, "connector task")

    def _unindex(self, m: ConnectMember) -> None:
        for units in (m.assigned, m.pending_revocation):
            remove_owner_epochs(self.unit_owner_epoch, units, m.member_epoch)
