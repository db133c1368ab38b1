"""Task ownership under random interleavings (property-style, seeded, simulated clock): many
members join at once, heartbeats interleave, responses are lost, clients apply their new
assignments late, members leave, rejoin after being fenced, and new ones arrive; some
processes run several members (stream threads).

After every step, Kafka's rules for a streams group (streams `CurrentAssignmentBuilder`,
KIP-1071) must hold:
- a client runs an active task only while no other client runs it: a task revoked from one
  member reaches another only once the first confirmed the revocation (its heartbeat no longer
  lists it) or left; this holds between members of one process too;
- the coordinator holds each active task on at most one member (assigned or pending
  revocation), and a process holds a task at most once (active, standby or warm-up);
- what a client runs is what the coordinator knows it may hold;
and once everyone heartbeats in order, the group becomes STABLE with every task active once.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, replace
from datetime import timedelta

import pytest
from kio.schema.errors import ErrorCode

from coordinator.group.streams.model import Holders, MemberState, StreamsGroupState, StreamsMember, Tasks
from coordinator.group.streams.reconciliation import reconcile

from .driver import REQ, Driver, beat, image, subtopology, topology

PARTITIONS = 12
TOP = topology(subtopology("0", sources=["input"], changelogs=["app-store-changelog"]),
               subtopology("1", sources=["other"]))
READY = image(input=PARTITIONS, other=PARTITIONS, **{"app-store-changelog": PARTITIONS})
ALL = {(s, p) for s in ("0", "1") for p in range(PARTITIONS)}
KINDS = ("active", "standby", "warmup")
T = ("0", 1)
FENCED = (ErrorCode.fenced_member_epoch, ErrorCode.unknown_member_id)


def _join(member: str, process: str):
    """A join as a Streams client sends it: no tasks held, a long rebalance timeout (the test
    never lets a timer fence a member that is still running tasks)."""
    return REQ.StreamsGroupHeartbeatRequest(
        group_id="app", member_id=member, member_epoch=0, endpoint_information_epoch=0,
        rebalance_timeout=timedelta(days=1), topology=TOP, active_tasks=(), standby_tasks=(), warmup_tasks=(),
        process_id=process, client_tags=(), task_offsets=None, task_end_offsets=None)


@dataclass
class Client:
    """One member as Kafka 4.4's Streams client runs it (StreamsMembershipManager,
    StreamsGroupHeartbeatRequestManager): the latest assignment received (`target`), the one
    reconciled (`current`), one reconciliation at a time (`inflight`: revoke callback, then
    assign callback; a newer assignment waits for the next one), the tasks it runs (`held`).
    A heartbeat reports `current`, and only when it changed since the last report or after a
    failed heartbeat; a join reports nothing held."""
    member: str
    process: str
    epoch: int = 0
    held: tuple = (set(), set(), set())
    current: tuple = (set(), set(), set())
    target: tuple = (set(), set(), set())
    inflight: tuple | None = None  # the assignment being reconciled
    revoked: bool = False          # its revocations are done
    last_sent: tuple | None = None
    on_disk: frozenset = frozenset()   # stateful tasks whose state it has (every one it held)

    def abandon(self) -> None:
        """Fenced: every task dropped (onAllTasksLost), a join with epoch 0 next (KIP-1082:
        the same member id)."""
        self.held = self.current = self.target = (set(), set(), set())
        self.inflight, self.revoked, self.epoch, self.last_sent = None, False, 0, None


class World:
    def __init__(self, seed: int, lose: float, offsets: bool = False, warmups: bool = False,
                 zones: bool = False) -> None:
        self.rnd = random.Random(seed)
        self.lose = lose
        # clients report TaskOffsets as the 4.4 client does (on a join and with their tasks):
        # the state on disk then ranks the assignor's candidates (offsets.py, assignor.py)
        self.offsets = offsets or warmups
        # kcoord's warm-ups (warmup.py): clients also report the end offsets of the tasks they
        # restore (standbys and warm-ups), half of them within the lag, half never
        self.warmups = warmups
        extra = {"streams_warmups_enabled": True, "streams_acceptable_recovery_lag": 10} if warmups else {}
        # kcoord's zone-aware standbys: each process in one of three zones (its client.tag.zone)
        self.zones = zones
        if zones:
            extra |= {"streams_rack_aware_assignment_tags": ("zone",),
                      "streams_num_standby_replicas": self.rnd.choice((1, 2))}
        config = {"streams_session_timeout_ms": 10 ** 9, "streams_num_standby_replicas": self.rnd.choice((0, 1)),
                  "streams_initial_rebalance_delay_ms": self.rnd.choice((0, 3000)),
                  "streams_assignment_interval_ms": self.rnd.choice((0, 1000))}
        self.d = Driver(READY, **(config | extra))
        self.clients: dict[str, Client] = {}
        self.next_id = 0
        self.log: list[str] = []
        self.warmed = 0                # answers that handed out warm-ups

    def new_client(self) -> None:
        process = f"p{self.rnd.randrange(6)}"      # six processes: several members share one
        member = f"m{self.next_id}"
        self.next_id += 1
        self.clients[member] = Client(member, process)

    # ------------------------------------------------------------------ client actions
    def heartbeat(self, c: Client, lose: float) -> None:
        if c.epoch == 0:
            req = _join(c.member, c.process)
            if self.zones:
                req = replace(req, client_tags=(REQ.KeyValue(key="zone", value=f"z{int(c.process[1:]) % 3}"),))
        else:
            owned = None if c.last_sent == c.current else c.current
            c.last_sent = c.current
            req = beat(c.member, c.epoch, owned, rebalance_timeout=timedelta(days=1))
        if self.offsets and (c.epoch == 0 or req.active_tasks is not None):
            req = replace(req, task_offsets=tuple(
                REQ.TaskOffset(subtopology_id=s, partition=p, offset=(7 * p + int(c.member[1:])) % 50)
                for s, p in sorted(c.on_disk - c.held[0])))
            if self.warmups:
                n = int(c.member[1:])
                req = replace(req, task_end_offsets=tuple(
                    REQ.TaskOffset(subtopology_id=s, partition=p, offset=(7 * p + n) % 50 + (0 if (p + n) % 2 else 999))
                    for s, p in sorted((c.held[1] | c.held[2]) & c.on_disk)))
        a = self.d.hb(req)
        lost = self.rnd.random() < lose
        self.log.append(f"hb {c.member} e={c.epoch} current={sorted(c.current[0])} held={sorted(c.held[0])} -> "
                        f"{a.error_code.name} e={a.member_epoch} {sorted(a.tasks() or []) if a.active_tasks else ''}"
                        f"standby={sorted(a.tasks('standby') or [])}{' LOST' if lost else ''}")
        if lost:                   # a failed heartbeat: the next one reports everything again
            c.last_sent = None
            return
        if a.error_code in FENCED:
            c.abandon()
            return
        assert a.error_code == ErrorCode.none, a.error_message
        c.epoch = a.member_epoch
        if a.active_tasks is not None:
            c.target = tuple(a.tasks(k) or set() for k in KINDS)
            self.warmed += bool(c.target[2])
            self.start(c)

    @staticmethod
    def start(c: Client) -> None:
        """The membership manager starts reconciling the latest target at once when none is in
        progress (its poll); the callbacks run later, on the stream thread."""
        if c.inflight is None and c.target != c.current:
            c.inflight, c.revoked = c.target, False

    def reconcile(self, c: Client) -> None:
        """One callback of the reconciliation in progress: revoke what it does not list, then
        assign what it lists (the current assignment from then on), acknowledged by a heartbeat
        at once; then the next one starts."""
        if c.inflight is None:
            return
        if not c.revoked:
            c.held = tuple(h & t for h, t in zip(c.held, c.inflight, strict=True))
            c.revoked = True
        else:
            c.held = tuple(set(t) for t in c.inflight)
            c.current, c.inflight = c.inflight, None
            c.on_disk |= {t for t in c.held[0] | c.held[1] | c.held[2] if t[0] == "0"}
        self.log.append(f"reconcile {c.member} held={sorted(c.held[0])} standby={sorted(c.held[1])}")
        if c.inflight is None:     # ACKNOWLEDGING: the new assignment is reported at once
            self.heartbeat(c, self.lose)
            self.start(c)

    def leave(self, c: Client) -> None:
        group = self.d.shard.groups.get("app")
        if group is not None and c.member in group.members:
            a = self.d.hb(beat(c.member, -1))
            assert a.error_code == ErrorCode.none, a.error_message
        self.log.append(f"leave {c.member}")
        del self.clients[c.member]

    def step(self) -> None:
        r = self.rnd.random()
        alive = list(self.clients.values())
        if not alive or r < 0.05:
            self.new_client()
        elif r < 0.65:
            self.heartbeat(self.rnd.choice(alive), self.lose)
        elif r < 0.9:
            self.reconcile(self.rnd.choice(alive))
        elif r < 0.93:
            self.leave(self.rnd.choice(alive))
        else:
            self.d.advance(self.rnd.randrange(1500))

    # ------------------------------------------------------------------ invariants
    def check(self, clients: bool = True) -> None:
        running: dict = {}
        for c in self.clients.values() if clients else ():
            for t in c.held[0]:
                assert t not in running, f"task {t} active on {running[t]} and {c.member}\n" + self.trail()
                running[t] = c.member
        group = self.d.shard.groups.get("app")
        if group is None:
            return
        holder: dict = {}
        per_process: dict = {}
        for m in group.members.values():
            for t in m.assigned.active | m.pending_revocation.active:
                assert t not in holder, f"coordinator: {t} held by {holder[t]} and {m.member_id}\n" + self.trail()
                holder[t] = m.member_id
            for kind in KINDS:
                for t in getattr(m.assigned, kind) | getattr(m.pending_revocation, kind):
                    key = (m.process_id, t)
                    assert key not in per_process, \
                        f"coordinator: process {m.process_id} holds {t} twice ({per_process[key]}, " \
                        f"{m.member_id} {kind})\n" + self.trail()
                    per_process[key] = (m.member_id, kind)
        for c in self.clients.values() if clients else ():
            m = group.members.get(c.member)
            may = set() if m is None else m.assigned.active | m.pending_revocation.active
            assert c.held[0] <= may, \
                f"{c.member} runs {sorted(c.held[0] - may)} the coordinator does not know of\n" + self.trail()

    def trail(self) -> str:
        return "\n".join(self.log[-40:])

    def settled(self) -> bool:
        group = self.d.group()
        return group.state() is StreamsGroupState.STABLE and all(
            c.inflight is None and c.member in group.members and c.epoch == group.members[c.member].member_epoch
            and c.current == tuple(set(t) for t in group.members[c.member].assigned) for c in self.clients.values())

    def settle(self, clients: bool = True) -> None:
        for _ in range(60):
            if self.settled():
                return
            for c in list(self.clients.values()):
                self.heartbeat(c, lose=0)
                self.reconcile(c)
                self.reconcile(c)
                self.check(clients)
            self.d.advance(1000)

    def run(self, steps: int = 500, clients: bool = True) -> None:
        for _ in range(10):            # ten instances started at once
            self.new_client()
        for _ in range(steps):
            self.step()
            self.check(clients)
        self.settle(clients)
        assert self.d.group().state() is StreamsGroupState.STABLE, self.trail()
        active = [t for c in self.clients.values() for t in c.held[0]]
        if self.clients:
            assert sorted(active) == sorted(ALL)


@pytest.mark.parametrize("seed", range(30))
def test_no_task_is_ever_active_on_two_members(seed: int):
    World(seed, lose=0).run()


@pytest.mark.parametrize("seed", range(20))
def test_no_task_is_ever_active_on_two_members_when_clients_report_their_state(seed: int):
    """The reported offsets change who inherits a task (the assignor's candidates), never
    the rule that gives it only once released."""
    World(seed, lose=0, offsets=True).run()
    World(seed, lose=0.15, offsets=True).run(clients=False)      # lost answers: the coordinator's view


@pytest.mark.parametrize("seed", range(20))
def test_no_task_is_ever_active_on_two_members_with_warmups(seed: int):
    """kcoord's warm-ups (warmup.py) keep a moving task on its holder while its new owner warms
    it: still no task on two members, no process holding a task twice, every task active once."""
    world = World(seed, lose=0, warmups=True)
    world.run()
    World(seed, lose=0.15, warmups=True).run(clients=False)
    assert world.warmed, "no warm-up was ever handed out"


@pytest.mark.parametrize("seed", range(10))
def test_no_task_is_ever_active_on_two_members_with_zone_aware_standbys(seed: int):
    """kcoord's zone-aware standbys (client_tags.py) change where standbys go, never the rules:
    no task on two members, no process holding a task twice, every task active once; and once
    settled, a stateful task's copies are in distinct zones wherever the target had the zones."""
    world = World(seed, lose=0, zones=True)
    world.run()
    World(seed, lose=0.15, zones=True).run(clients=False)
    group = world.d.group()
    zone = {m.member_id: int(m.process_id[1:]) % 3 for m in group.members.values()}
    zones = len(set(zone.values()))
    replicas = world.d.config.streams_num_standby_replicas
    for t in sorted(ALL):
        copies = [zone[m] for m, a in group.target.items() if t in a.active | a.standby]
        if t[0] == "0" and zones > replicas:
            assert len(copies) == 1 + replicas and len(set(copies)) == len(copies), (t, copies)


@pytest.mark.parametrize("seed", range(15))
def test_lost_answers_never_make_the_coordinator_hold_a_task_twice(seed: int):
    """With failed heartbeats the coordinator's own view still never holds an active task on
    two members nor a task twice on one process. (What clients run is not checked here: see
    the next test for the one case Kafka's protocol leaves open.)"""
    World(seed, lose=0.15).run(clients=False)


# ---------------------------------------------------------------------- one process, two members

def _driver():
    return Driver(READY, streams_initial_rebalance_delay_ms=0, streams_assignment_interval_ms=0)


def _tasks(a):
    return a.tasks() or set()


def test_an_active_task_moves_between_two_members_of_one_process_only_once_revoked():
    """Kafka's `isUnreleasedTask` for an active task: any current owner blocks it, whatever
    its process (two stream threads of one instance hand a task over like two instances)."""
    d = _driver()
    a = d.hb(_join("t1", "p"))
    assert _tasks(a) == ALL
    b = d.hb(_join("t2", "p"))                            # same process, half of the tasks as target
    assert _tasks(b) == set() and d.group().members["t2"].state.name == "UNRELEASED_TASKS"
    a = d.hb(beat("t1", a.member_epoch, (ALL, set(), set())))
    kept = _tasks(a)
    assert d.group().members["t1"].state.name == "UNREVOKED_TASKS" and len(kept) == len(ALL) // 2
    b = d.hb(beat("t2", b.member_epoch, (set(), set(), set())))
    assert not _tasks(b)                                  # t1 has not confirmed yet
    d.hb(beat("t1", a.member_epoch, (kept, set(), set())))
    b = d.hb(beat("t2", b.member_epoch, (set(), set(), set())))
    assert _tasks(b) == ALL - kept


@pytest.mark.parametrize(("kind", "holders", "given"), [
    # an active task: any owner blocks it; so does the member's process holding it otherwise
    ("active", Holders({T: "other"}, {}, {}), False),
    ("active", Holders({T: "p"}, {}, {}), False),
    ("active", Holders({}, {T: {"p"}}, {}), False),
    ("active", Holders({}, {}, {T: {"p"}}), False),
    ("active", Holders({}, {T: {"other"}}, {}), True),
    # a standby or warm-up task: only the member's process holding it, in any role, blocks it
    ("standby", Holders({T: "p"}, {}, {}), False),
    ("standby", Holders({}, {T: {"p"}}, {}), False),
    ("standby", Holders({}, {}, {T: {"p"}}), False),
    ("standby", Holders({T: "other"}, {T: {"other"}}, {}), True),
    ("warmup", Holders({}, {T: {"p"}}, {}), False),
    ("warmup", Holders({T: "other"}, {}, {}), True),
])
def test_a_task_is_given_only_once_released_by_kafkas_rules(kind, holders, given):
    """Kafka's `isUnreleasedTask` predicates of streams `CurrentAssignmentBuilder`, keyed by
    process: what another member of the same process holds counts as held."""
    member = StreamsMember("m", member_epoch=3, process_id="p")
    target = Tasks(**{kind: frozenset({T})})
    after = reconcile(member, 4, target, None, holders)
    assert after.member_epoch == 4
    assert (getattr(after.assigned, kind) == {T}) is given
    assert after.state is (MemberState.STABLE if given else MemberState.UNRELEASED_TASKS)


# ---------------------------------------------------------------------- stale reports

def test_a_report_from_before_the_latest_assignment_does_not_confirm_a_revocation():
    """A Streams client reports its last *reconciled* assignment, in full on the first heartbeat
    after its join and after any failed heartbeat (Kafka 4.4's StreamsGroupHeartbeatRequestManager:
    `heartbeatState.reset()`). While it still reconciles an assignment that gave it task T, that
    report lacks T; Kafka's rule (pending tasks are revoked once the report lists none of them)
    would let T go to another member while the client is about to start it. kcoord also wants
    the kept tasks in the report, which a report from before that assignment lacks."""
    d = _driver()
    a = d.hb(_join("a", "pa"))
    given = _tasks(a)                                     # a starts reconciling every task
    assert given == ALL
    b = d.hb(_join("b", "pb"))                            # b's target: half of a's tasks
    a = d.hb(beat("a", a.member_epoch, (set(), set(), set())))   # reconciled so far: nothing
    assert d.group().members["a"].state is MemberState.UNREVOKED_TASKS
    kept = _tasks(a)
    moved = given - kept
    d.hb(beat("a", a.member_epoch, (set(), set(), set())))       # the same, after a failed heartbeat
    assert d.group().members["a"].state is MemberState.UNREVOKED_TASKS
    b = d.hb(beat("b", b.member_epoch, (set(), set(), set())))
    assert not _tasks(b)                                  # nothing moves yet
    d.hb(beat("a", a.member_epoch, (given, set(), set())))       # done with `given`: still T
    d.hb(beat("a", a.member_epoch, (kept, set(), set())))        # done with `kept`: revoked
    assert d.group().members["a"].state is MemberState.STABLE
    b = d.hb(beat("b", b.member_epoch, (set(), set(), set())))
    assert _tasks(b) == moved


def test_a_stale_report_the_protocol_cannot_tell_apart_confirms_a_revocation():
    """The case left open, with Kafka's coordinator as with kcoord: the assignment a client is
    reconciling added only tasks that are revoked again, and after a failed heartbeat the
    client reports its assignment from before it: every kept task listed, none of the revoked
    ones, exactly what a report from after the revocation says. The tasks go to another member
    while the first may still start them; kcoord answers its report of them with its
    assignment at once (tasks are sent when the report differs), so it drops them soon."""
    d = _driver()
    a = d.hb(_join("a", "pa"))
    everything = _tasks(a)
    a = d.hb(beat("a", a.member_epoch, (everything, set(), set())))
    b = d.hb(_join("b", "pb"))
    a = d.hb(beat("a", a.member_epoch, None))            # told to keep half
    kept = _tasks(a)
    assert d.group().members["a"].state is MemberState.UNREVOKED_TASKS
    d.hb(beat("a", a.member_epoch, (kept, set(), set())))         # after, or from before: the same
    assert d.group().members["a"].state is MemberState.STABLE
    b = d.hb(beat("b", b.member_epoch, (set(), set(), set())))
    assert _tasks(b) == everything - kept
    late = d.hb(beat("a", d.group().members["a"].member_epoch, (everything, set(), set())))
    assert _tasks(late) == kept                           # if it did start them: told to drop them
