"""JoinGroup for classic groups (Kafka's `classicGroupJoinToClassicGroup`, docs/design/kafka-facts.md §9.2):
new dynamic members (KIP-394 member id required), new static members (KIP-345),
existing members, the group size limit. A JoinGroup for a consumer group never comes here:
the shard serves it from migration/ (operations.py rows).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from .. import record_helpers as rh
from ..group_types import group_type
from ..result import Result, ScheduleTimer
from ..timeutil import to_ms
from .group import ClassicGroup, ClassicGroupMember, ClassicGroupState, Parked
from .rebalance import (
    Effects,
    complete_join,
    complete_sync,
    current_generation_join,
    heartbeat_key,
    join_response,
    maybe_complete_join_phase,
    maybe_prepare_rebalance_or_complete_join,
    prepare_rebalance,
    reschedule_heartbeat,
)

if TYPE_CHECKING:
    from ..context import ClassicView, RequestContext
    from .requests import JoinAnswer

UNKNOWN_MEMBER_ID = ""


def _protocols(req) -> list[tuple[str, bytes]]:
    """The member's protocols, one per name (the first wins). Kafka keys JoinGroup's
    protocols by name; a repeated name must not count twice towards "supported by every
    member", or no protocol qualifies and the join can never complete (found by fuzzing)."""
    seen: dict[str, bytes] = {}
    for p in req.protocols:
        seen.setdefault(p.name, bytes(p.metadata))
    return list(seen.items())


def _error(answer: JoinAnswer, error: ErrorCode, member_id: str = "") -> Result:
    return Result(response=join_response(answer, error=error, member_id=member_id), replay=False)


def invalid_join(shard: ClassicView, ctx: RequestContext, req) -> Result | None:
    """The checks every JoinGroup passes first, whatever the group's type: a group id, and a
    session timeout within group.min/max.session.timeout.ms."""
    if not req.group_id:
        return _error(req.answer, ErrorCode.invalid_group_id, req.member_id)
    session = to_ms(req.session_timeout)
    if not shard.config.group_min_session_timeout_ms <= session <= shard.config.group_max_session_timeout_ms:
        return _error(req.answer, ErrorCode.invalid_session_timeout, req.member_id)
    return None


def join_group(shard: ClassicView, ctx: RequestContext, req, now_ms: int) -> Result:
    v = req.answer
    invalid = invalid_join(shard, ctx, req)
    if invalid is not None:
        return invalid
    group = shard.groups.get(req.group_id)
    if group is not None and not isinstance(group, ClassicGroup) and not group.is_empty():
        # A group of another type with members and no JoinGroup row of its own (operations.py;
        # a consumer group has one, in migration/): a connect group (docs/design/connect-groups-spec.md)
        # has no online conversion (docs/design/connect-groups.md), and a JoinGroup must not replace it.
        return _error(v, ErrorCode.inconsistent_group_protocol, req.member_id)
    fx = Effects()
    unknown = req.member_id == UNKNOWN_MEMBER_ID
    if not isinstance(group, ClassicGroup):
        if not unknown:
            return _error(v, ErrorCode.unknown_member_id, req.member_id)
        if group is not None:
            # Offline downgrade: an empty consumer (or connect, the connect group spec phase C1) group becomes
            # a classic group whatever the migration policy (its tombstones are written, not
            # replayed: the swap is direct).
            fx.records.extend(group_type(group).tombstones(group))
        group = ClassicGroup(req.group_id, ClassicGroupState.EMPTY, now_ms)
        shard.groups[req.group_id] = group
        fx.records.append(rh.group_metadata_record(group, {}))
    if not _accept_joining_member(shard, group, req.member_id):
        return _error(v, ErrorCode.group_max_size_reached)
    parked = Parked(shard.next_token(), v)
    if unknown:
        _join_new_member(shard, ctx, req, group, parked, now_ms, fx)
    else:
        _join_existing_member(shard, ctx, req, group, parked, now_ms, fx)
    return answer(fx, parked)


def answer(fx: Effects, parked: Parked) -> Result:
    """The request's own response: a direct answer, its parked response if this very
    operation already completed it (the last member to join), or the parked token."""
    if fx.direct is not None:
        return fx.result(response=fx.direct)
    for i, (token, response) in enumerate(fx.completions):
        if token == parked.token:
            del fx.completions[i]
            return fx.result(response=response)
    return fx.result(parked=parked.token)


