"""A connect-group worker, sans-IO (docs/design/connect-groups-spec.md).

The caller owns the sockets and the clock: `poll(now_ms)` gives the next
ConnectGroupHeartbeat to send (or None), `on_heartbeat(response, now_ms)` reads its answer
and returns what the application must do; the application reports back with `revoked()`
and `assigned()`.

Rules (the seed's "Response Handling", 001:L387-401, with KIP-848's member rules):
- Join with epoch 0 and every field; afterwards a field is sent only when it changed
  (null = unchanged), and ConnectorsAndTasks (the owned units) only when ownership
  changed: that is the acknowledgement the coordinator reconciles on.
- Revoke before assign: `Revoke` what is owned but no longer assigned, and only once the
  application stopped those units (`revoked()`), `Assign` the new ones. After a
  revocation the next heartbeat goes out at once (L398). The coordinator hands a unit to
  another worker only after this acknowledgement, so no unit is owned twice.
- FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID: every unit is `Lost` (stopped without any
  hand-over: it may be someone else's already) and the worker rejoins with epoch 0 under
  the same member id (L399).
- COMPUTE_ASSIGNMENT (32700) is informational: the heartbeat was processed, and the worker
  gets a `Compute` action: `prepare_request()`, then `on_prepare(response, now_ms)` runs the
  assignor and gives the Install. Prepare/Install UNKNOWN_MEMBER_ID: abandon, do NOT
  rejoin (another worker was asked); FENCED_MEMBER_EPOCH: wait for the next COMPUTE.
- When the assignor held lost units back (KIP-415's scheduled delay), the worker that
  computed the assignment sends Reason 1 once the delay is over: the coordinator then
  starts a new round (001:L196, L967).
- Coordinator errors are retried after `retry_backoff_ms` (`Rediscover` for NOT_COORDINATOR
  and COORDINATOR_NOT_AVAILABLE); anything else is `Fatal`.
- Leave: `leave()` revokes everything first, then sends epoch -1 (-2 for a static worker).
"""
from __future__ import annotations

import datetime
import enum
import uuid
from dataclasses import dataclass
from typing import Any

from kio.static.primitive import i8, i16, i32, i32Timedelta

from coordinator.protocol import connect_messages as cm

from .assignor import CONNECTOR_TASK, IncrementalCooperativeAssignor, Unit, WorkerSpec

NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
UNKNOWN_MEMBER_ID = 25
FENCED_MEMBER_EPOCH = 110
UNRELEASED_INSTANCE_ID = 111
COMPUTE_ASSIGNMENT = 32700
_RETRIABLE = {NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, UNRELEASED_INSTANCE_ID}

Units = frozenset[Unit]


@dataclass(frozen=True, slots=True)
class Revoke:
    units: Units


@dataclass(frozen=True, slots=True)
class Assign:
    units: Units


@dataclass(frozen=True, slots=True)
class Lost:
    units: Units


@dataclass(frozen=True, slots=True)
class Compute:
    """This worker is asked to compute the group's assignment."""


@dataclass(frozen=True, slots=True)
class Rediscover:
    """Find the group coordinator again, then keep polling."""


@dataclass(frozen=True, slots=True)
class Fatal:
    error_code: int
    message: str | None


class State(enum.Enum):
    JOINING = "joining"
    STABLE = "stable"
    RECONCILING = "reconciling"     # waiting for the application to revoke or assign
    ACKNOWLEDGING = "acknowledging"
    LEAVING = "leaving"
    LEFT = "left"
    FATAL = "fatal"


def units_of(cat) -> Units:
    return frozenset({(c, CONNECTOR_TASK) for c in cat.connectors} | {(t.connector, int(t.task)) for t in cat.tasks})


def wire(units: Units) -> cm.ConnectorsAndTasks:
    return cm.connectors_and_tasks(sorted(c for c, t in units if t == CONNECTOR_TASK),
                                   sorted((c, t) for c, t in units if t != CONNECTOR_TASK))


