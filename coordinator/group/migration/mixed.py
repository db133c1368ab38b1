"""Classic-protocol members inside a consumer group (docs/design/kafka-facts.md §5.4).

A classic consumer keeps speaking JoinGroup/SyncGroup/Heartbeat while the group is a
KIP-848 group: its JoinGroup is translated into a heartbeat of the consumer group (its
subscription and owned partitions come from the embedded ConsumerProtocol metadata),
SyncGroup returns its current assignment, and Heartbeat answers REBALANCE_IN_PROGRESS
whenever it must rejoin to move on in its reconciliation.
"""
from __future__ import annotations

import uuid
from dataclasses import replace
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from records import ClassicMemberMetadata, ClassicProtocol

from ...protocol.consumer_protocol import MalformedProtocolData, decode_subscription, encode_assignment
from ..classic.group import ClassicGroupMember
from ..classic.join import join_group
from ..classic.rebalance import join_response, sync_response
from ..errors import ApiError
from ..kio_util import build
from ..modern.consumer.group import ConsumerGroup, ConsumerGroupMember, MemberState, new_member_id
from ..modern.consumer.heartbeat import static_member, update_and_reconcile
from ..modern.consumer.heartbeat_policy import session_timeout_ms
from ..modern.consumer.membership import join_timer, session_timer, sync_timer
from ..result import CancelTimer, Effects, Result, ScheduleTimer, TimerOp
from ..timeutil import from_ms, to_ms
from .conversion import downgrade, fence_or_downgrade
from .policy import MigrationPolicy

if TYPE_CHECKING:
    from ..classic.requests import JoinAnswer
    from ..context import RequestContext, ShardView


def _classic_protocol_names(member: ConsumerGroupMember) -> list[str]:
    meta = member.classic_member_metadata
    return [p.name for p in meta.supported_protocols] if meta is not None else []


def _supported_protocol(group: ConsumerGroup, protocol_type: str, protocols: list[tuple[str, bytes]]) -> str | None:
    """`supportsClassicProtocols`: type `consumer` and a protocol every classic member
    supports (any protocol when there is no classic member yet). Returns its name."""
    if protocol_type != "consumer" or not protocols:
        return None
    classic = [m for m in group.members.values() if m.uses_classic_protocol]
    for name, _ in protocols:
        if all(name in _classic_protocol_names(m) for m in classic):
            return name
    return None


def _join_error(v: JoinAnswer, error: ErrorCode, member_id: str = "") -> Result:
    return Result(response=join_response(v, error=error, member_id=member_id))


# ------------------------------------------------------------------ JoinGroup
def classic_join(shard: ShardView, ctx: RequestContext, req, group: ConsumerGroup, now_ms: int) -> Result:
    v = req.answer
    gid = group.group_id
    if MigrationPolicy.parse(shard.config.consumer_migration_policy) is MigrationPolicy.DISABLED:
        # KAFKA-20640: with migration disabled classic members cannot join a consumer group.
        return _join_error(v, ErrorCode.inconsistent_group_protocol, req.member_id)
    protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
    instance_id = req.group_instance_id
    unknown = req.member_id == ""
    member_id = req.member_id or new_member_id()
    if not (instance_id is not None and instance_id in group.static_members) \
            and len(group.members) >= shard.config.consumer_max_size and member_id not in group.members:
        return _join_error(v, ErrorCode.group_max_size_reached)
    protocol_name = _supported_protocol(group, req.protocol_type, protocols)
    if protocol_name is None:
        return _join_error(v, ErrorCode.inconsistent_group_protocol, req.member_id)
    if instance_id is None and unknown and v.member_id_required:
        return _join_error(v, ErrorCode.member_id_required, member_id)  # KIP-394, no records
    try:
        subscription = decode_subscription(protocols[0][1])
    except MalformedProtocolData:
        return _join_error(v, ErrorCode.inconsistent_group_protocol, req.member_id)  # KAFKA-20662

    session_ms = to_ms(req.session_timeout)
    rebalance_ms = to_ms(req.rebalance_timeout)
    fx = Effects(replay=True)   # consumer-group records change state by replay
    if instance_id is not None and unknown:
        existing = group.static_member(instance_id)
        if existing is not None and _can_replace_last_consumer_member(shard, group, existing):
            return _downgrade_by_replacement(shard, ctx, req, group, existing, protocols, now_ms)
    try:
        if instance_id is None:
            member = group.members.get(member_id) or ConsumerGroupMember(member_id=member_id)
        else:
            member = static_member(group, member_id, -1, instance_id, None, unknown, fx, classic=True)
    except ApiError as e:
        return _join_error(v, e.code, req.member_id)

    owned = {}
    for topic, partitions in subscription.owned_partitions.items():
        t = shard.image.topics_by_name.get(topic)
        if t is not None:
            owned[t.topic_id] = frozenset(partitions)
    updated = replace(
        member, instance_id=instance_id if instance_id is not None else member.instance_id,
        rack_id=subscription.rack_id, rebalance_timeout_ms=rebalance_ms,
        subscribed_topic_names=tuple(sorted(set(subscription.topics))),
        subscribed_topic_regex="",  # classic members cannot use regex subscriptions
        client_id=ctx.client_id, client_host=ctx.client_host,
        classic_member_metadata=ClassicMemberMetadata(
            session_timeout_ms=session_ms,
            supported_protocols=tuple(ClassicProtocol(name=n, metadata=m) for n, m in protocols)))
    try:
        reconciled, _ = update_and_reconcile(shard, group, member, updated, owned, now_ms, fx)
    except ApiError as e:
        return _join_error(v, e.code, req.member_id)
    fx.timers += [CancelTimer(join_timer(gid, member_id)),
               ScheduleTimer(session_timer(gid, member_id), now_ms + session_ms),
               ScheduleTimer(sync_timer(gid, member_id), now_ms + rebalance_ms)]
    response = join_response(v, member_id=member_id, generation_id=reconciled.member_epoch,
                             protocol_type="consumer", protocol_name=protocol_name)
    return fx.result(response)


