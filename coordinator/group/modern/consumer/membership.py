"""Consumer-group membership computations shared by heartbeats, timers and (later)
classic members inside consumer groups.

Nothing here mutates the group: each function reads the current state, with the
member being updated "overlaid", and returns records (Kafka computes the same way
before its records are replayed).
"""
from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from ... import record_helpers as rh
from ...assignors import GroupSpec, MemberSubscription, PartitionAssignorError, SubscriptionType
from ...errors import ApiError
from ...hashing import group_metadata_hash
from ...image import MetadataImage, cached_topic_hash
from ...result import Result, TimerOp
from ...timers import cancel_member_timers, join_timer, rebalance_timer, session_timer, sync_timer  # noqa: F401 (re-exported)
from .group import ConsumerGroup, ConsumerGroupMember, TargetAssignment

if TYPE_CHECKING:
    from records import CoordinatorRecord

    from .view import ConsumerView




# --------------------------------------------------------------- subscriptions
def _overlay(group: ConsumerGroup, updated: Iterable[ConsumerGroupMember],
             removed: Iterable[str]) -> tuple[Counter, Counter, int]:
    """Subscribed names and regexes (with subscriber counts) as if `updated` replaced the
    members of the same id and `removed` had left; plus the resulting member count."""
    names = Counter(group.subscribed_topic_names)
    regexes = Counter(group.regex_subscribers)
    n = len(group.members)

    def drop(m: ConsumerGroupMember) -> None:
        names.subtract(m.subscribed_topic_names)
        if m.subscribed_topic_regex:
            regexes[m.subscribed_topic_regex] -= 1

    for member_id in removed:
        old = group.members.get(member_id)
        if old is not None:
            drop(old)
            n -= 1
    for m in updated:
        old = group.members.get(m.member_id)
        if old is not None:
            drop(old)
        else:
            n += 1
        names.update(m.subscribed_topic_names)
        if m.subscribed_topic_regex:
            regexes[m.subscribed_topic_regex] += 1
    return +names, +regexes, n


def subscribed_topic_names(group: ConsumerGroup, names: Counter, regexes: Counter) -> set[str]:
    """Topic names subscribed by name plus the topics resolved for subscribed regexes."""
    out = set(names)
    for regex in regexes:
        resolved = group.resolved_regexes.get(regex)
        if resolved is not None:
            out |= resolved.topics
    return out


def metadata_hash(image: MetadataImage, topic_names: Iterable[str]) -> int:
    """KIP-1101 group hash over the subscribed topics that exist."""
    pairs = []
    for name in topic_names:
        t = image.topics_by_name.get(name)
        if t is not None:
            pairs.append((name, cached_topic_hash(t)))
    return group_metadata_hash(pairs)


def subscription_type(names: Counter, regexes: Counter, num_members: int) -> SubscriptionType:
    """`ConsumerGroup.subscriptionType` (docs/design/kafka-facts.md §6)."""
    if not regexes:
        if all(count == num_members for count in names.values()):
            return SubscriptionType.HOMOGENEOUS
        return SubscriptionType.HETEROGENEOUS
    if not names and len(regexes) == 1 and next(iter(regexes.values())) == num_members:
        return SubscriptionType.HOMOGENEOUS
    return SubscriptionType.HETEROGENEOUS


def member_topic_ids(group: ConsumerGroup, image: MetadataImage,
                     member: ConsumerGroupMember) -> frozenset[uuid.UUID]:
    """Topic ids of the member's subscribed names and of its resolved regex (an
    unresolved regex matches nothing yet)."""
    ids = []
    by_name = image.topics_by_name
    for name in member.subscribed_topic_names:
        t = by_name.get(name)
        if t is not None:
            ids.append(t.topic_id)
    if member.subscribed_topic_regex:
        resolved = group.resolved_regexes.get(member.subscribed_topic_regex)
        if resolved is not None:
            for name in resolved.topics:
                t = by_name.get(name)
                if t is not None:
                    ids.append(t.topic_id)
    return frozenset(ids)


# ----------------------------------------------------------- target assignment
class _TopicDescriber:
    """The assignors' `SubscribedTopicDescriber` over the metadata image."""

    __slots__ = ("_by_id",)

    def __init__(self, image: MetadataImage) -> None:
        self._by_id = image.topics_by_id

    def num_partitions(self, topic_id: uuid.UUID) -> int:
        t = self._by_id.get(topic_id)
        return t.num_partitions if t is not None else -1


