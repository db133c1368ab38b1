"""A KIP-848 consumer group member, sans-IO (KIP-848, the client-side assignor spec for client assignors).

The caller owns the sockets and the clock: `poll(now_ms)` gives the next heartbeat request
to send (or None), `on_heartbeat(response, now_ms)` reads its answer and returns what the
application must do, and the application reports back with `revoked()`/`assigned()`.

Rules (KIP-848's member side):
- Join with epoch 0 and every field; afterwards a field is sent only when it changed
  (null = unchanged), and TopicPartitions (the owned partitions) only when ownership
  changed: that is the acknowledgement the coordinator reconciles on.
- Reconciliation towards the latest assignment received: first `Revoke` what is owned
  but no longer assigned, and only once the application has given it up (`revoked()`,
  after committing), `Assign` what is new. A partition is therefore never owned by two
  members: the coordinator hands it over only after the old owner acknowledged.
- FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID: every partition is `Lost` (not revoked: it may
  be someone else's already, so nothing is committed for it) and the member rejoins with
  epoch 0 under the same member id (KIP-1082: the client's id is kept for its lifetime).
- Coordinator errors (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, load in progress) and
  a failed request are retried after `retry_backoff_ms`; `Rediscover` tells the caller to
  look the coordinator up again. Anything else is `Fatal`.
- Leave: `leave()` revokes first, then sends epoch -1 (-2 for a static member, which
  keeps its assignment for the instance that comes back).
- Client assignors (docs/design/client-assignors-spec.md): a member that brings `PartitionAssignor`s heartbeats on the
  private key 32700. COMPUTE_ASSIGNMENT (32700) is informational: the heartbeat was
  processed, and the member gets a `Compute` action. `prepare_request()` and
  `on_prepare(response)` run the assignor and give the Install request. On a Prepare or
  Install error UNKNOWN_MEMBER_ID the computation is abandoned and the member does NOT
  rejoin (another member was asked); FENCED_MEMBER_EPOCH waits for the next COMPUTE.
"""
from __future__ import annotations

import datetime
import enum
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.consumer_group_heartbeat.v1 import request as cgh
from kio.static.primitive import i8, i16, i32

from coordinator.protocol import private_messages as pm

from .assignor import AssignorError, GroupSpec, MemberSpec, PartitionAssignor, Partitions

NONE = 0
NOT_COORDINATOR = 16
COORDINATOR_NOT_AVAILABLE = 15
COORDINATOR_LOAD_IN_PROGRESS = 14
UNKNOWN_MEMBER_ID = 25
FENCED_MEMBER_EPOCH = 110
UNRELEASED_INSTANCE_ID = 111
COMPUTE_ASSIGNMENT = 32700
_RETRIABLE = {NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, UNRELEASED_INSTANCE_ID}


@dataclass(frozen=True, slots=True)
class Revoke:
    partitions: Partitions


@dataclass(frozen=True, slots=True)
class Assign:
    partitions: Partitions


@dataclass(frozen=True, slots=True)
class Lost:
    partitions: Partitions


@dataclass(frozen=True, slots=True)
class Compute:
    """This member is asked to compute the group's assignment (docs/design/client-assignors-spec.md)."""


@dataclass(frozen=True, slots=True)
class Rediscover:
    """Find the group coordinator again, then keep polling."""


@dataclass(frozen=True, slots=True)
class Fatal:
    error_code: int
    message: str | None


class State(enum.Enum):
    JOINING = "joining"
    STABLE = "stable"            # owns exactly its latest assignment, acknowledged
    RECONCILING = "reconciling"  # waiting for the application to revoke or assign
    ACKNOWLEDGING = "acknowledging"
    LEAVING = "leaving"
    LEFT = "left"
    FATAL = "fatal"


def _diff(a: Partitions, b: Partitions) -> dict[uuid.UUID, frozenset[int]]:
    out = {t: ps - b.get(t, frozenset()) for t, ps in a.items()}
    return {t: ps for t, ps in out.items() if ps}


def _topic_partitions(p: Partitions) -> tuple[pm.TopicPartitions, ...]:
    return tuple(pm.TopicPartitions(topic_id=t, partitions=tuple(i32(x) for x in sorted(ps)))
                 for t, ps in sorted(p.items(), key=lambda kv: str(kv[0])) if ps)


def _norm(p: Partitions) -> dict[uuid.UUID, frozenset[int]]:
    return {t: frozenset(ps) for t, ps in p.items() if ps}