def _can_replace_last_consumer_member(shard, group: ConsumerGroup, existing: ConsumerGroupMember) -> bool:
    """Downgrade trigger B: a classic static member replaces the only consumer-protocol member."""
    return (not existing.uses_classic_protocol
            and group.all_members_use_classic_protocol_except({existing.member_id})
            and MigrationPolicy.parse(shard.config.consumer_migration_policy).downgrade_enabled
            and len(group.members) <= shard.config.group_max_size)


def _downgrade_by_replacement(shard, ctx, req, group: ConsumerGroup, existing: ConsumerGroupMember,
                              protocols, now_ms: int) -> Result:
    """Convert to a classic group in which the joining instance takes the replaced member's
    slot and target assignment, then serve this JoinGroup as a classic one."""
    joining = ClassicGroupMember(
        member_id=f"{req.group_instance_id}-{uuid.uuid4()}", group_instance_id=req.group_instance_id,
        client_id=ctx.client_id, client_host=ctx.client_host,
        rebalance_timeout_ms=to_ms(req.rebalance_timeout),
        session_timeout_ms=to_ms(req.session_timeout), protocol_type=req.protocol_type,
        supported_protocols=list(protocols))
    # Rebalance only when the target is not computed yet; otherwise the classic members
    # already hold their targets (Kafka reconciles first).
    rebalance = group.assignment_epoch < group.group_epoch
    classic, fx = downgrade(shard, group, set(), now_ms, replaced=(existing.member_id, joining),
                            rebalance=rebalance)
    # The joining member is now a known static member of the classic group: answer it as
    # a classic join (STABLE, same protocol: no rebalance, its assignment is ready).
    return join_group(shard, ctx, req, now_ms).prefixed(fx.records, fx.timers, fx.completions)


# ------------------------------------------------------------ member lookup
def _member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
    """The member a classic request names: by instance id when it has one (an empty member
    id with an instance id is an administrative removal, KIP-345), else by member id."""
    if instance_id is not None:
        member = group.static_member(instance_id)
        if member is None:
            raise ApiError(ErrorCode.unknown_member_id)
        if member_id and member.member_id != member_id:
            raise ApiError(ErrorCode.fenced_instance_id)
        return member
    member = group.members.get(member_id)
    if member is None:
        raise ApiError(ErrorCode.unknown_member_id)
    return member


def _classic_member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
    member = _member(group, member_id, instance_id)
    if not member.uses_classic_protocol:
        raise ApiError(ErrorCode.unknown_member_id)
    return member


