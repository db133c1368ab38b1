"""Uniform assignment when every member subscribes to the same topics.

Kafka's `UniformHomogeneousAssignmentBuilder`: balance first (assignment sizes differ by
at most one), then stickiness. Each member may keep up to its quota of what it holds;
what it must give up, and every partition nobody holds, is handed out in order to the
members still under quota.

Differences in representation, not in rules: partitions move as runs (`range` slices),
never one by one, so a full assignment of 500,000 partitions touches each member once.

Order of the unassigned partitions (decides *which* partitions a member gets, never how
many): first the partitions nobody holds, topic by topic in Kafka's `Uuid.compareTo`
order (Kafka uses its HashSet's order, which is not reproducible), ascending within a
topic; then the partitions revoked from members over quota, in member order.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping

from .partitions import (
    EMPTY_PARTITIONS,
    Partitions,
    canonical_sorted,
    free_runs,
    partitions_below,
    partitions_prefix,
    partitions_suffix,
    partitions_union,
)
from .spec import Assignment, GroupSpec, PartitionAssignorError, TopicDescriber, java_uuid_order
from .topic_index import UNKNOWN_TOPIC, TopicIndex

__all__ = ["assign_homogeneous"]


def assign_homogeneous(spec: GroupSpec, topics: TopicDescriber) -> dict[str, Assignment]:
    members = spec.members
    if not members:
        return {}
    get_current = spec.current_assignment.get
    subscribed = next(iter(members.values())).subscribed_topic_ids
    if not subscribed:
        return {member_id: _emptied(get_current(member_id)) for member_id in members}

    topic_order = sorted(subscribed, key=java_uuid_order)
    counts: list[int] = []
    for topic_id in topic_order:
        count = topics.num_partitions(topic_id)
        if count < 0:
            raise PartitionAssignorError(
                f"members are subscribed to topic {topic_id}, which is not in the topic metadata"
            )
        counts.append(count)
    member_count = len(members)
    min_quota, extras_left = divmod(sum(counts), member_count)

    if not spec.current_assignment:
        return _assign_fresh(list(members), topic_order, counts, min_quota, extras_left)

    index = TopicIndex(topic_order)
    index_by_identity = index.by_identity.get

    # Pass 1 (Kafka's maybeRevokePartitions): keep what fits the quota, revoke the rest.
    held_counts = [0] * len(topic_order)
    revoked: list[tuple[uuid.UUID, Partitions]] = []
    unfilled: list[tuple[str, int, Assignment | None]] = []
    result: dict[str, Assignment | None] = {}
    for member_position, member_id in enumerate(members):
        old = get_current(member_id)
        quota = min_quota
        holds_extra = extras_left > 0
        if holds_extra:
            quota += 1
        new: Assignment = old  # type: ignore[assignment]  # None only when falsy; then never indexed
        if old:
            for topic_id, parts in old.items():
                topic = index_by_identity(id(topic_id))
                if topic is None:
                    topic = index.lookup_by_value(topic_id)
                if topic == UNKNOWN_TOPIC:  # no longer subscribed
                    if new is old:
                        new = dict(old)
                    del new[topic_id]
                    continue
                count = counts[topic]
                size = len(parts)
                if size and parts[-1] >= count:
                    # Ids beyond the partition count cannot be kept (Kafka never shrinks
                    # a topic, so this only guards against inconsistent input).
                    parts = partitions_below(parts, count)
                    size = len(parts)
                    if new is old:
                        new = dict(old)
                    if not size:
                        del new[topic_id]
                        continue
                    new[topic_id] = parts
                held_counts[topic] += size
                if size <= quota:
                    quota -= size
                    continue
                if new is old:
                    new = dict(old)
                if quota:
                    new[topic_id] = partitions_prefix(parts, quota)
                else:
                    del new[topic_id]
                revoked.append((topic_id, partitions_suffix(parts, quota)))
                quota = 0
        if holds_extra:
            # KAFKA-18688: a member below its quota gives the tentative extra partition up
            # while enough members remain to take every extra, so that a member already
            # holding minQuota + 1 further on keeps it and a balanced assignment is stable.
            if quota and member_count - member_position > extras_left:
                quota -= 1
            else:
                extras_left -= 1
        result[member_id] = new
        if quota:
            unfilled.append((member_id, quota, new))

    runs = _unassigned_runs(index, counts, held_counts, members, get_current)
    runs.extend(revoked)

    return _hand_out(runs, unfilled, result)


def _assign_fresh(
    members: list[str], topic_order: list[uuid.UUID], counts: list[int], min_quota: int, extras: int
) -> dict[str, Assignment]:
    """A group where nobody holds anything: every partition is unassigned, nobody is over
    quota, and by the KAFKA-18688 rule the extras go to the last `extras` members. Members
    take consecutive slices of the topics in order, as in `_hand_out`, but a block of
    members whose slices fall inside one topic is built with C-level loops."""
    member_count = len(members)
    regular = member_count - extras  # members [0, regular) take min_quota, the rest one more
    result: dict[str, Assignment] = {}
    topic = 0
    start = 0  # next unassigned partition of topic_order[topic]
    member = 0
    while member < member_count:
        quota = min_quota if member < regular else min_quota + 1
        block_end = regular if member < regular else member_count
        if quota == 0:
            result.update((member_id, {}) for member_id in members[member:block_end])
            member = block_end
            continue
        while topic < len(counts) and start == counts[topic]:
            topic += 1
            start = 0
        fitting = min((counts[topic] - start) // quota, block_end - member) if topic < len(counts) else 0
        if fitting:
            topic_id = topic_order[topic]
            stop = start + fitting * quota
            slices = map(range, range(start, stop, quota), range(start + quota, stop + quota, quota))
            result.update(zip(members[member : member + fitting], [{topic_id: r} for r in slices]))
            member += fitting
            start = stop
            continue
        # This member's slice runs over the end of the topic: take it piece by piece.
        assignment: Assignment = {}
        while quota:
            if topic == len(counts):
                # Not reachable: the quotas add up to the partition count.
                raise PartitionAssignorError("ran out of partitions for a fresh assignment")
            taken = min(quota, counts[topic] - start)
            if taken:
                assignment[topic_order[topic]] = range(start, start + taken)
            quota -= taken
            start += taken
            if start == counts[topic]:
                topic += 1
                start = 0
        result[members[member]] = assignment
        member += 1
    return result


def _hand_out(
    runs: list[tuple[uuid.UUID, Partitions]],
    takers: Iterable[tuple[str, int, Assignment | None]],
    result: dict[str, Assignment | None],
) -> dict[str, Assignment]:
    """Kafka's assignRemainingPartitions: each (member, quota, assignment so far) takes
    the next `quota` partitions of `runs`, in order. Entries of `result` still None
    (members that hold nothing and got nothing) become empty assignments."""
    run_count = len(runs)
    run_index = 0
    offset = 0
    for member_id, quota, new in takers:
        if run_index == run_count:
            break
        topic_id, run = runs[run_index]
        left = len(run) - offset
        if left > quota and not new:
            # The common case: a slice of a single run, nothing to merge with.
            piece = run[offset : offset + quota]
            offset += quota
            result[member_id] = {topic_id: piece if type(piece) is range else canonical_sorted(piece)}
            continue
        pieces = []
        while quota and run_index < run_count:
            topic_id, run = runs[run_index]
            left = len(run) - offset
            if left > quota:
                pieces.append((topic_id, run[offset : offset + quota]))
                offset += quota
                break
            pieces.append((topic_id, run[offset:] if offset else run))
            quota -= left
            run_index += 1
            offset = 0
        merged = dict(new) if new else {}
        for topic_id, piece in pieces:
            merged[topic_id] = partitions_union(merged.get(topic_id, EMPTY_PARTITIONS), piece)
        result[member_id] = merged

    if run_index < run_count:
        raise PartitionAssignorError("partitions were left unassigned")
    for member_id, assignment in result.items():
        if assignment is None:
            result[member_id] = {}
    return result  # type: ignore[return-value]


def _emptied(old: Assignment | None) -> Assignment:
    """An empty assignment, reusing `old` if it already is one (so it reads unchanged)."""
    return old if old is not None and not old else {}


def _unassigned_runs(
    index: TopicIndex,
    counts: list[int],
    held_counts: list[int],
    members: Mapping[str, object],
    get_current: Callable[[str], Assignment | None],
) -> list[tuple[uuid.UUID, Partitions]]:
    """Runs of partitions no member holds, in topic order then ascending.

    A topic nobody holds is one run and a fully held topic has none, which covers a fresh
    group and a steady one without looking at any member again. Only a partly held topic
    (a member left, partitions were added) needs a scan of the holdings.
    """
    partly_held = {t for t, held in enumerate(held_counts) if 0 < held < counts[t]}
    held: dict[int, list[Partitions]] = {t: [] for t in partly_held}
    if partly_held:
        for member_id in members:
            old = get_current(member_id)
            if not old:
                continue
            for topic_id, parts in old.items():
                topic = index.lookup(topic_id)
                if topic in partly_held and parts:
                    held[topic].append(partitions_below(parts, counts[topic]))

    runs: list[tuple[uuid.UUID, Partitions]] = []
    for topic, topic_id in enumerate(index.topic_ids):
        if held_counts[topic] == 0:
            if counts[topic]:
                runs.append((topic_id, range(counts[topic])))
        elif topic in partly_held:
            runs.extend((topic_id, run) for run in free_runs(counts[topic], held[topic]))
    return runs