class ConsumerMember:
    def __init__(self, group_id: str, topics: Sequence[str], *, member_id: str | None = None,
                 instance_id: str | None = None, rack_id: str | None = None,
                 rebalance_timeout_ms: int = 300_000, server_assignor: str | None = None,
                 assignors: Sequence[PartitionAssignor] = (), retry_backoff_ms: int = 100) -> None:
        if assignors and server_assignor is not None:
            raise ValueError("a member uses either a server assignor or client assignors, not both")
        self.group_id = group_id
        self.member_id = member_id or str(uuid.uuid4())
        self.topics = tuple(topics)
        self.instance_id, self.rack_id = instance_id, rack_id
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.server_assignor = server_assignor
        self.assignors = tuple(assignors)
        self.retry_backoff_ms = retry_backoff_ms
        self.state = State.JOINING
        self.member_epoch = 0
        self.owned: dict[uuid.UUID, frozenset[int]] = {}
        self.target: dict[uuid.UUID, frozenset[int]] = {}
        self.assignment_info: tuple[int, int, bytes | None] = (0, -1, None)   # error, version, bytes
        self.reason = 0                     # sent once with the next heartbeat (docs/design/client-assignors-spec.md)
        self._sent_owned: dict[uuid.UUID, frozenset[int]] | None = None
        self._next_ms = 0
        self._in_flight = False
        self._pending_action: Revoke | Assign | None = None
        self._leave_sent = False
        self._leave_epoch = -1

    @property
    def next_poll_ms(self) -> int:
        """When `poll` may next give a request (a driver sleeps until then, or until an
        answer arrives)."""
        return self._next_ms

    @property
    def pending(self) -> Revoke | Assign | None:
        """The Revoke or Assign the application has not answered yet (None after fencing:
        a driver then must not answer it)."""
        return self._pending_action

    @property
    def uses_client_assignors(self) -> bool:
        return bool(self.assignors)

    # ------------------------------------------------------------ heartbeats
    def poll(self, now_ms: int) -> Any | None:
        """The heartbeat request to send now, or None (not due, one in flight, or left)."""
        if self._in_flight or self.state in (State.LEFT, State.FATAL) or now_ms < self._next_ms:
            return None
        if self.state is State.LEAVING and self._pending_action is not None:
            return None                     # revoke before leaving
        self._in_flight = True
        self._leave_sent = self.state is State.LEAVING
        return self._request()

    def _request(self) -> Any:
        # The leave epoch (-1, or -2 for a static member) only on the leave heartbeat: until
        # then the member keeps its epoch, with which the revoked partitions are committed.
        epoch = self._leave_epoch if self.state is State.LEAVING else self.member_epoch
        joining = epoch == 0
        owned_changed = self._sent_owned != self.owned
        parts = None
        if joining or owned_changed:
            parts = _topic_partitions(self.owned)
            self._sent_owned = dict(self.owned)
        if joining:
            parts = ()
        fields: dict[str, Any] = dict(
            group_id=self.group_id, member_id=self.member_id, member_epoch=epoch,
            instance_id=self.instance_id if joining or epoch < 0 else None,
            rack_id=self.rack_id if joining else None,
            rebalance_timeout=datetime.timedelta(milliseconds=self.rebalance_timeout_ms if joining else -1),
            subscribed_topic_names=self.topics if joining else None,
            server_assignor=self.server_assignor if joining else None)
        if self.assignors:
            send_list = joining or self.reason != 0
            fields["client_assignors"] = tuple(
                pm.ClientAssignor(name=a.name, minimum_version=i16(a.minimum_version),
                                  maximum_version=i16(a.maximum_version), version=i16(a.version),
                                  reason=i8(self.reason), metadata=a.metadata())
                for a in self.assignors) if send_list else None
            self.reason = 0
            fields["topic_partitions"] = parts
            return pm.CsaHeartbeatRequest(**fields)
        return cgh.ConsumerGroupHeartbeatRequest(
            topic_partitions=None if parts is None else tuple(
                cgh.TopicPartitions(topic_id=p.topic_id, partitions=p.partitions) for p in parts), **fields)

    def request_failed(self, now_ms: int) -> None:
        """The request got no answer (timeout, connection lost): send again later."""
        self._in_flight = False
        self._sent_owned = None             # the acknowledgement may not have arrived
        self._next_ms = now_ms + self.retry_backoff_ms

    def on_heartbeat(self, response: Any, now_ms: int) -> list[Any]:
        self._in_flight = False
        code = int(response.error_code)
        if self.state is State.LEAVING:
            if self._leave_sent:
                self.state = State.LEFT
            return []                           # an answer from before leave(): moot
        if code in (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID):
            return self._fenced(now_ms)
        if code in _RETRIABLE:
            self._sent_owned = None
            self._next_ms = now_ms + self.retry_backoff_ms
            return [Rediscover()] if code == NOT_COORDINATOR or code == COORDINATOR_NOT_AVAILABLE else []
        if code not in (NONE, COMPUTE_ASSIGNMENT) or (code == COMPUTE_ASSIGNMENT and not self.assignors):
            self.state = State.FATAL
            return [Fatal(code, response.error_message)]
        self.member_epoch = response.member_epoch
        self._next_ms = now_ms + int(response.heartbeat_interval.total_seconds() * 1000)
        actions: list[Any] = []
        if response.assignment is not None:
            self.target = _norm({tp.topic_id: tp.partitions for tp in response.assignment.topic_partitions})
            got = response.assignment
            info = (int(getattr(got, "error", 0)), int(getattr(got, "metadata_version", -1)),
                    getattr(got, "metadata_bytes", None))
            if self.assignors and info != self.assignment_info:
                self.assignment_info = info
                self.assignors[0].on_assignment(self.target, info[1], info[2], info[0])
        actions.extend(self._reconcile(now_ms))
        if code == COMPUTE_ASSIGNMENT:
            actions.append(Compute())
        return actions

    def _fenced(self, now_ms: int) -> list[Any]:
        lost = self.owned
        self.owned, self.target, self._sent_owned = {}, {}, None
        self.member_epoch, self.state, self._pending_action = 0, State.JOINING, None
        self._next_ms = now_ms
        return [Lost(lost)] if lost else []

    # ------------------------------------------------------------ reconciliation
    def _reconcile(self, now_ms: int) -> list[Any]:
        if self._pending_action is not None:
            return []                          # the application has not answered yet
        revoke = _diff(self.owned, self.target)
        if revoke:
            self.state = State.RECONCILING
            self._pending_action = Revoke(revoke)
            return [self._pending_action]
        add = _diff(self.target, self.owned)
        if add:
            self.state = State.RECONCILING
            self._pending_action = Assign(add)
            return [self._pending_action]
        if self._sent_owned != self.owned:
            self.state = State.ACKNOWLEDGING
            self._next_ms = now_ms             # acknowledge at once
        else:
            self.state = State.STABLE
        return []

    def revoked(self, now_ms: int) -> list[Any]:
        """The application gave up the partitions of the last `Revoke` (offsets committed)."""
        action = self._pending_action
        if not isinstance(action, Revoke):
            raise RuntimeError(f"revoked() without a pending Revoke (pending: {action})")
        self._pending_action = None
        self.owned = _diff(self.owned, action.partitions)
        self._next_ms = now_ms                 # acknowledge the revocation at once
        if self.state is State.LEAVING:
            return []
        return self._reconcile(now_ms)

    def assigned(self, now_ms: int) -> list[Any]:
        """The application took the partitions of the last `Assign`."""
        action = self._pending_action
        if not isinstance(action, Assign):
            raise RuntimeError(f"assigned() without a pending Assign (pending: {action})")
        self._pending_action = None
        self.owned = _norm({t: self.owned.get(t, frozenset()) | action.partitions.get(t, frozenset())
                            for t in set(self.owned) | set(action.partitions)})
        return self._reconcile(now_ms)

    def leave(self, now_ms: int) -> list[Any]:
        """Leave the group: Revoke everything first (then `revoked()`), then the leave
        heartbeat (epoch -1, or -2 for a static member) goes out at the next poll."""
        if self.state in (State.LEFT, State.FATAL):
            return []
        self.state = State.LEAVING
        self._next_ms = now_ms
        if self.member_epoch == 0:            # never joined: nothing to tell
            self.state = State.LEFT
            return []
        self._leave_epoch = -2 if self.instance_id is not None else -1
        self._pending_action = Revoke(dict(self.owned)) if self.owned else None
        return [self._pending_action] if self._pending_action else []

    def rejoin_with_reason(self, reason: int = 1) -> None:
        """Ask the coordinator for a new assignment (docs/design/client-assignors-spec.md: a non-zero Reason)."""
        self.reason = reason

    # ------------------------------------------------------------ client assignors
    def prepare_request(self) -> pm.PrepareAssignmentRequest:
        return pm.PrepareAssignmentRequest(group_id=self.group_id, member_id=self.member_id,
                                           member_epoch=i32(self.member_epoch))

    def on_prepare(self, response: pm.PrepareAssignmentResponse) -> pm.InstallAssignmentRequest | None:
        """Run the chosen assignor over the prepared group; the Install to send, or None
        when the computation is abandoned (an error answer)."""
        if int(response.error_code) != NONE:
            return None
        assignor = next((a for a in self.assignors if a.name == response.client_assignor_name), None)
        spec = GroupSpec(
            group_epoch=response.group_epoch,
            members={m.member_id: MemberSpec(
                member_id=m.member_id, subscriptions=frozenset(m.subscriptions), version=m.assignor_version,
                metadata=m.assignor_metadata, reason=m.assignor_reason, instance_id=m.instance_id,
                rack_id=m.rack_id, current=_norm({tp.topic_id: frozenset(tp.partitions) for tp in m.topic_partitions}))
                for m in response.members},
            partitions={p.topic_id: p.num_partitions for p in response.partition_metadata},
            topic_names={p.topic_id: p.topic_name for p in response.partition_metadata})
        error, members = 0, tuple[pm.InstalledMember, ...]()
        try:
            if assignor is None:
                raise AssignorError(1, f"no assignor {response.client_assignor_name!r} in this member")
            result = assignor.assign(spec)
            members = tuple(pm.InstalledMember(
                member_id=m, metadata_version=i16(a.metadata_version), metadata_bytes=a.metadata,
                partitions=_topic_partitions(a.partitions)) for m, a in sorted(result.items()))
        except AssignorError as e:
            error = e.code
        return pm.InstallAssignmentRequest(group_id=self.group_id, member_id=self.member_id,
                                           member_epoch=i32(self.member_epoch), group_epoch=response.group_epoch,
                                           error=i8(error), members=members)
