"""The built-in `sticky` streams task assignor (Kafka: `streams/assignor/StickyTaskAssignor`),
written from its guarantees, not its code.

Rules (Kafka 4.4's built-in assignor has no warm-up tasks and no rack awareness):
- every task is active on exactly one member;
- stickiness: a task stays with the member that had it active, then goes to one of its
  "previous standby" candidates, as long as that member stays within its quota. The
  candidates are Kafka 4.4's (`collectStandbyCandidates`, `STANDBY_CANDIDATE_ORDER`): the
  members that had it as a standby plus those that reported an offset for it (its state is on
  their disk, offsets.py), ranked standbys first, then by larger reported offset sum (0 when
  none), then by member id; the first in that rank wins unless a later one has both a lower
  process load and a lower member load (`findPrevMemberWithLeastLoad`). Kafka picks among all
  candidates and then checks the quota; kcoord drops those at their quota first, so a task
  whose best candidate is full still goes to another member with its state;
  the rest go to the least loaded member, the least loaded process first, so the load is
  balanced across processes by their number of members;
- the quota is ceil(tasks / members) over the tasks and members not yet full: once a member
  reaches it, the quota is computed again for the others (Kafka's `maybeUpdateTasksPerMember`).
  So loads never differ by more than one, whatever the previous assignment: a fixed
  ceil(tasks / members) let members that joined one by one keep 7, 7, ... 4, 4 of 64 tasks
  over 10, and the next join then moved tasks between members that stayed (8 lost one, 2
  gained one and had to wait for the revocations: docs/measurements/streams-rebalance.md);
- standbys only for the tasks of stateful subtopologies (those with a changelog: a standby of
  a stateless task would keep nothing warm; Kafka 4.4 assigns none there either);
- a standby is never placed on a process that holds the same task (active or standby);
  standbys that find no such process stay unassigned, with a warning, as in Kafka;
- deterministic: tasks, members and processes are walked in sorted order.
"""
from __future__ import annotations

import heapq
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from types import MappingProxyType

from .model import NO_TASKS, Task, Tasks, TaskSet

log = logging.getLogger("kcoord.streams.assignor")


@dataclass(frozen=True, slots=True)
class MemberSpec:
    process_id: str
    previous: Tasks      # the member's assignment so far (its target), for stickiness
    # the member's last reported TaskOffsets (offsets.py): the tasks whose state it has on disk
    reported: Mapping[Task, int] = field(default_factory=lambda: MappingProxyType({}))


class _Load:
    """Tasks per member and per process, and the least loaded member in O(log members): the
    order is (process load / capacity, member load, process, member). A heap of processes
    keyed by (load / capacity, their least loaded member's load, process), and per process a
    heap of (member load, member); entries whose load moved since are stale and skipped."""

    def __init__(self, members: Mapping[str, MemberSpec]) -> None:
        self.process_of = {m: s.process_id for m, s in members.items()}
        self.capacity: dict[str, int] = {}
        self.members_of: dict[str, list[str]] = {}
        for m, pid in sorted(self.process_of.items()):
            self.capacity[pid] = self.capacity.get(pid, 0) + 1
            self.members_of.setdefault(pid, []).append(m)
        self.member = dict.fromkeys(members, 0)
        self.process = dict.fromkeys(self.capacity, 0)
        # members_of lists are sorted: [(0, m), ...] in that order is already a heap
        self.in_process = {pid: [(0, m) for m in ms] for pid, ms in self.members_of.items()}
        self.heap = [self.process_key(pid) for pid in self.capacity]
        heapq.heapify(self.heap)

    def key(self, m: str) -> tuple[float, int, str, str]:
        pid = self.process_of[m]
        return (self.process[pid] / self.capacity[pid], self.member[m], pid, m)

    def _best(self, pid: str) -> tuple[int, str]:
        """The process's least loaded member (its stale entries dropped)."""
        entries = self.in_process[pid]
        while entries[0][0] != self.member[entries[0][1]]:
            heapq.heappop(entries)
        return entries[0]

    def process_key(self, pid: str) -> tuple[float, int, str]:
        return (self.process[pid] / self.capacity[pid], self._best(pid)[0], pid)

    def add(self, member_id: str) -> None:
        pid = self.process_of[member_id]
        self.member[member_id] += 1
        self.process[pid] += 1
        heapq.heappush(self.in_process[pid], (self.member[member_id], member_id))
        heapq.heappush(self.heap, self.process_key(pid))

    def first_least_loaded(self, ranked: Iterable[str]) -> str | None:
        """Kafka's `findPrevMemberWithLeastLoad`: the first of the ranked candidates, replaced
        only by a later one whose process load and member load are both lower."""
        best, best_process, best_member = None, 0.0, 0
        for m in ranked:
            pid = self.process_of[m]
            process, member = self.process[pid] / self.capacity[pid], self.member[m]
            if best is None or (process < best_process and member < best_member):
                best, best_process, best_member = m, process, member
        return best

    def pop_least(self, eligible: Callable[[str], bool]) -> str | None:
        """The least loaded member of an eligible process (`eligible` takes a process id); the
        processes it passes stay in the heap."""
        passed, found = [], None
        while self.heap:
            entry = heapq.heappop(self.heap)
            if entry != self.process_key(entry[2]):
                continue                      # stale
            passed.append(entry)
            if eligible(entry[2]):
                found = self._best(entry[2])[1]
                break
        for entry in passed:
            heapq.heappush(self.heap, entry)
        return found