def _accept_joining_member(shard: ClassicView, group: ClassicGroup, member_id: str) -> bool:
    """`acceptJoiningMember` (group.max.size, KIP-389)."""
    limit = shard.config.group_max_size
    member = group.members.get(member_id)
    if group.state in (ClassicGroupState.EMPTY, ClassicGroupState.DEAD):
        return True
    if group.state is ClassicGroupState.PREPARING_REBALANCE:
        return (member is not None and member.awaiting_join is not None) or group.num_awaiting_join < limit
    return member is not None or len(group.members) < limit


def _direct(fx: Effects, response) -> None:
    fx.direct = response


def _join_new_member(shard, ctx, req, group: ClassicGroup, parked: Parked, now_ms: int, fx: Effects) -> None:
    v = req.answer
    protocols = _protocols(req)
    if group.state is ClassicGroupState.DEAD:
        return _direct(fx, join_response(v, error=ErrorCode.coordinator_not_available))
    if not group.supports_protocols(req.protocol_type, protocols):
        return _direct(fx, join_response(v, error=ErrorCode.inconsistent_group_protocol))
    instance_id = req.group_instance_id
    new_id = group.generate_member_id(ctx.client_id, instance_id)
    if instance_id is not None:
        existing = group.static_member_id(instance_id)
        if existing is not None:
            return _update_static_member(shard, ctx, req, group, existing, new_id, parked, now_ms, fx)
    elif v.member_id_required:
        # KIP-394: hand out a member id and make the client come back with it, so a
        # client that times out and retries does not leave a ghost member behind.
        group.pending_join_members.add(new_id)
        fx.timers.append(_pending_heartbeat(group, new_id, now_ms + to_ms(req.session_timeout)))
        return _direct(fx, join_response(v, error=ErrorCode.member_id_required, member_id=new_id))
    _add_member_and_rebalance(shard, ctx, req, group, new_id, parked, now_ms, fx)


def _pending_heartbeat(group: ClassicGroup, member_id: str, deadline: int) -> ScheduleTimer:
    return ScheduleTimer(heartbeat_key(group.group_id, member_id), deadline)


def _add_member_and_rebalance(shard, ctx, req, group: ClassicGroup, member_id: str, parked: Parked,
                              now_ms: int, fx: Effects) -> None:
    member = ClassicGroupMember(
        member_id=member_id, group_instance_id=req.group_instance_id,
        client_id=ctx.client_id, client_host=ctx.client_host,
        rebalance_timeout_ms=to_ms(req.rebalance_timeout),
        session_timeout_ms=to_ms(req.session_timeout), protocol_type=req.protocol_type,
        supported_protocols=_protocols(req), is_new=True)
    if group.state is ClassicGroupState.PREPARING_REBALANCE and group.previous_state is ClassicGroupState.EMPTY:
        group.new_member_added = True
    group.add(member, parked)
    # A new member cannot heartbeat before its JoinGroup is answered; a 5-minute join
    # timeout removes it if its client went away meanwhile.
    reschedule_heartbeat(shard, fx, group, member, now_ms, shard.config.classic_new_member_join_timeout_ms)
    maybe_prepare_rebalance_or_complete_join(
        shard, fx, group, f"Adding new member {member_id} with group instance id "
                          f"{member.group_instance_id}; client reason: {req.reason}", now_ms)


