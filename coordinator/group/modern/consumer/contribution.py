"""What modern/consumer/ adds to the shard (group_types.Contribution): the consumer group type
(KIP-848), its replay rules, the client-side assignors' prepare/install rows, its timers that
need no conversion (assignment, client assignment, regex refresh; migration/ owns those that
may fence a member, since fencing the last consumer-protocol member downgrades the group),
what a loaded shard and a metadata change arm for it, and the heartbeat interval policy it
keeps on the shard. The consumer group heartbeat's row is migration/'s (migration/rows.py).
"""
from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

from ... import record_helpers as rh
from ...errors import ApiError
from ...group_types import Contribution
from ...result import Result, ScheduleTimer, TimerOp
from ...timers import TimerKind, assignment_key
from . import client_mode, regex_refresh
from .assignment_pacing import assignment_timer
from .group import ConsumerGroup, MemberState
from .group_type import ConsumerGroupType
from .heartbeat_policy import HeartbeatIntervalPolicy, group_overrides, session_timeout_ms
from .membership import (
    compute_target_assignment,
    metadata_hash,
    rebalance_timer,
    session_timer,
    subscribed_topic_names,
)
from .replay import REPLAY_RULES

if TYPE_CHECKING:
    from ...context import RequestContext
    from .view import ConsumerView

log = logging.getLogger("kcoord.shard")


def _prepare_assignment(shard: ConsumerView, ctx: RequestContext, req, now_ms: int) -> Result:
    return client_mode.prepare_assignment(shard, req, now_ms)


def _install_assignment(shard: ConsumerView, ctx: RequestContext, req, now_ms: int) -> Result:
    return client_mode.install_assignment(shard, req, now_ms)


def _on_assignment(shard: ConsumerView, key: tuple, payload: Any, now_ms: int) -> Result:
    group = shard.groups.get(key[1])
    if not isinstance(group, ConsumerGroup) or not group.members or group.assignment_epoch >= group.group_epoch:
        return Result()
    # The target is computed from this shard's image, which must be the one the group's
    # metadata hash describes. A shard that moved to another kcoord process may find an
    # image older than the hash (each process refreshes its own every
    # metadata_refresh_interval_ms): a topic created a moment before is missing. A target
    # computed from it gives that topic's partitions to nobody, and once the image catches
    # up the hash matches again, so no heartbeat would ever compute another. Bump the epoch
    # with the hash of the image used, as Kafka's heartbeat does when the subscribed topics'
    # hash changes: the next refresh then differs from it and starts the next epoch
    # (tests/unit/group/test_consumer_target_image.py).
    records: list = []
    epoch = group.group_epoch
    image_hash = metadata_hash(shard.image, subscribed_topic_names(group, group.subscribed_topic_names,
                                                                   group.regex_subscribers))
    if image_hash != group.metadata_hash:
        epoch += 1
        records.append(rh.group_epoch_record(group.group_id, epoch, image_hash))
        if group.has_partition_metadata_record:
            records.append(rh.partition_metadata_tombstone(group.group_id))
        if client_mode.in_client_mode(group, None) is not None:
            # a member computes it from a snapshot of this image: asked once the new epoch is
            # replayed, by this timer again at once
            return Result(records=records, timers=[ScheduleTimer(assignment_key(group.group_id), now_ms)])
    asked = client_mode.on_assignment_timer(shard, group, now_ms)
    if asked is not None:
        return asked   # client mode: a member computes it (docs/design/client-assignors-spec.md)
    try:
        target_records, _ = compute_target_assignment(shard, group, epoch, None, now_ms)
    except ApiError as e:
        log.error("[GroupId %s] %s", group.group_id, e.message)
        return Result()
    return Result(records=records + target_records)


def _on_client_assignment(shard: ConsumerView, key: tuple, payload: Any, now_ms: int) -> Result:
    group = shard.groups.get(key[1])
    if not isinstance(group, ConsumerGroup):
        shard.client_assignments.pop(key[1], None)
        return Result()
    return client_mode.on_deadline(shard, group, now_ms)


def _on_regex_refresh(shard: ConsumerView, key: tuple, payload: Any, now_ms: int) -> Result:
    group = shard.groups.get(key[1])
    if not isinstance(group, ConsumerGroup):
        return Result()
    return regex_refresh.refresh(shard, group, now_ms)


def on_loaded(shard: ConsumerView, now_ms: int) -> list[TimerOp]:
    """Kafka's `onLoaded`: session timers for every member, rebalance timers for members
    still revoking, plus pending target computations."""
    timers: list[TimerOp] = []
    for group in shard.groups.values():
        if not isinstance(group, ConsumerGroup):
            continue
        group.metadata_refresh_requested = True
        for member in group.members.values():
            timers.append(ScheduleTimer(session_timer(group.group_id, member.member_id),
                                        now_ms + session_timeout_ms(shard, group.group_id, member)))
            if member.state is MemberState.UNREVOKED_PARTITIONS and not member.uses_classic_protocol:
                timers.append(ScheduleTimer(rebalance_timer(group.group_id, member.member_id),
                                            now_ms + member.rebalance_timeout_ms, member.member_epoch))
        if group.members and group.assignment_epoch < group.group_epoch:
            timers.append(assignment_timer(shard, group))
    return timers


def on_metadata_update(shard: ConsumerView, changed: frozenset[str] | set[str], now_ms: int) -> list[TimerOp]:
    """Groups subscribed to a changed topic recompute their metadata hash on the next
    heartbeat (Kafka: `requestMetadataRefresh`); regex groups re-resolve."""
    timers: list[TimerOp] = []
    for group in shard.groups.values():
        if not isinstance(group, ConsumerGroup) or not group.members:
            continue
        names = subscribed_topic_names(group, group.subscribed_topic_names, group.regex_subscribers)
        if names & changed:
            group.metadata_refresh_requested = True
        timer = regex_refresh.refresh_timer(shard.config, group, now_ms, shard.last_image_version_with_new_topics)
        if timer is not None:
            timers.append(timer)
    return timers


def attach(shard: Any) -> None:
    """The heartbeat interval policy, counting every member of the shard's groups (the
    service replaces the count with its process-wide one)."""
    shard.heartbeat_policy = HeartbeatIntervalPolicy(
        shard.config, lambda: sum(len(g.members) for g in shard.groups.values()),
        functools.partial(group_overrides, shard))     # a partial: no frame of its own per heartbeat


CONTRIBUTION = Contribution(
    name="consumer",
    group_class=ConsumerGroup,
    group_type=ConsumerGroupType(),
    replay_rules=REPLAY_RULES,
    operations=(("consumer_group_prepare_assignment", None, _prepare_assignment),
                ("consumer_group_install_assignment", None, _install_assignment)),
    timers={TimerKind.ASSIGNMENT.value: _on_assignment,
            TimerKind.CLIENT_ASSIGNMENT.value: _on_client_assignment,
            TimerKind.REGEX_REFRESH.value: _on_regex_refresh},
    on_loaded=on_loaded,
    on_metadata_update=on_metadata_update,
    attach=attach,
)