class ConnectWorker:
    def __init__(self, group_id: str, assignor: IncrementalCooperativeAssignor, *, member_id: str | None = None,
                 instance_id: str | None = None, rebalance_timeout_ms: int = 60_000,
                 retry_backoff_ms: int = 100) -> None:
        self.group_id = group_id
        self.assignor = assignor
        self.member_id = member_id or str(uuid.uuid4())
        self.instance_id = instance_id
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.state = State.JOINING
        self.member_epoch = 0
        self.owned: Units = frozenset()
        self.target: Units = frozenset()
        self.assignment_metadata: tuple[int, int, bytes] = (0, -1, b"")   # error, version, bytes
        self.reason = 0
        self.reason_due_ms: int | None = None     # the scheduled delay of the last assignment computed here
        self._sent_owned: Units | None = None
        self._next_ms = 0
        self._in_flight = False
        self._pending: Revoke | Assign | None = None
        self._leave_sent = False
        self._leave_epoch = -1

    @property
    def next_poll_ms(self) -> int:
        due = self.reason_due_ms
        return self._next_ms if due is None else min(self._next_ms, max(due, 0))

    # ------------------------------------------------------------ heartbeats
    @property
    def pending(self) -> Revoke | Assign | None:
        """The Revoke or Assign the application has not answered yet (None after fencing:
        a driver then must not answer it)."""
        return self._pending

    def poll(self, now_ms: int) -> cm.ConnectGroupHeartbeatRequest | None:
        if self._in_flight or self.state in (State.LEFT, State.FATAL) or now_ms < self.next_poll_ms:
            return None
        if self.state is State.LEAVING and self._pending is not None:
            return None                     # revoke before leaving
        if self.reason_due_ms is not None and now_ms >= self.reason_due_ms and self.member_epoch > 0:
            self.reason, self.reason_due_ms = 1, None
        self._in_flight = True
        self._leave_sent = self.state is State.LEAVING
        return self._request()

    def _request(self) -> cm.ConnectGroupHeartbeatRequest:
        epoch = self._leave_epoch if self.state is State.LEAVING else self.member_epoch
        joining = epoch == 0
        owned = None
        if joining or self._sent_owned != self.owned:
            owned = wire(frozenset() if joining else self.owned)
            self._sent_owned = frozenset() if joining else self.owned
        send_list = joining or self.reason != 0
        a = self.assignor
        assignors = (cm.ConnectAssignor(name=a.name, minimum_version=i16(a.minimum_version),
                                        maximum_version=i16(a.maximum_version), version=i16(a.version),
                                        reason=i8(self.reason), metadata=a.metadata()),) if send_list else None
        self.reason = 0
        return cm.ConnectGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=i32(epoch),
            instance_id=self.instance_id if joining or epoch < 0 else None,
            rebalance_timeout=i32Timedelta.parse(
                datetime.timedelta(milliseconds=self.rebalance_timeout_ms if joining else -1)),
            client_assignors=assignors, connectors_and_tasks=owned)

    def request_failed(self, now_ms: int) -> None:
        """The request got no answer (timeout, connection lost): send again later."""
        self._in_flight = False
        self._sent_owned = None
        self._next_ms = now_ms + self.retry_backoff_ms

    def on_heartbeat(self, response: Any, now_ms: int) -> list[Any]:
        self._in_flight = False
        code = int(response.error_code)
        if self.state is State.LEAVING:
            if self._leave_sent:
                self.state = State.LEFT
            return []
        if code in (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID):
            return self._fenced(now_ms)
        if code in _RETRIABLE:
            self._sent_owned = None
            self._next_ms = now_ms + self.retry_backoff_ms
            return [Rediscover()] if code in (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE) else []
        if code not in (NONE, COMPUTE_ASSIGNMENT):
            self.state = State.FATAL
            return [Fatal(code, response.error_message)]
        self.member_epoch = int(response.member_epoch)
        self._next_ms = now_ms + int(response.heartbeat_interval.total_seconds() * 1000)
        got = response.assignment
        if got is not None:
            self.target = units_of(got.connectors_and_tasks)
            self.assignment_metadata = (int(got.error), int(got.version), bytes(got.metadata))
        actions = self._reconcile(now_ms)
        if code == COMPUTE_ASSIGNMENT:
            actions.append(Compute())
        return actions

    def _fenced(self, now_ms: int) -> list[Any]:
        lost = self.owned
        self.owned, self.target, self._sent_owned = frozenset(), frozenset(), None
        self.member_epoch, self.state, self._pending = 0, State.JOINING, None
        self._next_ms = now_ms
        return [Lost(lost)] if lost else []

    def _reconcile(self, now_ms: int) -> list[Any]:
        if self._pending is not None:
            return []
        revoke = self.owned - self.target
        if revoke:
            self.state, self._pending = State.RECONCILING, Revoke(revoke)
            return [self._pending]
        add = self.target - self.owned
        if add:
            self.state, self._pending = State.RECONCILING, Assign(add)
            return [self._pending]
        if self._sent_owned != self.owned:
            self.state, self._next_ms = State.ACKNOWLEDGING, now_ms
        else:
            self.state = State.STABLE
        return []

    def revoked(self, now_ms: int) -> list[Any]:
        """The application stopped the units of the last `Revoke`."""
        action = self._pending
        if not isinstance(action, Revoke):
            raise RuntimeError(f"revoked() without a pending Revoke (pending: {action})")
        self._pending = None
        self.owned = self.owned - action.units
        self._next_ms = now_ms                  # acknowledge at once (001:L398)
        return [] if self.state is State.LEAVING else self._reconcile(now_ms)

    def assigned(self, now_ms: int) -> list[Any]:
        """The application started the units of the last `Assign`."""
        action = self._pending
        if not isinstance(action, Assign):
            raise RuntimeError(f"assigned() without a pending Assign (pending: {action})")
        self._pending = None
        self.owned = self.owned | action.units
        return self._reconcile(now_ms)

    def leave(self, now_ms: int) -> list[Any]:
        if self.state in (State.LEFT, State.FATAL):
            return []
        self.state, self._next_ms = State.LEAVING, now_ms
        if self.member_epoch == 0:
            self.state = State.LEFT
            return []
        self._leave_epoch = -2 if self.instance_id is not None else -1
        self._pending = Revoke(self.owned) if self.owned else None
        return [self._pending] if self._pending else []

    # ------------------------------------------------------------ computing the assignment
    def prepare_request(self) -> cm.ConnectPrepareAssignmentRequest:
        return cm.ConnectPrepareAssignmentRequest(group_id=self.group_id, member_id=self.member_id,
                                                  member_epoch=i32(self.member_epoch))

    def on_prepare(self, response: Any, now_ms: int) -> cm.ConnectInstallAssignmentRequest | None:
        """Run the assignor over the prepared group; the Install to send, or None (abandoned)."""
        if int(response.error_code) != NONE:
            return None
        error, members = 0, tuple[cm.ConnectInstalledMember, ...]()
        if response.assignor_name != self.assignor.name:
            error = 1
        else:
            workers = {m.member_id: WorkerSpec(m.member_id, bytes(m.assignor_metadata),
                                               units_of(m.connectors_and_tasks)) for m in response.members}
            result = self.assignor.assign(self.member_id, workers, now_ms)
            members = tuple(cm.ConnectInstalledMember(member_id=m, connectors_and_tasks=wire(us),
                                                      version=i16(self.assignor.version),
                                                      metadata=result.metadata[m])
                            for m, us in sorted(result.targets.items()))
            self.reason_due_ms = now_ms + result.delay_ms if result.delay_ms > 0 else None
        return cm.ConnectInstallAssignmentRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=i32(self.member_epoch),
            group_epoch=response.group_epoch, error=i8(error), members=members)

    def on_install(self, response: Any, now_ms: int) -> None:
        """An Install refused (INVALID_ASSIGNMENT, a stale round) is dropped: the coordinator
        asks again with COMPUTE_ASSIGNMENT if it still needs an assignment."""
        if int(response.error_code) != NONE:
            self.reason_due_ms = None if int(response.error_code) == UNKNOWN_MEMBER_ID else self.reason_due_ms
