"""ConsumerGroupHeartbeat (KIP-848): join, keep-alive, reconcile, leave.

One heartbeat is one write operation: it reads the group, emits records and a
response. The order of checks and of records follows Kafka 4.3 (docs/design/kafka-facts.md §4.1-4.3,
§4.7); the comments name the Kafka rule each step implements.
"""
from __future__ import annotations

import enum
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from ... import record_helpers as rh
from ...context import AuthorizedRequestContext
from ...errors import ApiError, group_not_found, invalid_request, unknown_member
from ...group_types import group_type
from ...result import CancelTimer, Effects, Result, ScheduleTimer
from ...timeutil import from_ms, to_ms
from ..reconciliation import CurrentAssignmentBuilder
from . import client_mode
from . import regex as regexes
from .assignment_pacing import assignment_timer, can_compute_assignment
from .group import EMPTY_ASSIGNMENT, ConsumerGroup, ConsumerGroupMember, MemberState, new_member_id
from .heartbeat_policy import session_timeout_ms
from .membership import (
    _overlay,
    compute_target_assignment,
    fence,
    member_topic_ids,
    metadata_hash,
    rebalance_timer,
    session_timer,
    subscribed_topic_names,
)
from .regex_refresh import refresh_timer, remember_filter

if TYPE_CHECKING:
    from ...context import RequestContext, TopicFilter
    from .requests import ConsumerGroupHeartbeat
    from .view import ConsumerView

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2

# migration/'s two conversions, passed in by the shard's rows (migration/rows.py): the online
# upgrade of a non-empty classic group (a ClassicGroup in, the ConsumerGroup the heartbeat goes
# on with out), and fencing that may convert the group back (membership.fence without it).
# Their first argument is the shard as migration/ sees it (a ShardView), which this folder
# does not name: the heartbeat hands on the shard it was given.
Upgrade = Callable[[Any, Any, Effects, int], ConsumerGroup]
Fence = Callable[[Any, ConsumerGroup, list[str], int], Result]


class RegexStatus(enum.Enum):
    NO_CHANGE = 0
    REGEX_UPDATED = 1
    REGEX_UPDATED_AND_RESOLVED = 2


def heartbeat(shard: ConsumerView, ctx: RequestContext, req, now_ms: int, csa: bool = False,
              upgrade: Upgrade | None = None, fence: Fence = fence) -> Result:
    """`csa`: the request came through 32700, the client-assignor variant (docs/design/client-assignors-spec.md); it is
    key 68 v1's body plus ClientAssignors, and its answer a `client_mode.CsaAnswer`.

    `upgrade` converts a classic group the first member joins, `fence` removes members; the
    shard passes migration's (migration/rows.py), which may convert the group. Without
    `upgrade`, a joining member of a non-empty classic group is refused."""
    try:
        if not csa and req.steady_form and req.member_id and req.group_id:
            # A keep-alive with both ids passes `_validate` (stateless; every field it
            # checks beyond the ids is null): straight to the steady path.
            steady = _steady(shard, ctx, req, now_ms)
            return steady if steady is not None else _regular(shard, ctx, req, now_ms, csa, upgrade)
        _validate(shard, req)
        if csa:
            client_mode.validate(req, csa)
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            result = _leave(shard, ctx, req, now_ms, fence)
        else:
            steady = None
            if req.member_epoch > 0 and req.client_assignors is None:
                steady = _steady(shard, ctx, req, now_ms)
            result = steady if steady is not None else _regular(shard, ctx, req, now_ms, csa, upgrade)
    except ApiError as e:
        result = Result(response=_error(req, e))
    if csa and not isinstance(result.response, client_mode.CsaAnswer):
        group = shard.groups.get(req.group_id)
        member = group.members.get(req.member_id) if isinstance(group, ConsumerGroup) else None
        if result.response.error_code != ErrorCode.none or req.member_epoch < 0:
            member = None
        return result.with_response(client_mode.csa_answer(shard, req.group_id, member, result.response))
    return result


