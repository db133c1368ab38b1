"""KIP-848 consumer group model: members, target assignment and derived indexes.

Only replay (coordinator/group/replay.py) mutates these objects. Request handlers
read them and describe changes as records. Members are treated as immutable
values: an update builds a new member with `dataclasses.replace`.
"""
from __future__ import annotations

import base64
import enum
import logging
import uuid
from collections import Counter
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from .assignor_index import AssignorIndex

if TYPE_CHECKING:
    from records import ClassicMemberMetadata

    from ...assignors.partitions import Partitions

_log = logging.getLogger("kcoord.group")

# topic id -> {partition: assignment epoch} (KIP-1251 keeps one epoch per owned partition)
Assignment = dict[uuid.UUID, dict[int, int]]
# topic id -> partitions, as produced by the server-side assignors
TargetAssignment = dict[uuid.UUID, "Partitions"]

# Members are immutable values whose assignments are replaced, never changed in place, so
# every empty assignment can share one read-only mapping (10,000 idle members would
# otherwise hold 30,000 empty dicts).
EMPTY_ASSIGNMENT: Assignment = MappingProxyType({})  # type: ignore[assignment]


def new_member_id() -> str:
    """Kafka's `Uuid.randomUuid().toString()`: 16 random bytes in URL-safe base64 without
    padding, never starting with '-' (it would read as a command-line flag)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


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
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ClientAssignorSpec:
    """Seed 000 (modern/client_assignment.py has the rules): one entry of a member's ClientAssignors
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


@dataclass(slots=True)
class ConsumerGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str = ""
    server_assignor: str | None = None
    # Non-None exactly when the member speaks the classic protocol (KIP-848 migration).
    classic_member_metadata: ClassicMemberMetadata | None = None
    assigned_partitions: Assignment = field(default_factory=lambda: EMPTY_ASSIGNMENT)
    partitions_pending_revocation: Assignment = field(default_factory=lambda: EMPTY_ASSIGNMENT)
    # Seed 000 client-side assignors (modern/client_assignment.py; record tags >= 1000, records/
    # _client_assignor.py). None: the member brought none (every real Kafka client).
    client_assignors: tuple[ClientAssignorSpec, ...] | None = None
    # The Assignment.Error and metadata of the client-computed target this member reached
    # (copied from the target when it reaches the target epoch; defaults in server mode).
    assignment_error: int = 0
    assignment_metadata_version: int = -1
    assignment_metadata_bytes: bytes | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic_member_metadata is not None

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch

    def metadata_equals(self, other: ConsumerGroupMember) -> bool:
        """True when a ConsumerGroupMemberMetadata record would carry the same fields."""
        return (self.instance_id == other.instance_id and self.rack_id == other.rack_id
                and self.rebalance_timeout_ms == other.rebalance_timeout_ms
                and self.client_id == other.client_id and self.client_host == other.client_host
                and self.subscribed_topic_names == other.subscribed_topic_names
                and self.subscribed_topic_regex == other.subscribed_topic_regex
                and self.server_assignor == other.server_assignor
                and self.classic_member_metadata == other.classic_member_metadata
                and self.client_assignors == other.client_assignors)

    def assignment_equals(self, other: ConsumerGroupMember) -> bool:
        return (self.member_epoch == other.member_epoch
                and self.previous_member_epoch == other.previous_member_epoch
                and self.state is other.state
                and self.assigned_partitions == other.assigned_partitions
                and self.partitions_pending_revocation == other.partitions_pending_revocation
                and self.assignment_error == other.assignment_error
                and self.assignment_metadata_version == other.assignment_metadata_version
                and self.assignment_metadata_bytes == other.assignment_metadata_bytes)


@dataclass(slots=True)
class ResolvedRegularExpression:
    topics: frozenset[str]
    version: int
    timestamp_ms: int


