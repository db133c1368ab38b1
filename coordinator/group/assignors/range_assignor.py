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
            subscribed = members[ordered[0]].subscribed_topic_ids
            subscriber_counts = dict.fromkeys(subscribed, len(members))
            topic_lists = None
        else:
            subscriber_counts = {}
            for subscription in members.values():
                for topic_id in subscription.subscribed_topic_ids:
                    subscriber_counts[topic_id] = subscriber_counts.get(topic_id, 0) + 1
            topic_lists = {m: tuple(s.subscribed_topic_ids) for m, s in members.items()}

        # Per topic: [next range start, minimum quota, extras left, partition count].
        cursors: dict[uuid.UUID, list[int]] = {}
        for topic_id, subscribers in subscriber_counts.items():
            count = topics.num_partitions(topic_id)
            if count < 0:
                raise PartitionAssignorError(
                    f"a member is subscribed to topic {topic_id}, which is not in the topic metadata"
                )
            quota, extra = divmod(count, subscribers)
            cursors[topic_id] = [0, quota, extra, count]

        get_current = spec.current_assignment.get
        homogeneous_topics = tuple(subscriber_counts)
        assigned: dict[str, Assignment] = {}
        for member_id in ordered:
            assignment: Assignment = {}
            for topic_id in homogeneous_topics if topic_lists is None else topic_lists[member_id]:
                cursor = cursors[topic_id]
                start, quota, extra, count = cursor
                if extra:
                    quota += 1
                    cursor[2] = extra - 1
                stop = min(start + quota, count)
                cursor[0] = stop
                if start < stop:
                    assignment[topic_id] = range(start, stop)
            old = get_current(member_id)
            # Hand an unchanged assignment back as the same object (ranges compare in O(1)).
            assigned[member_id] = old if old is not None and old == assignment else assignment
        # Answer in the spec's member order.
        return {member_id: assigned[member_id] for member_id in members}


def _sorted_members(members: dict[str, MemberSubscription]) -> list[str]:
    """Static members by instance id, then dynamic members by member id.

    Kafka compares Java strings, i.e. UTF-16 code units; Python compares code points.
    They differ only when a character above U+FFFF meets one in U+E000..U+FFFF, so the
    UTF-16 encoding is used as the key only when some id is not ASCII.
    """
    static = [(s.instance_id, m) for m, s in members.items() if s.instance_id is not None]
    dynamic = [m for m, s in members.items() if s.instance_id is None]
    if all(i.isascii() for i, _ in static) and all(m.isascii() for m in dynamic):
        static.sort(key=lambda pair: pair[0])
        dynamic.sort()
    else:
        static.sort(key=lambda pair: pair[0].encode("utf-16-be", "surrogatepass"))
        dynamic.sort(key=lambda m: m.encode("utf-16-be", "surrogatepass"))
    return [m for _, m in static] + dynamic
