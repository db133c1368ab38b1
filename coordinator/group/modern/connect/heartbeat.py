"""ConnectGroupHeartbeat (docs/design/connect-groups-spec.md §1, §2): join, keep-alive,
reconcile, leave, and the connect group's timers (session, rebalance, assigner deadline).

One heartbeat is one write operation: it reads the group and returns records, timers and a
response; replay (modern/connect/replay.py) applies the records. The steps mirror Kafka's
ConsumerGroupHeartbeat (modern/consumer/heartbeat.py), which the seed says to keep (L399):
1. validate the request (L305-321; Min >= 0 as the client-side assignor spec says, L314's -1 is a typo);
2. find or create the group: a new id, an empty classic `connect` (or simple) group
   converted offline (phase C1, docs/design/connect-groups-spec.md §5), else GROUP_ID_NOT_FOUND;
3. find or create the worker; check its epoch (L325-332, the lenient previous-epoch case
   included when what it owns is a subset of what it was given);
4. update its metadata; bump the group epoch on a join or an assignor-list change, or on
   a Reason != 0 (the assigner's KIP-415 delayed rebalance, L196, L967);
5. ask the assigner (COMPUTE_ASSIGNMENT, informational: the heartbeat was processed in
   full) when the target is behind;
6. reconcile towards the worker's target with the consumer group's builder
   (modern/connect/reconcile.py): units are revoked before they are given to another worker.
Errors: UNKNOWN_MEMBER_ID or FENCED_MEMBER_EPOCH tell the worker to drop everything and
rejoin with epoch 0 (L399). A worker whose session expired is removed, so its next
heartbeat gets UNKNOWN_MEMBER_ID (docs/design/connect-groups-spec.md §2 "Fencing and rejoin").
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from kio.schema.errors import ErrorCode

from ....protocol import connect_messages as cm
from ...errors import ApiError, group_not_found, invalid_request, unknown_member
from ...group_types import group_type
from ...result import CancelTimer, Effects, Result, ScheduleTimer, TimerOp
from ...timeutil import to_ms
from ..client_assignment import (
    COMPUTE_ASSIGNMENT,
    ClientAssignorSpec,
    check_join,
    needs_reassignment,
    request_specs,
    validate_request,
)
from ..group import MemberState
from . import record_helpers as crh
from .assignment import maybe_request, on_deadline, wire_units
from .group import CONNECTOR_TASK, EMPTY_UNITS, ConnectGroup, ConnectMember, ConnectTarget
from .reconcile import reconcile
from .timers import assignment_deadline_key, cancel_member_timers, rebalance_key, session_key

if TYPE_CHECKING:
    from records import CoordinatorRecord

    from ...context import ConnectView, RequestContext

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
# Classic protocol types an empty classic group may have and still become a connect group
# on a ConnectGroupHeartbeat (phase C1): Connect's own, and a "simple" group (offsets only).
CONVERTIBLE_PROTOCOL_TYPES = frozenset({"", "connect"})

Owned = dict[str, frozenset[int]]


def heartbeat(shard: ConnectView, ctx: RequestContext, req, now_ms: int) -> Result:
    try:
        specs = _validate(req)
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return _leave(shard, req, now_ms)
        return _regular(shard, ctx, req, specs, now_ms)
    except ApiError as e:
        return Result(response=cm.heartbeat_response(error_code=int(e.code), error_message=e.message))


# --------------------------------------------------------------- validation
def _validate(req) -> tuple[ClientAssignorSpec, ...] | None:
    """001:L305-321 (stateless); returns the ClientAssignors as the engine's specs."""
    if not req.group_id:
        raise invalid_request("GroupId can't be empty.")
    if not req.member_id:
        raise invalid_request("MemberId can't be empty: a connect worker generates its own.")
    if req.instance_id is not None and not req.instance_id:
        raise invalid_request("InstanceId can't be empty.")
    epoch = req.member_epoch
    if epoch < STATIC_LEAVE_EPOCH:
        raise invalid_request(f"MemberEpoch {epoch} is invalid.")
    if epoch == STATIC_LEAVE_EPOCH and req.instance_id is None:
        raise invalid_request("InstanceId can't be null when leaving with MemberEpoch -2.")
    if req.server_assignor is not None:
        raise ApiError(ErrorCode.unsupported_assignor,
                       f"ServerAssignor {req.server_assignor} is not supported: connect groups assign on the "
                       "client side only (ClientAssignors).")
    specs = request_specs(req.client_assignors)
    validate_request(None, specs)
    if epoch == JOIN_EPOCH:
        if not specs:
            raise invalid_request("ClientAssignors must be set and non-empty when joining.")
        if to_ms(req.rebalance_timeout) <= 0:
            raise invalid_request("RebalanceTimeoutMs must be provided (> 0) when joining.")
        cat = req.connectors_and_tasks
        if cat is not None and (cat.connectors or cat.tasks):
            raise invalid_request("ConnectorsAndTasks must be empty when (re-)joining.")
    return specs


