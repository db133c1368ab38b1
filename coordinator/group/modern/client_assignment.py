"""Client-side assignor mode (docs/design/client-assignors-spec.md §1, §3, §4): the rules, sans-IO.

The coordinator picks one member (the *assigner*) to compute the group's target
assignment with its own logic: it is told COMPUTE_ASSIGNMENT on a heartbeat, asks for a
snapshot of the group (PrepareAssignment), and sends the result back (InstallAssignment).
Reconciliation, epochs and fencing stay on the server. This module holds the decisions;
the shard feeds it the group and writes what it returns.

Rules (each cites the seed line or the docs/design/client-assignors-spec.md resolution it implements):
- Client mode needs *every* member to bring a non-empty ClientAssignors list, and the
  lists to share a name (000:L220-223). One member without (any real Kafka client, a
  classic member) puts the group in server mode; it is never rejected (§1.1, §1.7 #9).
- The assignor: among names in every list, the lowest sum of list positions, ties broken
  by name (the seed says "respect the precedence defined by the members", silent when
  they disagree).
- An eligible assigner's [Min, Max] for that assignor contains every member's Version
  (000:L250-260). The current assigner is kept while eligible (001:L155), else the
  highest Max wins, then the smallest member id. A member that timed out is skipped for
  the next pick once (§1.3), unless it is the only one eligible.
- Join: after the join the client-assignor members must still share a name and have an
  eligible assigner, or the joiner gets UNSUPPORTED_ASSIGNOR and is not added (stronger
  than the seed's pairwise range overlap, 000:L256: A[1-2]v1 and B[2-3]v3 overlap, yet
  neither covers both versions). Members without client assignors do not count: they
  make the group server mode, not incompatible.
- One assignment in flight per group (000:L246), soft state lost on reload, with a
  deadline of the assigner's rebalance timeout from the request (000:L248). On expiry it
  is abandoned, the assigner is *not* fenced, and a late Install is UNKNOWN_MEMBER_ID.
- An Install is validated against the PREPARED snapshot (000:L262-272), not the live
  group; members that left since are accepted and dropped. An Install with Error != 0
  skips the partition rules and still completes the round (000:L274-276): the epoch
  advances, so a deterministic assignor failure does not loop.
"""
from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from ..errors import ApiError, group_not_found, invalid_request, unknown_member
from .group import ClientAssignorSpec

if TYPE_CHECKING:
    pass

# Private error codes (coordinator/protocol/private_apis.py; repeated here because the
# group core must not import the protocol package's gateway-facing modules).
COMPUTE_ASSIGNMENT = 32700
INVALID_ASSIGNMENT = 32701

Assignment = Mapping[uuid.UUID, Iterable[int]]


class InvalidAssignment(Exception):
    """An Install that does not fit the prepared snapshot; the text names the invariant."""

    code = INVALID_ASSIGNMENT


Specs = Sequence[ClientAssignorSpec]


def spec_tuple(entries: Iterable) -> tuple[ClientAssignorSpec, ...]:
    """The entries of a request or a record as specs: the 32700 and connect requests and
    the type 5 and 1001 records name their fields alike."""
    return tuple(ClientAssignorSpec(e.name, e.minimum_version, e.maximum_version, e.version, e.reason,
                                    e.metadata) for e in entries)


def specs_of(entries: Iterable | None) -> tuple[ClientAssignorSpec, ...] | None:
    """A member's list from a record's entries; empty or absent gives None (the member
    brought none)."""
    return spec_tuple(entries) if entries else None


def request_specs(entries: Iterable | None) -> tuple[ClientAssignorSpec, ...] | None:
    """A request's ClientAssignors: null gives None (unchanged), an empty list the empty
    tuple (validate_request and carry_specs tell the two apart)."""
    return None if entries is None else spec_tuple(entries)