def _error(req: ConsumerGroupHeartbeat, e: ApiError) -> Any:
    """The answer carrying only `e` (protocol/error_responses.py's, at the request's version)."""
    return req.response_schema.ConsumerGroupHeartbeatResponse(
        throttle_time=_NO_THROTTLE, error_code=e.code, error_message=e.message, member_epoch=0,
        heartbeat_interval=_NO_THROTTLE)


_NO_THROTTLE = from_ms(0)


# --------------------------------------------------------------- validation
def _validate(shard: ConsumerView, req: ConsumerGroupHeartbeat) -> None:
    """`throwIfConsumerGroupHeartbeatRequestIsInvalid` (stateless)."""
    epoch = req.member_epoch
    if not req.member_id and (req.member_id_required or epoch > 0 or epoch == LEAVE_EPOCH):
        raise invalid_request("MemberId can't be empty.")
    if not req.group_id:
        raise invalid_request("GroupId can't be empty.")
    if req.instance_id is not None and not req.instance_id:
        raise invalid_request("InstanceId can't be empty.")
    if req.rack_id is not None and not req.rack_id:
        raise invalid_request("RackId can't be empty.")
    regex = req.subscribed_topic_regex
    if epoch == JOIN_EPOCH:
        if to_ms(req.rebalance_timeout) == -1:
            raise invalid_request("RebalanceTimeoutMs must be provided in first request.")
        if req.topic_partitions is None or req.topic_partitions:
            raise invalid_request("TopicPartitions must be empty when (re-)joining.")
        if req.subscribed_topic_names is None and regex is None:
            raise invalid_request("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
    elif epoch == STATIC_LEAVE_EPOCH:
        if req.instance_id is None:
            raise invalid_request("InstanceId can't be null.")
    elif epoch < STATIC_LEAVE_EPOCH:
        raise invalid_request(f"MemberEpoch {epoch} is invalid.")
    if req.server_assignor is not None and req.server_assignor not in shard.assignors:
        raise ApiError(ErrorCode.unsupported_assignor,
                       f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                       f"{', '.join(shard.config.consumer_assignors)}.")


def _owned(topic_partitions) -> dict[uuid.UUID, frozenset[int]] | None:
    if topic_partitions is None:
        return None
    return {tp.topic_id: frozenset(tp.partitions) for tp in topic_partitions}


def _is_subset(owned: dict[uuid.UUID, frozenset[int]], assigned) -> bool:
    for topic_id, parts in owned.items():
        have = assigned.get(topic_id, {})
        if any(p not in have for p in parts):
            return False
    return True


def _throw_if_epoch_invalid(m: ConsumerGroupMember, epoch: int, owned) -> None:
    """`throwIfConsumerGroupMemberEpochIsInvalid`."""
    if epoch == JOIN_EPOCH:
        return  # KAFKA-19233 (4.2): a member may rejoin with epoch 0 in any state.
    if epoch > m.member_epoch:
        raise ApiError(ErrorCode.fenced_member_epoch,
                       f"The consumer group member has a greater epoch ({epoch}) than the one known by "
                       f"the group coordinator ({m.member_epoch}). The member must abandon all its "
                       "partitions and rejoin.")
    if epoch < m.member_epoch:
        # A lost response: the member may retry with its previous epoch as long as it does
        # not claim partitions it was not given.
        if epoch == m.previous_member_epoch and owned is not None \
                and _is_subset(owned, m.assigned_partitions):
            return
        raise ApiError(ErrorCode.fenced_member_epoch,
                       f"The consumer group member has a smaller epoch ({epoch}) than the one known by "
                       f"the group coordinator ({m.member_epoch}). The member must abandon all its "
                       "partitions and rejoin.")


# ----------------------------------------------------------- group / member
def _consumer_group_for_heartbeat(shard: ConsumerView, group_id: str, create: bool, fx: Effects,
                                  now_ms: int, upgrade: Upgrade | None) -> ConsumerGroup:
    """`getOrMaybeCreateConsumerGroup`."""
    group = shard.groups.get(group_id)
    if group is None:
        if not create:
            raise group_not_found(group_id)
        # Not put in the map: the records materialise it when they are replayed.
        return ConsumerGroup(group_id)
    if isinstance(group, ConsumerGroup):
        return group
    if create and group_type(group).name == "classic":
        if group.is_empty():
            # Offline upgrade, allowed whatever the migration policy: drop the classic group
            # (its tombstone, `createGroupTombstoneRecords`).
            fx.records.extend(group_type(group).tombstones(group))
            return ConsumerGroup(group_id)
        if upgrade is not None:
            return upgrade(shard, group, fx, now_ms)
    raise group_not_found(group_id, "It is not a consumer group.")


def _throw_if_full(shard: ConsumerView, group: ConsumerGroup, member_id: str,
                   instance_id: str | None) -> None:
    if instance_id is not None and instance_id in group.static_members:
        return  # KAFKA-20601: a static member may rejoin a full group.
    if len(group.members) >= shard.config.consumer_max_size and \
            (not member_id or member_id not in group.members):
        raise ApiError(ErrorCode.group_max_size_reached,
                       f"The consumer group has reached its maximum capacity of "
                       f"{shard.config.consumer_max_size} members.")


def static_member(group: ConsumerGroup, member_id: str, epoch: int, instance_id: str, owned,
                  create: bool, fx: Effects, classic: bool = False) -> ConsumerGroupMember:
    """`getOrMaybeSubscribeStaticConsumerGroupMember`. `classic`: the joining member speaks
    the classic protocol (it may replace any static member; no epoch checks)."""
    existing = group.static_member(instance_id)
    if create:
        if existing is None:
            return ConsumerGroupMember(member_id=member_id)
        if not classic and not existing.uses_classic_protocol and existing.member_epoch != STATIC_LEAVE_EPOCH:
            # KIP-848: the *joining* duplicate is rejected; the live instance keeps its slot.
            raise ApiError(ErrorCode.unreleased_instance_id,
                           f"Static member {existing.member_id} with instance id {instance_id} is "
                           "present in the consumer group.")
        replacement = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        gid = group.group_id
        fx.records.extend(rh.remove_member_records(gid, existing.member_id))
        fx.records.append(client_mode.member_metadata_record(gid, replacement))
        fx.records.append(client_mode.target_member_record(group, member_id, group.target_of(existing.member_id),
                                                           existing.member_id))
        fx.records.append(client_mode.current_assignment_record(gid, replacement))
        return replacement
    if existing is None:
        raise ApiError(ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown.")
    if existing.member_id != member_id:
        raise ApiError(ErrorCode.fenced_instance_id,
                       f"Static member {member_id} with instance id {instance_id} was fenced by "
                       f"member {existing.member_id}.")
    if not classic:
        _throw_if_epoch_invalid(existing, epoch, owned)
    return existing


# ------------------------------------------------------------------- steady


def _steady(shard: ConsumerView, ctx: RequestContext, req, now_ms: int) -> Result | None:
    """The keep-alive of a member that is STABLE at the group's current target and sends
    nothing new (every optional field null, as clients send in steady state). `_regular`
    would produce no record for it, only the session timer and an answer without an
    assignment; this gets there without building an updated member. Anything else
    (static or classic members, regex groups, a pending metadata refresh or target
    computation, another epoch, a changed client id or host) returns None: `_regular`
    handles it."""
    if not req.steady_form:     # requests.py: every optional field null, no rebalance timeout
        return None
    group = shard.groups.get(req.group_id)
    if group is None or group.__class__ is not ConsumerGroup or group.metadata_refresh_requested \
            or group.regex_subscribers or group.assignment_epoch < group.group_epoch:
        return None
    member = group.members.get(req.member_id)
    if member is None or member.member_epoch != req.member_epoch or member.instance_id is not None \
            or member.classic_member_metadata is not None \
            or not member.is_reconciled_to(group.assignment_epoch) \
            or (group.assignment_unconfirmed and member.member_id in group.assignment_unconfirmed) \
            or member.client_id != ctx.client_id or member.client_host != ctx.client_host:
        return None
    member_id = member.member_id
    group_id = group.group_id
    epoch = member.member_epoch
    interval, session_ms = shard.heartbeat_policy.steady_ms(group_id)
    cls = req.response_schema.ConsumerGroupHeartbeatResponse
    kept = _STEADY_ANSWERS.get(member_id)
    if kept is not None and kept[0] is cls and kept[1] == epoch and kept[2] == interval and kept[3] == group_id:
        response, key = kept[4], kept[5]
    else:
        response = cls(throttle_time=_NO_THROTTLE, error_code=ErrorCode.none, member_id=member_id,
                       member_epoch=epoch, heartbeat_interval=from_ms(interval), assignment=None)
        key = session_timer(group_id, member_id)
        if len(member_id) + len(group_id) <= _KEPT_IDS_MAX:    # an entry outlives its member
            if len(_STEADY_ANSWERS) >= STEADY_ANSWERS_KEPT:
                _STEADY_ANSWERS.clear()
            _STEADY_ANSWERS[member_id] = (cls, epoch, interval, group_id, response, key)
    return Result(response, (), [ScheduleTimer(key, now_ms + session_ms)])


# A steady answer is the same immutable message every interval until the member's epoch or
# interval moves: kept per member id and handed out again (building a kio message costs
# about as much as the rest of `_steady`), with the member's session timer key. Both are
# functions of what is checked (version, member id, epoch, interval, group id), so a member
# id reused in another group or shard gets its own. Bounded (cleared when full, and only ids
# of a sane size): member ids come from clients.
STEADY_ANSWERS_KEPT = 16_384
_KEPT_IDS_MAX = 512      # characters of member id and group id together
_STEADY_ANSWERS: dict[str, tuple[type, int, int, str, Any, tuple]] = {}


# ------------------------------------------------------------------ regular
def _regular(shard: ConsumerView, ctx: RequestContext, req, now_ms: int, csa: bool = False,
             upgrade: Upgrade | None = None) -> Result:
    fx = Effects(replay=True)   # consumer-group records change state by replay
    epoch = req.member_epoch
    create = epoch == JOIN_EPOCH
    owned = _owned(req.topic_partitions)
    group = _consumer_group_for_heartbeat(shard, req.group_id, create, fx, now_ms, upgrade)
    gid = group.group_id
    _throw_if_full(shard, group, req.member_id, req.instance_id)
    member_id = req.member_id or new_member_id()

    if req.instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            if not create:
                raise unknown_member(gid, member_id)
            member = ConsumerGroupMember(member_id=member_id)
        else:
            _throw_if_epoch_invalid(member, epoch, owned)
    else:
        member = static_member(group, member_id, epoch, req.instance_id, owned, create, fx)

    regex = req.subscribed_topic_regex
    rebalance_timeout_ms = to_ms(req.rebalance_timeout)
    updated = replace(
        member,
        instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
        rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=rebalance_timeout_ms if rebalance_timeout_ms != -1 else member.rebalance_timeout_ms,
        server_assignor=req.server_assignor if req.server_assignor is not None else member.server_assignor,
        subscribed_topic_names=(tuple(sorted(set(req.subscribed_topic_names)))
                                if req.subscribed_topic_names is not None else member.subscribed_topic_names),
        subscribed_topic_regex=regex if regex is not None else member.subscribed_topic_regex,
        client_id=ctx.client_id, client_host=ctx.client_host,
        classic_member_metadata=None)
    specs = client_mode.request_specs(req)
    if specs is not None:
        updated = client_mode.carry_specs(group, member, updated, specs)

    reconciled, target_behind = update_and_reconcile(
        shard, group, member, updated, owned, now_ms, fx,
        ctx.topic_filter if ctx.__class__ is AuthorizedRequestContext else None)
    fx.timers.append(ScheduleTimer(session_timer(gid, member_id),
                                now_ms + session_timeout_ms(shard, gid, reconciled)))

    full_request = (rebalance_timeout_ms != -1
                    and (req.subscribed_topic_names is not None or regex is not None)
                    and req.topic_partitions is not None)
    assignment = None
    metadata_changed = csa and (reconciled.assignment_error, reconciled.assignment_metadata_version,
                                reconciled.assignment_metadata_bytes) != (
        member.assignment_error, member.assignment_metadata_version, member.assignment_metadata_bytes)
    if epoch == JOIN_EPOCH or full_request or reconciled.assigned_partitions != member.assigned_partitions \
            or metadata_changed or _resend_assignment(group, member_id, owned):
        mod = req.response_schema
        assignment = mod.Assignment(topic_partitions=tuple(
            mod.TopicPartitions(topic_id=t, partitions=tuple(sorted(ps)))
            for t, ps in reconciled.assigned_partitions.items()))
    _note_confirmation(group, member_id, owned, reconciled, assignment is not None)
    response = req.response_schema.ConsumerGroupHeartbeatResponse(
        throttle_time=from_ms(0), error_code=ErrorCode.none, member_id=member_id,
        member_epoch=reconciled.member_epoch,
        heartbeat_interval=from_ms(shard.heartbeat_policy.interval_ms(group, reconciled, target_behind)),
        assignment=assignment)
    if csa:
        return fx.result(client_mode.csa_answer(shard, gid, reconciled, response))
    return fx.result(response)


def _resend_assignment(group: ConsumerGroup, member_id: str, owned) -> bool:
    """Whether this answer carries the member's assignment again although it did not change.

    Kafka sends the assignment only on a full request or when it changed, counting on the
    client to send a full request after any failed heartbeat. librdkafka (2.16) does not
    after a timeout, and it times a ConsumerGroupHeartbeat out after the heartbeat interval
    it was last given (its REQTMOUT scan runs each second): an answer slower than that,
    one that waits for the write of its records behind a busy upstream, is dropped. With
    kcoord's 100 ms pending interval that happens; the member then never learns of a
    revocation (it keeps every partition until its rebalance timeout, 300 s) or of
    partitions released to it. So until the member reports owning exactly its assignment,
    every answer to a heartbeat without owned partitions carries it again. Clients take an
    assignment equal to the one they hold as nothing to do (librdkafka's
    `rd_kafka_cgrp_consumer_is_new_assignment_different`, Java's `processAssignmentReceived`)."""
    return owned is None and member_id in group.assignment_unconfirmed


def _note_confirmation(group: ConsumerGroup, member_id: str, owned, reconciled: ConsumerGroupMember,
                       sent: bool) -> None:
    """A member confirms its assignment by reporting exactly those partitions as owned (the
    acknowledgement every KIP-848 client sends once it has reconciled)."""
    unconfirmed = group.assignment_unconfirmed
    if owned is not None and _owns_exactly(owned, reconciled.assigned_partitions):
        unconfirmed.discard(member_id)
    elif sent:
        unconfirmed.add(member_id)


def _owns_exactly(owned: dict[uuid.UUID, frozenset[int]], assigned) -> bool:
    return ({t: ps for t, ps in owned.items() if ps}
            == {t: frozenset(ps) for t, ps in assigned.items() if ps})


def update_and_reconcile(shard: ConsumerView, group: ConsumerGroup, member: ConsumerGroupMember,
                         updated: ConsumerGroupMember, owned, now_ms: int,
                         fx: Effects, topic_filter: TopicFilter | None = None) -> tuple[ConsumerGroupMember, bool]:
    """Steps 7-13 of Kafka's heartbeat, shared with classic members of consumer groups:
    persist the member, maybe bump the group epoch (subscription, regex, assignor or
    metadata change), compute the target assignment, reconcile the member towards it.
    Returns the reconciled member, and whether the target is behind the group epoch
    (its computation was deferred: the member should come back soon)."""
    gid = group.group_id
    member_id = updated.member_id
    is_new = member_id not in group.members
    names_changed = updated.subscribed_topic_names != member.subscribed_topic_names
    if is_new or not updated.metadata_equals(member):
        fx.records.append(client_mode.member_metadata_record(gid, updated))

    status = _update_regex(shard, group, member, updated, now_ms, fx, topic_filter)

    default = shard.config.default_assignor
    assignor_changed = (group.preferred_server_assignor(default)
                        != group.preferred_server_assignor(default, {member_id: updated.server_assignor}))
    bump = (names_changed or status is RegexStatus.REGEX_UPDATED_AND_RESOLVED or assignor_changed
            or client_mode.mode_changed(group, member, updated))

    group_epoch = group.group_epoch
    if bump or group.metadata_refresh_requested:
        names, regex_counts, _ = _overlay(group, [updated], [])
        new_hash = metadata_hash(shard.image, subscribed_topic_names(group, names, regex_counts))
        group.metadata_refresh_requested = False  # soft state, like Kafka's refresh deadline
        if bump or new_hash != group.metadata_hash:
            group_epoch += 1
            fx.records.append(rh.group_epoch_record(gid, group_epoch, new_hash))
            if group.has_partition_metadata_record:
                fx.records.append(rh.partition_metadata_tombstone(gid))

    target_epoch, target = _target_for(shard, group, group_epoch, member, updated, now_ms, fx)

    subscription_changed = names_changed or status is not RegexStatus.NO_CHANGE
    reconciled = updated
    if subscription_changed or not updated.is_reconciled_to(target_epoch):
        reconciled = CurrentAssignmentBuilder(
            updated, target_epoch=target_epoch, target=target,
            subscribed_topic_ids=member_topic_ids(group, shard.image, updated),
            partition_epoch=group.partition_epoch, owned=owned,
            subscription_changed=subscription_changed).build()
        if updated.client_assignors or reconciled.assignment_metadata_version != -1 \
                or reconciled.assignment_error or reconciled.assignment_metadata_bytes is not None:
            reconciled = client_mode.with_target_metadata(group, reconciled, target_epoch)
        if is_new or not reconciled.assignment_equals(updated):
            fx.records.append(client_mode.current_assignment_record(gid, reconciled))
            if not reconciled.uses_classic_protocol:
                key = rebalance_timer(gid, member_id)
                if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
                    fx.timers.append(ScheduleTimer(key, now_ms + reconciled.rebalance_timeout_ms,
                                                reconciled.member_epoch))
                else:
                    fx.timers.append(CancelTimer(key))
    return reconciled, target_epoch < group_epoch


def _update_regex(shard: ConsumerView, group: ConsumerGroup, member: ConsumerGroupMember,
                  updated: ConsumerGroupMember, now_ms: int, fx: Effects,
                  topic_filter: TopicFilter | None = None) -> RegexStatus:
    """`maybeUpdateRegularExpressions`: track regex subscriptions; resolution itself runs as a
    separate operation (`regex-refresh` timer) like Kafka's background resolution."""
    old, new = member.subscribed_topic_regex, updated.subscribed_topic_regex
    status = RegexStatus.NO_CHANGE
    if old != new:
        gid = group.group_id
        subscribed = member.member_id in group.members
        if old and subscribed and group.regex_subscribers.get(old, 0) == 1 and old in group.resolved_regexes:
            fx.records.append(rh.regex_tombstone(gid, old))
        if new:
            if group.regex_subscribers.get(new, 0) == 0:
                regexes.compile_regex(new)  # INVALID_REGULAR_EXPRESSION
                status = RegexStatus.REGEX_UPDATED
            elif new in group.resolved_regexes:
                status = RegexStatus.REGEX_UPDATED_AND_RESOLVED
            else:
                status = RegexStatus.REGEX_UPDATED
        else:
            status = RegexStatus.REGEX_UPDATED_AND_RESOLVED
    timer = refresh_timer(shard.config, group, now_ms, shard.last_image_version_with_new_topics,
                          new_regex=new if status is RegexStatus.REGEX_UPDATED else None)
    if timer is not None:
        fx.timers.append(timer)
        if topic_filter is not None:   # resolved with this member's rights (KAFKA-18813)
            remember_filter(shard, group.group_id, topic_filter)
    return status


def _target_for(shard: ConsumerView, group: ConsumerGroup, group_epoch: int,
                member: ConsumerGroupMember, updated: ConsumerGroupMember, now_ms: int,
                fx: Effects):
    """`maybeUpdateTargetAssignment`: reuse the current target when it is up to date, or when
    KIP-1263's assignment interval has not elapsed yet (then a timer computes it later).
    In client mode (docs/design/client-assignors-spec.md) the coordinator never computes: it asks a member
    (client_mode.maybe_ask) and keeps the current target until that member installs one."""
    client = client_mode.in_client_mode(group, updated) is not None
    if client:
        fx.timers.extend(client_mode.maybe_ask(shard, group, updated, group_epoch, now_ms))
    elif shard.client_assignments:
        # The group left client mode, if it was in it (A12). A shard without client-mode
        # groups (every real Kafka client) pays only this check.
        client_mode.server_mode(shard, group.group_id)
    if client or group.assignment_epoch >= group_epoch or not can_compute_assignment(shard, group, now_ms):
        if group.assignment_epoch < group_epoch and not client:
            fx.timers.append(assignment_timer(shard, group))
        target = group.target_assignment.get(updated.member_id)
        if target is None and updated.instance_id is not None:
            # A static member that rejoined under a new id keeps the target of its old id.
            previous_id = group.static_members.get(updated.instance_id)
            if previous_id is not None:
                target = group.target_assignment.get(previous_id)
        return group.assignment_epoch, target or {}
    new_records, target = compute_target_assignment(shard, group, group_epoch, updated, now_ms)
    fx.records.extend(new_records)
    return group_epoch, target


# -------------------------------------------------------------------- leave
def _leave(shard: ConsumerView, ctx: RequestContext, req, now_ms: int, fence: Fence) -> Result:
    """Epoch -1: leave (fence). Epoch -2: a static member leaves temporarily and keeps its
    target; KIP-1251 resets its assignment epochs to 0 so that only the instance that
    comes back (under a new member id) can commit for those partitions."""
    group = shard.groups.get(req.group_id)
    if not isinstance(group, ConsumerGroup):
        raise group_not_found(req.group_id)
    gid = group.group_id
    member = group.leaving_member(req.member_id, req.instance_id)
    mod = req.response_schema
    if req.member_epoch == STATIC_LEAVE_EPOCH:
        leaving = replace(member, member_epoch=STATIC_LEAVE_EPOCH, partitions_pending_revocation=EMPTY_ASSIGNMENT,
                          assigned_partitions={t: dict.fromkeys(ps, 0)
                                               for t, ps in member.assigned_partitions.items()})
        records = [client_mode.current_assignment_record(gid, leaving)]
        result = Result(records=records)
    else:
        result = fence(shard, group, [member.member_id], now_ms)
    return result.with_response(mod.ConsumerGroupHeartbeatResponse(
        throttle_time=from_ms(0), error_code=ErrorCode.none, member_id=member.member_id,
        member_epoch=req.member_epoch, heartbeat_interval=from_ms(0)))
