"""kcoord's warm-up tasks: a stateful task moves to its new owner only once that owner has
restored its state (KIP-441's idea, as Kafka trunk's `AssignmentRefinerImpl` plans it). Kafka
4.4's coordinator calls a refine hook after each new target and reconciles members against
what it returns, but its hook returns the target unchanged: no warm-ups. This is kcoord's
extension, off by default (docs/design/streams-groups.md, "Warm-up tasks").

Rules:
- on only with the serve-wide `streams_warmups_enabled` and the group's
  `streams.num.warmup.replicas` > 0 (Kafka's default 2 alone never turns it on); off, the
  target is reconciled against as before, byte for byte;
- the plan (`Plan`, soft state, one per target epoch and target) refines the assignor's
  target; members reconcile against it instead (heartbeat.py). Records 20/21 and the
  describe's TargetAssignment stay the assignor's; record 22 carries the warm-ups;
- only tasks of stateful subtopologies are held back. A member is *caught up* on a task when
  its own last report has both an offset and an end offset for it, each in [0, Long.MAX_VALUE),
  and end - offset <= `streams.acceptable.recovery.lag` (the 4.4 client's "hot" warm-up rule).
  A caught-up 4.4 client reports an offset *above* its end offset (3 against 2 for a changelog
  of three records, seen through kcoord), so a lag of 0 works. An active task is running (the
  client drops running actives from TaskOffsets), and its holder keeps it even if its last
  report shows it restoring: a 4.4 client reports on its interval, so a holder that has since
  finished looks restoring for up to `streams.task.offset.interval.ms`, and it has restored
  more of it than a new owner;
- a task whose target owner O is not its active holder H moves at once when O's process is
  H's or a member of O's process is caught up on it. A move a plan let through stands: the
  next plan counts O's process as caught up on it for as long as the target sends it there
  (`Plan.moved`), since O's report drops the task's end offset once its warm-up is revoked
  for the move, and a plan that held it back again would hand it back and forth, one epoch
  per report. H is the member with the task in its current active tasks; one revoking it has
  let it go (a reload, which forgets the plan, does not undo a move under way). Else it stays active on H (when H is
  gone, on the caught-up standby with the least lag; none: it moves) and O's process warms
  it: a standby or warm-up a member of O's process already holds is kept (a standby costs no
  budget), else a warm-up is put on O. `streams.num.warmup.replicas` is a group-wide budget of warm-ups, spent first
  on the ones already running, then in task order; a move without one waits, parked on H;
- a process never holds two copies of a task: the holder's process drops the task's other
  copies; a task is active on one member only (the plan moves an active, never copies it);
- reassessment (the probing rebalance): a heartbeat whose report makes a held-back move's
  process caught up, and the `("streams", "warmup", group)` timer after a plan with held-back
  moves, bump the group epoch (record 17) when no bump is pending, so the paced target
  (membership.can_compute: one per assignment interval) is computed and refined again. The
  timer's delay is `streams.task.offset.interval.ms`, doubled for each plan in a row that
  holds the same moves back, up to `PROBE_MAX_MS` (KIP-441's `probing.rebalance.interval.ms`,
  10 min): a warm-up that never reports within the lag costs a bump every 10 min at most;
- turned off under a plan (the group's `streams.num.warmup.replicas` set to 0), the plan is
  dropped at the next heartbeat, which bumps the group epoch if it held moves back;
- at DEBUG (logger `kcoord.streams.membership`) each promotion is one line; the current plans'
  warm-ups and held-back moves are gauges read at scrape time (`StreamsGroup.warmup_tasks`,
  `Plan.held_moves`, coordinator/metrics.py).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from ..result import Result, ScheduleTimer
from .membership import (
    KIND,
    assignment_timer,
    can_compute,
    group_epoch_record,
    group_settings,
    log,
    soft_of,
    stateful_subtopologies,
)
from .model import Soft, StreamsGroup, StreamsMember, StreamsSettings, Task, Tasks, Topology
from .offsets import EMPTY as NO_OFFSETS
from .offsets import MemberOffsets

LONG_MAX = 2**63 - 1
PROBE_MAX_MS = 600_000


class Plan(NamedTuple):
    """The refined assignment of one target: what members reconcile against, the moves held
    back and the moves let through across processes (each task -> the process of its target
    owner), and the probe's delay after it."""
    epoch: int
    target: Mapping[str, Tasks]
    assignment: dict[str, Tasks]
    held: dict[Task, str]
    moved: dict[Task, str]
    probe_ms: int

    def held_moves(self, members: Mapping[str, Any]) -> int:
        """The moves the plan holds back to processes still in the group (one that left stays in
        the plan until the next heartbeat). A plan of an older target still counts: its moves
        stay held in the members' assignments until a heartbeat refines the new target (a probe
        computes it without one). Read only, at scrape time, by coordinator/metrics.py's
        GroupCollector, which may not import this layer and reads a plan through this method
        alone; the dicts are walked as copies (coordinator/metrics_kafka.py, walk_retrying)."""
        processes = {m.process_id for m in list(members.values())}
        return sum(process in processes for process in list(self.held.values()))


