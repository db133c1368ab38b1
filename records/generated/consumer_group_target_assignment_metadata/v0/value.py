# ruff: noqa: E501
"""Generated from ``common/message/ConsumerGroupTargetAssignmentMetadataValue.json`` in Kafka's jar by coordinator.protocol.messagegen."""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i64


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    assignment_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The assignment epoch."""
    assignment_timestamp: i64 = field(metadata={"kafka_type": "int64", "tag": 0}, default=i64(0))
    """The time at which the assignment calculation finished."""
