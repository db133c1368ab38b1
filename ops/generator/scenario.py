"""The generator's simulation: many groups of both protocols living side by side on the
partitions of an offsets topic, written as a Kafka coordinator writes them.

Every simulated tick (default 5 s) each member commits the partitions it owns (one
OffsetCommit write per member); now and then members join and leave (rebalances),
groups convert classic -> consumer -> classic (full upgrade/downgrade cycles),
transactional producers commit offsets inside transactions that end in COMMIT or
ABORT markers, short-lived groups empty out and are deleted (tombstones), offsets
expire, and records of types this coordinator does not know (share and streams
groups, a type from the future) appear, as they would after a downgrade (KIP-915).
"""
from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from coordinator.group.hashing import partition_for
from ops.generator.groups import (
    ClassicSim,
    ConsumerSim,
    GroupSim,
    Member,
    Rec,
    Topic,
    downgrade,
    upgrade,
)
from records import ZERO_UUID, OffsetCommitKey, OffsetCommitValue, encode_key, encode_value
from records.batch import COMPRESSION_NONE, ControlMarker, build_batch, build_control_batch

TOPIC_WORDS = ["orders", "payments", "clicks", "inventory", "shipments", "audit", "users",
               "sessions", "invoices", "alerts", "metrics", "refunds"]
APPS = ["billing", "search", "fraud", "analytics", "mailer", "warehouse", "ledger", "notify"]
# Keys of record types this coordinator does not know: share groups (10, 11), the streams
# partition metadata KIP-1101 removed (18), and one from the future (42). Each: (type, has member id).
UNKNOWN_TYPES = [(11, False), (10, True), (18, False), (42, False)]


@dataclass
class GeneratorSpec:
    partitions: int = 4                  # offsets topic partitions
    groups: int = 40
    records: int = 20_000                # stop after about this many records
    topics: int = 6
    topic_partitions: int = 6
    seed: int = 7
    start_ms: int = 1_767_225_600_000    # 2026-01-01T00:00:00Z
    tick_ms: int = 5_000
    consumer_fraction: float = 0.35
    transactional_fraction: float = 0.1
    cycle_fraction: float = 0.15         # groups doing classic <-> consumer cycles
    ephemeral_fraction: float = 0.1      # groups that empty out and are deleted
    unknown_types: bool = True
    compression: int = COMPRESSION_NONE
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)   # e.g. ids of a real cluster
    topic_names: list[str] = field(default_factory=list)
    cycle_ticks: int = 4                 # ticks between the phases of a conversion cycle
    abort_fraction: float = 0.25


@dataclass
class GroupPlan:
    sim: GroupSim
    role: str                            # classic | consumer | txn | cycle | ephemeral
    partition: int
    phase: int = 0
    next_phase_tick: int = 0
    producer_ids: dict[str, int] = field(default_factory=dict)
    pending_txn: dict[int, int] = field(default_factory=dict)   # producer id -> tick to end it


Sink = Callable[[int, bytes, int], None]   # (partition, batch bytes, records in it)


