"""The built-in `sticky` streams task assignor (Kafka: `streams/assignor/StickyTaskAssignor`),
the rules of Kafka 4.4.0's own (read from its jar: docs/design/streams-groups.md, "The sticky
assignor's placement, as Kafka 4.4.0 does it").

Rules (Kafka 4.4's built-in assignor has no warm-up tasks and no rack awareness; kcoord's
zone-aware standbys, off by default, are the last rule):
- every task is active on exactly one member;
- two quotas, each ceil(tasks / members) over the tasks and members not yet full, computed
  again for the others once a member reaches it (Kafka's `maybeUpdateActiveTasksPerMember`,
  `maybeUpdateTotalTasksPerMember`): the active quota over the active tasks, and the total
  quota over the active tasks plus one per standby replica of each stateful task, a member's
  actives and standbys together. So where every process has one member (a Streams
  instance is one member per stream thread), loads never differ by more than one,
  whatever the previous assignment; the last pass balances processes by tasks per member
  first, so processes of unequal member counts can leave two members two apart. A fixed
  ceil(tasks / members) let members that joined one by one keep
  7, 7, ... 4, 4 of 64 tasks over 10, and the next join then moved tasks between members that
  stayed (docs/measurements/streams-rebalance.md);
- each member's previous tasks are its current assignment (`StreamsGroupMember.assignedTasks()`,
  as Kafka 4.4's `TargetAssignmentBuilder` hands them), not its last target: a member that has
  not revoked what a target took from it still holds it, one not yet given what a target gave
  it holds nothing (membership.compute_target);
- actives, tasks by partition then subtopology, as Kafka: the task's previous active owner if under
  the active quota; then, for those left, its "previous standby" candidates
  (`collectStandbyCandidates`, `STANDBY_CANDIDATE_ORDER`): the members that had it as a
  standby plus those that reported an offset for it (its state is on their disk, offsets.py),
  ranked standbys first, then by larger reported offset sum (0 when none), then by member id.
  One candidate is chosen, the first in that rank unless a later one has both a lower process
  load and a lower member load (`findPrevMemberWithLeastLoad`); only then is its quota checked,
  and a chosen candidate at its quota leaves the task to the last pass (another candidate is
  not tried). The rest, by subtopology then partition, go to the least loaded process (load:
  tasks / members) and its least loaded member, with no quota;
- standbys only for the tasks of stateful subtopologies (those with a changelog: a standby of
  a stateless task would keep nothing warm), tasks by partition then subtopology, both
  descending; for each replica: the task's previous active owner (a member that had it active
  and lost it keeps its state as a standby), if its process does not hold the task yet and it
  is under the total quota; else the chosen "previous standby" candidate among those whose
  process does not hold the task, if under the total quota; else this and the task's
  remaining replicas wait for the last pass: tasks by subtopology then partition, both
  descending, each replica to the least loaded process that does not hold the task and its
  least loaded member, with no quota;
- a standby is never placed on a process that holds the same task (active or standby);
  standbys that find no such process stay unassigned, with a warning, as in Kafka;
- zone-aware standbys (kcoord's extension, only with tag keys configured: the group's
  `streams.rack.aware.assignment.tags`; client_tags.py states KIP-708's filter): for each
  standby replica, the processes whose tags the filter bans are not candidates: the previous
  active owner and the "previous standby" candidates are taken only if allowed, and the last
  pass takes the least loaded allowed process without the task; only when no process is
  allowed does the replica go to the least loaded process without the task, as without tags.
  Actives are placed as without tags; without tag keys, or when no key has two values among
  the processes, the placement is the rules above exactly;
- deterministic: where Kafka's order is its hash maps' (members' order among equally ranked
  candidates, and which of equally loaded processes or members is the least loaded), kcoord
  takes the smaller member id; among processes of equal load, the one whose least loaded
  member has fewer tasks, then the smaller process id.
"""
from __future__ import annotations

import heapq
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from types import MappingProxyType

from .client_tags import Banned, TagSpread
from .model import NO_TASKS, Task, Tasks

log = logging.getLogger("kcoord.streams.assignor")
# Zone-aware standbys' last pass keeps one heap per cell (a combination of tag values) while
# there are at most this many; beyond (e.g. `zone,host` with a host per process, or members
# each sending a value of their own) a pass over every cell per replica costs more than the
# filtered scan of one heap: a fresh target of 1000 members and 5000 tasks took 3.3 s with a
# host per process through the cells, 60 ms through the scan, the same targets (a read-only
# review's measurement).
MAX_CELLS = 64


@dataclass(frozen=True, slots=True)
class MemberSpec:
    process_id: str
    previous: Tasks      # the member's current assignment (Kafka's assignedTasks), for stickiness
    # the member's last reported TaskOffsets (offsets.py): the tasks whose state it has on disk
    reported: Mapping[Task, int] = field(default_factory=lambda: MappingProxyType({}))
    # the member's ClientTags, read only with zone-aware standbys on (client_tags.py)
    client_tags: tuple[tuple[str, str], ...] = ()


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


