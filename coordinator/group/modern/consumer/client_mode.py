"""Client-side assignor mode in the shard (docs/design/client-assignors-spec.md): heartbeat hooks,
Prepare, Install, timers.

modern/client_assignment.py holds the rules (sans-IO, no group state); this module applies them to
a consumer group and turns the outcome into records, responses and timers.

Rules of this module:
- A group whose members brought no client assignors never reaches any of this code past
  one counter check (`group.client_assignor_index.listed`), and every record it writes is
  built by record_helpers unchanged: byte-identical to Kafka (X3, tests/unit/group/
  test_client_assign_server_mode.py).
- The round in flight is soft state (`shard.client_assignments[group_id]`, not on the group
  object: a join creates the group only when its records are replayed), re-checked on use: it is
  abandoned as soon as its assigner left, became ineligible, or the group left client mode
  (docs/design/client-assignors-spec.md §3), so fencing needs no hook of its own.
- Responses leave the core as plain data (`CsaAnswer`, `PrepareAnswer`, `InstallAnswer`):
  the group core may not import the protocol package; coordinator/private_apis.py builds
  the wire messages of 32700-32702 from them.
- Prepare and Install run checks 1-5 of docs/design/client-assignors-spec.md §2 in order; Install is validated
  against the PREPARED snapshot (§1.4). A failed Install writes nothing and re-asks.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from ... import record_helpers as rh
from ...errors import ApiError, invalid_request
from ...result import CancelTimer, Result, ScheduleTimer
from ...timers import CLIENT_ASSIGNMENT, assignment_key
from .. import client_assignment
from ..client_assignment import (
    ClientAssignment,
    ClientAssignorSpec,
    InvalidAssignment,
    PreparedGroup,
    Specs,
    check_join,
    gather_install,
    needs_reassignment,
    select_assignor,
    validate_request,
)
from . import assignment_pacing
from .assignment_pacing import can_compute_assignment
from .client_round import prepare_view
from .group import ConsumerGroup, ConsumerGroupMember

if TYPE_CHECKING:
    from records import CoordinatorRecord

    from .view import ConsumerView

Lists = Mapping[str, Specs | None]


def client_assignment_key(group_id: str) -> tuple:
    return (CLIENT_ASSIGNMENT, group_id)


def state_of(shard: ConsumerView, group_id: str) -> ClientAssignment:
    ca = shard.client_assignments.get(group_id)
    if ca is None:
        ca = shard.client_assignments[group_id] = ClientAssignment()
    return ca


def server_mode(shard: ConsumerView, group_id: str) -> None:
    """The group is (back) in server mode: any round in flight is abandoned (A12)."""
    shard.client_assignments.pop(group_id, None)


# ------------------------------------------------------------------ heartbeat hooks
def request_specs(req) -> tuple[ClientAssignorSpec, ...] | None:
    """The ClientAssignors of a 32700 request (key 68's requests have none: None, requests.py)."""
    return client_assignment.request_specs(req.client_assignors)


def validate(req, csa: bool) -> None:
    """000:L482-486, plus: a join through 32700 must bring ClientAssignors (§1.2)."""
    specs = request_specs(req)
    if csa and req.member_epoch == 0 and not specs:
        raise invalid_request("ClientAssignors must be set (non-empty) when joining through "
                              "ConsumerGroupHeartbeat with client assignors (API key 32700).")
    validate_request(req.server_assignor, specs)


def lists_of(group: ConsumerGroup, updated: ConsumerGroupMember | None = None) -> dict[str, Specs | None]:
    lists: dict[str, Specs | None] = {m: mm.client_assignors for m, mm in group.members.items()}
    if updated is not None:
        lists[updated.member_id] = updated.client_assignors
    return lists


def carry_specs(group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember,
                specs: tuple[ClientAssignorSpec, ...] | None) -> ConsumerGroupMember:
    """`updated` with the request's ClientAssignors (null: unchanged). A repeat of the stored
    list with Reason 0 keeps the stored one, so it writes no record (A14). A joiner, or a
    member changing its list, must leave the group a common assignor and an eligible
    assigner, or gets UNSUPPORTED_ASSIGNOR and is not added (§1.1)."""
    if specs is None:
        return updated
    old = member.client_assignors
    if old is not None and not needs_reassignment(old, specs):
        return updated
    if member.member_id not in group.members or old != specs:
        _join_check(group, member.member_id, specs)
    return replace(updated, client_assignors=specs)


def _join_check(group: ConsumerGroup, member_id: str, specs: tuple[ClientAssignorSpec, ...]) -> None:
    """client_assignment.check_join, O(names) when the joiner itself is an eligible
    assigner (the usual case: one library version); otherwise the full O(n) check decides."""
    current = group.members.get(member_id)
    with group.client_assignor_index.overlaid(current.client_assignors if current else None, specs) as index:
        # check_join counts only the members with a list: `listed`, not len(members)
        name = index.select(index.listed)
        ok = name is not None and index.covers_all(next(s for s in specs if s.name == name))
    if not ok:
        check_join(lists_of(group), member_id, specs)


def mode_changed(group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember) -> bool:
    """Bump the group epoch: the group enters or leaves client mode or changes assignor, or
    this member's list changed or carries a Reason (000:L190-191, L370)."""
    if not group.client_assignor_index.listed and not updated.client_assignors:
        return False
    present = member.member_id in group.members
    if present and updated.client_assignors is member.client_assignors:
        # The steady heartbeat: the group's lists are unchanged, so is its assignor. Without
        # this, every heartbeat of an n-member group paid two O(n) selections (bench/
        # bench_client_assignors.py, 1,000 members).
        return False
    old = member.client_assignors if present else None
    # Only a list this request carried counts (carry_specs keeps the stored object
    # otherwise): a stored Reason must not bump the epoch on every later heartbeat.
    if updated.client_assignors is not member.client_assignors and needs_reassignment(old, updated.client_assignors):
        return True
    return selection(group, None) != selection(group, updated)


def _overlaid(group: ConsumerGroup, updated: ConsumerGroupMember | None):
    """The group's AssignorIndex with `updated`'s list in place of its stored one (kept by
    replay, so O(names) per heartbeat, not O(members)), and the member count with it."""
    current = group.members.get(updated.member_id) if updated is not None else None
    old = current.client_assignors if current is not None else None
    new = updated.client_assignors if updated is not None else old
    n = len(group.members) + (updated is not None and current is None)
    return group.client_assignor_index.overlaid(old, new), n


def selection(group: ConsumerGroup, updated: ConsumerGroupMember | None) -> str | None:
    """client_assignment.select_assignor over the members' lists with `updated` overlaid."""
    overlay, n = _overlaid(group, updated)
    with overlay as index:
        return index.select(n)


def in_client_mode(group: ConsumerGroup, updated: ConsumerGroupMember | None) -> str | None:
    """The group's client assignor with `updated` overlaid, or None (server mode)."""
    if not group.client_assignor_index.listed and (updated is None or not updated.client_assignors):
        return None
    return selection(group, updated)


def _refresh(shard: ConsumerView, group: ConsumerGroup, updated: ConsumerGroupMember | None) -> ClientAssignment:
    """Abandon the round whose assigner left, became ineligible, or whose group left client mode."""
    ca = state_of(shard, group.group_id)
    f = ca.in_flight
    if f is None:
        return ca
    assigner = updated if updated is not None and updated.member_id == f.assigner else group.members.get(f.assigner)
    overlay, n = _overlaid(group, updated)
    with overlay as index:
        name = index.select(n)
        spec = next((s for s in assigner.client_assignors or () if s.name == name), None) if assigner else None
        if name is None or spec is None or not index.covers_all(spec):
            ca.abandon()
    return ca


def maybe_ask(shard: ConsumerView, group: ConsumerGroup, updated: ConsumerGroupMember | None, group_epoch: int,
              now_ms: int) -> list:
    """Start a round when the group is behind and idle (§1.1 "When to ask"); the timers to
    arm (the round's deadline)."""
    ca = _refresh(shard, group, updated)
    if ca.in_flight is not None or group.assignment_epoch >= group_epoch:
        return []           # the O(n) lists below only when a round may start
    lists = lists_of(group, updated)
    behind = can_compute_assignment(shard, group, now_ms)
    timeouts = {m: mm.rebalance_timeout_ms for m, mm in group.members.items()}
    if updated is not None:
        timeouts[updated.member_id] = updated.rebalance_timeout_ms
    asked = ca.maybe_request(lists, behind, now_ms, timeouts)
    if asked is None:
        return []
    shard.log.info("[GroupId %s] Member %s is asked to compute the assignment of epoch %d (client assignor %s).",
                   group.group_id, asked, group_epoch, select_assignor(lists))
    assert ca.in_flight is not None
    return [ScheduleTimer(client_assignment_key(group.group_id), ca.in_flight.deadline_ms)]


def with_target_metadata(group: ConsumerGroup, m: ConsumerGroupMember, target_epoch: int) -> ConsumerGroupMember:
    """Once a member reaches the target epoch it hands out that target's Error and metadata
    (server-computed targets: 0, -1, null)."""
    if m.member_epoch != target_epoch:
        return m
    if group.client_assignor_name is None:
        error, version, data = 0, -1, None
    else:
        version, data = group.target_metadata.get(m.member_id, (-1, None))
        error = group.assignment_error
    if (error, version, data) == (m.assignment_error, m.assignment_metadata_version, m.assignment_metadata_bytes):
        return m
    return replace(m, assignment_error=error, assignment_metadata_version=version, assignment_metadata_bytes=data)


# ------------------------------------------------------------------ records
def member_metadata_record(group_id: str, m: ConsumerGroupMember) -> CoordinatorRecord:
    from records import ClientAssignor
    r = rh.member_metadata_record(group_id, m)
    if m.client_assignors:
        r.value.client_assignors = tuple(ClientAssignor(s.name, s.minimum_version, s.maximum_version, s.reason,
                                                        s.version, s.metadata) for s in m.client_assignors)
    return r


def target_member_record(group: ConsumerGroup, member_id: str, target, metadata_of: str) -> CoordinatorRecord:
    """A target record carrying the client assignor's metadata `metadata_of` had (a static
    member replaced under a new id keeps its old target and that target's metadata)."""
    r = rh.target_member_record(group.group_id, member_id, target)
    md = group.target_metadata.get(metadata_of) if group.target_metadata else None
    if md is not None:
        r.value.metadata_version, r.value.metadata_bytes = md
    return r


def current_assignment_record(group_id: str, m: ConsumerGroupMember) -> CoordinatorRecord:
    r = rh.current_assignment_record(group_id, m)
    if (m.assignment_error, m.assignment_metadata_version, m.assignment_metadata_bytes) != (0, -1, None):
        r.value.error = m.assignment_error
        r.value.metadata_version = m.assignment_metadata_version
        r.value.metadata_bytes = m.assignment_metadata_bytes
    return r


# ------------------------------------------------------------------ answers
@dataclass(frozen=True, slots=True)
class CsaAnswer:
    """A 32700 heartbeat's answer: key 68's v1 response, plus COMPUTE_ASSIGNMENT and the
    assignment's Error and metadata (private_apis.py writes CsaHeartbeatResponse)."""
    response: Any
    compute: bool = False
    error: int = 0
    metadata_version: int = -1
    metadata_bytes: bytes | None = None


@dataclass(frozen=True, slots=True)
class PrepareAnswer:
    error_code: int = 0
    message: str | None = None
    prepared: PreparedGroup | None = None


@dataclass(frozen=True, slots=True)
class InstallAnswer:
    error_code: int = 0
    message: str | None = None


def csa_answer(shard: ConsumerView, group_id: str, member: ConsumerGroupMember | None, response) -> CsaAnswer:
    ca = shard.client_assignments.get(group_id) if member is not None else None
    compute = ca is not None and member is not None and ca.asked(member.member_id)
    if member is None:
        return CsaAnswer(response, compute)
    return CsaAnswer(response, compute, member.assignment_error, member.assignment_metadata_version,
                     member.assignment_metadata_bytes)


# ------------------------------------------------------------------ Prepare / Install
def _caller(shard: ConsumerView, req):
    group = shard.groups.get(req.group_id) if req.group_id else None
    if group is not None and not isinstance(group, ConsumerGroup):
        raise ApiError(ErrorCode.group_id_not_found, f"Group {req.group_id} is not a consumer group.")
    ca = _refresh(shard, group, None) if group is not None else ClientAssignment()
    f = ca.check_caller(req.group_id, group, req.member_id, req.member_epoch)
    assert group is not None
    return group, ca, f


def prepare_assignment(shard: ConsumerView, req, now_ms: int) -> Result:
    """32701 (docs/design/client-assignors-spec.md §2): checks 1-5, then a snapshot at the current group epoch;
    the round becomes PREPARED (a repeated Prepare refreshes it)."""
    try:
        group, ca, _ = _caller(shard, req)
    except ApiError as e:
        return Result(response=PrepareAnswer(int(e.code), e.message))
    lists = lists_of(group)
    name = select_assignor(lists)
    assert name is not None   # _refresh abandoned the round otherwise
    view = prepare_view(group, shard.image, {m: s or () for m, s in lists.items()}, name)
    ca.prepare(view.snapshot)
    return Result(response=PrepareAnswer(prepared=view))


def install_assignment(shard: ConsumerView, req, now_ms: int) -> Result:
    """32702: checks 1-5, then the prepared epoch and §1.4 against the snapshot. Success
    writes the changed targets with their metadata (type 7, tags 1000/1001), then the
    target metadata at the prepared epoch E with Error and the assignor (type 6)."""
    try:
        group, ca, f = _caller(shard, req)
        try:
            members = gather_install((m.member_id, ((tp.topic_id, tp.partitions) for tp in m.partitions))
                                     for m in req.members)
        except InvalidAssignment:
            ca._reask(f)
            raise
        metadata = {m.member_id: (m.metadata_version, m.metadata_bytes) for m in req.members}
        done = ca.install(req.group_epoch, req.error, members, metadata, group.members)
    except ApiError as e:
        return Result(response=InstallAnswer(int(e.code), e.message))
    except InvalidAssignment as e:
        shard.log.info("[GroupId %s] InstallAssignment from %s refused: %s", req.group_id, req.member_id, e)
        return Result(response=InstallAnswer(e.code, str(e)))
    gid = group.group_id
    records: list[CoordinatorRecord] = []
    for member_id, target in sorted(done.targets.items()):
        version, data = done.metadata.get(member_id, (-1, None))
        old = {t: frozenset(ps) for t, ps in (group.target_assignment.get(member_id) or {}).items() if ps}
        if old == target and group.target_metadata.get(member_id, (-1, None)) == (version, data) \
                and group.client_assignor_name is not None:
            continue
        r = rh.target_member_record(gid, member_id, target)
        r.value.metadata_version, r.value.metadata_bytes = version, data
        records.append(r)
    snapshot_assignor = f.snapshot.assignor if f.snapshot is not None else select_assignor(lists_of(group))
    meta = rh.target_metadata_record(gid, done.epoch, now_ms)
    meta.value.assignment_error = done.error
    meta.value.client_assignor_name = snapshot_assignor
    records.append(meta)
    timers: list = [CancelTimer(client_assignment_key(gid))]
    if group.group_epoch > done.epoch:
        # Still behind: the next round starts once KIP-1263's interval has passed (§1.5).
        timers.append(ScheduleTimer(assignment_key(gid), now_ms + assignment_pacing.interval_ms(shard, group)))
    return Result(response=InstallAnswer(), records=records, timers=timers)


# ------------------------------------------------------------------ timers
def on_assignment_timer(shard: ConsumerView, group: ConsumerGroup, now_ms: int) -> Result | None:
    """The `assignment` timer of a client-mode group asks a member instead of computing;
    None: the group is in server mode."""
    if in_client_mode(group, None) is None:
        server_mode(shard, group.group_id)
        return None
    return Result(timers=maybe_ask(shard, group, None, group.group_epoch, now_ms))


def on_deadline(shard: ConsumerView, group: ConsumerGroup, now_ms: int) -> Result:
    """The assigner did not Install in time: abandon (not fenced, 000:L248) and ask another."""
    ca = shard.client_assignments.get(group.group_id)
    if ca is None:
        return Result()
    late = ca.expire(now_ms)
    if late is None:
        return Result()
    shard.log.info("[GroupId %s] Member %s did not install the assignment in time; asking another member.",
                   group.group_id, late)
    return Result(timers=maybe_ask(shard, group, None, group.group_epoch, now_ms))
