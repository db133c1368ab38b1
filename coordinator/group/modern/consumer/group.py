"""KIP-848 consumer group model: members, target assignment and derived indexes.

The base (epochs, members, static members, state, one owner per partition) is
modern/group.py's `ModernGroup`, shared with connect groups. Only replay
(coordinator/group/replay.py) mutates these objects. Request handlers read them and
describe changes as records. Members are treated as immutable values: an update builds
a new member with `dataclasses.replace`.
"""
from __future__ import annotations

import base64
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...errors import IllegalStateError  # noqa: F401 (re-exported: replay raises it)
from ..group import (  # noqa: F401 (Assignment, ConsumerGroupState, MemberState: re-exported)
    EMPTY_ASSIGNMENT,
    Assignment,
    ClientAssignorSpec,
    ConsumerGroupState,
    MemberState,
    ModernGroup,
    ModernMember,
    add_owner_epochs,
    remove_owner_epochs,
)
from .assignor_index import AssignorIndex

if TYPE_CHECKING:
    from records import ClassicMemberMetadata

    from ...assignors.partitions import Partitions


# topic id -> partitions, as produced by the server-side assignors
TargetAssignment = dict[uuid.UUID, "Partitions"]


def new_member_id() -> str:
    """Kafka's `Uuid.randomUuid().toString()`: 16 random bytes in URL-safe base64 without
    padding, never starting with '-' (it would read as a command-line flag)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


@dataclass(slots=True)
class ConsumerGroupMember(ModernMember):
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
    # Client-side assignors (modern/client_assignment.py; record tags >= 1000, records/
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


class ConsumerGroup(ModernGroup[ConsumerGroupMember]):
    """A consumer group as `ModernGroup`/`ConsumerGroup` hold it, plus indexes kept on replay."""

    group_type = "consumer"

    def __init__(self, group_id: str) -> None:
        super().__init__(group_id)
        self.metadata_hash = 0
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
        # Members whose latest assignment went out in a heartbeat answer they have not yet
        # confirmed by reporting exactly those partitions as owned (heartbeat.py
        # `_resend_assignment`). Soft state, like the refresh flag: no record, empty after
        # a load; a member leaves it when it leaves the group.
        self.assignment_unconfirmed: set[str] = set()
        # Client-side assignors. Persisted (tags >= 1000): the assigner's metadata
        # per member (version, bytes), its Error, and the client assignor that computed the
        # target (None: the server assignor did; the metadata is then not handed out).
        # The members' lists, aggregated (replay only); `.listed` counts the members with one.
        self.client_assignor_index = AssignorIndex()
        self.target_metadata: dict[str, tuple[int, bytes | None]] = {}
        self.assignment_error = 0
        self.client_assignor_name: str | None = None

    # ------------------------------------------------------------------ queries
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
    def remove_member(self, member_id: str) -> None:
        super().remove_member(member_id)
        self.assignment_unconfirmed.discard(member_id)

    def _index(self, m: ConsumerGroupMember) -> None:
        self.subscribed_topic_names.update(m.subscribed_topic_names)
        if m.subscribed_topic_regex:
            self.regex_subscribers[m.subscribed_topic_regex] += 1
        if m.server_assignor is not None:
            self.server_assignors[m.server_assignor] += 1
        if m.uses_classic_protocol:
            self.num_classic_members += 1
        self.client_assignor_index.add(m.client_assignors)
        for assignment in (m.assigned_partitions, m.partitions_pending_revocation):
            add_owner_epochs(self.current_partition_epoch, assignment, m.member_epoch, self.group_id, "partition")

    def _unindex(self, m: ConsumerGroupMember) -> None:
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
        if m.uses_classic_protocol:
            self.num_classic_members -= 1
        self.client_assignor_index.remove(m.client_assignors)
        for assignment in (m.assigned_partitions, m.partitions_pending_revocation):
            remove_owner_epochs(self.current_partition_epoch, assignment, m.member_epoch)

    def set_target(self, member_id: str, target: TargetAssignment) -> None:
        self.target_assignment[member_id] = target

    def remove_target(self, member_id: str) -> None:
        self.target_assignment.pop(member_id, None)
        self.target_metadata.pop(member_id, None)
