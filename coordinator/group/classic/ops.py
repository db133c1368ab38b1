"""SyncGroup, Heartbeat and LeaveGroup for classic groups (docs/design/kafka-facts.md §9.3). Requests for a
consumer group (classic members inside a KIP-848 group) never come here: the shard serves them
from migration/ (operations.py rows).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from .. import record_helpers as rh
from ..kio_util import build
from ..result import CancelTimer, Result
from ..timeutil import from_ms
from .group import ClassicGroup, ClassicGroupState, Parked
from .join import answer, validate_member
from .rebalance import (
    Effects,
    complete_join,
    complete_sync,
    heartbeat_key,
    maybe_complete_join_phase,
    maybe_prepare_rebalance_or_complete_join,
    reschedule_heartbeat,
    sync_response,
)

if TYPE_CHECKING:
    from ..context import ClassicView, RequestContext
    from .requests import Heartbeat, LeaveGroup, SyncGroup


# ------------------------------------------------------------------ SyncGroup
def sync_group(shard: ClassicView, ctx: RequestContext, req: SyncGroup, now_ms: int) -> Result:
    v = req.response_schema
    group = shard.groups.get(req.group_id)
    if not isinstance(group, ClassicGroup):
        return Result(response=sync_response(v, error=ErrorCode.unknown_member_id), replay=False)
    error = _validate_sync(group, req)
    if error is not None:
        return Result(response=sync_response(v, error=error), replay=False)
    fx = Effects()
    member_id = req.member_id
    if group.state is ClassicGroupState.PREPARING_REBALANCE:
        return Result(response=sync_response(v, error=ErrorCode.rebalance_in_progress), replay=False)
    member = group.members[member_id]
    group.pending_sync_members.discard(member_id)
    if group.state is ClassicGroupState.STABLE:
        return Result(response=sync_response(v, protocol_type=group.protocol_type,
                                             protocol_name=group.protocol_name,
                                             assignment=member.assignment), replay=False)
    # COMPLETING_REBALANCE: wait for the leader's assignment.
    parked = Parked(shard.next_token(), v)
    member.awaiting_sync = parked
    if group.is_leader(member_id):
        assignments = {a.member_id: bytes(a.assignment) for a in req.assignments}
        missing = [mid for mid in group.members if mid not in assignments]
        if missing:
            shard.log.warning("[GroupId %s] Setting empty assignments for members %s for generation %d.",
                              group.group_id, missing, group.generation_id)
        for mid in missing:
            assignments[mid] = b""
        # Kafka moves to STABLE once this record is durable; here every response waits for
        # the same write, and a failed write reloads the shard (members then rejoin).
        fx.records.append(rh.group_metadata_record(group, assignments))
        for m in group.members.values():
            m.assignment = assignments.get(m.member_id, b"")
            complete_sync(fx, m, protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                          assignment=m.assignment)
        group.transition_to(ClassicGroupState.STABLE, now_ms)
    return answer(fx, parked)


def _validate_sync(group: ClassicGroup, req) -> ErrorCode | None:
    if group.state is ClassicGroupState.DEAD:
        return ErrorCode.coordinator_not_available
    error = validate_member(group, req.member_id, req.group_instance_id)
    if error is not None:
        return error
    if req.generation_id != group.generation_id:
        return ErrorCode.illegal_generation
    protocol_type = req.protocol_type
    protocol_name = req.protocol_name
    # KIP-559 (v5): the protocol the member thinks it synced must be the group's.
    if protocol_type is not None and protocol_type != (group.protocol_type or ""):
        return ErrorCode.inconsistent_group_protocol
    if protocol_name is not None and protocol_name != (group.protocol_name or ""):
        return ErrorCode.inconsistent_group_protocol
    return None


# ------------------------------------------------------------------ Heartbeat
def heartbeat(shard: ClassicView, ctx: RequestContext, req: Heartbeat, now_ms: int) -> Result:
    mod = req.response_schema

    def reply(code: ErrorCode, fx: Effects | None = None) -> Result:
        r = build(mod.HeartbeatResponse, throttle_time=from_ms(0), error_code=code)
        return fx.result(response=r) if fx else Result(response=r, replay=False)

    group = shard.groups.get(req.group_id)
    if not isinstance(group, ClassicGroup):
        return reply(ErrorCode.unknown_member_id)
    if group.state is ClassicGroupState.DEAD:
        return reply(ErrorCode.coordinator_not_available)
    error = validate_member(group, req.member_id, req.group_instance_id)
    if error is not None:
        return reply(error)
    if req.generation_id != group.generation_id:
        return reply(ErrorCode.illegal_generation)
    if group.state is ClassicGroupState.EMPTY:
        return reply(ErrorCode.unknown_member_id)
    fx = Effects()
    reschedule_heartbeat(shard, fx, group, group.members[req.member_id], now_ms)
    if group.state is ClassicGroupState.PREPARING_REBALANCE:
        return reply(ErrorCode.rebalance_in_progress, fx)
    return reply(ErrorCode.none, fx)


# ----------------------------------------------------------------- LeaveGroup
def leave_group(shard: ClassicView, ctx: RequestContext, req: LeaveGroup, now_ms: int) -> Result:
    mod = req.response_schema
    identities = req.members
    group = shard.groups.get(req.group_id)

    def reply(top: ErrorCode, members: list[tuple[str, str | None, ErrorCode]], fx: Effects | None = None):
        if not req.lists_members:
            # v0-2 carry one member: its error is the response's error.
            top = members[0][2] if members and top is ErrorCode.none else top
        listed = () if not req.lists_members else tuple(build(mod.MemberResponse, member_id=mid, group_instance_id=iid,
                                              error_code=code) for mid, iid, code in members)
        r = build(mod.LeaveGroupResponse, throttle_time=from_ms(0), error_code=top, members=listed)
        return fx.result(response=r) if fx else Result(response=r, replay=False)

    if not isinstance(group, ClassicGroup):
        return reply(ErrorCode.none, [(mid, iid, ErrorCode.unknown_member_id) for mid, iid in identities])
    if group.state is ClassicGroupState.DEAD:
        return reply(ErrorCode.coordinator_not_available, [])
    fx = Effects()
    out = []
    left = []
    for member_id, instance_id in identities:
        if member_id == "":
            # Administrative removal by instance id (KIP-345).
            target = group.static_member_id(instance_id)
            if target is None:
                out.append((member_id, instance_id, ErrorCode.unknown_member_id))
                continue
            _remove_current_member(fx, group, target)
        elif member_id in group.pending_join_members:
            group.pending_join_members.discard(member_id)
            fx.timers.append(CancelTimer(heartbeat_key(group.group_id, member_id)))
        else:
            error = validate_member(group, member_id, instance_id)
            if error is not None:
                out.append((member_id, instance_id, error))
                continue
            _remove_current_member(fx, group, member_id)
        out.append((member_id, instance_id, ErrorCode.none))
        left.append(member_id or instance_id)
    if left:
        reason = f"explicit `LeaveGroup` request for ({', '.join(left)}) members."  # type: ignore[arg-type]  # a member id or an instance id, never both None
        if group.state in (ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE):
            maybe_prepare_rebalance_or_complete_join(shard, fx, group, reason, now_ms)
        elif group.state is ClassicGroupState.PREPARING_REBALANCE:
            maybe_complete_join_phase(shard, fx, group, now_ms)
    return reply(ErrorCode.none, out, fx)


def _remove_current_member(fx: Effects, group: ClassicGroup, member_id: str) -> None:
    member = group.members[member_id]
    fx.timers.append(CancelTimer(heartbeat_key(group.group_id, member_id)))
    # A member leaving while its JoinGroup is parked gets UNKNOWN_MEMBER_ID, so a still
    # running client rejoins from scratch.
    complete_join(fx, group, member, error=ErrorCode.unknown_member_id, member_id="")
    complete_sync(fx, member, error=ErrorCode.unknown_member_id)
    group.remove(member_id)
