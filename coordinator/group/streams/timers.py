"""The streams group's timers (one kind, `streams`; membership.py names the keys).

Rules (each handler re-checks what armed it, timers.py of the kernel):
- session: the member did not heartbeat within the session timeout; it is fenced (removed);
- rebalance: the member still holds tasks pending revocation at the epoch it had to leave
  them by; it is fenced;
- assignment: the target the pacing held back is computed now, if the group still needs one;
- warmup: kcoord's probe while warm-ups are held back (warmup.py): a group epoch bump, if due;
- a loaded shard arms them again for its streams groups (`on_loaded`, Kafka's `onLoaded`).
"""
from __future__ import annotations

from typing import Any

from ..result import Result, ScheduleTimer
from .membership import (
    assignment_configs,
    assignment_timer,
    can_compute,
    compute_target,
    configured_for,
    end_quiet_hold,
    endpoint_changed,
    forget_due,
    group_epoch_record,
    group_settings,
    rebalance_key,
    removal_records,
    removal_timers,
    session_key,
    soft_of,
)
from .model import MemberState, StreamsGroup
from .warmup import on_probe


def on_timer(shard: Any, key: tuple, payload: Any, now_ms: int) -> Result:
    what, group_id = key[1], key[2]
    group = shard.groups.get(group_id)
    if not isinstance(group, StreamsGroup):
        return Result()
    if what == "assignment":
        return _assignment(shard, group, now_ms)
    if what == "warmup":
        return on_probe(shard, group, now_ms)
    member = group.members.get(key[3])
    if member is None:
        return Result()
    if what == "rebalance" and not (member.state is MemberState.UNREVOKED_TASKS and member.member_epoch == payload):
        return Result()
    shard.log.info("streams group %s: member %s fenced (%s timeout)", group_id, member.member_id, what)
    soft = soft_of(shard, group_id)
    endpoint_changed(soft, member, None)
    forget_due(soft, member.member_id)
    if len(group.members) == 1:
        soft.shutdown_requester = soft.initial_delay_until_ms = soft.quiet_hold = soft.warmups = None
    return Result(records=removal_records(group, member.member_id),
                  timers=removal_timers(group_id, member.member_id))


def _assignment(shard: Any, group: StreamsGroup, now_ms: int) -> Result:
    if group.group_epoch <= group.target_assignment_epoch or not group.members:
        return Result()
    settings = group_settings(shard, group.group_id)
    soft = soft_of(shard, group.group_id)
    when = can_compute(group, soft, settings, now_ms)
    if when is not None:
        return Result(timers=[assignment_timer(group.group_id, when)])
    configured = None if group.topology is None else configured_for(soft, group.topology, shard.image)
    records: list = []
    epoch = group.group_epoch
    if configured is not None and group.topology is not None and configured.metadata_hash != group.metadata_hash:
        # The shard's image is not the one the group's hash describes: a shard that moved to
        # another kcoord process may load with an image older than the hash (each process
        # refreshes its own), missing a topic created a moment before. The target computed
        # from it is stamped with that image's hash in a new epoch, as the heartbeat does when
        # the hash changes, so the next heartbeat after the image catches up starts another
        # (the consumer groups' assignment timer does the same; tests/unit/group/streams/
        # test_target_image.py).
        epoch += 1
        validated = group.topology.epoch if configured.is_ready() else -1
        # the target below is computed with the current settings: the epoch records their configs,
        # so the next heartbeat does not bump again for the same target
        records.append(group_epoch_record(group, epoch, configured.metadata_hash, validated,
                                          assignment_configs(settings)))
    target_records, target = compute_target(group, dict(group.members), configured, epoch, settings, now_ms,
                                            soft=soft)
    end_quiet_hold(soft, target, settings)
    return Result(records=records + target_records)


def on_loaded(shard: Any, now_ms: int) -> list:
    """Kafka's `onLoaded` for streams groups: a session timer for every member, a rebalance
    timer for every member still revoking, and the assignment timer of a group whose target is
    behind its epoch."""
    timers: list = []
    for group in shard.groups.values():
        if not isinstance(group, StreamsGroup):
            continue
        settings = group_settings(shard, group.group_id)
        for m in group.members.values():
            timers.append(ScheduleTimer(session_key(group.group_id, m.member_id), now_ms + settings.session_timeout_ms))
            if m.state is MemberState.UNREVOKED_TASKS:
                timers.append(ScheduleTimer(rebalance_key(group.group_id, m.member_id),
                                            now_ms + m.rebalance_timeout_ms, m.member_epoch))
        if group.members and group.group_epoch > group.target_assignment_epoch:
            timers.append(assignment_timer(group.group_id, now_ms))
    return timers