def _update_static_member(shard, ctx, req, group: ClassicGroup, old_id: str, new_id: str, parked: Parked,
                          now_ms: int, fx: Effects) -> None:
    """KIP-345: a known instance id joins with no member id (a restart). In STABLE, if the
    selected protocol would not change, persist the new member id without a rebalance."""
    v = req.answer
    old = group.members[old_id]
    # The previous incarnation's parked requests are answered FENCED_INSTANCE_ID.
    complete_join(fx, group, old, error=ErrorCode.fenced_instance_id, member_id=old_id)
    complete_sync(fx, old, error=ErrorCode.fenced_instance_id)
    leader_before = group.leader_id
    member = group.replace_static_member(req.group_instance_id, old_id, new_id)
    reschedule_heartbeat(shard, fx, group, member, now_ms)
    group.update_member(member, _protocols(req), to_ms(req.rebalance_timeout),
                        to_ms(req.session_timeout), parked)
    if group.state is ClassicGroupState.STABLE:
        if (group.protocol_name or "") == group.select_protocol():
            fx.records.append(rh.group_metadata_record(
                group, {m.member_id: m.assignment for m in group.members.values()}))
            group.take_join(member)
            if v.skip_assignment:
                is_leader = group.is_leader(new_id)
                # The leader must not re-run the assignor (SkipAssignment, KIP-814).
                _direct(fx, join_response(v, **current_generation_join(group, new_id, is_leader,
                                                                       skip_assignment=is_leader)))
            else:
                fields = current_generation_join(group, new_id, False)
                fields["leader"] = leader_before or ""
                _direct(fx, join_response(v, **fields))
            return
        maybe_prepare_rebalance_or_complete_join(
            shard, fx, group, f"Group's selected protocol will change because static member {new_id} "
                              f"with instance id {req.group_instance_id} joined with change of protocol", now_ms)
    elif group.state is ClassicGroupState.COMPLETING_REBALANCE:
        # The leader may already assign to the old member id: rebalance so the new id gets one.
        prepare_rebalance(shard, fx, group, f"Updating metadata for static member {new_id} with instance id "
                                            f"{req.group_instance_id}", now_ms)
    else:
        maybe_complete_join_phase(shard, fx, group, now_ms)


def _join_existing_member(shard, ctx, req, group: ClassicGroup, parked: Parked, now_ms: int, fx: Effects) -> None:
    v = req.answer
    member_id = req.member_id
    protocols = _protocols(req)
    if group.state is ClassicGroupState.DEAD:
        return _direct(fx, join_response(v, error=ErrorCode.coordinator_not_available, member_id=member_id))
    if not group.supports_protocols(req.protocol_type, protocols):
        return _direct(fx, join_response(v, error=ErrorCode.inconsistent_group_protocol, member_id=member_id))
    if member_id in group.pending_join_members:
        return _add_member_and_rebalance(shard, ctx, req, group, member_id, parked, now_ms, fx)
    error = validate_member(group, member_id, req.group_instance_id)
    if error is not None:
        return _direct(fx, join_response(v, error=error, member_id=member_id))
    member = group.members[member_id]
    rebalance_timeout = to_ms(req.rebalance_timeout)
    session_timeout = to_ms(req.session_timeout)

    def update_then_rebalance(reason: str) -> None:
        group.update_member(member, protocols, rebalance_timeout, session_timeout, parked)
        maybe_prepare_rebalance_or_complete_join(shard, fx, group, reason, now_ms)

    if group.state is ClassicGroupState.PREPARING_REBALANCE:
        update_then_rebalance(f"Member {member_id} is joining group during PreparingRebalance")
    elif group.state is ClassicGroupState.COMPLETING_REBALANCE:
        if member.matches(protocols):
            # A lost JoinGroup response: answer with the current generation again.
            _direct(fx, join_response(v, **current_generation_join(group, member_id, group.is_leader(member_id))))
        else:
            update_then_rebalance(f"Updating metadata for member {member_id} during CompletingRebalance")
    elif group.state is ClassicGroupState.STABLE:
        if group.is_leader(member_id):
            # The leader rejoining forces a rebalance: that is how a consumer leader reacts
            # to topic metadata changes that its members' metadata does not show.
            update_then_rebalance(f"Leader {member_id} re-joining group during Stable")
        elif not member.matches(protocols):
            update_then_rebalance(f"Updating metadata for member {member_id} during Stable")
        else:
            _direct(fx, join_response(v, **current_generation_join(group, member_id, False)))
    else:
        # Empty: let the member reset its generation and rejoin.
        _direct(fx, join_response(v, error=ErrorCode.unknown_member_id, member_id=member_id))


def validate_member(group: ClassicGroup, member_id: str, instance_id: str | None) -> ErrorCode | None:
    """`ClassicGroup.validateMember`."""
    if instance_id is not None:
        existing = group.static_member_id(instance_id)
        if existing is None:
            return ErrorCode.unknown_member_id
        if existing != member_id:
            return ErrorCode.fenced_instance_id
        return None
    if member_id not in group.members:
        return ErrorCode.unknown_member_id
    return None