def validate_request(server_assignor: str | None, specs: Specs | None) -> None:
    """000:L482-486: never both assignor kinds; every entry named, 0 <= Min <= Version <= Max."""
    if specs is None:
        return
    if server_assignor is not None:
        raise invalid_request("ServerAssignor and ClientAssignors can't both be set.")
    seen: set[str] = set()
    for i, s in enumerate(specs):
        where = f"ClientAssignors[{i}]"
        if not s.name:
            raise invalid_request(f"{where}.Name can't be empty.")
        if s.name in seen:
            raise invalid_request(f"{where}.Name {s.name} appears twice.")
        seen.add(s.name)
        if not 0 <= s.minimum_version <= s.maximum_version:
            raise invalid_request(f"{where} ({s.name}): MinimumVersion {s.minimum_version} and MaximumVersion "
                                  f"{s.maximum_version} must satisfy 0 <= Min <= Max.")
        if not s.covers(s.version):
            raise invalid_request(f"{where} ({s.name}): Version {s.version} is outside "
                                  f"[{s.minimum_version}, {s.maximum_version}].")


def needs_reassignment(old: Specs | None, new: Specs | None) -> bool:
    """000:L190-191, L370: the group epoch is bumped when the stored list changes (name,
    range, version or metadata) or when a request carries a non-zero Reason."""
    if new is None:
        return False
    if any(s.reason != 0 for s in new):
        return True
    return tuple(s.without_reason() for s in old or ()) != tuple(s.without_reason() for s in new)


# ------------------------------------------------------------------ selection
def select_assignor(lists: Mapping[str, Specs | None]) -> str | None:
    """The client assignor of the group, or None: server mode (a member without client
    assignors, an empty group, or no name common to every list)."""
    if not lists or any(not specs for specs in lists.values()):
        return None
    ranks: dict[str, int] = {}
    common: set[str] | None = None
    for specs in lists.values():
        assert specs   # checked above; for mypy
        names = {s.name for s in specs}
        common = names if common is None else common & names
        for position, s in enumerate(specs):
            ranks[s.name] = ranks.get(s.name, 0) + position
    if not common:
        return None
    return min(common, key=lambda n: (ranks[n], n))


def spec_for(specs: Specs, name: str) -> ClientAssignorSpec:
    return next(s for s in specs if s.name == name)


def eligible_assigners(name: str, lists: Mapping[str, Specs]) -> list[str]:
    """Members whose [Min, Max] for `name` contains every member's Version (000:L260)."""
    versions = {spec_for(specs, name).version for specs in lists.values()}
    return sorted(m for m, specs in lists.items() if all(spec_for(specs, name).covers(v) for v in versions))


def choose_assigner(name: str, lists: Mapping[str, Specs], current: str | None = None,
                    excluded: Iterable[str] = ()) -> str | None:
    eligible = eligible_assigners(name, lists)
    if current in eligible:
        return current
    skipped = set(excluded)
    candidates = [m for m in eligible if m not in skipped] or eligible
    if not candidates:
        return None
    return min(candidates, key=lambda m: (-spec_for(lists[m], name).maximum_version, m))


def check_join(lists: Mapping[str, Specs | None], member_id: str, specs: Specs | None) -> None:
    """UNSUPPORTED_ASSIGNOR unless the client-assignor members, the joiner included, still
    share an assignor and have an eligible assigner (§1.1 "Join check")."""
    if not specs:
        return
    others = {m: s for m, s in lists.items() if s and m != member_id}
    after = {**others, member_id: specs}
    name = select_assignor(after)
    if name is None:
        raise ApiError(ErrorCode.unsupported_assignor,
                       f"ClientAssignors {[s.name for s in specs]} share no assignor with the group's members.")
    if not eligible_assigners(name, after):
        versions = sorted({spec_for(s, name).version for s in after.values()})
        raise ApiError(ErrorCode.unsupported_assignor,
                       f"No member's version range of client assignor {name} covers every member's "
                       f"version {versions}.")


# ------------------------------------------------------------------ install
@dataclass(frozen=True, slots=True)
class Snapshot:
    """What Prepare showed the assigner (000:L270: the install is checked against it)."""
    group_epoch: int
    assignor: str
    subscriptions: Mapping[str, frozenset[uuid.UUID]]   # member id -> subscribed topic ids
    partitions: Mapping[uuid.UUID, int]                 # subscribed topic id -> partition count


