"""The classic group rebalance machinery shared by JoinGroup, SyncGroup, LeaveGroup and
timers (Kafka's `prepareRebalance`, `completeClassicGroupJoin`, heartbeat and sync
expiration; docs/design/kafka-facts.md §9).

Handlers mutate the group directly (Kafka keeps classic groups outside its timelines)
and collect what must happen outside into `Effects`: GroupMetadata records, timer
changes, and responses to parked requests.
"""
from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from .. import record_helpers as rh
from ..kio_util import build
from ..result import CancelTimer, Effects, Result, ScheduleTimer  # noqa: F401 (Effects re-exported)
from ..timers import heartbeat_key, join_key, sync_key  # noqa: F401 (re-exported)
from ..timeutil import from_ms
from .group import ClassicGroup, ClassicGroupMember, ClassicGroupState

if TYPE_CHECKING:
    from ..context import ClassicView
    from .requests import JoinAnswer

# ------------------------------------------------------------------ responses
def join_response(answer: JoinAnswer, *, error: ErrorCode = ErrorCode.none, member_id: str = "",
                  generation_id: int = -1, protocol_type: str | None = None,
                  protocol_name: str | None = None, leader: str = "", skip_assignment: bool = False,
                  members: tuple = ()):
    mod = answer.response_schema
    if not answer.nullable_protocol_name:
        protocol_name = protocol_name or ""  # not nullable before v7
    return build(mod.JoinGroupResponse, throttle_time=from_ms(0), error_code=error,
                 generation_id=generation_id, protocol_type=protocol_type, protocol_name=protocol_name,
                 leader=leader or "", skip_assignment=skip_assignment, member_id=member_id,
                 members=tuple(build(mod.JoinGroupResponseMember, member_id=mid, group_instance_id=iid,
                                     metadata=meta) for mid, iid, meta in members))


def sync_response(mod: ModuleType, *, error: ErrorCode = ErrorCode.none, protocol_type: str | None = None,
                  protocol_name: str | None = None, assignment: bytes = b""):
    return build(mod.SyncGroupResponse, throttle_time=from_ms(0), error_code=error,
                 protocol_type=protocol_type, protocol_name=protocol_name, assignment=assignment)


def members_for_leader(group: ClassicGroup) -> tuple:
    return tuple((m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name))
                 for m in group.members.values())


def complete_join(fx: Effects, group: ClassicGroup, member: ClassicGroupMember, **fields) -> None:
    parked = group.take_join(member)
    if parked is not None:
        fx.completions.append((parked.token, join_response(parked.answer, **fields)))


def complete_sync(fx: Effects, member: ClassicGroupMember, **fields) -> None:
    parked, member.awaiting_sync = member.awaiting_sync, None
    if parked is not None:
        fx.completions.append((parked.token, sync_response(parked.answer, **fields)))


def current_generation_join(group: ClassicGroup, member_id: str, with_members: bool, **extra) -> dict:
    return dict(member_id=member_id, generation_id=group.generation_id, protocol_type=group.protocol_type,
                protocol_name=group.protocol_name, leader=group.leader_id or "",
                members=members_for_leader(group) if with_members else (), **extra)


# ------------------------------------------------------------------- timers
def reschedule_heartbeat(shard: ClassicView, fx: Effects, group: ClassicGroup,
                         member: ClassicGroupMember, now_ms: int, timeout_ms: int | None = None) -> None:
    fx.timers.append(ScheduleTimer(heartbeat_key(group.group_id, member.member_id),
                                   now_ms + (member.session_timeout_ms if timeout_ms is None else timeout_ms)))


# ---------------------------------------------------------------- rebalance
def maybe_prepare_rebalance_or_complete_join(shard, fx: Effects, group: ClassicGroup, reason: str,
                                             now_ms: int) -> None:
    if group.can_rebalance():
        prepare_rebalance(shard, fx, group, reason, now_ms)
    else:
        maybe_complete_join_phase(shard, fx, group, now_ms)


def prepare_rebalance(shard, fx: Effects, group: ClassicGroup, reason: str, now_ms: int) -> None:
    if group.state is ClassicGroupState.COMPLETING_REBALANCE:
        reset_and_propagate_assignment_with_error(fx, group, ErrorCode.rebalance_in_progress)
    fx.timers.append(CancelTimer(sync_key(group.group_id)))
    initial = group.state is ClassicGroupState.EMPTY
    if initial:
        # A new group: give members group.initial.rebalance.delay.ms to join before the
        # first generation, and keep extending while new members arrive.
        delay = shard.config.group_initial_rebalance_delay_ms
        remaining = max(group.rebalance_timeout_ms() - delay, 0)
        fx.timers.append(ScheduleTimer(join_key(group.group_id), now_ms + delay, ("initial", delay, remaining)))
    group.transition_to(ClassicGroupState.PREPARING_REBALANCE, now_ms)
    shard.log.info("[GroupId %s] Preparing to rebalance group in state %s with old generation %d (reason: %s).",
                   group.group_id, group.state.value, group.generation_id, reason)
    if not initial:
        if group.has_all_members_joined():
            complete_group_join(shard, fx, group, now_ms)
        else:
            fx.timers.append(ScheduleTimer(join_key(group.group_id), now_ms + group.rebalance_timeout_ms(),
                                           ("rebalance",)))