def enabled(settings: StreamsSettings) -> bool:
    return settings.warmups_enabled and settings.num_warmup_replicas > 0


def warmup_key(group_id: str) -> tuple:
    return (KIND, "warmup", group_id)


def caught_up(offsets: MemberOffsets, task: Task, lag: int) -> bool:
    """The member's own last report says it restored ``task`` to within ``lag``."""
    o, e = offsets.offsets.get(task), offsets.end_offsets.get(task)
    return o is not None and e is not None and 0 <= o < LONG_MAX and 0 <= e < LONG_MAX and e - o <= lag


def _active_holders(members: Mapping[str, StreamsMember]) -> dict[Task, str]:
    """Each task in some member's current active tasks -> that member (one revoking it has let
    it go: the plan that moved it stands)."""
    return {t: mid for mid, m in members.items() for t in m.assigned.active}


class _Refiner:
    """One refinement (the module's rules): the target's tasks, copied into mutable sets."""

    def __init__(self, members: Mapping[str, StreamsMember], target: Mapping[str, Tasks],
                 offsets: Mapping[str, MemberOffsets], lag: int, moved: Mapping[Task, str] | None = None) -> None:
        self.members, self.offsets, self.lag = members, offsets, lag
        self.moved_before = moved or {}
        self.moved: dict[Task, str] = {}
        self.out = {mid: [set(t.active), set(t.standby), set(t.warmup)] for mid, t in target.items()
                    if mid in members}
        self.by_process: dict[str, list[str]] = {}
        self.standbys: dict[Task, list[str]] = {}       # who holds each task as a standby
        for mid in sorted(members):
            self.by_process.setdefault(members[mid].process_id, []).append(mid)
            for t in members[mid].assigned.standby:
                self.standbys.setdefault(t, []).append(mid)
        self.promoted: list[tuple[Task, str]] = []

    def _up(self, mid: str, t: Task) -> bool:
        return caught_up(self.offsets.get(mid, NO_OFFSETS), t, self.lag)

    def _moving_to(self, pid: str, t: Task) -> bool:
        """The previous plan let ``t`` through to process ``pid`` (the module's rules)."""
        return self.moved_before.get(t) == pid

    def _copy(self, pid: str, t: Task) -> tuple[str, int] | None:
        """A member of process ``pid`` holding ``t`` as a standby (1) or a warm-up (2)."""
        for mid in self.by_process.get(pid, ()):
            a = self.members[mid].assigned
            if t in a.standby:
                return mid, 1
            if t in a.warmup:
                return mid, 2
        return None

    def _keeper(self, holder: str | None, owner_pid: str, t: Task) -> str | None:
        if holder is not None:
            return holder
        standbys = [(self.offsets[mid].end_offsets[t] - self.offsets[mid].offsets[t], mid)
                    for mid in self.standbys.get(t, ())
                    if self.members[mid].process_id != owner_pid and self._up(mid, t)]
        return min(standbys)[1] if standbys else None

    def _hold(self, t: Task, owner: str, keeper: str) -> None:
        self.out[owner][0].discard(t)
        for mid in self.by_process[self.members[keeper].process_id]:
            tasks = self.out.setdefault(mid, [set(), set(), set()])
            tasks[1].discard(t)
            tasks[2].discard(t)
        self.out[keeper][0].add(t)

    def refine(self, target: Mapping[str, Tasks], stateful: frozenset[str], budget: int) -> dict[Task, str]:
        holders = _active_holders(self.members)
        held: dict[Task, str] = {}
        wanted: list[tuple[int, Task, str]] = []
        for owner in sorted(self.out):
            pid = self.members[owner].process_id
            for t in sorted(target[owner].active):
                holder = holders.get(t)
                if t[0] not in stateful or holder == owner:
                    continue
                if holder is not None and self.members[holder].process_id == pid:
                    continue
                if self._moving_to(pid, t) or any(self._up(mid, t) for mid in self.by_process[pid]):
                    if holder is not None or self._moving_to(pid, t):
                        # kept while the holder may still be revoking it (a plan made then
                        # sees no holder, and the one after must not hold it back again)
                        self.moved[t] = pid
                    if self._copy(pid, t) is not None and not self._moving_to(pid, t):
                        self.promoted.append((t, owner))
                    continue
                keeper = self._keeper(holder, pid, t)
                if keeper is None:
                    continue
                self._hold(t, owner, keeper)
                held[t] = pid
                copy = self._copy(pid, t)
                if copy is not None and copy[1] == 1:
                    self.out.setdefault(copy[0], [set(), set(), set()])[1].add(t)
                else:
                    wanted.append((0 if copy is not None else 1, t, owner if copy is None else copy[0]))
        for _, t, mid in sorted(wanted)[:budget]:
            self.out.setdefault(mid, [set(), set(), set()])[2].add(t)
        return held

    def assignment(self) -> dict[str, Tasks]:
        return {mid: Tasks(frozenset(a), frozenset(s), frozenset(w)) for mid, (a, s, w) in self.out.items()}


