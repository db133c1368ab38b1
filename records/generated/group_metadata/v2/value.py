# ruff: noqa: E501
"""Generated from ``common/message/GroupMetadataValue.json`` in Kafka's jar by coordinator.protocol.messagegen."""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i64


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberMetadata:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = False
    member_id: str = field(metadata={"kafka_type": "string"})
    """The member id."""
    client_id: str = field(metadata={"kafka_type": "string"})
    """The client id."""
    client_host: str = field(metadata={"kafka_type": "string"})
    """The client host."""
    rebalance_timeout: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    """The rebalance timeout."""
    session_timeout: i32 = field(metadata={"kafka_type": "int32"})
    """The session timeout."""
    subscription: bytes = field(metadata={"kafka_type": "bytes"})
    """The subscription."""
    assignment: bytes = field(metadata={"kafka_type": "bytes"})
    """The assignment."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = False
    protocol_type: str = field(metadata={"kafka_type": "string"})
    """The protocol type."""
    generation: i32 = field(metadata={"kafka_type": "int32"})
    """The generation id."""
    protocol: str | None = field(metadata={"kafka_type": "string"})
    """The protocol name."""
    leader: str | None = field(metadata={"kafka_type": "string"})
    """The leader id."""
    current_state_timestamp: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    """The timestamp of the last state change."""
    members: tuple[MemberMetadata, ...]
    """The group members."""
