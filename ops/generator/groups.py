"""Groups as the generator drives them: each method returns the records of ONE coordinator
write (one batch), in the order Kafka's coordinator writes them.

- Classic groups: a GroupMetadata value (v3) after every completed rebalance, an empty
  one when the last member leaves, a tombstone when the group is deleted.
- Consumer groups (KIP-848): member metadata, group epoch, target assignment, then each
  member's current assignment as it reconciles (revocation first, docs/design/kafka-facts.md §4.3/4.4);
  a leaving member's tombstones in `removeMember` order (docs/design/kafka-facts.md §2.4).
- Conversions (docs/design/kafka-facts.md §5.2/5.3): `upgrade` writes the GroupMetadata tombstone and
  the consumer records of `createConsumerGroupRecords`; `downgrade` writes the
  tombstones of `createGroupTombstoneRecords` and a STABLE GroupMetadata.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

from coordinator.group.hashing import group_metadata_hash, topic_hash
from records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    TopicMetadata,
    TopicPartitions,
)

Rec = CoordinatorRecord
STABLE, UNREVOKED = 0, 1


@dataclass(frozen=True, slots=True)
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: int


def _tomb(key) -> Rec:
    return Rec(key, None, 0)


def subscription_bytes(topics: list[str]) -> bytes:
    return ConsumerProtocolMemberMetadata(0, sorted(topics), b"").encode()


def assignment_bytes(assigned: dict[str, list[int]]) -> bytes:
    return ConsumerProtocolMemberAssignment(0, sorted((t, sorted(ps)) for t, ps in assigned.items()),
                                            b"").encode()


def round_robin(members: list[str], slots: list[tuple[Topic, int]]) -> dict[str, list[tuple[Topic, int]]]:
    out: dict[str, list] = {m: [] for m in members}
    ordered = sorted(members)
    for i, slot in enumerate(slots):
        out[ordered[i % len(ordered)]].append(slot)
    return out


@dataclass
class Member:
    member_id: str
    client_id: str
    client_host: str
    instance_id: str | None = None
    rack_id: str | None = None
    classic_session_timeout: int | None = None   # not None: a classic-protocol member
    epoch: int = 0
    assigned: dict[Topic, dict[int, int]] = field(default_factory=dict)   # topic -> {p: epoch}

    @property
    def is_classic(self) -> bool:
        return self.classic_session_timeout is not None


class GroupSim:
    """State shared by both protocols: identity, subscription, members."""

    def __init__(self, group_id: str, topics: list[Topic], assignor: str) -> None:
        self.group_id = group_id
        self.topics = topics
        self.assignor = assignor
        self.members: dict[str, Member] = {}
        # The classic protocol name (a classic group's assignor, or what classic members of
        # a consumer group announce).
        self.protocol = assignor
        self.deleted = False

    def slots(self) -> list[tuple[Topic, int]]:
        return [(t, p) for t in self.topics for p in range(t.partitions)]

    def owned(self) -> list[tuple[Topic, int]]:
        return sorted(((t, p) for m in self.members.values() for t, ps in m.assigned.items() for p in ps),
                      key=lambda s: (s[0].name, s[1]))


# ====================================================================== classic
class ClassicSim(GroupSim):
    kind = "classic"

    def __init__(self, group_id: str, topics: list[Topic], assignor: str = "range") -> None:
        super().__init__(group_id, topics, assignor)
        self.generation = 0
        self.leader: str | None = None
        self.session_timeout = 45_000

    def rebalance(self, now_ms: int) -> list[Rec]:
        """A completed JoinGroup/SyncGroup round: the GroupMetadata Kafka stores on sync."""
        self.generation += 1
        if not self.members:
            self.leader = None
            return [Rec(GroupMetadataKey(self.group_id), GroupMetadataValue(
                protocol_type="consumer", generation=self.generation, protocol=None, leader=None,
                current_state_timestamp=now_ms, members=()), 3)]
        plan = round_robin(list(self.members), self.slots())
        for mid, m in self.members.items():
            m.epoch = self.generation
            m.assigned = {}
            for t, p in plan[mid]:
                m.assigned.setdefault(t, {})[p] = self.generation
        self.leader = min(self.members)
        return [self.group_metadata(now_ms)]

    def group_metadata(self, now_ms: int) -> Rec:
        names = [t.name for t in self.topics]
        members = tuple(MemberMetadata(
            member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
            client_host=m.client_host, rebalance_timeout=300_000, session_timeout=self.session_timeout,
            subscription=subscription_bytes(names),
            assignment=assignment_bytes({t.name: list(ps) for t, ps in m.assigned.items()}))
            for m in sorted(self.members.values(), key=lambda m: m.member_id))
        return Rec(GroupMetadataKey(self.group_id), GroupMetadataValue(
            protocol_type="consumer", generation=self.generation, protocol=self.protocol,
            leader=self.leader, current_state_timestamp=now_ms, members=members), 3)

    def delete(self) -> list[Rec]:
        self.deleted = True
        return [_tomb(GroupMetadataKey(self.group_id))]


# ===================================================================== consumer
class ConsumerSim(GroupSim):
    kind = "consumer"

    def __init__(self, group_id: str, topics: list[Topic], assignor: str = "uniform",
                 legacy_partition_metadata: bool = False, regex: str | None = None) -> None:
        super().__init__(group_id, topics, assignor)
        self.protocol = "range"
        self.regex = regex
        self.epoch = 1
        self.assignment_epoch = 1
        self.targets: dict[str, dict[Topic, list[int]]] = {}
        self.regexes: dict[str, list[str]] = {}
        # Logs written by Kafka <= 4.0 hold ConsumerGroupPartitionMetadata values.
        self.legacy_partition_metadata = legacy_partition_metadata
        self.has_partition_metadata = False

    # ------------------------------------------------------------- records
    def member_metadata(self, m: Member) -> Rec:
        classic = None
        if m.is_classic:
            names = [t.name for t in self.topics]
            classic = ClassicMemberMetadata(m.classic_session_timeout, (
                ClassicProtocol(self.protocol, subscription_bytes(names)),))
        use_regex = self.regex is not None and not m.is_classic
        return Rec(ConsumerGroupMemberMetadataKey(self.group_id, m.member_id),
                   ConsumerGroupMemberMetadataValue(
                       instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
                       client_host=m.client_host,
                       subscribed_topic_names=() if use_regex
                       else tuple(sorted(t.name for t in self.topics)),
                       subscribed_topic_regex=self.regex if use_regex else None,
                       rebalance_timeout_ms=300_000,
                       server_assignor=None if m.is_classic else self.assignor,
                       classic_member_metadata=classic))

    def epoch_record(self) -> Rec:
        h = group_metadata_hash((t.name, topic_hash(t.topic_id, t.name, t.partitions))
                                for t in self.topics)
        return Rec(ConsumerGroupMetadataKey(self.group_id), ConsumerGroupMetadataValue(self.epoch, h))

    def current_assignment(self, m: Member, previous: int, state: int,
                           pending: dict[Topic, dict[int, int]] | None = None) -> Rec:
        def tps(a: dict[Topic, dict[int, int]]) -> tuple:
            return tuple(TopicPartitions(t.topic_id, tuple(sorted(ps)),
                                         tuple(ps[p] for p in sorted(ps)))
                         for t, ps in sorted(a.items(), key=lambda kv: kv[0].name) if ps)
        return Rec(ConsumerGroupCurrentMemberAssignmentKey(self.group_id, m.member_id),
                   ConsumerGroupCurrentMemberAssignmentValue(m.epoch, previous, state, tps(m.assigned),
                                                             tps(pending or {})))

    def _target_records(self, now_ms: int) -> list[Rec]:
        plan = round_robin(list(self.members), self.slots()) if self.members else {}
        out = []
        for mid, slots in plan.items():
            target: dict[Topic, list[int]] = {}
            for t, p in slots:
                target.setdefault(t, []).append(p)
            if self.targets.get(mid) != target:
                self.targets[mid] = target
                out.append(Rec(ConsumerGroupTargetAssignmentMemberKey(self.group_id, mid),
                               ConsumerGroupTargetAssignmentMemberValue(tuple(
                                   TopicPartitions(t.topic_id, tuple(sorted(ps)), ())
                                   for t, ps in sorted(target.items(), key=lambda kv: kv[0].name)))))
        self.assignment_epoch = self.epoch
        out.append(Rec(ConsumerGroupTargetAssignmentMetadataKey(self.group_id),
                       ConsumerGroupTargetAssignmentMetadataValue(self.epoch, now_ms)))
        return out

    # ----------------------------------------------------------- operations
    def join(self, m: Member, now_ms: int) -> list[Rec]:
        """A heartbeat with member epoch 0: new member, new group epoch, new target."""
        self.members[m.member_id] = m
        out = [self.member_metadata(m)]
        if self.regex is not None and self.regex not in self.regexes and not m.is_classic:
            # Kafka resolves a new regex in the background and stores the result.
            out += self.subscribe_regex(self.regex, [t.name for t in self.topics], now_ms, 1)
        if self.legacy_partition_metadata and not self.has_partition_metadata:
            self.has_partition_metadata = True
            out.append(Rec(ConsumerGroupPartitionMetadataKey(self.group_id),
                           ConsumerGroupPartitionMetadataValue(tuple(
                               TopicMetadata(t.topic_id, t.name, t.partitions) for t in self.topics))))
        self.epoch += 1
        out.append(self.epoch_record())
        out += self._target_records(now_ms)
        return out

    def leave(self, member_id: str, now_ms: int) -> list[Rec]:
        """A heartbeat with epoch -1 (or a session expiry): `removeMember` + new epoch."""
        self.members.pop(member_id)
        self.targets.pop(member_id, None)
        out = [_tomb(ConsumerGroupCurrentMemberAssignmentKey(self.group_id, member_id)),
               _tomb(ConsumerGroupTargetAssignmentMemberKey(self.group_id, member_id)),
               _tomb(ConsumerGroupMemberMetadataKey(self.group_id, member_id))]
        self.epoch += 1
        out.append(self.epoch_record())
        if self.has_partition_metadata:
            # Since 4.1 the next metadata update tombstones the old subscription record.
            self.has_partition_metadata = False
            out.append(_tomb(ConsumerGroupPartitionMetadataKey(self.group_id)))
        out += self._target_records(now_ms)
        return out

    def reconcile(self) -> list[list[Rec]]:
        """Heartbeats that move every member to the target: revocations first (each a write
        of its own), then the members at the new epoch. A partition is only given to a member
        at a higher epoch than its previous owner held it (§4.4)."""
        writes: list[list[Rec]] = []
        for m in sorted(self.members.values(), key=lambda m: m.member_id):
            target = self.targets.get(m.member_id, {})
            keep = {t: {p: e for p, e in ps.items() if p in target.get(t, ())}
                    for t, ps in m.assigned.items()}
            revoked = {t: {p: e for p, e in ps.items() if p not in target.get(t, ())}
                       for t, ps in m.assigned.items()}
            if any(revoked.values()) and not m.is_classic:
                m.assigned = {t: ps for t, ps in keep.items() if ps}
                writes.append([self.current_assignment(m, m.epoch, UNREVOKED, revoked)])
        for m in sorted(self.members.values(), key=lambda m: m.member_id):
            target = self.targets.get(m.member_id, {})
            previous, m.epoch = m.epoch, self.assignment_epoch
            new = {}
            for t, ps in target.items():
                held = m.assigned.get(t, {})
                new[t] = {p: held.get(p, m.epoch) for p in ps}
            m.assigned = new
            writes.append([self.current_assignment(m, previous, STABLE)])
        return writes

    def subscribe_regex(self, regex: str, topics: list[str], now_ms: int, version: int) -> list[Rec]:
        self.regexes[regex] = topics
        return [Rec(ConsumerGroupRegularExpressionKey(self.group_id, regex),
                    ConsumerGroupRegularExpressionValue(tuple(sorted(topics)), version, now_ms))]

    def tombstones(self) -> list[Rec]:
        """`createGroupTombstoneRecords` (docs/design/kafka-facts.md §5.3), in Kafka's order."""
        g, ids = self.group_id, sorted(self.members)
        out = [_tomb(ConsumerGroupCurrentMemberAssignmentKey(g, m)) for m in ids]
        out += [_tomb(ConsumerGroupTargetAssignmentMemberKey(g, m)) for m in ids]
        out.append(_tomb(ConsumerGroupTargetAssignmentMetadataKey(g)))
        out += [_tomb(ConsumerGroupMemberMetadataKey(g, m)) for m in ids]
        out += [_tomb(ConsumerGroupRegularExpressionKey(g, r)) for r in sorted(self.regexes)]
        out.append(_tomb(ConsumerGroupPartitionMetadataKey(g)))
        out.append(_tomb(ConsumerGroupMetadataKey(g)))
        return out

    def delete(self) -> list[Rec]:
        """DeleteGroups on an empty consumer group."""
        self.deleted = True
        return self.tombstones()


