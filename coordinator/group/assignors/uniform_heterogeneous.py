"""Uniform assignment when members subscribe to different topics.

Kafka's `UniformHeterogeneousAssignmentBuilder` (as reworked by KAFKA-17710):
1. Members keep everything they hold of topics they still subscribe to.
2. Every partition nobody holds goes, topic by topic, to the least-loaded subscriber of its
   topic: (assigned count, member index) ascending. Topics go in order of partitions per
   subscriber descending, then subscriber count ascending, then topic id ascending
   (Kafka's `Uuid.compareTo`).
3. Balance: for each topic with two or more subscribers, move partitions from its most
   loaded subscribers to its least loaded ones until they differ by at most one; repeat
   over the topics until a full pass moves nothing, at most 16 passes. With overlapping,
   non-identical subscriptions the result can be only "almost balanced" (Kafka's javadoc
   example: 9/10/11).

Member indices are positions in `GroupSpec.members`. Giving partitions to the least loaded
subscriber one at a time fills "levels": every subscriber at the lowest count gets one,
then the level rises and the subscribers that reach it join. Between two joins a member
receives every c-th unassigned partition, so this builder hands out whole stepped `range`
slices instead of single partitions; the partitions a member receives are the same.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable
from itertools import chain
from operator import itemgetter

from .partitions import (
    EMPTY_PARTITIONS,
    Partitions,
    canonical_sorted,
    free_runs,
    partitions_below,
    partitions_prefix,
    partitions_union,
)
from .spec import Assignment, GroupSpec, PartitionAssignorError, TopicDescriber, java_uuid_order
from .topic_index import TopicIndex

__all__ = ["assign_heterogeneous", "MAX_BALANCE_PASSES"]

MAX_BALANCE_PASSES = 16
"""Kafka's `MAX_ITERATION_COUNT`: each pass roughly halves the imbalance."""


