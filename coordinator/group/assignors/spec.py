"""What a server-side assignor is given (Kafka's `GroupSpec`, `SubscribedTopicDescriber`).

Kafka's `GroupSpec` also carries an inverted target assignment (partition -> owner) for
`isPartitionAssigned`. The builders here derive "which partitions are held" from the
current target assignments of the members in the spec, so the caller does not have to
maintain a per-partition map. Entries of `current_assignment` for member ids that are not
in `members` are ignored: their partitions count as free, as in Kafka, where a member
that leaves has its target assignment deleted.
"""
from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from .partitions import Partitions

__all__ = [
    "Assignment",
    "GroupSpec",
    "MappingTopicDescriber",
    "MemberSubscription",
    "PartitionAssignor",
    "PartitionAssignorError",
    "SubscriptionType",
    "TopicDescriber",
    "java_uuid_order",
]

Assignment = dict[uuid.UUID, Partitions]
"""One member's assignment: topic id -> partitions. Treated as immutable once built."""


class PartitionAssignorError(Exception):
    """Kafka's `PartitionAssignorException`; the coordinator answers UNKNOWN_SERVER_ERROR."""


class SubscriptionType(enum.Enum):
    """Kafka's `SubscriptionType`: whether every member subscribes to the same topics."""

    HOMOGENEOUS = "HOMOGENEOUS"
    HETEROGENEOUS = "HETEROGENEOUS"


@dataclass(slots=True)
class MemberSubscription:
    """Kafka's `MemberSubscription`: the member's rack, static instance id and topics."""

    rack_id: str | None
    instance_id: str | None
    subscribed_topic_ids: frozenset[uuid.UUID]


@dataclass(slots=True)
class GroupSpec:
    """The input of `assign`.

    members: member id -> subscription; the iteration order is the member order the
        uniform builders use (Kafka iterates `memberIds()`).
    current_assignment: member id -> the member's current *target* assignment.
        A missing member means an empty assignment. Assignments are never mutated;
        a member whose assignment does not change gets the same dict object back.
        Each partition has at most one owner here (an assignor's output always has one;
        Kafka's inverted target map cannot hold two). Topics that are fully covered are
        not re-checked for double owners, for speed.
    """

    members: dict[str, MemberSubscription]
    subscription_type: SubscriptionType
    current_assignment: Mapping[str, Assignment] = field(default_factory=dict)


class TopicDescriber(Protocol):
    """Kafka's `SubscribedTopicDescriber` (rack look-ups omitted: no assignor uses them)."""

    def num_partitions(self, topic_id: uuid.UUID) -> int:
        """The topic's partition count, or -1 if the topic is unknown."""
        ...


class PartitionAssignor(Protocol):
    """Kafka's `ConsumerGroupPartitionAssignor`."""

    name: str

    def assign(self, spec: GroupSpec, topics: TopicDescriber) -> dict[str, Assignment]:
        """The new target assignment: an entry for every member of `spec`, in member order.

        Raises PartitionAssignorError for a subscribed topic with unknown partition count
        or partitions left over.
        """
        ...


class MappingTopicDescriber:
    """A `TopicDescriber` over a `{topic_id: partition_count}` mapping."""

    __slots__ = ("_counts",)

    def __init__(self, counts: Mapping[uuid.UUID, int]) -> None:
        self._counts = counts

    def num_partitions(self, topic_id: uuid.UUID) -> int:
        return self._counts.get(topic_id, -1)


# Kafka's `Uuid.compareTo` compares the two 64-bit halves as *signed* longs. Flipping the
# sign bit of each half turns that into plain unsigned order on the 128-bit integer.
_SIGN_BITS = (1 << 127) | (1 << 63)


def java_uuid_order(topic_id: uuid.UUID) -> int:
    """Sort key that orders topic ids as Kafka's `Uuid.compareTo` does."""
    return topic_id.int ^ _SIGN_BITS