# ==================================================================== conversions
def upgrade(classic: ClassicSim, now_ms: int) -> tuple[ConsumerSim, list[Rec]]:
    """Classic -> consumer (§5.2): GroupMetadata tombstone, then per member its metadata (as a
    classic member), the group epoch = generation, targets = current assignments, target
    metadata, and per member its current assignment at epoch = generation."""
    sim = ConsumerSim(classic.group_id, classic.topics, "uniform")
    sim.protocol = classic.protocol
    sim.epoch = sim.assignment_epoch = classic.generation
    out = [_tomb(GroupMetadataKey(classic.group_id))]
    members = sorted(classic.members.values(), key=lambda m: m.member_id)
    for m in members:
        m.classic_session_timeout = classic.session_timeout
        m.epoch = classic.generation
        m.assigned = {t: dict.fromkeys(ps, classic.generation) for t, ps in m.assigned.items()}
        sim.members[m.member_id] = m
        sim.targets[m.member_id] = {t: sorted(ps) for t, ps in m.assigned.items()}
        out.append(sim.member_metadata(m))
    out.append(sim.epoch_record())
    for m in members:
        out.append(Rec(ConsumerGroupTargetAssignmentMemberKey(sim.group_id, m.member_id),
                       ConsumerGroupTargetAssignmentMemberValue(tuple(
                           TopicPartitions(t.topic_id, tuple(sorted(ps)), ())
                           for t, ps in sorted(m.assigned.items(), key=lambda kv: kv[0].name)))))
    out.append(Rec(ConsumerGroupTargetAssignmentMetadataKey(sim.group_id),
                   ConsumerGroupTargetAssignmentMetadataValue(classic.generation, now_ms)))
    for m in members:
        out.append(sim.current_assignment(m, classic.generation, STABLE))
    return sim, out


def downgrade(sim: ConsumerSim, leaving: str, now_ms: int) -> tuple[ClassicSim, list[Rec]]:
    """Consumer -> classic when the last consumer-protocol member `leaving` leaves (§5.3,
    trigger A): the group's tombstones, then a STABLE GroupMetadata at generation = group
    epoch holding the remaining classic members and their target assignments."""
    out = sim.tombstones()
    classic = ClassicSim(sim.group_id, sim.topics, sim.protocol)
    classic.generation = sim.epoch
    sim.members.pop(leaving)
    for mid, m in sorted(sim.members.items()):
        target = sim.targets.get(mid, {})
        m.assigned = {t: dict.fromkeys(ps, sim.epoch) for t, ps in target.items()}
        m.classic_session_timeout = None
        classic.members[mid] = m
    classic.session_timeout = 45_000
    classic.leader = None
    out.append(classic.group_metadata(now_ms))
    return classic, out
