"""Client-side assignment of a connect group through the shared engine (modern/client_assignment.py):
who is asked (COMPUTE_ASSIGNMENT), ConnectGroupPrepareAssignment and
ConnectGroupInstallAssignment (docs/design/connect-groups-spec.md §1, §2).

Rules:
- Assignment is only ever client-side (001:L119, L131): the engine picks the assignor and
  the assigner (sticky: Connect's leader, 001:L155), keeps one round in flight with the
  assigner's rebalance timeout as deadline, and checks the caller of Prepare/Install.
- The snapshot a Prepare shows is the group at its current epoch; an Install is checked
  against it (001:L159-167), not against the live group:
  1. every worker of the install was in the snapshot (workers that left since are
     accepted and dropped, 000:L246);
  2. no unit is assigned twice, across workers or within one;
  3. ids are well-formed: a non-empty connector name, a task >= -1 (-1 is the connector).
  "All connectors/tasks are assigned" is *not* enforced: the coordinator never sees the
  connector set (it lives in Connect's config topic), and KIP-415's scheduled delay leaves
  lost units unassigned on purpose (the connect group spec's own case study, L943-953).
- An Install with Error != 0 skips the unit rules, keeps every target, and still
  advances the assignment epoch to the snapshot's (000:L274-276), so a deterministic
  assignor failure (Connect's CONFIG_MISMATCH) does not loop.
- A refused Install writes nothing and re-asks the assigner (its next heartbeat gets
  COMPUTE_ASSIGNMENT again).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from ....protocol import connect_messages as cm
from ...errors import ApiError, group_not_found, invalid_request
from ...result import CancelTimer, Result, ScheduleTimer, TimerOp
from ..client_assignment import (
    INVALID_ASSIGNMENT,
    InFlight,
    InvalidAssignment,
    Phase,
    Snapshot,
    select_assignor,
)
from . import record_helpers as crh
from .group import CONNECTOR_TASK, ConnectGroup, ConnectTarget, TargetUnits
from .timers import assignment_deadline_key

if TYPE_CHECKING:
    from records import CoordinatorRecord

    from ...context import ConnectView, RequestContext


# ------------------------------------------------------------------ asking
def maybe_request(group: ConnectGroup, lists, timeouts: Mapping[str, int], group_epoch: int,
                  now_ms: int) -> list[TimerOp]:
    """Start a round when the target is behind `group_epoch` and none is in flight; the
    deadline timer abandons it (the assigner is not fenced, docs/design/client-assignors-spec.md §3)."""
    ca = group.client_assignment
    assigner = ca.maybe_request(lists, group.assignment_epoch < group_epoch, now_ms, timeouts)
    if assigner is None or ca.in_flight is None:
        return []
    return [ScheduleTimer(assignment_deadline_key(group.group_id), ca.in_flight.deadline_ms)]


def on_deadline(shard: ConnectView, group: ConnectGroup, now_ms: int) -> Result:
    """The assigner did not install in time: skip it once and ask another worker."""
    ca = group.client_assignment
    if ca.expire(now_ms) is None:
        return Result()
    shard.log.info("[GroupId %s] connect assignment round abandoned: the assigner did not install within its "
                   "rebalance timeout", group.group_id)
    timeouts = {m.member_id: m.rebalance_timeout_ms for m in group.members.values()}
    return Result(timers=maybe_request(group, group.assignor_lists(), timeouts, group.group_epoch, now_ms))


# ------------------------------------------------------------------ prepare
def _connect_group(shard: ConnectView, group_id: str) -> ConnectGroup | None:
    group = shard.groups.get(group_id)
    return group if isinstance(group, ConnectGroup) else None  # type: ignore[unreachable]


def _caller(shard: ConnectView, req) -> tuple[ConnectGroup, InFlight]:
    """Checks 1-5 of Prepare and Install in the engine's order (docs/design/client-assignors-spec.md §2)."""
    group = _connect_group(shard, req.group_id)
    if group is None:
        if not req.group_id or not req.member_id or req.member_epoch < 0:
            raise invalid_request("GroupId and MemberId can't be empty and MemberEpoch can't be negative.")
        raise group_not_found(req.group_id, "" if req.group_id not in shard.groups else "It is not a connect group.")
    return group, group.client_assignment.check_caller(req.group_id, group, req.member_id, req.member_epoch)


def prepare(shard: ConnectView, ctx: RequestContext, req, now_ms: int) -> Result:
    """ConnectGroupPrepareAssignment: checks 1-5 (001:L413-427), then the snapshot."""
    try:
        group, _ = _caller(shard, req)
        ca = group.client_assignment
        lists = group.assignor_lists()
        name = select_assignor(lists)
        if name is None:    # the lists no longer share a name (cannot happen once asked)
            raise ApiError(ErrorCode.unsupported_assignor, "The workers share no client assignor.")
        ca.prepare(Snapshot(group.group_epoch, name, {m: frozenset() for m in group.members}, {}))
    except ApiError as e:
        return Result(response=cm.prepare_response(error_code=int(e.code), error_message=e.message))
    members = []
    for member_id in sorted(group.members):
        m = group.members[member_id]
        spec = next(s for s in m.client_assignors if s.name == name)
        members.append(cm.prepared_member(
            member_id=member_id, member_epoch=m.member_epoch, instance_id=m.instance_id, version=spec.version,
            reason=spec.reason, metadata=spec.metadata, units=wire_units(group.target_of(member_id).units)))
    return Result(response=cm.prepare_response(error_code=0, group_epoch=group.group_epoch, assignor_name=name,
                                               members=tuple(members)))


