# ruff: noqa: E501
"""Generated from ``common/message/StreamsGroupTargetAssignmentMemberValue.json`` in Kafka's jar by coordinator.protocol.messagegen."""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16, i32


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskIds:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    subtopology_id: str = field(metadata={"kafka_type": "string"})
    """The subtopology ID."""
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    """The partitions of the input topics processed by this member."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupTargetAssignmentMemberValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    active_tasks: tuple[TaskIds, ...]
    """Currently assigned active tasks for this streams client."""
    standby_tasks: tuple[TaskIds, ...]
    """Currently assigned standby tasks for this streams client."""
    warmup_tasks: tuple[TaskIds, ...]
    """Currently assigned warm-up tasks for this streams client."""