def owned_units(cat) -> Owned | None:
    if cat is None:
        return None
    out: dict[str, set[int]] = {}
    for c in cat.connectors:
        out.setdefault(c, set()).add(CONNECTOR_TASK)
    for t in cat.tasks:
        out.setdefault(t.connector, set()).add(int(t.task))
    return {c: frozenset(ts) for c, ts in out.items()}


def _is_subset(owned: Owned, assigned) -> bool:
    return all(t in assigned.get(c, ()) for c, ts in owned.items() for t in ts)


def _check_epoch(m: ConnectMember, epoch: int, owned: Owned | None) -> None:
    """`throwIfConsumerGroupMemberEpochIsInvalid`, with units for partitions (001:L330)."""
    if epoch == JOIN_EPOCH:
        return
    if epoch > m.member_epoch:
        raise ApiError(ErrorCode.fenced_member_epoch,
                       f"The worker has a greater epoch ({epoch}) than the coordinator knows ({m.member_epoch}). "
                       "It must drop its connectors and tasks and rejoin.")
    if epoch < m.member_epoch:
        if epoch == m.previous_member_epoch and owned is not None and _is_subset(owned, m.assigned):
            return   # a lost response: safe to move it to its epoch again (001:L330)
        raise ApiError(ErrorCode.fenced_member_epoch,
                       f"The worker has a smaller epoch ({epoch}) than the coordinator knows ({m.member_epoch}). "
                       "It must drop its connectors and tasks and rejoin.")


# ----------------------------------------------------------- group / worker
def _new_group(shard: ConnectView, group_id: str) -> ConnectGroup:
    """A new group goes into the map at once, unlike a new consumer group: the round this
    heartbeat may start (COMPUTE_ASSIGNMENT to the joiner, C1) is soft state on the group
    object, which the records then replay into (`Replayer.group_as` keeps an object of the
    right class). If the write fails, what stays is an empty group at epoch 1: it answers as
    a group that was never written would, and expires at the next retention check."""
    group = ConnectGroup(group_id)
    cast(Any, shard.groups)[group_id] = group
    return group


def _group_for(shard: ConnectView, group_id: str, create: bool, fx: Effects) -> ConnectGroup:
    group: Any = shard.groups.get(group_id)
    if group is None:
        if not create:
            raise group_not_found(group_id)
        return _new_group(shard, group_id)
    if isinstance(group, ConnectGroup):
        return group
    if create and group_type(group).name == "classic":
        if group.is_empty() and group_type(group).protocol_type(group) in CONVERTIBLE_PROTOCOL_TYPES:
            # Phase C1 (docs/design/connect-groups-spec.md §5): offline conversion of an empty classic group.
            # The tombstone is written for durability; the swap in memory is direct, as the
            # consumer groups' conversions do (context.py, exception 2).
            fx.records.extend(group_type(group).tombstones(group))
            return _new_group(shard, group_id)
        raise group_not_found(group_id, f"It is a classic group (protocol type {group.protocol_type!r}, "
                                        f"{len(group.members)} members), not a connect group: only an empty "
                                        "classic connect group converts (docs/design/connect-groups.md).")
    raise group_not_found(group_id, "It is not a connect group.")


