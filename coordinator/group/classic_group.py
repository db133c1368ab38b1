"""Classic (JoinGroup/SyncGroup) group model.

Kafka keeps classic groups outside its timeline structures and mutates their soft
state directly; only GroupMetadata records (type 2) make them durable. Here the
model is what a GroupMetadata record rebuilds: on load a group with members is
STABLE, one without is EMPTY (`GroupMetadataManager.replay(GroupMetadataValue)`).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field


class ClassicGroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


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

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, meta in self.supported_protocols:
            if name == protocol:
                return meta
        return b""


class ClassicGroup:
    group_type = "classic"

    def __init__(self, group_id: str, state: ClassicGroupState = ClassicGroupState.EMPTY,
                 now_ms: int = -1) -> None:
        self.group_id = group_id
        self.state = state
        self.state_timestamp_ms = now_ms
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, ClassicGroupMember] = {}

    def is_empty(self) -> bool:
        return not self.members

    def is_simple(self) -> bool:
        """A group that only exists because offsets were committed for it
        (`ClassicGroup.isSimpleGroup`): no protocol type, no members."""
        return not self.protocol_type and not self.members

    def state_name(self) -> str:
        return self.state.value
