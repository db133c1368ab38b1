# ruff: noqa: E501
"""Generated from ``common/message/OffsetCommitValue.json`` in Kafka's jar by coordinator.protocol.messagegen."""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16, i64


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = False
    offset: i64 = field(metadata={"kafka_type": "int64"})
    """The offset that the consumer wants to store (for this partition)."""
    metadata: str = field(metadata={"kafka_type": "string"})
    """Any metadata the client wants to keep."""
    commit_timestamp: i64 = field(metadata={"kafka_type": "int64"})
    """The time at which the commit was added to the log."""