class ConsumerGroup:
    """A consumer group as `ModernGroup`/`ConsumerGroup` hold it, plus indexes kept on replay."""

    group_type = "consumer"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        # KAFKA-20268 (4.3): groups start at epoch 1 with target assignment (1, 0),
        # so the first member's join bumps the group to epoch 2.
        self.group_epoch = 1
        self.metadata_hash = 0
        self.assignment_epoch = 1
        self.assignment_timestamp_ms = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}
        self.target_assignment: dict[str, TargetAssignment] = {}
        # topic id -> {partition -> epoch of the member currently owning it}; guarantees a
        # single owner (KIP-848: a partition is only given once its previous owner released it).
        self.current_partition_epoch: dict[uuid.UUID, dict[int, int]] = {}
        self.subscribed_topic_names: Counter[str] = Counter()
        self.regex_subscribers: Counter[str] = Counter()
        self.resolved_regexes: dict[str, ResolvedRegularExpression] = {}
        self.server_assignors: Counter[str] = Counter()
        self.num_classic_members = 0
        self.has_partition_metadata_record = False
        # Set when the metadata image changed for a subscribed topic; the next heartbeat
        # recomputes the metadata hash (Kafka: requestMetadataRefresh).
        self.metadata_refresh_requested = False
        self.last_regex_refresh_ms = 0
        # Seed 000 client-side assignors. Persisted (tags >= 1000): the assigner's metadata
        # per member (version, bytes), its Error, and the client assignor that computed the
        # target (None: the server assignor did; the metadata is then not handed out).
        # The members' lists, aggregated (replay only); `.listed` counts the members with one.
        self.client_assignor_index = AssignorIndex()
        self.target_metadata: dict[str, tuple[int, bytes | None]] = {}
        self.assignment_error = 0
        self.client_assignor_name: str | None = None

    # ------------------------------------------------------------------ queries
    @property
    def state(self) -> ConsumerGroupState:
        """`ConsumerGroup.maybeUpdateGroupState`, evaluated on demand."""
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

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id)
        return self.members.get(member_id) if member_id is not None else None

    def target_of(self, member_id: str) -> TargetAssignment:
        return self.target_assignment.get(member_id, {})

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.current_partition_epoch.get(topic_id, {}).get(partition, -1)

    def preferred_server_assignor(self, default: str, overlay: dict[str, str | None] | None = None) -> str:
        """KAFKA-20434: the most common non-null ServerAssignor among members, else the default.
        `overlay` replaces some members' assignor (member_id -> assignor or None) for what-if checks."""
        counts = self.server_assignors
        if overlay:
            counts = Counter(counts)
            for member_id, new in overlay.items():
                old = self.members[member_id].server_assignor if member_id in self.members else None
                if old is not None:
                    counts[old] -= 1
                if new is not None:
                    counts[new] += 1
        best, best_count = default, 0
        for name, count in counts.items():
            if count > best_count:
                best, best_count = name, count
        return best

    def all_members_use_classic_protocol_except(self, member_ids: set[str]) -> bool:
        return all(m.uses_classic_protocol for mid, m in self.members.items() if mid not in member_ids)

    # ---------------------------------------------------------- replay helpers
    def put_member(self, member: ConsumerGroupMember) -> None:
        old = self.members.get(member.member_id)
        if old is not None:
            self._unindex_member(old)
        self.members[member.member_id] = member
        self._index_member(member)

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is not None:
            self._unindex_member(old)

    def _index_member(self, m: ConsumerGroupMember) -> None:
        self.subscribed_topic_names.update(m.subscribed_topic_names)
        if m.subscribed_topic_regex:
            self.regex_subscribers[m.subscribed_topic_regex] += 1
        if m.server_assignor is not None:
            self.server_assignors[m.server_assignor] += 1
        if m.instance_id is not None:
            self.static_members[m.instance_id] = m.member_id
        if m.uses_classic_protocol:
            self.num_classic_members += 1
        self.client_assignor_index.add(m.client_assignors)
        self._add_partition_epochs(m.assigned_partitions, m.member_epoch)
        self._add_partition_epochs(m.partitions_pending_revocation, m.member_epoch)

    def _unindex_member(self, m: ConsumerGroupMember) -> None:
        self.subscribed_topic_names.subtract(m.subscribed_topic_names)
        for name in m.subscribed_topic_names:
            if self.subscribed_topic_names[name] <= 0:
                del self.subscribed_topic_names[name]
        if m.subscribed_topic_regex:
            self.regex_subscribers[m.subscribed_topic_regex] -= 1
            if self.regex_subscribers[m.subscribed_topic_regex] <= 0:
                del self.regex_subscribers[m.subscribed_topic_regex]
        if m.server_assignor is not None:
            self.server_assignors[m.server_assignor] -= 1
            if self.server_assignors[m.server_assignor] <= 0:
                del self.server_assignors[m.server_assignor]
        if m.instance_id is not None and self.static_members.get(m.instance_id) == m.member_id:
            del self.static_members[m.instance_id]
        if m.uses_classic_protocol:
            self.num_classic_members -= 1
        self.client_assignor_index.remove(m.client_assignors)
        self._remove_partition_epochs(m.assigned_partitions, m.member_epoch)
        self._remove_partition_epochs(m.partitions_pending_revocation, m.member_epoch)

    def _add_partition_epochs(self, assignment: Assignment, epoch: int) -> None:
        for topic_id, parts in assignment.items():
            owners = self.current_partition_epoch.setdefault(topic_id, {})
            for p in parts:
                prev = owners.get(p)
                if prev is not None and prev >= epoch:
                    # Two owners of one partition: Kafka throws and fails the whole load. A
                    # compacted log can reach this; keep serving and say so loudly instead.
                    _log.error("group %s: partition %s-%d is owned at epoch %d and assigned again at "
                               "epoch %d", self.group_id, topic_id, p, prev, epoch)
                owners[p] = epoch

    def _remove_partition_epochs(self, assignment: Assignment, epoch: int) -> None:
        for topic_id, parts in assignment.items():
            owners = self.current_partition_epoch.get(topic_id)
            if owners is None:
                continue
            for p in parts:
                if owners.get(p) == epoch:
                    del owners[p]
            if not owners:
                del self.current_partition_epoch[topic_id]

    def set_target(self, member_id: str, target: TargetAssignment) -> None:
        self.target_assignment[member_id] = target

    def remove_target(self, member_id: str) -> None:
        self.target_assignment.pop(member_id, None)
        self.target_metadata.pop(member_id, None)


class IllegalStateError(Exception):
    """A record contradicts the state it is replayed onto (Kafka: IllegalStateException)."""
