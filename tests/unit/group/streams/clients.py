"""Simulated Kafka Streams 4.4 clients heartbeating into the sans-IO streams core on the
driver's simulated clock, to count the heartbeat round trips and the simulated time a group
needs to converge (test_convergence.py).

Each client follows Kafka 4.4's client rules (clients/.../internals/
StreamsGroupHeartbeatRequestManager.java and StreamsMembershipManager.java):
- a join (epoch 0) is sent at once; later heartbeats every `HeartbeatIntervalMs` of the last
  response (the manager takes each response's interval as sent);
- a response's tasks, when present, are the new target; a reconciliation starts when none is
  in progress and captures the target: revoke what it lacks, then assign what it adds (one
  pass of the callbacks on the stream thread, `callback_ms` long); when it completes, what it
  captured is the current assignment, the member is ACKNOWLEDGING and heartbeats at once
  (`shouldHeartbeatBeforeIntervalExpires`), and a target that arrived meanwhile is
  reconciled next;
- a heartbeat reports the last reconciled assignment only when it changed since the last
  report (`LastSentFields`), else the task fields are null;
- ``report_offsets``: the client reports `TaskOffsets` as the 4.4 client does on a join and
  whenever it reports its tasks (`HeartbeatState.buildRequestData`, only when they differ from
  the last ones sent): the tasks of stateful subtopologies whose state it has on disk (every
  one it held, active or standby), minus its running active tasks (`TaskManager.
  maybeUpdateTaskOffsetSumSnapshot`); off by default;
- ``restore_per_ms`` > 0 (off by default): each stateful task's changelog holds ``changelog``
  records, and a client restores every task it holds that is not caught up (a standby, a
  warm-up or a restoring active) at that many records per ms, from what it has on disk. It
  reports by the 4.4 rules (docs/design/streams-groups.md, "What the 4.4 client sends"):
  `TaskOffsets` = its tasks on disk minus its running actives, `TaskEndOffsets` = the tasks it
  restores; both on a join, then when it reports its tasks, when the response's
  `TaskOffsetIntervalMs` passed since it last sent them, or when a reconciled warm-up is hot
  (within the response's `AcceptableRecoveryLag`), each map only if it changed;
- ``open_ms_per_task``: a reconciliation that adds k active tasks takes k times as long more
  (the Streams client opens the tasks it was given before it acts on a newer target, so a
  member just handed many tasks is slow to release them: docs/measurements/
  streams-rebalance.md, "the start row"); 0 by default.

A task is never active in two clients at once: checked whenever a reconciliation completes.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field, replace
from datetime import timedelta

from kio.schema.errors import ErrorCode

from coordinator.group.streams.model import MemberState, StreamsGroupState

from .driver import REQ, Driver, beat

NOTHING: tuple = (frozenset(), frozenset(), frozenset())
KINDS = ("active", "standby", "warmup")


@dataclass
class Client:
    member: str
    process: str
    epoch: int = 0
    interval_ms: int = 0
    current: tuple = NOTHING           # the last reconciled assignment
    target: tuple = NOTHING            # the latest assignment received
    reconciling: tuple | None = None  # the target being reconciled, captured when it started
    generation: int = 0                # of the heartbeat due next
    last_sent: tuple | None = None
    heartbeats: int = 0
    reconciliations: int = 0
    moved_in: int = 0                  # active tasks it started (each one a task moved to it)
    most_active: int = 0               # the most active tasks it held at once
    # simulated ms in which the coordinator had the member not STABLE at the target epoch,
    # summed over the intervals between its heartbeats
    busy_since_ms: int | None = None
    busy_ms: list = field(default_factory=list)
    on_disk: set = field(default_factory=set)          # stateful tasks it ever held
    offsets_sent: tuple | None = None
    # the restore model (``restore_per_ms``): records restored per task on disk, as of
    # `restored_at`; what the last response said; when the offsets were last sent
    restored: dict = field(default_factory=dict)
    restored_at: int = 0
    task_offset_ms: int = -1
    recovery_lag: int = -1
    offsets_sent_at: int | None = None
    ends_sent: tuple | None = None


class Fleet:
    """Clients and the driver on one event queue, ordered by simulated time."""

    def __init__(self, d: Driver, topology, callback_ms: int = 0, open_ms_per_task: int = 0,
                 report_offsets: bool = False, restore_per_ms: int = 0, changelog: int = 0) -> None:
        self.d, self.topology, self.callback_ms = d, topology, callback_ms
        self.restore_per_ms, self.changelog = restore_per_ms, changelog
        self.open_ms_per_task = open_ms_per_task
        self.report_offsets = report_offsets
        self.stateful = {s.subtopology_id for s in topology.subtopologies if s.state_changelog_topics}
        self.clients: dict[str, Client] = {}
        self.queue: list[tuple[int, int, str, str, int]] = []
        self.seq = 0

    def _at(self, when: int, what: str, member: str) -> None:
        """Queue an event; a heartbeat queued later supersedes the one queued before (the
        manager's timer restarts with every heartbeat sent)."""
        self.seq += 1
        c = self.clients[member]
        if what == "heartbeat":
            c.generation += 1
        heapq.heappush(self.queue, (when, self.seq, what, member, c.generation))

    def start(self, member: str, process: str, at_ms: int | None = None) -> Client:
        c = self.clients[member] = Client(member, process)
        self._at(self.d.now_ms if at_ms is None else at_ms, "heartbeat", member)
        return c

    # ------------------------------------------------------------------ one client
    def _offsets(self, c: Client) -> tuple | None:
        """The TaskOffsets to send, or None (not reporting, or the same as last sent)."""
        if not self.report_offsets:
            return None
        sent = tuple(REQ.TaskOffset(subtopology_id=s, partition=p, offset=100 + p)
                     for s, p in sorted(c.on_disk - c.current[0]))
        if sent == c.offsets_sent:
            return None
        c.offsets_sent = sent
        return sent

    def _restore(self, c: Client) -> tuple[dict, dict]:
        """The restore model: (TaskOffsets, TaskEndOffsets) as the client has them now."""
        now = self.d.now_ms
        done = (now - c.restored_at) * self.restore_per_ms
        c.restored_at = now
        held = c.current[0] | c.current[1] | c.current[2]
        for t in held & c.on_disk:
            c.restored[t] = min(self.changelog, c.restored.get(t, 0) + done)
        restoring = {t for t in held & c.on_disk if c.restored[t] < self.changelog or t not in c.current[0]}
        offsets = {t: c.restored.get(t, 0) for t in c.on_disk if t not in c.current[0] or t in restoring}
        return offsets, {t: self.changelog for t in restoring}

    def _restore_report(self, c: Client, req, tasks_sent: bool):
        offsets, ends = self._restore(c)
        hot = any(t in offsets and ends.get(t, -1) - offsets[t] <= c.recovery_lag for t in c.current[2])
        if not (c.epoch == 0 or tasks_sent or hot or (c.offsets_sent_at is not None and c.task_offset_ms >= 0
                                                      and c.offsets_sent_at + c.task_offset_ms <= self.d.now_ms)):
            return req
        sent = tuple(REQ.TaskOffset(subtopology_id=s, partition=p, offset=o) for (s, p), o in sorted(offsets.items()))
        sent_ends = tuple(REQ.TaskOffset(subtopology_id=s, partition=p, offset=o) for (s, p), o in sorted(ends.items()))
        c.offsets_sent_at = self.d.now_ms
        changed = {"task_offsets": None if sent == c.offsets_sent else sent,
                   "task_end_offsets": None if sent_ends == c.ends_sent else sent_ends}
        c.offsets_sent, c.ends_sent = sent, sent_ends
        return replace(req, **changed)

    def _request(self, c: Client):
        if c.epoch == 0:
            c.offsets_sent = c.ends_sent = None         # a join always sends them
            req = REQ.StreamsGroupHeartbeatRequest(
                group_id="app", member_id=c.member, member_epoch=0, endpoint_information_epoch=0,
                rebalance_timeout=timedelta(minutes=5), topology=self.topology, active_tasks=(), standby_tasks=(),
                warmup_tasks=(), process_id=c.process, client_tags=(), task_offsets=self._offsets(c),
                task_end_offsets=None)
            return self._restore_report(c, req, True) if self.restore_per_ms else req
        owned = None if c.last_sent == c.current else c.current
        c.last_sent = c.current
        req = beat(c.member, c.epoch, owned)
        if self.restore_per_ms:
            return self._restore_report(c, req, owned is not None)
        return req if owned is None else replace(req, task_offsets=self._offsets(c))

    def heartbeat(self, c: Client) -> None:
        a = self.d.hb(self._request(c))
        c.heartbeats += 1
        assert a.error_code == ErrorCode.none, a.error_message
        c.epoch = a.member_epoch
        c.interval_ms = int(a.heartbeat_interval.total_seconds() * 1000)
        c.task_offset_ms = int(a.task_offset_interval.total_seconds() * 1000)
        c.recovery_lag = a.acceptable_recovery_lag
        if a.active_tasks is not None:
            c.target = tuple(frozenset(a.tasks(k) or ()) for k in KINDS)
        self._track(c)
        self._at(self.d.now_ms + c.interval_ms, "heartbeat", c.member)
        self._maybe_reconcile(c)

    def _maybe_reconcile(self, c: Client) -> None:
        if c.reconciling is None and c.target != c.current:
            c.reconciling = c.target
            opened = len(c.target[0] - c.current[0])
            self._at(self.d.now_ms + self.callback_ms + opened * self.open_ms_per_task, "reconciled", c.member)

    def _track(self, c: Client) -> None:
        m = self.d.group().members[c.member]
        busy = m.state is not MemberState.STABLE or m.member_epoch != self.d.group().target_assignment_epoch
        if busy and c.busy_since_ms is None:
            c.busy_since_ms = self.d.now_ms
        elif not busy and c.busy_since_ms is not None:
            c.busy_ms.append(self.d.now_ms - c.busy_since_ms)
            c.busy_since_ms = None

    def reconciled(self, c: Client) -> None:
        """The reconciliation started earlier completes: what it captured is the current
        assignment, acknowledged at once (ACKNOWLEDGING); a target that arrived meanwhile is
        reconciled next."""
        assert c.reconciling is not None
        c.moved_in += len(c.reconciling[0] - c.current[0])
        if self.restore_per_ms:
            self._restore(c)          # what it restored under its previous assignment
        c.current, c.reconciling = c.reconciling, None
        c.on_disk |= {t for t in c.current[0] | c.current[1] | c.current[2] if t[0] in self.stateful}
        c.reconciliations += 1
        c.most_active = max(c.most_active, len(c.current[0]))
        for other in self.clients.values():
            assert other is c or not (other.current[0] & c.current[0]), ("active twice", c.member, other.member)
        self.heartbeat(c)

    # ------------------------------------------------------------------ the run
    def run_until(self, done, limit_ms: int = 120_000) -> int:
        """Process events until ``done()``; the simulated ms it took."""
        start = self.d.now_ms
        while not done():
            assert self.queue and self.queue[0][0] - start <= limit_ms, "no convergence"
            when, _, what, member, generation = heapq.heappop(self.queue)
            self.d.advance(max(0, when - self.d.now_ms))     # the coordinator's timers fire on the way
            c = self.clients.get(member)
            if c is None:                                     # it left or was killed: its events are void
                continue
            if what == "reconciled":
                self.reconciled(c)
            elif generation == c.generation:
                self.heartbeat(c)
        return self.d.now_ms - start

    def stable(self, tasks: set) -> bool:
        group = self.d.shard.groups.get("app")
        if group is None or group.state() is not StreamsGroupState.STABLE:
            return False
        running = [t for c in self.clients.values() for t in c.current[0]]
        return (len(running) == len(tasks) and set(running) == tasks and all(
            c.reconciling is None and c.member in group.members
            and c.current == tuple(frozenset(x) for x in group.members[c.member].assigned)
            for c in self.clients.values()))

    def round_trips(self) -> int:
        return sum(c.heartbeats for c in self.clients.values())
