"""Shared builders and invariant checks for the assignor tests."""
from __future__ import annotations

import uuid
from collections.abc import Mapping

from hypothesis import strategies as st

from coordinator.group.assignors import (
    GroupSpec,
    MappingTopicDescriber,
    MemberSubscription,
    SortedPartitions,
    SubscriptionType,
    partitions_of,
)

HOMOGENEOUS = SubscriptionType.HOMOGENEOUS
HETEROGENEOUS = SubscriptionType.HETEROGENEOUS

# Small ids whose Kafka `Uuid.compareTo` order is T[0] < T[1] < ... (high half zero).
T = [uuid.UUID(int=i + 1) for i in range(8)]


def sub(*topics: uuid.UUID, instance_id: str | None = None) -> MemberSubscription:
    return MemberSubscription(rack_id=None, instance_id=instance_id, subscribed_topic_ids=frozenset(topics))


def parts(*ids: int):
    return partitions_of(ids)


def spec(members: Mapping[str, MemberSubscription], current=None, subscription_type=None) -> GroupSpec:
    if subscription_type is None:
        distinct = {m.subscribed_topic_ids for m in members.values()}
        subscription_type = HOMOGENEOUS if len(distinct) <= 1 else HETEROGENEOUS
    return GroupSpec(dict(members), subscription_type, dict(current or {}))


def describer(counts: Mapping[uuid.UUID, int]) -> MappingTopicDescriber:
    return MappingTopicDescriber(dict(counts))


def as_sets(result) -> dict[str, dict[uuid.UUID, set[int]]]:
    return {m: {t: set(p) for t, p in a.items() if len(p)} for m, a in result.items()}


def sizes(result) -> dict[str, int]:
    return {m: sum(len(p) for p in a.values()) for m, a in result.items()}


def check_canonical(p) -> None:
    """`range` iff the set is an arithmetic progression, ascending and distinct."""
    ids = list(p)
    assert ids == sorted(set(ids)), p
    if isinstance(p, range):
        assert p.step > 0
    else:
        assert type(p) is SortedPartitions
        assert len(ids) >= 3, p
        steps = {b - a for a, b in zip(ids, ids[1:])}
        assert len(steps) > 1, f"{p!r} is an arithmetic progression but not a range"


def check_valid(group: GroupSpec, counts: Mapping[uuid.UUID, int], result) -> None:
    """Every subscribed partition is assigned exactly once, to a subscriber of its topic."""
    assert list(result) == list(group.members), "one entry per member, in member order"
    owner: dict[tuple[uuid.UUID, int], str] = {}
    for member_id, member_assignment in result.items():
        subscribed = group.members[member_id].subscribed_topic_ids
        for topic_id, p in member_assignment.items():
            check_canonical(p)
            assert topic_id in subscribed, f"{member_id} got {topic_id} without subscribing"
            for partition in p:
                assert 0 <= partition < counts[topic_id]
                key = (topic_id, partition)
                assert key not in owner, f"{key} given to {owner.get(key)} and {member_id}"
                owner[key] = member_id
    subscribed_topics = set().union(*(m.subscribed_topic_ids for m in group.members.values()))
    expected = {(t, p) for t in subscribed_topics for p in range(counts[t])}
    assert set(owner) == expected, f"unassigned: {sorted(expected - set(owner))[:10]}"


def check_balanced(result) -> None:
    loads = sizes(result).values()
    assert max(loads) - min(loads) <= 1, sizes(result)


def check_no_improving_move(group: GroupSpec, result) -> None:
    """Kafka's heterogeneous balance criterion: no partition can move to a subscriber of
    its topic that holds two or more partitions fewer than its owner."""
    load = sizes(result)
    for owner_id, member_assignment in result.items():
        for topic_id, p in member_assignment.items():
            if not len(p):
                continue
            for other_id, other in group.members.items():
                if topic_id in other.subscribed_topic_ids:
                    assert load[owner_id] - load[other_id] <= 1, (
                        f"{topic_id} partition could move {owner_id}({load[owner_id]}) -> "
                        f"{other_id}({load[other_id]})"
                    )


@st.composite
def groups(draw, homogeneous: bool, max_members: int = 8, max_topics: int = 4, max_partitions: int = 12):
    """(member ids, subscriptions, partition counts) for a random group."""
    topic_count = draw(st.integers(1, max_topics))
    topics = T[:topic_count]
    counts = {t: draw(st.integers(0, max_partitions)) for t in topics}
    member_count = draw(st.integers(1, max_members))
    member_ids = [f"m{i}" for i in draw(st.permutations(range(member_count)))]
    if homogeneous:
        chosen = draw(st.sets(st.sampled_from(topics), min_size=1))
        subscriptions = {m: sub(*chosen) for m in member_ids}
    else:
        subscriptions = {
            m: sub(*draw(st.sets(st.sampled_from(topics), min_size=0, max_size=topic_count)))
            for m in member_ids
        }
    return subscriptions, counts