# ------------------------------------------------------------------ install
def gather(members) -> dict[str, ConnectTarget]:
    """An Install's members as targets, checking rules 2-3 within and across workers."""
    out: dict[str, ConnectTarget] = {}
    owner: dict[tuple[str, int], str] = {}
    for entry in members:
        mid = entry.member_id
        if mid in out:
            raise InvalidAssignment(f"Worker {mid} is listed twice.")
        units: dict[str, set[int]] = {}
        cat = entry.connectors_and_tasks
        pairs = [(c, CONNECTOR_TASK) for c in cat.connectors] + [(t.connector, t.task) for t in cat.tasks]
        for connector, task in pairs:
            if not connector:
                raise InvalidAssignment(f"Worker {mid} is assigned a connector with an empty name.")
            if task < CONNECTOR_TASK:
                raise InvalidAssignment(f"Worker {mid} is assigned task {connector}/{task}: tasks are numbered "
                                        f"from 0 (-1 is the connector itself).")
            previous = owner.setdefault((connector, task), mid)
            if previous != mid or task in units.get(connector, ()):
                what = f"Connector {connector}" if task == CONNECTOR_TASK else f"Task {connector}/{task}"
                raise InvalidAssignment(f"{what} is assigned twice ({previous} and {mid}).")
            units.setdefault(connector, set()).add(task)
        out[mid] = ConnectTarget({c: frozenset(ts) for c, ts in units.items()}, int(entry.version),
                                 bytes(entry.metadata))
    return out


def _reask(f: InFlight) -> None:
    f.phase = Phase.REQUESTED
    f.snapshot = None


def _validate(f: InFlight, group_epoch: int, error: int, members) -> dict[str, ConnectTarget]:
    if f.snapshot is None:
        raise InvalidAssignment("No ConnectGroupPrepareAssignment preceded this install.")
    if group_epoch != f.snapshot.group_epoch:
        raise InvalidAssignment(f"GroupEpoch {group_epoch} is not the prepared epoch {f.snapshot.group_epoch}.")
    if error != 0:
        return {}
    targets = gather(members)
    for mid in targets:
        if mid not in f.snapshot.subscriptions:
            raise InvalidAssignment(f"Worker {mid} was not in the prepared group (epoch {f.snapshot.group_epoch}).")
    return targets


def install(shard: ConnectView, ctx: RequestContext, req, now_ms: int) -> Result:
    """ConnectGroupInstallAssignment: checks 1-5, then the rules above; on success the
    targets that changed (1003) and the target metadata at the prepared epoch (1002)."""
    try:
        group, f = _caller(shard, req)
        ca = group.client_assignment
        try:
            targets = _validate(f, req.group_epoch, req.error, req.members)
        except InvalidAssignment as e:
            _reask(f)
            return Result(response=cm.install_response(error_code=INVALID_ASSIGNMENT, error_message=str(e)))
    except ApiError as e:
        return Result(response=cm.install_response(error_code=int(e.code), error_message=e.message))
    assert f.snapshot is not None
    epoch, assignor = f.snapshot.group_epoch, f.snapshot.assignor
    ca.in_flight = None
    records = installed_records(group, epoch, req.error, assignor, targets, f.snapshot.subscriptions, now_ms)
    return Result(response=cm.install_response(error_code=0),
                  records=records, timers=[CancelTimer(assignment_deadline_key(group.group_id))])


def installed_records(group: ConnectGroup, epoch: int, error: int, assignor: str,
                      targets: Mapping[str, ConnectTarget], prepared: Iterable[str],
                      now_ms: int) -> list[CoordinatorRecord]:
    """A target record for each live worker whose target changed (prepared workers the
    install leaves out get an empty target), then the metadata at the prepared epoch."""
    gid = group.group_id
    records: list[CoordinatorRecord] = []
    if error == 0:
        for mid in sorted(set(prepared) & set(group.members)):
            new = targets.get(mid, ConnectTarget())
            if group.targets.get(mid) != new and not (mid not in group.targets and new == ConnectTarget()):
                records.append(crh.target_member_record(gid, mid, new))
    records.append(crh.target_metadata_record(gid, epoch, error, assignor, now_ms))
    return records


# ------------------------------------------------------------------ wire helpers
def wire_units(units: TargetUnits | Mapping[str, Iterable[int]]) -> cm.ConnectorsAndTasks:
    connectors = sorted(c for c, ts in units.items() if CONNECTOR_TASK in ts)
    tasks = [(c, t) for c in sorted(units) for t in sorted(units[c]) if t != CONNECTOR_TASK]
    return cm.connectors_and_tasks(connectors, tasks)