class _Quota:
    """The sticky passes' quota (the module's rules): ceil(left tasks / members not full)."""

    def __init__(self, tasks: int, members: int) -> None:
        self.tasks, self.members = tasks, members
        self.per_member = -(-tasks // members) if members else 0

    def took(self, load: int) -> None:
        """A member's load is now `load`; at the quota it is full, and the quota is redone."""
        if load == self.per_member and self.members > 1:
            self.tasks -= load
            self.members -= 1
            self.per_member = -(-self.tasks // self.members)


def assign(members: Mapping[str, MemberSpec], tasks: Iterable[Task], num_standby: int,
           stateful: frozenset[str] | None = None) -> dict[str, Tasks]:
    """Each member's new target assignment; standbys only for the tasks of the ``stateful``
    subtopologies (None: every task)."""
    all_tasks = sorted(tasks)
    if not members:
        return {}
    active = _assign_active(members, all_tasks)
    with_state = all_tasks if stateful is None else [t for t in all_tasks if t[0] in stateful]
    standby = _assign_standby(members, with_state, active, num_standby)
    return {m: Tasks(frozenset(active[m]), frozenset(standby[m]), NO_TASKS) for m in sorted(members)}


def _assign_active(members: Mapping[str, MemberSpec], tasks: list[Task]) -> dict[str, set[Task]]:
    out: dict[str, set[Task]] = {m: set() for m in members}
    load = _Load(members)
    quota = _Quota(len(tasks), len(members))
    prev_active = _owners(members, lambda s: s.previous.active)
    prev_standby = _candidates(members)
    unassigned = []
    for t in tasks:
        owner = next((m for m in sorted(prev_active.get(t, ())) if load.member[m] < quota.per_member), None)
        if owner is None:
            unassigned.append(t)
        else:
            out[owner].add(t)
            load.add(owner)
            quota.took(load.member[owner])
    rest = []
    for t in unassigned:
        warm = load.first_least_loaded(m for m in prev_standby.get(t, ()) if load.member[m] < quota.per_member)
        if warm is None:
            rest.append(t)
        else:
            out[warm].add(t)
            load.add(warm)
            quota.took(load.member[warm])
    for t in rest:
        m = load.pop_least(lambda _pid: True)
        assert m is not None
        out[m].add(t)
        load.add(m)
    return out


def _assign_standby(members: Mapping[str, MemberSpec], tasks: list[Task], active: dict[str, set[Task]],
                    num_standby: int) -> dict[str, set[Task]]:
    out: dict[str, set[Task]] = {m: set() for m in members}
    if num_standby <= 0:
        return out
    load = _Load(members)
    for m, ts in active.items():
        for _ in ts:
            load.add(m)
    holders: dict[Task, set[str]] = {}
    for m, ts in active.items():
        for t in ts:
            holders.setdefault(t, set()).add(members[m].process_id)
    quota = math.ceil(len(tasks) * (num_standby + 1) / len(members))
    prev_standby = _candidates(members)
    unplaced = 0
    for t in tasks:
        placed = holders.setdefault(t, set())
        for _ in range(num_standby):
            sticky = [m for m in prev_standby.get(t, ())
                      if members[m].process_id not in placed and load.member[m] < quota]
            chosen = load.first_least_loaded(sticky) or load.pop_least(partial(_elsewhere, placed))
            if chosen is None:
                unplaced += 1
                continue
            out[chosen].add(t)
            load.add(chosen)
            placed.add(members[chosen].process_id)
    if unplaced:
        log.warning("Unable to assign %d of %d standby tasks: there is not enough available capacity. You should "
                    "increase the number of application instances to maintain the requested number of standby "
                    "replicas.", unplaced, len(tasks) * num_standby)
    return out


def _candidates(members: Mapping[str, MemberSpec]) -> dict[Task, list[str]]:
    """Each task's "previous standby" candidates in Kafka 4.4's rank (the module's rules): its
    standby holders, then the members that reported an offset for it without holding it as a
    standby, each group by larger reported offset sum, then member id (Kafka's ties follow its
    members' hash order)."""
    ranked: dict[Task, list[tuple[bool, int, str]]] = {}
    for m, spec in members.items():
        standby = spec.previous.standby
        for t in standby:
            ranked.setdefault(t, []).append((False, -spec.reported.get(t, 0), m))
        for t, offset in spec.reported.items():
            if t not in standby:
                ranked.setdefault(t, []).append((True, -offset, m))
    return {t: [m for _, _, m in sorted(c)] for t, c in ranked.items()}


def _elsewhere(held: set[str], process_id: str) -> bool:
    return process_id not in held


def _owners(members: Mapping[str, MemberSpec], pick) -> dict[Task, set[str]]:
    owners: dict[Task, set[str]] = {}
    for m, spec in members.items():
        tasks: TaskSet = pick(spec)
        for t in tasks:
            owners.setdefault(t, set()).add(m)
    return owners