def _needs_rejoin(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """A classic member moves through reconciliation only by rejoining."""
    if member.member_epoch < group.assignment_epoch or member.state is MemberState.UNREVOKED_PARTITIONS:
        return True
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        # Rejoin as soon as none of the partitions it waits for is still held elsewhere.
        for topic_id, partitions in group.target_of(member.member_id).items():
            have = member.assigned_partitions.get(topic_id, {})
            if any(p not in have and group.partition_epoch(topic_id, p) != -1 for p in partitions):
                return False
        return True
    return False


# ------------------------------------------------------------------ SyncGroup
def classic_sync(shard: ShardView, ctx: RequestContext, req, group: ConsumerGroup, now_ms: int) -> Result:
    v = req.response_schema
    gid = group.group_id
    try:
        if group.is_empty():
            raise ApiError(ErrorCode.unknown_member_id)
        member = _classic_member(group, req.member_id, req.group_instance_id)
        if req.generation_id != member.member_epoch:
            raise ApiError(ErrorCode.illegal_generation)
        protocol_type = req.protocol_type
        protocol_name = req.protocol_name
        if (protocol_type is not None and protocol_type != "consumer") or \
                (protocol_name is not None and protocol_name not in _classic_protocol_names(member)):
            raise ApiError(ErrorCode.inconsistent_group_protocol)
    except ApiError as e:
        return Result(response=sync_response(v, error=e.code))
    if group.assignment_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
        return Result(response=sync_response(v, error=ErrorCode.rebalance_in_progress),
                      timers=[ScheduleTimer(join_timer(gid, member.member_id), now_ms + member.rebalance_timeout_ms)])
    names = {}
    for topic_id, partitions in member.assigned_partitions.items():
        t = shard.image.topics_by_id.get(topic_id)
        if t is not None:
            names[t.name] = tuple(partitions)
    version = _subscription_version(member)
    timers: list[TimerOp] = [
        CancelTimer(sync_timer(gid, member.member_id)),
        ScheduleTimer(session_timer(gid, member.member_id), now_ms + session_timeout_ms(shard, gid, member))]
    return Result(response=sync_response(v, protocol_type="consumer",
                                         protocol_name=protocol_name or _classic_protocol_names(member)[0],
                                         assignment=encode_assignment(names, version)), timers=timers)


def _subscription_version(member: ConsumerGroupMember) -> int:
    meta = member.classic_member_metadata
    assert meta is not None   # only classic-protocol members reach here
    for p in meta.supported_protocols:
        try:
            return decode_subscription(bytes(p.metadata)).version
        except MalformedProtocolData:
            continue
    return 0


# ------------------------------------------------------------------ Heartbeat
def classic_heartbeat(shard: ShardView, ctx: RequestContext, req, group: ConsumerGroup,
                      now_ms: int) -> Result:
    mod = req.response_schema
    gid = group.group_id
    try:
        member = _classic_member(group, req.member_id, req.group_instance_id)
        if req.generation_id != member.member_epoch:
            raise ApiError(ErrorCode.illegal_generation)
    except ApiError as e:
        return Result(response=build(mod.HeartbeatResponse, throttle_time=from_ms(0), error_code=e.code))
    timers: list = [ScheduleTimer(session_timer(gid, member.member_id),
                                  now_ms + session_timeout_ms(shard, gid, member))]
    error = ErrorCode.none
    if _needs_rejoin(group, member):
        error = ErrorCode.rebalance_in_progress
        timers.append(ScheduleTimer(join_timer(gid, member.member_id), now_ms + member.rebalance_timeout_ms))
    return Result(response=build(mod.HeartbeatResponse, throttle_time=from_ms(0), error_code=error), timers=timers)


# ----------------------------------------------------------------- LeaveGroup
def classic_leave(shard: ShardView, ctx: RequestContext, req, identities, group: ConsumerGroup,
                  now_ms: int) -> Result:
    mod = req.response_schema
    out = []
    leaving: list[str] = []
    for member_id, instance_id in identities:
        try:
            member = _member(group, member_id, instance_id)
            leaving.append(member.member_id)
            out.append((member_id, instance_id, ErrorCode.none))
        except ApiError as e:
            out.append((member_id, instance_id, e.code))
    result = fence_or_downgrade(shard, group, leaving, now_ms) if leaving else Result()
    top = out[0][2] if not req.lists_members and out else ErrorCode.none
    members = () if not req.lists_members else tuple(
        build(mod.MemberResponse, member_id=m, group_instance_id=i, error_code=c) for m, i, c in out)
    return result.with_response(build(mod.LeaveGroupResponse, throttle_time=from_ms(0), error_code=top,
                                      members=members))
