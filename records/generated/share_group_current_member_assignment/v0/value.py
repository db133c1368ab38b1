# ruff: noqa: E501
"""Generated from ``common/message/ShareGroupCurrentMemberAssignmentValue.json`` in Kafka's jar by coordinator.protocol.messagegen."""

import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartitions:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    """The topic Id."""
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    """The partition Ids."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupCurrentMemberAssignmentValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The current member epoch that is expected from the member in the heartbeat request."""
    previous_member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """If the last epoch bump is lost before reaching the member, the member will retry with the previous epoch."""
    state: i8 = field(metadata={"kafka_type": "int8"})
    """The member state. See MemberState for the possible values."""
    assigned_partitions: tuple[TopicPartitions, ...]
    """The partitions assigned to (or owned by) this member."""