class Scenario:
    def __init__(self, spec: GeneratorSpec, sink: Sink) -> None:
        self.spec = spec
        self.rng = random.Random(spec.seed)
        self.sink = sink
        self.next_offset = [0] * spec.partitions
        self.records = 0
        self.now = spec.start_ms
        self.tick = 0
        self.topics = self._topics()
        self.plans = self._plans()
        self._member_seq = 0
        self._next_pid = 4000
        self._offsets: dict[tuple, int] = {}
        self._keys: dict[tuple, bytes] = {}

    # -------------------------------------------------------------- set-up
    def _topics(self) -> list[Topic]:
        names = self.spec.topic_names or [
            f"{TOPIC_WORDS[i % len(TOPIC_WORDS)]}{'' if i < len(TOPIC_WORDS) else i}"
            for i in range(self.spec.topics)]
        out = []
        for name in names:
            tid = self.spec.topic_ids.get(name) or uuid.uuid5(uuid.NAMESPACE_URL, f"kcoord-gen/{name}")
            out.append(Topic(name, tid, self.rng.randint(max(1, self.spec.topic_partitions // 2),
                                                         self.spec.topic_partitions)))
        return out

    def _plans(self) -> list[GroupPlan]:
        s, plans = self.spec, []
        cuts = [("cycle", s.cycle_fraction), ("txn", s.transactional_fraction),
                ("ephemeral", s.ephemeral_fraction), ("consumer", s.consumer_fraction)]
        for i in range(s.groups):
            x, role = self.rng.random(), "classic"
            for name, share in cuts:
                if x < share:
                    role = name
                    break
                x -= share
            app = APPS[i % len(APPS)]
            gid = f"{app}-{role}-{i}"
            topics = self.rng.sample(self.topics, k=min(len(self.topics), self.rng.randint(1, 2)))
            if role == "consumer" or (role == "ephemeral" and self.rng.random() < 0.5):
                regex = f"{topics[0].name}.*" if self.rng.random() < 0.15 else None
                sim: GroupSim = ConsumerSim(gid, [t for t in self.topics if regex and
                                                  t.name.startswith(topics[0].name)] or topics,
                                            self.rng.choice(["uniform", "range"]),
                                            legacy_partition_metadata=self.rng.random() < 0.3,
                                            regex=regex)
            else:
                sim = ClassicSim(gid, topics, self.rng.choice(["range", "cooperative-sticky",
                                                               "roundrobin"]))
            plans.append(GroupPlan(sim, role, partition_for(gid, s.partitions),
                                   next_phase_tick=self.rng.randint(0, 3)))
        return plans

    def _member(self, gid: str, classic: bool = False) -> Member:
        self._member_seq += 1
        n = self._member_seq
        client = f"{gid}-client-{n}"
        mid = f"{client}-{uuid.UUID(int=self.rng.getrandbits(128))}" if classic else \
            str(uuid.UUID(int=self.rng.getrandbits(128)))
        return Member(mid, client, f"/10.0.{n % 250}.{n % 200 + 1}",
                      rack_id=f"rack-{n % 3}" if self.rng.random() < 0.3 else None)

    # -------------------------------------------------------------- output
    def write(self, partition: int, records: list, *, producer_id: int = -1,
              transactional: bool = False) -> None:
        if not records:
            return
        pairs = [r if isinstance(r, tuple) else (encode_key(r.key), encode_value(r.value, r.value_version))
                 for r in records]
        off = self.next_offset[partition]
        self.sink(partition, build_batch(pairs, base_offset=off, timestamp_ms=self.now,
                                         compression=self.spec.compression, producer_id=producer_id,
                                         producer_epoch=0 if producer_id >= 0 else -1,
                                         base_sequence=0 if producer_id >= 0 else -1,
                                         transactional=transactional), len(pairs))
        self.next_offset[partition] = off + len(pairs)
        self.records += len(pairs)

    def marker(self, partition: int, producer_id: int, committed: bool) -> None:
        off = self.next_offset[partition]
        self.sink(partition, build_control_batch(
            ControlMarker.COMMIT if committed else ControlMarker.ABORT, base_offset=off,
            timestamp_ms=self.now, producer_id=producer_id, producer_epoch=0), 1)
        self.next_offset[partition] = off + 1
        self.records += 1

    def commits(self, plan: GroupPlan, m: Member) -> list[tuple[bytes, bytes]]:
        gid, out = plan.sim.group_id, []
        # KIP-848 consumers (Java >= 4.1) commit by topic id (OffsetCommit v10): the value
        # then carries the topic id; classic clients commit by name.
        by_id = isinstance(plan.sim, ConsumerSim) and not m.is_classic
        for t, ps in sorted(m.assigned.items(), key=lambda kv: kv[0].name):
            for p in sorted(ps):
                k = (gid, t.name, p)
                key = self._keys.get(k)
                if key is None:
                    key = self._keys[k] = encode_key(OffsetCommitKey(gid, t.name, p))
                offset = self._offsets.get(k, self.rng.randint(0, 10_000)) + self.rng.randint(1, 500)
                self._offsets[k] = offset
                roll = self.rng.random()
                if roll < 0.02:     # an older client's retention time: version 1
                    value = encode_value(OffsetCommitValue(offset, -1, "", self.now,
                                                           self.now + 604_800_000), 1)
                elif roll < 0.04:   # metadata, and a tagged field from a newer writer (KIP-915)
                    value = encode_value(OffsetCommitValue(
                        offset, 3, f"host={m.client_host}", self.now, topic_id=t.topic_id,
                        unknown_tagged_fields=((9, b"\x01future"),)), 4)
                else:
                    value = encode_value(OffsetCommitValue(
                        offset, 3, "", self.now, topic_id=t.topic_id if by_id else ZERO_UUID), 4)
                out.append((key, value))
        return out

    def all_commits(self, plan: GroupPlan) -> None:
        for m in sorted(plan.sim.members.values(), key=lambda m: m.member_id):
            pairs = self.commits(plan, m)
            if not pairs:
                continue
            if plan.role != "txn":
                self.write(plan.partition, pairs)
                continue
            pid = plan.producer_ids.get(m.member_id)
            if pid is None:
                self._next_pid += 1
                pid = plan.producer_ids[m.member_id] = self._next_pid
            if pid in plan.pending_txn:   # one transaction at a time per producer
                continue
            self.write(plan.partition, pairs, producer_id=pid, transactional=True)
            plan.pending_txn[pid] = self.tick + self.rng.randint(0, 2)

    # ------------------------------------------------------------- the tick
    def run(self) -> None:
        while self.records < self.spec.records:
            self.step()
        self.finish()

    def step(self) -> None:
        for plan in self.plans:
            if plan.sim.deleted:
                continue
            if self.tick >= plan.next_phase_tick:
                getattr(self, f"_{plan.role}")(plan)
            elif plan.role in ("classic", "consumer", "txn") and self.rng.random() < 0.02:
                self._churn(plan)
            self.all_commits(plan)
            self._end_transactions(plan)
        if self.spec.unknown_types and self.rng.random() < 0.3:
            self._unknown_records()
        self.tick += 1
        self.now += self.spec.tick_ms

    def finish(self) -> None:
        """Close every open transaction, so the log ends with no pending offsets."""
        for plan in self.plans:
            for pid in sorted(plan.pending_txn):
                self.marker(plan.partition, pid, self.rng.random() >= self.spec.abort_fraction)
            plan.pending_txn.clear()

    def _end_transactions(self, plan: GroupPlan) -> None:
        for pid, due in sorted(plan.pending_txn.items()):
            if due <= self.tick:
                self.marker(plan.partition, pid, self.rng.random() >= self.spec.abort_fraction)
                del plan.pending_txn[pid]

    # ----------------------------------------------------------- membership
    def _join(self, plan: GroupPlan, m: Member, prefix: list[Rec] = ()) -> None:
        sim = plan.sim
        if isinstance(sim, ConsumerSim):
            self.write(plan.partition, list(prefix) + sim.join(m, self.now))
            for w in sim.reconcile():
                self.write(plan.partition, w)
        else:
            sim.members[m.member_id] = m
            self.write(plan.partition, list(prefix) + sim.rebalance(self.now))

    def _leave(self, plan: GroupPlan, member_id: str) -> None:
        sim = plan.sim
        if isinstance(sim, ConsumerSim):
            self.write(plan.partition, sim.leave(member_id, self.now))
            for w in sim.reconcile():
                self.write(plan.partition, w)
        else:
            sim.members.pop(member_id)
            self.write(plan.partition, sim.rebalance(self.now))

    def _start(self, plan: GroupPlan, n: int) -> None:
        classic = isinstance(plan.sim, ClassicSim)
        if classic:   # one rebalance admits all initial members
            for _ in range(n):
                m = self._member(plan.sim.group_id, classic=True)
                plan.sim.members[m.member_id] = m
            self.write(plan.partition, plan.sim.rebalance(self.now))
        else:
            for _ in range(n):
                self._join(plan, self._member(plan.sim.group_id))

    def _churn(self, plan: GroupPlan) -> None:
        members = plan.sim.members
        if len(members) > 1 and self.rng.random() < 0.5:
            self._leave(plan, self.rng.choice(sorted(members)))
        elif len(members) < 6:
            self._join(plan, self._member(plan.sim.group_id, isinstance(plan.sim, ClassicSim)))

    def _later(self, plan: GroupPlan, ticks: int) -> None:
        plan.phase += 1
        plan.next_phase_tick = self.tick + ticks

    # ------------------------------------------------------------- roles
    def _classic(self, plan: GroupPlan) -> None:
        self._start(plan, self.rng.randint(1, 4))
        plan.next_phase_tick = 1 << 62

    _consumer = _classic
    _txn = _classic

    def _ephemeral(self, plan: GroupPlan) -> None:
        sim = plan.sim
        if plan.phase == 0:
            self._start(plan, self.rng.randint(1, 2))
            self._later(plan, self.rng.randint(2, 6))
        elif plan.phase == 1:       # everyone leaves: the group is empty
            for mid in sorted(sim.members):
                self._leave(plan, mid)
            self._later(plan, self.rng.randint(1, 3))
        else:                       # DeleteGroups: offset tombstones, then the group's
            gid = sim.group_id
            tombs = [(self._keys[k], None) for k in sorted(self._keys) if k[0] == gid]
            self.write(plan.partition, tombs + [(encode_key(r.key), None) for r in sim.delete()])
            for k in [k for k in self._keys if k[0] == gid]:
                del self._keys[k]

    def _cycle(self, plan: GroupPlan) -> None:
        """classic (2 members) -> upgrade by a joining consumer member -> a second consumer
        member -> consumer members leave -> the last one's leave downgrades -> classic
        rebalance -> upgrade again ..."""
        sim, phase = plan.sim, plan.phase % 5
        if plan.phase == 0:
            self._start(plan, 2)
        elif phase == 1 and isinstance(sim, ClassicSim) and sim.members:
            plan.sim, records = upgrade(sim, self.now)
            self._join(plan, self._member(sim.group_id), prefix=records)
        elif phase == 2 and isinstance(sim, ConsumerSim):
            self._join(plan, self._member(sim.group_id))
        elif phase == 3 and isinstance(sim, ConsumerSim):
            consumers = sorted(mid for mid, m in sim.members.items() if not m.is_classic)
            if len(consumers) > 1:
                self._leave(plan, consumers[0])
        elif phase == 4 and isinstance(sim, ConsumerSim):
            consumers = sorted(mid for mid, m in sim.members.items() if not m.is_classic)
            if len(consumers) == 1 and len(sim.members) > 1:
                plan.sim, records = downgrade(sim, consumers[0], self.now)
                self.write(plan.partition, records)
        elif phase == 0 and isinstance(sim, ClassicSim):
            # Kafka prepares a rebalance right after a downgrade (trigger A, §5.3).
            self.write(plan.partition, sim.rebalance(self.now))
        self._later(plan, self.spec.cycle_ticks + self.rng.randint(0, self.spec.cycle_ticks))

    # ------------------------------------------------------- unknown types
    def _unknown_records(self) -> None:
        rtype, with_member = self.rng.choice(UNKNOWN_TYPES)
        gid = f"{'share' if rtype in (10, 11) else 'streams' if rtype == 18 else 'future'}-app-" \
              f"{self.rng.randint(0, 5)}"
        key = rtype.to_bytes(2, "big") + _kstring(gid)
        if with_member:
            key += _kstring(f"member-{self.rng.randint(0, 3)}")
        # Value: version 0 of a flexible struct (an int32 epoch and an empty tag section);
        # sometimes a tombstone, as a newer coordinator deletes its own records.
        value = None if self.rng.random() < 0.2 else \
            b"\x00\x00" + self.rng.randint(1, 50).to_bytes(4, "big") + b"\x00"
        self.write(partition_for(gid, self.spec.partitions), [(key, value)])


def _kstring(s: str) -> bytes:
    b = s.encode()
    return len(b).to_bytes(2, "big") + b