def compute_target_assignment(shard: ConsumerView, group: ConsumerGroup, group_epoch: int,
                              updated: ConsumerGroupMember | None, now_ms: int,
                              removed: Iterable[str] = ()
                              ) -> tuple[list[CoordinatorRecord], TargetAssignment]:
    """Run the group's preferred assignor over all members (with `updated` overlaid) and
    emit one TargetAssignmentMember record per member whose target changed, then the
    TargetAssignmentMetadata record (Kafka's `TargetAssignmentBuilder`)."""
    members = dict(group.members)
    removed = set(removed)
    previous_static_id = None
    if updated is not None:
        members[updated.member_id] = updated
        if updated.instance_id is not None:
            previous_static_id = group.static_members.get(updated.instance_id)
            if previous_static_id is not None and previous_static_id != updated.member_id:
                removed.add(previous_static_id)
    for member_id in removed:
        members.pop(member_id, None)

    names, regexes, n = _overlay(group, [updated] if updated else [], removed)
    sub_type = subscription_type(names, regexes, n)
    image = shard.image
    spec_members = {}
    current: dict[str, TargetAssignment] = {}
    for member_id, m in members.items():
        spec_members[member_id] = MemberSubscription(m.rack_id, m.instance_id,
                                                     member_topic_ids(group, image, m))
        target = group.target_assignment.get(member_id)
        if target is None and m is updated and previous_static_id is not None:
            # A static member that rejoined under a new member id keeps its old target.
            target = group.target_assignment.get(previous_static_id)
        if target:
            current[member_id] = target

    overlay = {updated.member_id: updated.server_assignor} if updated is not None else None
    assignor_name = group.preferred_server_assignor(shard.config.default_assignor, overlay)
    assignor = shard.assignors.get(assignor_name) or shard.assignors[shard.config.default_assignor]
    try:
        result = assignor.assign(GroupSpec(spec_members, sub_type, current), _TopicDescriber(image))
    except PartitionAssignorError as e:
        raise ApiError(ErrorCode.unknown_server_error,
                       f"Failed to compute a new target assignment for epoch {group_epoch}: {e}") from e

    records: list[CoordinatorRecord] = []
    for member_id in members:
        new = result.get(member_id) or {}
        old = current.get(member_id) or {}
        if new is not old and new != old:
            records.append(rh.target_member_record(group.group_id, member_id, new))
    records.append(rh.target_metadata_record(group.group_id, group_epoch, now_ms))
    target = result.get(updated.member_id, {}) if updated is not None else {}
    return records, target


# --------------------------------------------------------------------- fencing
def fence(shard: ConsumerView, group: ConsumerGroup, member_ids: list[str], now_ms: int) -> Result:
    """Kafka's `consumerGroupFenceMembers` without the downgrade branch: the members leave (a
    session or rebalance timeout, a leave, a static replacement). The shard and the heartbeat
    reach it through migration/conversion.py's `fence_or_downgrade`, which adds the branch."""
    records, timers = fence_members(shard, group, member_ids)
    return Result(records=records, timers=timers)


def fence_members(shard: ConsumerView, group: ConsumerGroup, member_ids: list[str]
                  ) -> tuple[list[CoordinatorRecord], list[TimerOp]]:
    """Kafka's `consumerGroupFenceMembers` without the downgrade branch (migration/ adds it):
    tombstone each member, drop regexes only they used, bump the group epoch."""
    gid = group.group_id
    records: list[CoordinatorRecord] = []
    timers: list[TimerOp] = []
    for member_id in member_ids:
        records.extend(rh.remove_member_records(gid, member_id))
        timers.extend(cancel_member_timers(gid, member_id))
    names, regexes, n = _overlay(group, [], member_ids)
    for regex in group.regex_subscribers:
        if regex not in regexes and regex in group.resolved_regexes:
            records.append(rh.regex_tombstone(gid, regex))
    new_hash = metadata_hash(shard.image, subscribed_topic_names(group, names, regexes))
    epoch = group.group_epoch + 1
    records.append(rh.group_epoch_record(gid, epoch, new_hash))
    if n == 0:
        # KAFKA-20442: with the last member gone, the target is (epoch, 0) so the empty
        # group is consistent and later offset commits are judged against it.
        records.append(rh.target_metadata_record(gid, epoch, 0))
    return records, timers