def maybe_complete_join_phase(shard, fx: Effects, group: ClassicGroup, now_ms: int) -> None:
    # Never early during an initial rebalance: the delay timer decides (Kafka checks the
    # previous state is not EMPTY).
    if (group.state is ClassicGroupState.PREPARING_REBALANCE and group.has_all_members_joined()
            and group.previous_state is not ClassicGroupState.EMPTY):
        complete_group_join(shard, fx, group, now_ms)


def complete_group_join(shard, fx: Effects, group: ClassicGroup, now_ms: int) -> None:
    """`completeClassicGroupJoin`: drop dynamic members that did not rejoin, start the next
    generation, answer every parked JoinGroup (the leader gets the member list)."""
    gid = group.group_id
    fx.timers.append(CancelTimer(join_key(gid)))
    for m in [m for m in group.not_yet_rejoined_members() if m.group_instance_id is None]:
        group.remove(m.member_id)
        fx.timers.append(CancelTimer(heartbeat_key(gid, m.member_id)))
    if group.state is ClassicGroupState.DEAD:
        return
    if not group.maybe_elect_new_joined_leader() and group.members:
        # Nobody rejoined yet: wait another rebalance timeout for session expiry to act.
        fx.timers.append(ScheduleTimer(join_key(gid), now_ms + group.rebalance_timeout_ms(), ("rebalance",)))
        return
    group.init_next_generation(now_ms)
    if group.state is ClassicGroupState.EMPTY:
        fx.records.append(rh.group_metadata_record(group, {}))
        return
    shard.log.info("[GroupId %s] Stabilized group generation %d with %d members.", gid, group.generation_id,
                   len(group.members))
    for m in list(group.members.values()):
        complete_join(fx, group, m, **current_generation_join(group, m.member_id, group.is_leader(m.member_id)))
        m.is_new = False
        reschedule_heartbeat(shard, fx, group, m, now_ms)
        group.pending_sync_members.add(m.member_id)
    fx.timers.append(ScheduleTimer(sync_key(gid), now_ms + group.rebalance_timeout_ms(), group.generation_id))


def reset_and_propagate_assignment_with_error(fx: Effects, group: ClassicGroup, error: ErrorCode) -> None:
    for m in group.members.values():
        m.assignment = b""
        complete_sync(fx, m, error=error)


def remove_member_and_update_group(shard, fx: Effects, group: ClassicGroup, member: ClassicGroupMember,
                                   reason: str, now_ms: int) -> None:
    """A member is gone (session expiry, LeaveGroup): answer its parked JoinGroup with
    UNKNOWN_MEMBER_ID (so a live client rejoins) and rebalance the rest."""
    complete_join(fx, group, member, error=ErrorCode.unknown_member_id, member_id="")
    complete_sync(fx, member, error=ErrorCode.unknown_member_id)
    group.remove(member.member_id)
    fx.timers.append(CancelTimer(heartbeat_key(group.group_id, member.member_id)))
    if group.state in (ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE):
        maybe_prepare_rebalance_or_complete_join(shard, fx, group, reason, now_ms)
    elif group.state is ClassicGroupState.PREPARING_REBALANCE and group.has_all_members_joined():
        complete_group_join(shard, fx, group, now_ms)


# ------------------------------------------------------------- timer expiry
def on_join_timer(shard, group: ClassicGroup, payload, now_ms: int) -> Result:
    fx = Effects()
    if group.state is not ClassicGroupState.PREPARING_REBALANCE:
        return fx.result()
    if payload and payload[0] == "initial":
        _, delay, remaining = payload
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            new_delay = min(shard.config.group_initial_rebalance_delay_ms, remaining)
            fx.timers.append(ScheduleTimer(join_key(group.group_id), now_ms + new_delay,
                                           ("initial", new_delay, max(remaining - delay, 0))))
            return fx.result()
    complete_group_join(shard, fx, group, now_ms)
    return fx.result()


def on_sync_timer(shard, group: ClassicGroup, generation: int, now_ms: int) -> Result:
    """Members that never sent SyncGroup in time are removed, then the group rebalances."""
    fx = Effects()
    if generation != group.generation_id or group.state not in (
            ClassicGroupState.COMPLETING_REBALANCE, ClassicGroupState.STABLE):
        return fx.result()
    missing = [mid for mid in group.pending_sync_members if mid in group.members]
    if missing:
        group.pending_sync_members.clear()
        for mid in missing:
            member = group.members[mid]
            complete_sync(fx, member, error=ErrorCode.unknown_member_id)
            group.remove(mid)
            fx.timers.append(CancelTimer(heartbeat_key(group.group_id, mid)))
        prepare_rebalance(shard, fx, group, f"Removing {missing} on pending sync request expiration", now_ms)
    return fx.result()


def on_heartbeat_timer(shard, group: ClassicGroup, member_id: str, now_ms: int) -> Result:
    fx = Effects()
    if member_id in group.pending_join_members:
        group.pending_join_members.discard(member_id)
        maybe_complete_join_phase(shard, fx, group, now_ms)
        return fx.result()
    member = group.members.get(member_id)
    if member is None or member.has_satisfied_heartbeat():
        return fx.result()
    shard.log.info("[GroupId %s] Member %s in group has failed, removing it from the group.",
                   group.group_id, member_id)
    remove_member_and_update_group(shard, fx, group, member,
                                   f"removing member {member_id} on heartbeat expiration", now_ms)
    return fx.result()