class _Cells:
    """The least loaded process the tags allow, in O(cells log processes): the processes by
    their tag cell (client_tags.TagSpread.cell), one heap of `_Load.process_key` per cell, kept
    as `_Load` keeps its own (stale entries skipped). Filtering `_Load.pop_least` instead passes
    every banned process less loaded than the allowed one: about 100 per replica in
    bench_streams_assignor's scenarios with 3 zones, where the banned zone's processes are
    often the least loaded."""

    def __init__(self, load: _Load, spread: TagSpread) -> None:
        self.load, self.spread = load, spread
        members: dict[tuple[str | None, ...], list[str]] = {}
        for pid in sorted(load.capacity):
            members.setdefault(spread.cell(pid), []).append(pid)
        self.first = {cell: pids[0] for cell, pids in members.items()}
        self.cell_of = {pid: cell for cell, pids in members.items() for pid in pids}
        self.heaps = {cell: [load.process_key(pid) for pid in pids] for cell, pids in members.items()}
        for heap in self.heaps.values():
            heapq.heapify(heap)

    def moved(self, process_id: str) -> None:
        heapq.heappush(self.heaps[self.cell_of[process_id]], self.load.process_key(process_id))

    def pop_least(self, banned: Banned, held: set[str]) -> str | None:
        """`_Load.pop_least` over the processes the tags allow that do not hold the task."""
        load, best = self.load, None
        for cell, heap in self.heaps.items():
            if not self.spread.allows(banned, self.first[cell]):
                continue
            passed = []
            while heap:
                entry = heap[0]
                if entry != load.process_key(entry[2]):
                    heapq.heappop(heap)               # stale
                elif entry[2] in held:
                    passed.append(heapq.heappop(heap))
                else:
                    if best is None or entry < best:
                        best = entry
                    break
            for entry in passed:
                heapq.heappush(heap, entry)
        return None if best is None else load._best(best[2])[1]


class _Quota:
    """A quota (the module's rules): ceil(left tasks / members not full). Kafka lets the
    number of members not full reach 0 (quota 0); kept at 1 here, which refuses the same
    members: the quota never grows, so every member is at or above it by then."""

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
           stateful: frozenset[str] | None = None, tag_keys: Iterable[str] = ()) -> dict[str, Tasks]:
    """Each member's new target assignment; standbys only for the tasks of the ``stateful``
    subtopologies (None: every task), spread over the values of the client tags ``tag_keys``
    (kcoord's zone-aware standbys; none: Kafka 4.4's placement)."""
    all_tasks = sorted(tasks)
    if not members:
        return {}
    with_state = all_tasks if stateful is None else [t for t in all_tasks if t[0] in stateful]
    num_standby = max(num_standby, 0)
    load = _Load(members)
    # Kafka's `totalTasksPerMember`, counted from the start: the active pass fills it too
    total = _Quota(len(all_tasks) + len(with_state) * num_standby, len(members))
    prev_active = _previous_owners(members)
    prev_standby = _candidates(members)
    active = _assign_active(load, total, all_tasks, prev_active, prev_standby)
    spread = _spread(members, tag_keys) if num_standby > 0 else None
    standby = _assign_standby(load, total, with_state, active, num_standby, prev_active, prev_standby, spread)
    return {m: Tasks(frozenset(active[m]), frozenset(standby[m]), NO_TASKS) for m in sorted(members)}


def _by_partition(task: Task) -> tuple[int, str]:
    """Kafka's order of the sticky passes: partition, then subtopology id (Java's String order,
    the same as Python's for ids without characters beyond U+FFFF)."""
    return task[1], task[0]


def _assign_active(load: _Load, total: _Quota, tasks: list[Task], prev_active: dict[Task, str],
                   prev_standby: dict[Task, list[str]]) -> dict[str, set[Task]]:
    out: dict[str, set[Task]] = {m: set() for m in load.member}
    quota = _Quota(len(tasks), len(out))

    def give(m: str, t: Task) -> None:
        out[m].add(t)
        load.add(m)
        quota.took(load.member[m])
        total.took(load.member[m])

    waiting = []
    # Kafka's `assignActive` walks these two passes by partition, then subtopology
    # (docs/design/streams-groups.md, "The sticky assignor's placement")
    for t in sorted(tasks, key=_by_partition):
        owner = prev_active.get(t)
        if owner is not None and load.member[owner] < quota.per_member:
            give(owner, t)
        else:
            waiting.append(t)
    rest = []
    for t in waiting:
        # Kafka chooses first and checks the quota after: a full choice is not replaced
        warm = load.first_least_loaded(prev_standby.get(t, ()))
        if warm is not None and load.member[warm] < quota.per_member:
            give(warm, t)
        else:
            rest.append(t)
    for t in sorted(rest):
        m = load.pop_least(_anywhere)
        assert m is not None
        give(m, t)
    return out


