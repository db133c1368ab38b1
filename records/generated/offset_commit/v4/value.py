# ruff: noqa: E501
"""Generated from ``common/message/OffsetCommitValue.json`` in Kafka's jar by coordinator.protocol.messagegen."""

import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i64


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(4)
    __flexible__: ClassVar[bool] = True
    offset: i64 = field(metadata={"kafka_type": "int64"})
    """The offset that the consumer wants to store (for this partition)."""
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    """The leader epoch of the last consumed record."""
    metadata: str = field(metadata={"kafka_type": "string"})
    """Any metadata the client wants to keep."""
    commit_timestamp: i64 = field(metadata={"kafka_type": "int64"})
    """The time at which the commit was added to the log."""
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid", "tag": 0}, default=None)
    """The topic id of the committed offset."""
