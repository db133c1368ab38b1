"""Kafka's server-side `RangeAssignor` (name "range", rewritten by KAFKA-16944).

Deterministic and not sticky: members are sorted with static members first (by instance
id), then dynamic members (by member id); for each topic, with P partitions and S
subscribers, each subscriber in that order takes the next contiguous range of P // S
partitions, plus one while P % S extra partitions remain. When every member subscribes
to the same topics and they have equal partition counts, members get the same partition
numbers of every topic (co-partitioning). With static members the assignment survives a
rolling bounce as long as members, metadata and subscriptions are unchanged.
"""
from __future__ import annotations

import uuid

from .partitions import EMPTY_PARTITIONS
from .spec import (
    Assignment,
    GroupSpec,
    MemberSubscription,
    PartitionAssignorError,
    SubscriptionType,
    TopicDescriber,
)

__all__ = ["RangeAssignor"]


class RangeAssignor:
    name = "range"

    def assign(self, spec: GroupSpec, topics: TopicDescriber) -> dict[str, Assignment]:
        members = spec.members
        if not members:
            return {}
        ordered = _sorted_members(members)
        if spec.subscription_type is SubscriptionType.HOMOGENEOUS:
            assigned = _assign_homogeneous(ordered, members[ordered[0]].subscribed_topic_ids, topics)
        else:
            assigned = _assign_heterogeneous(ordered, members, topics)
        # Answer in the spec's member order; an unchanged assignment is handed back as the
        # same object (ranges compare in O(1)).
        current = spec.current_assignment
        if not current:
            return {member_id: assigned[member_id] for member_id in members}
        result: dict[str, Assignment] = {}
        for member_id in members:
            new = assigned[member_id]
            old = current.get(member_id)
            result[member_id] = old if old is not None and old == new else new
        return result


def _partition_count(topics: TopicDescriber, topic_id: uuid.UUID) -> int:
    count = topics.num_partitions(topic_id)
    if count < 0:
        raise PartitionAssignorError(
            f"a member is subscribed to topic {topic_id}, which is not in the topic metadata"
        )
    return count


def _ranges(count: int, subscribers: int) -> list[range]:
    """The ranges of a topic's subscribers, in order: `count // subscribers` partitions
    each, one more for the first `count % subscribers` (empty ranges included)."""
    quota, extra = divmod(count, subscribers)
    bigger = quota + 1
    ranges = [range(i * bigger, (i + 1) * bigger) for i in range(extra)]
    if quota:
        first = extra * bigger
        ranges.extend(map(range, range(first, count, quota), range(first + quota, count + quota, quota)))
    else:
        ranges.extend([EMPTY_PARTITIONS] * (subscribers - extra))
    return ranges


def _assign_homogeneous(
    ordered: list[str], subscribed: frozenset[uuid.UUID], topics: TopicDescriber
) -> dict[str, Assignment]:
    # Every member takes the same position in every topic: compute one column of ranges
    # per partition count and give each member its range of every topic of that count.
    # `dict.fromkeys` over a set reuses the stored hashes; `uuid.UUID.__hash__` is Python
    # code and would otherwise dominate (one call per member and topic).
    topics_by_count: dict[int, set[uuid.UUID]] = {}
    for topic_id in subscribed:
        topics_by_count.setdefault(_partition_count(topics, topic_id), set()).add(topic_id)
    groups = [(frozenset(ids), _ranges(count, len(ordered))) for count, ids in topics_by_count.items()]
    if not groups:
        return {member_id: {} for member_id in ordered}
    first_topics, first_column = groups[0]
    if len(groups) == 1:
        return {member_id: dict.fromkeys(first_topics, r) if r else {}
                for member_id, r in zip(ordered, first_column)}
    assigned: dict[str, Assignment] = {}
    for position, member_id in enumerate(ordered):
        assignment: Assignment = {}
        for topic_ids, column in groups:
            r = column[position]
            if r:
                assignment.update(dict.fromkeys(topic_ids, r))
        assigned[member_id] = assignment
    return assigned


def _assign_heterogeneous(
    ordered: list[str], members: dict[str, MemberSubscription], topics: TopicDescriber
) -> dict[str, Assignment]:
    # Each topic's subscribers, in sorted member order, take consecutive ranges.
    subscribers: dict[uuid.UUID, list[str]] = {}
    for member_id in ordered:
        for topic_id in members[member_id].subscribed_topic_ids:
            subscribers.setdefault(topic_id, []).append(member_id)
    assigned: dict[str, Assignment] = {member_id: {} for member_id in ordered}
    for topic_id, topic_subscribers in subscribers.items():
        column = _ranges(_partition_count(topics, topic_id), len(topic_subscribers))
        for member_id, r in zip(topic_subscribers, column):
            if r:
                assigned[member_id][topic_id] = r
    return assigned


def _sorted_members(members: dict[str, MemberSubscription]) -> list[str]:
    """Static members by instance id, then dynamic members by member id.

    Kafka compares Java strings, i.e. UTF-16 code units; Python compares code points.
    They differ only when a character above U+FFFF meets one in U+E000..U+FFFF, so the
    UTF-16 encoding is used as the key only when some id is not ASCII.
    """
    static = [(s.instance_id, m) for m, s in members.items() if s.instance_id is not None]
    dynamic = [m for m, s in members.items() if s.instance_id is None]
    if "".join(i for i, _ in static).isascii() and "".join(dynamic).isascii():
        static.sort(key=lambda pair: pair[0])
        dynamic.sort()
    else:
        static.sort(key=lambda pair: pair[0].encode("utf-16-be", "surrogatepass"))
        dynamic.sort(key=lambda m: m.encode("utf-16-be", "surrogatepass"))
    return [m for _, m in static] + dynamic