class _Builder:
    """State of one heterogeneous assignment; members and topics are list indices."""

    def __init__(self, spec: GroupSpec, topics: TopicDescriber) -> None:
        self.member_ids = list(spec.members)
        self.member_count = len(self.member_ids)
        self._index_subscriptions(spec, topics)
        # Partitions assigned to each member so far.
        self.sizes = [0] * self.member_count
        # `assignments[i]` is member i's assignment; `copied[i]` says whether it is this
        # builder's own dict (writable) or still the caller's (returned as is if untouched).
        self.copied = [False] * self.member_count
        self._revoke_unsubscribed(spec)

    def _index_subscriptions(self, spec: GroupSpec, topics: TopicDescriber) -> None:
        """Topic indices, partition counts and ascending subscriber lists.

        Members are grouped by subscription first: groups share the frozenset object (or
        at least its cached hash), so this costs one lookup per member, not per topic.
        """
        groups: dict[frozenset[uuid.UUID], list[int]] = {}
        for position, subscription in enumerate(spec.members.values()):
            group = groups.get(subscription.subscribed_topic_ids)
            if group is None:
                groups[subscription.subscribed_topic_ids] = group = []
            group.append(position)
        topic_ids: list[uuid.UUID] = []
        seen: set[uuid.UUID] = set()
        for subscribed in groups:
            for topic_id in subscribed:
                if topic_id not in seen:
                    seen.add(topic_id)
                    topic_ids.append(topic_id)
        self.index = index = TopicIndex(topic_ids)
        self.counts: list[int] = []
        for topic_id in topic_ids:
            count = topics.num_partitions(topic_id)
            if count < 0:
                raise PartitionAssignorError(
                    f"members are subscribed to topic {topic_id}, which is not in the topic metadata"
                )
            self.counts.append(count)
        self.subscribers: list[list[int]] = [[] for _ in topic_ids]
        # Each member's subscription as a set of topic indices (shared within a group).
        self.subscribed: list[frozenset[int]] = [frozenset()] * self.member_count
        for subscribed, group in groups.items():
            topic_set = frozenset(index.lookup(t) for t in subscribed)
            for topic in topic_set:
                self.subscribers[topic].extend(group)
            for position in group:
                self.subscribed[position] = topic_set
        if len(groups) > 1:
            for subscribers in self.subscribers:
                subscribers.sort()

    def writable(self, position: int) -> Assignment:
        if not self.copied[position]:
            old = self.assignments[position]
            self.assignments[position] = dict(old) if old else {}
            self.copied[position] = True
        return self.assignments[position]  # type: ignore[return-value]

    def _revoke_unsubscribed(self, spec: GroupSpec) -> None:
        get_current = spec.current_assignment.get
        counts, index, subscriptions, sizes = self.counts, self.index, self.subscribed, self.sizes
        index_by_identity = index.by_identity.get
        self.held_counts = held_counts = [0] * len(counts)
        self.assignments: list[Assignment | None] = [get_current(m) for m in self.member_ids]
        assignments = self.assignments
        for position, old in enumerate(assignments):
            if not old:
                continue
            subscribed = subscriptions[position]
            size = 0
            for topic_id, parts in old.items():
                topic = index_by_identity(id(topic_id))
                if topic is None:
                    topic = index.lookup_by_value(topic_id)
                if topic not in subscribed:
                    del self.writable(position)[topic_id]
                    continue
                held = len(parts)
                if held and parts[-1] >= counts[topic]:  # inconsistent input: ids past the count
                    parts = partitions_below(parts, counts[topic])
                    held = len(parts)
                    if held:
                        self.writable(position)[topic_id] = parts
                    else:
                        del self.writable(position)[topic_id]
                size += held
                held_counts[topic] += held
            sizes[position] = size

    def unassigned(self) -> dict[int, list[range]]:
        """Runs of free partitions of each topic that has some, by topic index."""
        counts, held_counts = self.counts, self.held_counts
        partly_held = {t for t, held in enumerate(held_counts) if 0 < held < counts[t]}
        held: dict[int, list[Partitions]] = {t: [] for t in partly_held}
        if partly_held:
            for assignment in self.assignments:
                if assignment:
                    for topic_id, parts in assignment.items():
                        topic = self.index.lookup(topic_id)
                        if topic in partly_held:
                            held[topic].append(parts)
        free: dict[int, list[range]] = {}
        for topic, count in enumerate(counts):
            if held_counts[topic] == 0:
                if count:
                    free[topic] = [range(count)]
            elif topic in partly_held:
                free[topic] = free_runs(count, held[topic])
        return free

    def topic_order(self, topics: Iterable[int]) -> list[int]:
        counts, subscribers, topic_ids = self.counts, self.subscribers, self.index.topic_ids
        return sorted(
            topics,
            key=lambda t: (
                -(counts[t] / len(subscribers[t])),
                len(subscribers[t]),
                java_uuid_order(topic_ids[t]),
            ),
        )

    def by_load(self, members: list[int]) -> list[int]:
        """`members` (ascending indices) sorted by (assigned count, member index)."""
        # The sort is stable and the input ascending, so sorting by count alone also
        # orders equal counts by index; a C-level key keeps this cheap per topic.
        return sorted(members, key=self.sizes.__getitem__)

    def assign_remaining(self, free: dict[int, list[range]]) -> None:
        sizes, assignments, copied = self.sizes, self.assignments, self.copied
        for topic in self.topic_order(free):
            topic_id = self.index.topic_ids[topic]
            runs = free[topic]
            pending: Partitions | list[int] = runs[0] if len(runs) == 1 else list(chain.from_iterable(runs))
            order = self.by_load(self.subscribers[topic])
            phases = _level_fill(pending, order, [sizes[i] for i in order])
            if len(phases) == 1:
                grants: Iterable[tuple[int, Partitions | list[int]]] = zip(*phases[0])
            else:
                # Phases hand out ascending blocks of `pending`, so a member's pieces, in
                # phase order, concatenate into an ascending sequence.
                pieces_of: dict[int, list] = {}
                for takers, pieces in phases:
                    for member, piece in zip(takers, pieces):
                        pieces_of.setdefault(member, []).append(piece)
                grants = (
                    (member, pieces[0] if len(pieces) == 1 else list(chain.from_iterable(pieces)))
                    for member, pieces in pieces_of.items()
                )
            # Only a topic somebody held before needs merging with what a member has.
            merge = self.held_counts[topic] > 0
            for member, piece in grants:
                if type(piece) is not range:
                    piece = canonical_sorted(piece)
                sizes[member] += len(piece)
                if copied[member]:
                    assignment = assignments[member]
                else:
                    old = assignments[member]
                    assignments[member] = assignment = dict(old) if old else {}
                    copied[member] = True
                if merge:
                    held = assignment.get(topic_id)  # type: ignore[union-attr]
                    if held:
                        piece = partitions_union(held, piece)
                assignment[topic_id] = piece  # type: ignore[index]

    def balance(self) -> None:
        topics = self.topic_order(t for t, s in enumerate(self.subscribers) if len(s) >= 2)
        if not topics:
            return
        # Each pass reads every subscriber's load per topic; gather them in C.
        self.loads_of = {t: itemgetter(*self.subscribers[t]) for t in topics}
        # Stop once a whole pass over the topics since the last move moved nothing.
        last_moved = -1
        for _ in range(MAX_BALANCE_PASSES):
            for position, topic in enumerate(topics):
                if position == last_moved:
                    return
                if self.balance_topic(topic) or last_moved == -1:
                    last_moved = position

    def balance_topic(self, topic: int) -> int:
        subscribers = self.subscribers[topic]
        sizes = self.sizes
        loads = self.loads_of[topic](sizes)
        if max(loads) - min(loads) <= 1:
            return 0
        topic_id = self.index.topic_ids[topic]
        levels = _Levels(sizes, self.by_load(subscribers))
        # A member gives up its highest partitions of the topic first, and only ones it held
        # when this topic's turn began (Kafka's partitions-grouped-by-owner list).
        assignments = self.assignments
        held = {i: assignments[i].get(topic_id, EMPTY_PARTITIONS) for i in subscribers if assignments[i]}  # type: ignore[union-attr]  # filtered by `if assignments[i]`
        given: dict[int, int] = {}
        received: dict[int, list[int]] = {}
        moved = 0
        while not levels.balanced():
            donor = levels.next_most_loaded()
            while donor != -1 and len(held.get(donor, ())) <= given.get(donor, 0):
                levels.exclude_last_most_loaded()
                donor = levels.next_most_loaded()
            if donor == -1:
                break
            receiver = levels.next_least_loaded()
            if levels.balanced():
                break
            count = given.get(donor, 0)
            parts = held[donor]
            received.setdefault(receiver, []).append(parts[len(parts) - 1 - count])
            given[donor] = count + 1
            sizes[donor] -= 1
            sizes[receiver] += 1
            moved += 1
        for donor, count in given.items():
            parts = held[donor]
            kept = partitions_prefix(parts, len(parts) - count)
            assignment = self.writable(donor)
            if kept:
                assignment[topic_id] = kept
            else:
                del assignment[topic_id]
        for receiver, partitions in received.items():
            assignment = self.writable(receiver)
            assignment[topic_id] = partitions_union(
                assignment.get(topic_id, EMPTY_PARTITIONS), sorted(partitions)
            )
        return moved


