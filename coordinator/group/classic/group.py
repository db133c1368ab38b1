"""Classic (JoinGroup/SyncGroup) group model.

Kafka keeps classic groups outside its timeline structures: handlers mutate their soft
state directly, and GroupMetadata records (type 2) only make the current generation
durable. On load a GroupMetadata record rebuilds a group as STABLE with members, or
EMPTY without (`GroupMetadataManager.replay(GroupMetadataValue)`), docs/design/kafka-facts.md §9.

Parked JoinGroup/SyncGroup requests are `Parked(token, answer)`: the runtime holds the
client's response until a later operation completes the token, in the request's version
(`answer`: JoinGroup's `JoinAnswer`, SyncGroup's response classes; classic/requests.py).
"""
from __future__ import annotations

import enum
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

_VALID_PREVIOUS = {
    "EMPTY": {"PREPARING_REBALANCE"},
    "PREPARING_REBALANCE": {"STABLE", "COMPLETING_REBALANCE", "EMPTY"},
    "COMPLETING_REBALANCE": {"PREPARING_REBALANCE"},
    "STABLE": {"COMPLETING_REBALANCE"},
}


class ClassicGroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class Parked:
    """A client request whose response is released later (Kafka: a parked future)."""
    token: int
    answer: Any


@dataclass(slots=True)
class ClassicGroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    # (protocol name, metadata bytes) in the member's order of preference.
    supported_protocols: list[tuple[str, bytes]] = field(default_factory=list)
    assignment: bytes = b""
    awaiting_join: Parked | None = None
    awaiting_sync: Parked | None = None
    # A member that joined but never got a JoinGroup response: it cannot heartbeat yet,
    # so its timer is Kafka's 5-minute new-member join timeout.
    is_new: bool = False

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, meta in self.supported_protocols:
            if name == protocol:
                return meta
        return b""

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.supported_protocols]

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.supported_protocols == protocols

    def has_satisfied_heartbeat(self) -> bool:
        """`ClassicGroupMember.hasSatisfiedHeartbeat`: members waiting in a rebalance count as
        alive; new members (never answered) do not."""
        if self.is_new:
            return False
        return self.awaiting_join is not None or self.awaiting_sync is not None


class ClassicGroup:
    group_type = "classic"

    def __init__(self, group_id: str, state: ClassicGroupState = ClassicGroupState.EMPTY,
                 now_ms: int = -1) -> None:
        self.group_id = group_id
        self.state = state
        self.previous_state: ClassicGroupState | None = None
        self.state_timestamp_ms = now_ms
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, ClassicGroupMember] = {}
        self.static_members: dict[str, str] = {}
        self.pending_join_members: set[str] = set()  # KIP-394: ids handed out, not yet joined
        self.pending_sync_members: set[str] = set()
        self.num_awaiting_join = 0
        self.supported_protocols: Counter[str] = Counter()
        # Set while an initial rebalance waits for joiners (group.initial.rebalance.delay.ms).
        self.new_member_added = False

    # ---------------------------------------------------------------- queries
    def is_empty(self) -> bool:
        return not self.members

    def is_simple(self) -> bool:
        """Exists only because offsets were committed for it (`isSimpleGroup`)."""
        return not self.protocol_type and not self.members and not self.pending_join_members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_join_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def can_rebalance(self) -> bool:
        return self.state in (ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE,
                              ClassicGroupState.EMPTY)

    def static_member_id(self, instance_id: str | None) -> str | None:
        return self.static_members.get(instance_id) if instance_id is not None else None

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """An empty group takes any non-empty protocol type and protocol list; otherwise the
        type must match and some protocol must be supported by every member."""
        if self.state is ClassicGroupState.EMPTY:
            return bool(protocol_type) and bool(protocols)
        n = len(self.members)
        return (protocol_type == (self.protocol_type or "")
                and any(self.supported_protocols[name] == n for name, _ in protocols))

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol among those every member
        supports; the most voted wins (ties: the earliest in the first member's list)."""
        n = len(self.members)
        candidates = [p for p, count in self.supported_protocols.items() if count == n]
        if not candidates:
            raise ValueError(f"no protocol supported by every member of group {self.group_id}")
        votes: Counter[str] = Counter()
        for m in self.members.values():
            votes[next(name for name, _ in m.supported_protocols if name in candidates)] += 1
        order = {name: i for i, name in enumerate(next(iter(self.members.values())).protocol_names())}
        return max(candidates, key=lambda p: (votes[p], -order.get(p, len(order))))

    def not_yet_rejoined_members(self) -> list[ClassicGroupMember]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    # ---------------------------------------------------------------- changes
    def transition_to(self, state: ClassicGroupState, now_ms: int) -> None:
        if state is not ClassicGroupState.DEAD and self.state.name not in _VALID_PREVIOUS[state.name]:
            raise IllegalClassicTransition(f"group {self.group_id}: {self.state.value} -> {state.value}")
        self.previous_state = self.state
        self.state = state
        self.state_timestamp_ms = now_ms

    def add(self, member: ClassicGroupMember, parked: Parked | None = None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        self.pending_join_members.discard(member.member_id)
        self.supported_protocols.update(member.protocol_names())
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        if parked is not None:
            member.awaiting_join = parked
            self.num_awaiting_join += 1

    def remove(self, member_id: str) -> ClassicGroupMember | None:
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self.supported_protocols.subtract(member.protocol_names())
        self.supported_protocols = +self.supported_protocols
        if member.awaiting_join is not None:
            self.num_awaiting_join -= 1
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            # Prefer a member that is rejoining; else any member (`maybeElectNewJoinedLeader`).
            self.leader_id = next((m.member_id for m in self.members.values() if m.awaiting_join is not None),
                                  next(iter(self.members), None))
        return member

    def update_member(self, member: ClassicGroupMember, protocols: list[tuple[str, bytes]],
                      rebalance_timeout_ms: int, session_timeout_ms: int, parked: Parked | None) -> None:
        self.supported_protocols.subtract(member.protocol_names())
        self.supported_protocols.update(name for name, _ in protocols)
        self.supported_protocols = +self.supported_protocols
        member.supported_protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if parked is not None:
            if member.awaiting_join is None:
                self.num_awaiting_join += 1
            member.awaiting_join = parked
        elif member.awaiting_join is not None:
            self.num_awaiting_join -= 1
            member.awaiting_join = None

    def take_join(self, member: ClassicGroupMember) -> Parked | None:
        """Detach the member's parked JoinGroup so it can be answered."""
        parked = member.awaiting_join
        if parked is not None:
            member.awaiting_join = None
            self.num_awaiting_join -= 1
        return parked

    def maybe_elect_new_joined_leader(self) -> bool:
        """`maybeElectNewJoinedLeader`: keep a leader that rejoined, else pick a member that
        did; False when nobody rejoined."""
        leader = self.members.get(self.leader_id) if self.leader_id else None
        if leader is not None and leader.awaiting_join is not None:
            return True
        for m in self.members.values():
            if m.awaiting_join is not None:
                self.leader_id = m.member_id
                return True
        return False

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(ClassicGroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(ClassicGroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> ClassicGroupMember:
        """The same instance joined under a new member id: move the member over."""
        old = self.members.pop(old_id)
        old.member_id = new_id
        self.members[new_id] = old
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.pending_sync_members.discard(old_id)
        return old

    def generate_member_id(self, client_id: str, instance_id: str | None) -> str:
        return f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"


class IllegalClassicTransition(Exception):
    pass
