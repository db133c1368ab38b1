"""StreamsGroupHeartbeat (API 88) on the shard (Kafka: `GroupMetadataManager.streamsGroupHeartbeat`).

Rules:
- the request is checked first (responses.validate); a refusal is an error response and
  writes nothing;
- the group: a streams group, a new one on a join (epoch 0), or, on a join, an empty classic
  group converted offline (its tombstones first; committed offsets stay). Any other group is
  GROUP_ID_NOT_FOUND "Group X is not a streams group.";
- static membership: a member with an instance id leaving with -2 stays (epoch -2, its tasks)
  until a join with its instance id replaces it or its session ends; who may join or heartbeat
  as whom (GROUP_MAX_SIZE_REACHED, UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID): admission.py;
- the member: epoch 0 joins (the id is the client's, KIP-1082), -1/-2 leave, any other epoch
  must be the member's, or its previous one with some of its tasks in hand, else
  FENCED_MEMBER_EPOCH (Kafka's `throwIfStreamsGroupMemberEpochIsInvalid`); an unknown member
  is UNKNOWN_MEMBER_ID;
- the topology: the first join stores it; a join at a lower topology epoch is served with
  STALE_TOPOLOGY; a different topology is INVALID_REQUEST "Topology updates are not supported yet.";
- the group epoch moves when the topology is stored, a member's metadata changes, or the
  metadata hash of the topology's topics changes; the target follows, paced (membership.py);
- statuses: the topology's configuration (MISSING_SOURCE_TOPICS, MISSING_INTERNAL_TOPICS,
  INCORRECTLY_PARTITIONED_TOPICS), STALE_TOPOLOGY, SHUTDOWN_APPLICATION once any member asked
  for it (until the group is empty), MISSING_CLIENT_TAGS (v1 only) naming the group's
  `streams.rack.aware.assignment.tags` keys the member did not send, ASSIGNMENT_DELAYED (listed
  first, Kafka's words "Assignment delayed due to the configured initial rebalance delay.")
  while the target is held back (kcoord's quiet hold, membership.py, says "initial rebalance
  quiet period");
- the member's TaskOffsets / TaskEndOffsets are kept (offsets.py: each side replaced when
  sent, a duplicate task INVALID_REQUEST) after the member and topology checks and before the
  target is computed, as Kafka 4.4 does;
- kcoord's warm-ups (warmup.py, off by default): members reconcile against the refined target,
  and a report that makes a held-back move ready bumps the group epoch;
- the heartbeat interval: Kafka's fixed one, or kcoord's adaptive one (membership.py), under
  which a member waiting for unreleased tasks gets the released ones together (release.py);
- tasks are in the response when the member joins, when its tasks changed, or when what it
  reports holding differs from what it has; the interactive-query map when the member's
  endpoint-information epoch is not the group's (endpoints.py);
- at DEBUG (logger `kcoord.streams.heartbeat`) every answered heartbeat is one line: who,
  what it reported, where it stands against its target, and the interval it was told (the
  rebalance benchmark's diagnosis, docs/measurements/streams-rebalance.md).
"""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from kio.schema.errors import ErrorCode

from ..errors import ApiError, group_not_found, invalid_request, unknown_member
from ..group_types import group_type
from ..result import CancelTimer, Result, ScheduleTimer
from . import records as rh
from .admission import check_capacity, check_instance, replaced_static_member
from .endpoints import partitions_by_endpoint
from .membership import (
    assignment_configs,
    assignment_timer,
    can_compute,
    compute_target,
    configured_for,
    delay_cause,
    end_quiet_hold,
    endpoint_changed,
    forget_due,
    group_epoch_record,
    group_settings,
    heartbeat_interval_ms,
    note_join,
    note_validated,
    rebalance_key,
    release_due_ms,
    remember_due,
    removal_records,
    removal_timers,
    session_key,
    soft_of,
    trickle_cap,
)
from .model import EMPTY_TASKS, Holders, MemberState, StreamsGroup, StreamsMember, Tasks, Topology
from .offsets import EMPTY as EMPTY_OFFSETS
from .offsets import after_heartbeat, store
from .reconciliation import reconcile, within
from .records import tasks_from, topology_from
from .release import hold_back_cap
from .responses import LEAVE_EPOCH, LEAVE_STATIC_EPOCH, error_response, response, response_schema, validate
from .topology import ASSIGNMENT_DELAYED, MISSING_CLIENT_TAGS, SHUTDOWN_APPLICATION, STALE_TOPOLOGY
from .warmup import enabled, refined, reported_caught_up, turned_off