def _level_fill(pending, order: list[int], loads: list[int]) -> list[tuple[list[int], list]]:
    """Kafka's "next partition to the least loaded subscriber", as whole slices.

    `order` is sorted by (load, index) and `loads` are its loads. The members at the
    lowest load each take one partition, in order; then the level rises by one and the
    members whose load it reaches join. While nobody joins, the k-th of c members takes
    every c-th partition, so each such phase is one stepped slice per member.
    Returns (members, slices of `pending`) per phase.
    """
    phases = []
    remaining = len(pending)
    position = 0
    joined = 0
    level = loads[0]
    member_count = len(order)
    while remaining:
        while joined < member_count and loads[joined] <= level:
            joined += 1
        rounds = loads[joined] - level if joined < member_count else remaining
        handed = min(rounds * joined, remaining)
        stop = position + handed
        takers = min(joined, handed)
        phases.append((order[:takers], [pending[position + j : stop : joined] for j in range(takers)]))
        position = stop
        remaining -= handed
        level += rounds
    return phases


class _Levels:
    """Kafka's `MemberAssignmentBalancer`: hands out one topic's subscribers, least loaded
    first on one side and most loaded first on the other, level by level.

    `order` is sorted by (count, index). The least-loaded range [0, least_end) holds the
    members at or below `least_level`; each gets one partition per level, then the level
    rises and the members that reach it join. The most-loaded range [most_start, most_end)
    mirrors it from the top; members with nothing left to give are swapped out of it.
    Counts are read live, as Kafka does, since moves change them while the ranges grow.
    """

    __slots__ = ("sizes", "order", "least_end", "least_level", "least_next",
                 "most_start", "most_end", "most_level", "most_next")

    def __init__(self, sizes: list[int], order: list[int]) -> None:
        self.sizes = sizes
        self.order = order = list(order)
        n = len(order)
        self.least_end = 0
        self.least_level = sizes[order[0]] - 1
        self.least_next = 0
        self.most_start = n
        self.most_end = n
        self.most_level = sizes[order[-1]] + 1
        self.most_next = n - 1

    def balanced(self) -> bool:
        return self.most_level - self.least_level <= 1

    def next_least_loaded(self) -> int:
        order, sizes = self.order, self.sizes
        if self.least_next >= self.least_end:
            self.least_level += 1
            while self.least_end < len(order) and sizes[order[self.least_end]] == self.least_level:
                self.least_end += 1
            self.least_next = 0
        member = order[self.least_next]
        self.least_next += 1
        return member

    def next_most_loaded(self) -> int:
        order, sizes = self.order, self.sizes
        if self.most_next < self.most_start:
            if self.most_end <= self.most_start and self.most_start > 0:
                # Exclusions emptied the range: restart it at the next member down.
                self.most_level = sizes[order[self.most_start - 1]]
            else:
                self.most_level -= 1
            while self.most_start > 0 and sizes[order[self.most_start - 1]] == self.most_level:
                self.most_start -= 1
            self.most_next = self.most_end - 1
        if self.most_next < 0:
            return -1
        member = order[self.most_next]
        self.most_next -= 1
        return member

    def exclude_last_most_loaded(self) -> None:
        order = self.order
        last = self.most_next + 1
        end = self.most_end - 1
        order[last], order[end] = order[end], order[last]
        self.most_end = end


def assign_heterogeneous(spec: GroupSpec, topics: TopicDescriber) -> dict[str, Assignment]:
    if not spec.members:
        return {}
    builder = _Builder(spec, topics)
    if builder.subscribers:
        builder.assign_remaining(builder.unassigned())
        builder.balance()
    else:
        # Nobody subscribes to anything: everyone ends with nothing.
        for index, assignment in enumerate(builder.assignments):
            if assignment:
                builder.assignments[index] = {}
    current = spec.current_assignment
    result: dict[str, Assignment] = {}
    for member_id, assignment, copied in zip(builder.member_ids, builder.assignments, builder.copied):
        if copied:
            # A partition can leave a member and come back within balancing; the caller
            # detects "unchanged" by identity, so hand back the original when equal.
            old = current.get(member_id)
            if old is not None and old == assignment:
                assignment = old
        result[member_id] = assignment if assignment is not None else {}
    return result
