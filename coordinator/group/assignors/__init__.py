"""KIP-848 server-side assignors: `uniform` and `range`, as in Apache Kafka 4.3.

    from coordinator.group.assignors import ASSIGNORS, GroupSpec, MemberSubscription, ...
    new_target = ASSIGNORS["uniform"].assign(group_spec, topic_describer)
    # -> {member_id: {topic_id: Partitions}} for every member of the spec, in member order

Contract with the caller:
- `GroupSpec.current_assignment` is the current *target* assignment; it is never mutated.
  A member whose assignment does not change gets back the same dict object (`is`), so
  "target unchanged, write no record" is an identity test. Members missing from
  `current_assignment` count as empty and, if they stay empty, get a new `{}`.
- No inverted target (partition -> owner) is needed: which partitions are held is derived
  from the assignments of the members in the spec.
- `Partitions` (see `partitions.py`) is `range | SortedPartitions`, canonical, so `==` is
  set equality; build one from any ids with `partitions_of`.
- An unknown topic (partition count -1) or partitions left over raise
  `PartitionAssignorError`, which the coordinator maps to UNKNOWN_SERVER_ERROR.
"""
from .partitions import EMPTY_PARTITIONS, Partitions, SortedPartitions, partitions_of, partitions_union
from .range_assignor import RangeAssignor
from .spec import (
    Assignment,
    GroupSpec,
    MappingTopicDescriber,
    MemberSubscription,
    PartitionAssignor,
    PartitionAssignorError,
    SubscriptionType,
    TopicDescriber,
)
from .uniform import UniformAssignor

ASSIGNORS: dict[str, PartitionAssignor] = {
    UniformAssignor.name: UniformAssignor(),
    RangeAssignor.name: RangeAssignor(),
}
"""Assignors by name; Kafka's default `group.consumer.assignors` is [uniform, range]."""

__all__ = [
    "ASSIGNORS",
    "Assignment",
    "EMPTY_PARTITIONS",
    "GroupSpec",
    "MappingTopicDescriber",
    "MemberSubscription",
    "PartitionAssignor",
    "PartitionAssignorError",
    "Partitions",
    "RangeAssignor",
    "SortedPartitions",
    "SubscriptionType",
    "TopicDescriber",
    "UniformAssignor",
    "partitions_of",
    "partitions_union",
]