def _static_member(group: ConnectGroup, member_id: str, epoch: int, instance_id: str, owned: Owned | None,
                   create: bool, fx: Effects) -> tuple[ConnectMember, str | None]:
    """The static worker, and the member id it replaced (its slot and target), if any."""
    existing = group.static_member(instance_id)
    if create:
        if existing is None or existing.member_id == member_id:
            return existing or group.members.get(member_id) or ConnectMember(member_id), None
        if existing.member_epoch != STATIC_LEAVE_EPOCH:
            raise ApiError(ErrorCode.unreleased_instance_id,
                           f"Static worker {existing.member_id} with instance id {instance_id} is in the group.")
        # The instance comes back under a new member id: it takes over the slot and target.
        replacement = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        gid = group.group_id
        fx.records.extend(crh.remove_member_records(gid, existing.member_id))
        fx.records.append(crh.member_metadata_record(gid, replacement))
        fx.records.append(crh.target_member_record(gid, member_id, group.target_of(existing.member_id)))
        fx.records.append(crh.current_assignment_record(gid, replacement))
        fx.timers.extend(cancel_member_timers(gid, existing.member_id))
        return replacement, existing.member_id
    if existing is None:
        raise ApiError(ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown.")
    if existing.member_id != member_id:
        raise ApiError(ErrorCode.fenced_instance_id, f"Static worker {member_id} with instance id {instance_id} "
                                                     f"was fenced by worker {existing.member_id}.")
    _check_epoch(existing, epoch, owned)
    return existing, None


# ------------------------------------------------------------------ regular
def _regular(shard: ConnectView, ctx: RequestContext, req, specs, now_ms: int) -> Result:
    fx = Effects(replay=True)
    epoch = req.member_epoch
    create = epoch == JOIN_EPOCH
    owned = owned_units(req.connectors_and_tasks)
    group = _group_for(shard, req.group_id, create, fx)
    gid, member_id = group.group_id, req.member_id

    replaced: str | None = None
    if req.instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            if not create:
                raise unknown_member(gid, member_id)
            member = ConnectMember(member_id)
        else:
            _check_epoch(member, epoch, owned)
    else:
        member, replaced = _static_member(group, member_id, epoch, req.instance_id, owned, create, fx)
    if specs:   # a list this request brings must leave the group an assignor and an assigner
        check_join(_lists(group, replaced), member_id, specs)

    timeout = to_ms(req.rebalance_timeout)
    updated = replace(member, instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
                      rebalance_timeout_ms=timeout if timeout > 0 else member.rebalance_timeout_ms,
                      client_assignors=specs if specs is not None else member.client_assignors,
                      client_id=ctx.client_id, client_host=ctx.client_host)
    is_new = member_id not in group.members
    if is_new or not updated.metadata_equals(member):
        fx.records.append(crh.member_metadata_record(gid, updated))
    group_epoch = group.group_epoch
    # A static worker back under a new id takes its old slot: no new assignment needed.
    if (is_new and replaced is None) or needs_reassignment(member.client_assignors, specs):
        group_epoch += 1
        fx.records.append(crh.group_epoch_record(gid, group_epoch))

    if group.client_assignment.in_flight is None and group.assignment_epoch < group_epoch:
        # The O(n) lists only when a round may start (ClientAssignment.maybe_request's test).
        lists = _lists(group, replaced)
        lists[member_id] = updated.client_assignors
        timeouts = {m.member_id: m.rebalance_timeout_ms for m in group.members.values()}
        timeouts[member_id] = updated.rebalance_timeout_ms
        fx.timers.extend(maybe_request(group, lists, timeouts, group_epoch, now_ms))

    target = group.targets.get(member_id)
    if target is None and replaced is not None:
        target = group.targets.get(replaced)
    reconciled = updated
    if is_new or not updated.is_reconciled_to(group.assignment_epoch):
        reconciled = reconcile(group, updated, group.assignment_epoch, target or ConnectTarget(), owned)
        if is_new or not reconciled.assignment_equals(updated):
            fx.records.append(crh.current_assignment_record(gid, reconciled))
            key = rebalance_key(gid, member_id)
            if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
                fx.timers.append(ScheduleTimer(key, now_ms + reconciled.rebalance_timeout_ms, reconciled.member_epoch))
            else:
                fx.timers.append(CancelTimer(key))
    fx.timers.append(ScheduleTimer(session_key(gid, member_id), now_ms + shard.config.consumer_session_timeout_ms))

    asked = group.client_assignment.asked(member_id)
    full = timeout > 0 and specs is not None and req.connectors_and_tasks is not None
    assignment = None
    if create or full or reconciled.assigned != member.assigned or reconciled.member_epoch != member.member_epoch \
            or (reconciled.error, reconciled.metadata_version, reconciled.metadata) != \
            (member.error, member.metadata_version, member.metadata):
        assignment = cm.assignment(error=reconciled.error, units=wire_units(reconciled.assigned),
                                   version=reconciled.metadata_version, metadata=reconciled.metadata)
    pending = asked or group.assignment_epoch < group_epoch or not reconciled.is_reconciled_to(group.assignment_epoch)
    return fx.result(cm.heartbeat_response(
        error_code=COMPUTE_ASSIGNMENT if asked else 0,
        error_message="Compute the group's assignment (ConnectGroupPrepareAssignment, then Install)." if asked
        else None, member_id=member_id, member_epoch=reconciled.member_epoch,
        interval_ms=interval_ms(shard, pending), assignment=assignment))


def _lists(group: ConnectGroup, replaced: str | None) -> dict[str, tuple[ClientAssignorSpec, ...]]:
    """The workers' ClientAssignors, without the slot a returning static worker takes over."""
    return {m.member_id: m.client_assignors for m in group.members.values() if m.member_id != replaced}


def interval_ms(shard: ConnectView, pending: bool) -> int:
    """The consumer groups' heartbeat policy (modern/consumer/heartbeat_policy.py) without its per-process
    stretch: a worker with work pending comes back fast, a stable one at the stable pace."""
    c = shard.config
    if c.consumer_heartbeat_policy == "fixed":
        return c.consumer_heartbeat_interval_ms
    return c.consumer_heartbeat_pending_interval_ms if pending else c.consumer_heartbeat_stable_interval_ms


# -------------------------------------------------------------------- leave
def _leave(shard: ConnectView, req, now_ms: int) -> Result:
    """Epoch -1: leave (fenced at once). Epoch -2: a static worker leaves for a while and
    keeps its slot; its units stay owned at epoch 0 until it returns or its session ends."""
    group: Any = shard.groups.get(req.group_id)
    if not isinstance(group, ConnectGroup):
        raise group_not_found(req.group_id, "" if group is None else "It is not a connect group.")
    gid = group.group_id
    member = group.leaving_member(req.member_id, req.instance_id, noun="worker")
    if req.member_epoch == STATIC_LEAVE_EPOCH:
        leaving = replace(member, member_epoch=STATIC_LEAVE_EPOCH, pending_revocation=EMPTY_UNITS,
                          assigned={c: dict.fromkeys(ts, 0) for c, ts in member.assigned.items()})
        result = Result(records=[crh.current_assignment_record(gid, leaving)])
    else:
        result = fence(shard, group, [member.member_id], now_ms)
    return result.with_response(cm.heartbeat_response(error_code=0, member_id=member.member_id,
                                                      member_epoch=req.member_epoch))


def fence(shard: ConnectView, group: ConnectGroup, member_ids: list[str], now_ms: int) -> Result:
    """Remove workers (leave, session or rebalance timeout): their tombstones in Kafka's
    order, a group epoch bump (a new assignment is needed, 001:L108), and, with the last
    worker gone, the target at that epoch so the empty group is consistent (KAFKA-20442)."""
    gid = group.group_id
    records: list[CoordinatorRecord] = []
    timers: list[TimerOp] = []
    for member_id in member_ids:
        records.extend(crh.remove_member_records(gid, member_id))
        timers.extend(cancel_member_timers(gid, member_id))
    epoch = group.group_epoch + 1
    records.append(crh.group_epoch_record(gid, epoch))
    remaining = set(group.members) - set(member_ids)
    if not remaining:
        records.append(crh.target_metadata_record(gid, epoch, 0, group.assignor_name, now_ms))
    ca = group.client_assignment
    if ca.in_flight is not None and (ca.in_flight.assigner in member_ids or not remaining):
        ca.abandon()
        timers.append(CancelTimer(assignment_deadline_key(gid)))
    return Result(records=records, timers=timers)


# ------------------------------------------------------------------- timers
def on_timer(shard: ConnectView, key: tuple, payload: Any, now_ms: int) -> Result:
    """The handler of the "connect" timer kind (modern/connect/timers.py)."""
    group: Any = shard.groups.get(key[2])
    if not isinstance(group, ConnectGroup):
        return Result()
    if key[1] == "assign":
        return on_deadline(shard, group, now_ms)
    member = group.members.get(key[3])
    if member is None:
        return Result()
    if key[1] == "session":
        shard.log.info("[GroupId %s] Worker %s fenced from the connect group because its session expired.",
                       group.group_id, member.member_id)
        return fence(shard, group, [member.member_id], now_ms)
    if key[1] == "rebalance" and member.member_epoch == payload and member.state is MemberState.UNREVOKED_PARTITIONS:
        shard.log.info("[GroupId %s] Worker %s fenced from the connect group because it did not revoke its units "
                       "within %dms.", group.group_id, member.member_id, member.rebalance_timeout_ms)
        return fence(shard, group, [member.member_id], now_ms)
    return Result()


def on_loaded(shard: ConnectView, now_ms: int) -> list[TimerOp]:
    """What a loaded shard arms for its connect groups: every worker's session, the
    rebalance timeout of workers still revoking, and a new round for groups whose target
    is behind (the round in flight was soft state, docs/design/client-assignors-spec.md §3)."""
    timers: list[TimerOp] = []
    for group in list(shard.groups.values()):
        if not isinstance(group, ConnectGroup):
            continue
        gid = group.group_id
        for m in group.members.values():  # type: ignore[unreachable]
            timers.append(ScheduleTimer(session_key(gid, m.member_id),
                                        now_ms + shard.config.consumer_session_timeout_ms))
            if m.state is MemberState.UNREVOKED_PARTITIONS:
                timers.append(ScheduleTimer(rebalance_key(gid, m.member_id), now_ms + m.rebalance_timeout_ms,
                                            m.member_epoch))
        if group.members:
            timeouts = {m.member_id: m.rebalance_timeout_ms for m in group.members.values()}
            timers.extend(maybe_request(group, group.assignor_lists(), timeouts, group.group_epoch, now_ms))
    return timers