class Refined(NamedTuple):
    assignment: dict[str, Tasks]
    held: dict[Task, str]          # the moves held back: task -> its target owner's process
    moved: dict[Task, str]         # the moves let through across processes, likewise
    promoted: list                 # (task, owner): moves let through as their warm-up caught up


def refine(members: Mapping[str, StreamsMember], target: Mapping[str, Tasks], offsets: Mapping[str, MemberOffsets],
           stateful: frozenset[str], budget: int, lag: int, moved: Mapping[Task, str] | None = None) -> Refined:
    """One refinement of ``target``; ``moved``: the previous plan's moves let through."""
    r = _Refiner(members, target, offsets, lag, moved)
    held = r.refine(target, stateful, budget)
    return Refined(r.assignment(), held, r.moved, r.promoted)


def refined(soft: Soft, group_id: str, members: Mapping[str, StreamsMember], epoch: int, target: dict[str, Tasks],
            topology: Topology | None, settings: StreamsSettings, now_ms: int) -> tuple[dict[str, Tasks], list]:
    """What members reconcile against at target ``epoch`` (the plan, made once per target),
    and the timers to arm: the probe, when a new plan holds moves back."""
    plan = soft.warmups
    if plan is not None and plan.epoch == epoch and plan.target == target:
        # a copy (the group's target changes in place on replay) holding the same values, so
        # the next comparison is one identity check per member
        soft.warmups = plan._replace(target=dict(target))
        return plan.assignment, []
    r = refine(members, target, soft.task_offsets, stateful_subtopologies(topology), settings.num_warmup_replicas,
               settings.acceptable_recovery_lag, None if plan is None else plan.moved)
    probe_ms = settings.task_offset_interval_ms
    if plan is not None and plan.held and plan.held == r.held:
        probe_ms = min(max(plan.probe_ms * 2, probe_ms), max(PROBE_MAX_MS, probe_ms))
    soft.warmups = Plan(epoch, dict(target), r.assignment, r.held, r.moved, probe_ms)
    for t, owner in r.promoted:
        log.debug("streams group %s at %d: target epoch %d promotes task %s_%d to member %s (caught up)",
                  group_id, now_ms, epoch, t[0], t[1], owner)
    if not r.held:
        return r.assignment, []
    return r.assignment, [ScheduleTimer(warmup_key(group_id), now_ms + probe_ms)]


def _holding_now(plan: Plan | None, group: StreamsGroup) -> bool:
    """The plan of the group's current target holds moves back, and no new target is due yet
    (a bump already pending would be bumped again for nothing)."""
    return (plan is not None and bool(plan.held) and plan.epoch == group.target_assignment_epoch
            and group.group_epoch <= group.target_assignment_epoch)


def reported_caught_up(soft: Soft, group: StreamsGroup, process_id: str, reported: MemberOffsets,
                       settings: StreamsSettings) -> bool:
    """Whether this report makes a move the current plan holds back ready (a bump is due)."""
    plan = soft.warmups
    if not _holding_now(plan, group):
        return False
    lag = settings.acceptable_recovery_lag
    return any(plan.held.get(t) == process_id and caught_up(reported, t, lag) for t in reported.end_offsets)


def turned_off(soft: Soft, group: StreamsGroup, settings: StreamsSettings) -> bool:
    """Warm-ups were turned off (the group's `streams.num.warmup.replicas` set to 0) under a
    plan: drop it, and whether a bump is due (members reconciled to a plan holding moves back
    would otherwise stay there until the next target)."""
    plan = soft.warmups
    if plan is None or enabled(settings):
        return False
    soft.warmups = None
    return bool(plan.held) and plan.epoch == group.target_assignment_epoch == group.group_epoch


def on_probe(shard: Any, group: StreamsGroup, now_ms: int) -> Result:
    """The probe timer: while the current plan holds moves back, bump the group epoch so the
    next target is computed (paced) and refined with the offsets reported since."""
    settings = group_settings(shard, group.group_id)
    soft = soft_of(shard, group.group_id)
    if not enabled(settings) or not group.members or not _holding_now(soft.warmups, group):
        return Result()
    when = can_compute(group, soft, settings, now_ms)
    return Result(records=[group_epoch_record(group, group.group_epoch + 1, group.metadata_hash,
                                              group.validated_topology_epoch)],
                  timers=[assignment_timer(group.group_id, now_ms if when is None else when)])