def validate_install(snapshot: Snapshot, members: Mapping[str, Assignment]) -> None:
    """§1.4 rules 1-5; raises InvalidAssignment naming the first broken one."""
    owner: dict[tuple[uuid.UUID, int], str] = {}
    for member_id, assignment in members.items():
        subscribed = snapshot.subscriptions.get(member_id)
        if subscribed is None:
            raise InvalidAssignment(f"Member {member_id} was not in the prepared group (epoch "
                                    f"{snapshot.group_epoch}).")
        for topic_id, partitions in assignment.items():
            count = snapshot.partitions.get(topic_id)
            if count is None:
                raise InvalidAssignment(f"Topic {topic_id} assigned to {member_id} is not a subscribed topic of "
                                        "the prepared group.")
            if topic_id not in subscribed:
                raise InvalidAssignment(f"Topic {topic_id} is assigned to {member_id}, which does not subscribe "
                                        "to it.")
            for p in partitions:
                if not 0 <= p < count:
                    raise InvalidAssignment(f"Partition {topic_id}-{p} assigned to {member_id} does not exist "
                                            f"(the topic has {count}).")
                previous = owner.setdefault((topic_id, p), member_id)
                if previous != member_id or _repeats(partitions, p):
                    raise InvalidAssignment(f"Partition {topic_id}-{p} is assigned twice ({previous} and "
                                            f"{member_id}).")
    missing = sorted((str(t), p) for t, n in snapshot.partitions.items() for p in range(n) if (t, p) not in owner)
    if missing:
        t, p = missing[0]
        raise InvalidAssignment(f"Partition {t}-{p} is not assigned ({len(missing)} unassigned).")


def gather_install(entries: Iterable[tuple[str, Iterable[tuple[uuid.UUID, Sequence[int]]]]]
                   ) -> dict[str, dict[uuid.UUID, list[int]]]:
    """An Install's members as validate_install takes them. A topic repeated within a
    member is merged (its partitions then count as repeats if they overlap); a member
    listed twice is refused, since its entries cannot be told apart."""
    out: dict[str, dict[uuid.UUID, list[int]]] = {}
    for member_id, topics in entries:
        if member_id in out:
            raise InvalidAssignment(f"Member {member_id} is listed twice.")
        merged: dict[uuid.UUID, list[int]] = {}
        for topic_id, partitions in topics:
            merged.setdefault(topic_id, []).extend(partitions)
        out[member_id] = merged
    return out


def _repeats(partitions: Iterable[int], p: int) -> bool:
    return isinstance(partitions, (list, tuple)) and partitions.count(p) > 1


@dataclass(frozen=True, slots=True)
class PreparedMember:
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    subscriptions: tuple[uuid.UUID, ...]
    spec: ClientAssignorSpec                      # this member's entry for the chosen assignor
    target: Mapping[uuid.UUID, frozenset[int]]    # its current target: the stickiness input (000:L242)


@dataclass(frozen=True, slots=True)
class PreparedGroup:
    """Prepare's answer (docs/design/client-assignors-spec.md §2), and the snapshot the Install is checked against."""
    snapshot: Snapshot
    members: tuple[PreparedMember, ...]
    topic_names: Mapping[uuid.UUID, str]


class Phase(enum.Enum):
    REQUESTED = "requested"    # the assigner is told COMPUTE_ASSIGNMENT on its heartbeats
    PREPARED = "prepared"      # it has the snapshot; its Install is awaited


@dataclass(slots=True)
class InFlight:
    assigner: str
    deadline_ms: int
    phase: Phase = Phase.REQUESTED
    snapshot: Snapshot | None = None


@dataclass(slots=True)
class Installed:
    """A completed round: advance the assignment epoch to `epoch` (000:L199, not the
    current group epoch), with these targets (absent when `error` != 0: unchanged)."""
    epoch: int
    error: int
    targets: dict[str, dict[uuid.UUID, frozenset[int]]] = field(default_factory=dict)
    metadata: dict[str, tuple[int, bytes]] = field(default_factory=dict)