log = logging.getLogger("kcoord.streams.heartbeat")


def streams_group_heartbeat(shard: Any, ctx: Any, req: Any, now_ms: int) -> Result:
    try:
        validate(req)
        return _heartbeat(shard, ctx, req, now_ms)
    except ApiError as e:
        return Result(response=error_response(ctx.api_version, e.code, e.message))


def _group(shard: Any, req: Any) -> tuple[StreamsGroup, list]:
    group = shard.groups.get(req.group_id)
    if isinstance(group, StreamsGroup):
        return group, []
    if group is None:
        # Kafka 4.4 words a heartbeat of a member in a missing group as a streams lookup, and a
        # leave (-1/-2) as the plain group lookup (both checked against a live 4.4 broker).
        if req.member_epoch not in (0, LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
            raise ApiError(ErrorCode.group_id_not_found, f"Streams group {req.group_id} not found.")
        if req.member_epoch != 0:
            raise group_not_found(req.group_id)
        return StreamsGroup(req.group_id), []
    gtype = group_type(group)
    if req.member_epoch == 0 and gtype.name == "classic" and gtype.state(group) == "Empty":
        return StreamsGroup(req.group_id), list(gtype.tombstones(group))
    raise ApiError(ErrorCode.group_id_not_found, f"Group {req.group_id} is not a streams group.")


def _static_leave(gid: str, member: StreamsMember, version: int, settings: Any, now_ms: int) -> Result:
    """A static member leaving with -2 stays in the group with epoch -2 and its tasks, until
    it is replaced by a member with its instance id or its session runs out (Kafka's static
    membership): no group epoch bump, no task moves."""
    left = replace(member, member_epoch=LEAVE_STATIC_EPOCH)
    return Result(records=[rh.current_assignment(gid, left)],
                  timers=[CancelTimer(rebalance_key(gid, member.member_id)),
                          ScheduleTimer(session_key(gid, member.member_id), now_ms + settings.session_timeout_ms)],
                  response=response(version, member_id=member.member_id, member_epoch=LEAVE_STATIC_EPOCH,
                                    heartbeat_ms=0, task_offset_ms=0, recovery_lag=-1, statuses=[], tasks=None,
                                    endpoint_epoch=0))


def _owned(req: Any) -> Tasks | None:
    if req.active_tasks is None:
        return None
    return Tasks(tasks_from(req.active_tasks), tasks_from(req.standby_tasks), tasks_from(req.warmup_tasks))


def _check_epoch(member: StreamsMember, received: int, owned: Tasks | None) -> None:
    if received > member.member_epoch:
        raise ApiError(ErrorCode.fenced_member_epoch,
                       f"The streams group member has a greater member epoch ({received}) than the one known by "
                       f"the group coordinator ({member.member_epoch}). The member must abandon all its tasks and "
                       "rejoin.")
    # the previous epoch with a subset of the tasks in hand: the answer that moved the member
    # on was lost (Kafka's `throwIfStreamsGroupMemberEpochIsInvalid`)
    if received < member.member_epoch and (received != member.previous_member_epoch or owned is None
                                           or not within(owned, member.assigned)):
        raise ApiError(ErrorCode.fenced_member_epoch,
                       f"The streams group member has a smaller member epoch ({received}) than the one known by "
                       f"the group coordinator ({member.member_epoch}). The member must abandon all its tasks and "
                       "rejoin.")


def _updated(member: StreamsMember, ctx: Any, req: Any, topology_epoch: int) -> StreamsMember:
    timeout = req.rebalance_timeout
    timeout_ms = timeout if isinstance(timeout, int) else int(timeout.total_seconds() * 1000)
    ep = req.user_endpoint
    return replace(
        member,
        instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
        rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
        client_id=ctx.client_id or "", client_host=ctx.client_host or "",
        rebalance_timeout_ms=timeout_ms if timeout_ms != -1 else member.rebalance_timeout_ms,
        topology_epoch=topology_epoch,
        process_id=req.process_id if req.process_id is not None else member.process_id,
        user_endpoint=(ep.host, int(ep.port)) if ep is not None else member.user_endpoint,
        client_tags=(tuple(sorted((kv.key, kv.value) for kv in req.client_tags)) if req.client_tags is not None
                     else member.client_tags))


def _reconcile(gid: str, member: StreamsMember, updated: StreamsMember, members: dict, target_epoch: int,
               target: dict, owned: Tasks | None, joining: bool, now_ms: int, records: list,
               timers: list, cap: int | None = None, after: StreamsMember | None = None) -> StreamsMember:
    """The member's next assignment (reconciliation.py; ``cap``: the quiet hold's trickle or
    release.py's hold-back; ``after``: that assignment already reconciled without a cap), its
    record 22 if it changed, and its rebalance timer: armed when it starts revoking, cancelled
    once it is not."""
    if after is None:
        after = reconcile(updated, target_epoch, target.get(updated.member_id, EMPTY_TASKS), owned,
                          Holders.of(members.values()), cap)
    if joining or (after.member_epoch, after.previous_member_epoch, after.state, after.assigned,
                   after.pending_revocation) != (member.member_epoch, member.previous_member_epoch, member.state,
                                                 member.assigned, member.pending_revocation):
        records.append(rh.current_assignment(gid, after))
    key = rebalance_key(gid, updated.member_id)
    if after.state is not MemberState.UNREVOKED_TASKS:
        timers.append(CancelTimer(key))
    elif member.state is not MemberState.UNREVOKED_TASKS or joining:
        timers.append(ScheduleTimer(key, now_ms + after.rebalance_timeout_ms, after.member_epoch))
    return after


def _statuses(configuration: tuple[int, str] | None, member: StreamsMember, topology: Topology,
              shutdown_requester: str | None, tag_keys: tuple[str, ...]) -> list[tuple[int, str]]:
    out = [] if configuration is None else [configuration]
    if member.topology_epoch < topology.epoch:
        out.append((STALE_TOPOLOGY, f"The member's topology epoch {member.topology_epoch} is behind the "
                                    f"group's topology epoch {topology.epoch}."))
    if shutdown_requester is not None:
        out.append((SHUTDOWN_APPLICATION, f"The application is requested to shutdown by member {shutdown_requester}."))
    if not tag_keys:
        return out
    sent = {key for key, _ in member.client_tags}
    missing = [key for key in tag_keys if key not in sent]
    if missing:     # the list as Java prints one; responses.py drops it for a v0 member
        out.append((MISSING_CLIENT_TAGS, f"Missing required client tags for rack-aware standby assignment: "
                                         f"[{', '.join(missing)}]. Configure them via 'client.tag.<tagKey>' in "
                                         "your Streams config."))
    return out


def _heartbeat(shard: Any, ctx: Any, req: Any, now_ms: int) -> Result:
    settings = group_settings(shard, req.group_id)
    group, records = _group(shard, req)
    gid, mid, epoch = req.group_id, req.member_id, req.member_epoch
    soft = soft_of(shard, gid)
    member = group.members.get(mid)
    owned = _owned(req)
    if epoch == LEAVE_STATIC_EPOCH and member is not None and member.instance_id is not None:
        return _static_leave(gid, member, ctx.api_version, settings, now_ms)
    if epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
        if member is None:
            raise unknown_member(gid, mid)
        if len(group.members) == 1:
            soft.shutdown_requester = soft.initial_delay_until_ms = soft.quiet_hold = soft.warmups = None
        endpoint_changed(soft, member, None)
        forget_due(soft, mid)
        return Result(records=removal_records(group, mid), timers=removal_timers(gid, mid),
                      response=response(ctx.api_version, member_id=mid, member_epoch=epoch, heartbeat_ms=0,
                                        task_offset_ms=0, recovery_lag=-1, statuses=[], tasks=None,
                                        endpoint_epoch=0))
    joining = member is None
    if epoch == 0:
        check_capacity(group, req, settings.max_size)
    else:
        check_instance(group, req)
        if member is None:
            raise unknown_member(gid, mid)
        _check_epoch(member, epoch, owned)
    replaced = replaced_static_member(group, req) if joining else None
    if replaced is not None:      # the new member takes the static member's place, as it was
        records += [rh.current_assignment_tombstone(gid, replaced.member_id),
                    rh.target_member_tombstone(gid, replaced.member_id), rh.member_tombstone(gid, replaced.member_id)]
        member = replace(replaced, member_id=mid)
        forget_due(soft, replaced.member_id)    # its id is gone: nothing may stay keyed by it
    member = member or StreamsMember(mid)
    bump = False
    topology = group.topology
    topology_epoch = member.topology_epoch
    if epoch == 0:
        requested = topology_from(req.topology)
        topology_epoch = requested.epoch
        if topology is None:
            topology = requested
            records.append(rh.topology(gid, requested))
            bump = True
        elif requested.epoch >= topology.epoch and requested != topology:
            raise invalid_request("Topology updates are not supported yet.")
    updated = _updated(member, ctx, req, topology_epoch)
    if joining or updated != member:     # _updated changes only the metadata of record 19
        records.append(rh.member_metadata(gid, updated))
        bump = bump or replaced is None or updated != member
    if topology is None:     # a log with members but no topology: make the member rejoin with it
        raise ApiError(ErrorCode.fenced_member_epoch, f"Group {gid} has no topology; the member must rejoin.")
    configured = configured_for(soft, topology, shard.image)
    # Kafka 4.4 keeps the reported offsets here, after the member and topology checks and
    # before the target is computed, so this heartbeat's offsets rank the candidates (offsets.py)
    reported = after_heartbeat(soft.task_offsets.get(mid, EMPTY_OFFSETS), req, configured.task_counts)
    if reported is not None:
        store(soft.task_offsets, group.members, mid, reported)
        # kcoord's warm-ups: a report that makes a held-back move ready starts the next target
        bump = bump or (enabled(settings) and reported_caught_up(soft, group, updated.process_id, reported, settings))
    validated = topology.epoch if configured.is_ready() else -1
    # called whether or not a bump is due already: a plan left under the switch turned off
    # would stay counted by the warm-up gauges (coordinator/metrics.py) until the next heartbeat
    off = turned_off(soft, group, settings)
    configs = assignment_configs(settings)
    # Kafka 4.4: a change of the group's standby replicas or client-tag keys starts a rebalance
    bump = bump or configured.metadata_hash != group.metadata_hash or off or (
        configs != group.last_assignment_configs and dict(configs) != dict(group.last_assignment_configs))
    group_epoch = group.group_epoch + 1 if bump else group.group_epoch
    if bump or validated != group.validated_topology_epoch:
        records.append(group_epoch_record(group, group_epoch, configured.metadata_hash, validated, configs))
    if joining and not group.members and settings.initial_rebalance_delay_ms > 0:
        soft.initial_delay_until_ms = now_ms + settings.initial_rebalance_delay_ms
    if joining:
        note_join(soft, group, settings, now_ms)
    if validated >= 0 > group.validated_topology_epoch:
        note_validated(soft, now_ms)
    if req.shutdown_application:
        soft.shutdown_requester = mid

    statuses: list[tuple[int, str]] = []
    timers: list = [ScheduleTimer(session_key(gid, mid), now_ms + settings.session_timeout_ms)]
    members = {**group.members, mid: updated}
    target_epoch, target = group.target_assignment_epoch, group.target
    held_until: int | None = None
    if replaced is not None:
        del members[replaced.member_id]
        kept = target.get(replaced.member_id, EMPTY_TASKS)
        target = {**{m: t for m, t in target.items() if m != replaced.member_id}, mid: kept}
        records.append(rh.target_member(gid, mid, kept))
        timers += removal_timers(gid, replaced.member_id)
    if group_epoch > target_epoch:
        when = can_compute(group, soft, settings, now_ms)
        if when is None:
            assigned, target = compute_target(group, members, configured, group_epoch, settings, now_ms,
                                              topology, soft)
            records += assigned
            target_epoch = group_epoch
            end_quiet_hold(soft, target, settings)
        else:
            timers.append(assignment_timer(gid, when))
            held_until = when
            statuses.append((ASSIGNMENT_DELAYED,
                             f"Assignment delayed due to the configured {delay_cause(soft, settings, when)}."))
    if enabled(settings):     # members reconcile against the refined target (warmup.py)
        target, probe = refined(soft, gid, members, target_epoch, target, topology, settings, now_ms)
        timers += probe
    trickle = trickle_cap(soft, settings, now_ms, configured.is_ready(), len(members) if target_epoch == group_epoch
                          else 0, sum((configured.task_counts or {}).values()))
    cap = None if trickle is None else trickle[0]
    uncapped = None
    if cap is None:     # released tasks handed together (release.py)
        mine = target.get(mid, EMPTY_TASKS)
        uncapped = reconcile(updated, target_epoch, mine, owned, Holders.of(members.values()))
        cap = hold_back_cap(shard, soft, settings, member, uncapped, mine,
                            (m for m in members.values() if m.member_id != mid), now_ms)
    after = _reconcile(gid, member, updated, members, target_epoch, target, owned, joining, now_ms, records, timers,
                       cap, uncapped if cap is None else None)
    endpoint_changed(soft, replaced if replaced is not None else None if joining else member, after)
    # Kafka 4.4 lists ASSIGNMENT_DELAYED first (its broker answered so)
    statuses = statuses + _statuses(configured.status, after, topology, soft.shutdown_requester,
                                    settings.rack_aware_assignment_tags)
    send_tasks = joining or epoch == 0 or after.assigned != member.assigned or owned != after.assigned
    endpoints = None
    if req.endpoint_information_epoch != soft.endpoint_epoch and configured.is_ready():
        endpoints = partitions_by_endpoint(response_schema(ctx.api_version), {**members, mid: after}.values(),
                                           topology, shard.image)
    released_at = None
    if after.state is MemberState.UNRELEASED_TASKS:
        missing = target.get(mid, EMPTY_TASKS).minus(after.assigned)
        released_at = release_due_ms(soft, (m for m in members.values() if m.member_id != mid), missing, now_ms)
    capped_until = (trickle[1] if trickle is not None and after.state is MemberState.UNRELEASED_TASKS
                    and len(after.assigned.active) >= trickle[0] else None)
    interval = heartbeat_interval_ms(shard, settings, after, target_epoch, group_epoch, held_until, now_ms, released_at,
                                     capped_until)
    remember_due(soft, group, mid, now_ms + interval)
    if log.isEnabledFor(logging.DEBUG):
        _debug(gid, mid, ctx.client_id, epoch, owned, after, target.get(mid, EMPTY_TASKS), group_epoch, target_epoch,
               configured, statuses, interval, now_ms)
    return Result(records=records, timers=timers, response=response(
        ctx.api_version, member_id=mid, member_epoch=after.member_epoch,
        heartbeat_ms=interval,
        task_offset_ms=settings.task_offset_interval_ms, recovery_lag=settings.acceptable_recovery_lag,
        statuses=statuses, tasks=after.assigned if send_tasks else None, endpoint_epoch=soft.endpoint_epoch,
        endpoints=endpoints))


def _debug(gid: str, mid: str, client: str | None, epoch: int, owned: Tasks | None, after: StreamsMember, target: Tasks,
           group_epoch: int, target_epoch: int, configured: Any, statuses: list, interval: int, now_ms: int) -> None:
    """One DEBUG line per answered heartbeat (sizes, not task lists: a line stays short)."""
    def n(t: Tasks | None) -> str:
        return "-" if t is None else str(len(t.active) + len(t.standby) + len(t.warmup))
    log.debug("streams group %s member %s (client %s) at %d: sent epoch %d owned %s; now %s epoch %d assigned %s "
              "revoking %s target %s (missing %s); group epoch %d target epoch %d ready %s statuses %s; interval %d ms",
              gid, mid, client, now_ms, epoch, n(owned), after.state.name, after.member_epoch, n(after.assigned),
              n(after.pending_revocation), n(target), n(target.minus(after.assigned)), group_epoch, target_epoch,
              configured.is_ready(), [code for code, _ in statuses], interval)