def _spread(members: Mapping[str, MemberSpec], tag_keys: Iterable[str]) -> TagSpread | None:
    """The processes' tags, or None where they cannot spread anything (no key configured, or
    none with two values among the processes: the filter then never bans)."""
    keys = tuple(tag_keys)
    if not keys:
        return None
    spread = TagSpread(keys, {m: (s.process_id, s.client_tags) for m, s in members.items()})
    return spread if any(n > 1 for n in spread.distinct.values()) else None


def _assign_standby(load: _Load, total: _Quota, tasks: list[Task], active: dict[str, set[Task]], num_standby: int,
                    prev_active: dict[Task, str], prev_standby: dict[Task, list[str]],
                    spread: TagSpread | None = None) -> dict[str, set[Task]]:
    out: dict[str, set[Task]] = {m: set() for m in load.member}
    if num_standby <= 0:
        return out
    process_of = load.process_of
    holders: dict[Task, set[str]] = {t: {process_of[m]} for m, ts in active.items() for t in ts}

    cells: _Cells | None = None      # the tags' heaps, for the last pass

    def give(m: str, t: Task) -> None:
        out[m].add(t)
        load.add(m)
        total.took(load.member[m])
        holders[t].add(process_of[m])
        if cells is not None:
            cells.moved(process_of[m])

    left: list[tuple[Task, int, Banned | None, Banned]] = []
    for t in sorted(tasks, key=_by_partition, reverse=True):
        placed = holders.setdefault(t, set())
        banned: Banned | None = None
        first: Banned = {}
        for i in range(num_standby):
            if spread is not None:
                banned = spread.ban(placed, banned)
                if i == 0:
                    first = {k: set(v) for k, v in banned.items()}
                else:
                    banned = spread.settle(placed, banned, first)
            # with tags, a process they ban is no candidate, as one holding the task is not
            bar = placed.__contains__ if spread is None or not banned else partial(_barred, spread, banned, placed)
            chosen = prev_active.get(t)
            if chosen is None or bar(process_of[chosen]) or load.member[chosen] >= total.per_member:
                chosen = load.first_least_loaded(m for m in prev_standby.get(t, ()) if not bar(process_of[m]))
                if chosen is not None and load.member[chosen] >= total.per_member:
                    chosen = None
            if chosen is None:
                left.append((t, num_standby - i, banned, first))      # this replica and the task's next ones
                break
            give(chosen, t)
    unplaced = 0
    if spread is not None and left and spread.cells(load.capacity) <= MAX_CELLS:
        cells = _Cells(load, spread)
    for t, replicas, banned, first in sorted(left, key=_task_and_replicas, reverse=True):
        placed = holders[t]
        for i in range(replicas):
            chosen = None
            if spread is not None:
                banned = spread.settle(placed, spread.ban(placed, banned), first)
                if banned and cells is not None:    # else every process without the task is allowed
                    chosen = cells.pop_least(banned, placed)
                elif banned:                        # more cells than a heap each is worth
                    chosen = load.pop_least(partial(_allowed, spread, banned, placed))
            if chosen is None and banned:
                # no process the tags allow: a previous holder of this standby first, as the
                # first pass keeps one without tags (the ban bars it there), else every new
                # target would pick by load again and the standby could alternate between two
                # processes (a review's property sweep: 4 of 3,000 random groups)
                chosen = load.first_least_loaded(m for m in prev_standby.get(t, ()) if process_of[m] not in placed)
            if chosen is None:          # no process the tags allow: the rule without tags
                chosen = load.pop_least(partial(_elsewhere, placed))
            if chosen is None:
                unplaced += replicas - i
                break
            give(chosen, t)
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


def _previous_owners(members: Mapping[str, MemberSpec]) -> dict[Task, str]:
    """Each task's previous active owner (Kafka's `activeTaskToPrevMember`: one member per
    task; a target never holds a task active twice, and if the members' assignments did,
    Kafka keeps the last in its hash order, here the smallest member id)."""
    owners: dict[Task, str] = {}
    for m in sorted(members, reverse=True):
        for t in members[m].previous.active:
            owners[t] = m
    return owners


def _anywhere(_process_id: str) -> bool:
    return True


def _elsewhere(held: set[str], process_id: str) -> bool:
    return process_id not in held


def _barred(spread: TagSpread, banned: Banned, held: set[str], process_id: str) -> bool:
    return process_id in held or not spread.allows(banned, process_id)


def _allowed(spread: TagSpread, banned: Banned, held: set[str], process_id: str) -> bool:
    return not _barred(spread, banned, held, process_id)


def _task_and_replicas(entry: tuple[Task, int, Banned | None, Banned]) -> tuple[Task, int]:
    return entry[0], entry[1]