@dataclass(slots=True)
class ClientAssignment:
    """One group's client-assignment state (§1.3): soft, like a metadata refresh request."""
    in_flight: InFlight | None = None
    skip_once: frozenset[str] = frozenset()     # timed-out assigners, skipped by the next pick
    last_assigner: str | None = None

    def maybe_request(self, lists: Mapping[str, Specs | None], needs_assignment: bool, now_ms: int,
                      rebalance_timeout_ms: Mapping[str, int]) -> str | None:
        """Start a round when the group is in client mode, behind (assignment epoch <
        group epoch, and KIP-1263's interval elapsed: `needs_assignment`) and idle.
        Returns the member to ask, or None."""
        if self.in_flight is not None or not needs_assignment:
            return None
        name = select_assignor(lists)
        if name is None:
            return None
        assigner = choose_assigner(name, {m: specs or () for m, specs in lists.items()}, self.last_assigner,
                                   self.skip_once)
        if assigner is None:
            return None
        self.skip_once = frozenset()
        self.last_assigner = assigner
        self.in_flight = InFlight(assigner, now_ms + rebalance_timeout_ms[assigner])
        return assigner

    def asked(self, member_id: str) -> bool:
        """Whether this member's heartbeat answers COMPUTE_ASSIGNMENT (until its Prepare)."""
        f = self.in_flight
        return f is not None and f.phase is Phase.REQUESTED and f.assigner == member_id

    def expire(self, now_ms: int) -> str | None:
        """On the deadline: abandon the round, skip the assigner once, do not fence it.
        Returns the assigner that timed out, or None."""
        f = self.in_flight
        if f is None or now_ms < f.deadline_ms:
            return None
        self.in_flight = None
        self.skip_once = frozenset({f.assigner})
        self.last_assigner = None
        return f.assigner

    def abandon(self) -> None:
        """The assigner left or was fenced, became ineligible, or the group left client mode."""
        self.in_flight = None

    def check_caller(self, group_id: str, group, member_id: str, member_epoch: int) -> InFlight:
        """Prepare/Install checks 1-5 in order (docs/design/client-assignors-spec.md §2, from 001:L413-427)."""
        if not group_id or not member_id or member_epoch < 0:
            raise invalid_request("GroupId and MemberId can't be empty and MemberEpoch can't be negative.")
        if group is None:
            raise group_not_found(group_id)
        member = group.members.get(member_id)
        if member is None:
            raise unknown_member(group_id, member_id)
        if member_epoch not in (member.member_epoch, member.previous_member_epoch):
            raise ApiError(ErrorCode.fenced_member_epoch,
                           f"MemberEpoch {member_epoch} is neither the current ({member.member_epoch}) nor the "
                           f"previous ({member.previous_member_epoch}) epoch of member {member_id}.")
        f = self.in_flight
        if f is None or f.assigner != member_id:
            # 001:L426; the member library abandons the computation on it (never rejoins).
            raise ApiError(ErrorCode.unknown_member_id,
                           f"Member {member_id} is not asked to compute the assignment of group {group_id}.")
        return f

    def prepare(self, snapshot: Snapshot) -> None:
        """Mark the round PREPARED at this snapshot (a repeated Prepare refreshes it)."""
        assert self.in_flight is not None
        self.in_flight.phase = Phase.PREPARED
        self.in_flight.snapshot = snapshot

    def install(self, group_epoch: int, error: int, members: Mapping[str, Assignment],
                metadata: Mapping[str, tuple[int, bytes]], live: Iterable[str]) -> Installed:
        """Validate and complete the round. On InvalidAssignment the round stays open, the
        assigner is asked again (its next heartbeat gets COMPUTE_ASSIGNMENT) and nothing is
        written (A4). `live` are the members still in the group: targets of the others
        are dropped (A7)."""
        f = self.in_flight
        assert f is not None
        if f.snapshot is None:
            self._reask(f)
            raise InvalidAssignment("No PrepareAssignment preceded this InstallAssignment.")
        prepared = f.snapshot.group_epoch
        if group_epoch != prepared:
            self._reask(f)
            raise InvalidAssignment(f"GroupEpoch {group_epoch} is not the prepared epoch {prepared}.")
        if error == 0:
            try:
                validate_install(f.snapshot, members)
            except InvalidAssignment:
                self._reask(f)
                raise
        self.in_flight = None
        present = set(live)
        done = Installed(epoch=f.snapshot.group_epoch, error=error)
        if error == 0:
            done.targets = {m: {t: frozenset(ps) for t, ps in a.items() if ps}
                            for m, a in members.items() if m in present}
            for m in f.snapshot.subscriptions:
                if m in present:
                    done.targets.setdefault(m, {})
        done.metadata = {m: md for m, md in metadata.items() if m in present}
        return done

    @staticmethod
    def _reask(f: InFlight) -> None:
        f.phase = Phase.REQUESTED
        f.snapshot = None
