"""The leader's assignment of shards (state-topic partitions) to kcoord instances.

Rules:
- **Balanced:** each instance gets ⌊N/M⌋ or ⌈N/M⌉ of the N shards once moves complete;
  the instances that already hold the most keep the extra ones, so fewer shards move.
- **Sticky:** an instance keeps the shards it reports owning (its metadata's `owned`), up
  to its quota. A shard claimed by two instances (a zombie's stale claim) stays with the
  claim of the newer generation; on a tie, with the smaller instance id.
- **Cooperative** (Kafka's incremental cooperative rebalancing, KIP-429 / Connect's
  KIP-415): a shard taken from an instance is *not* given to another in the same
  generation. Its owner stops serving it, the map shows it as moving (absent from
  `owners`), and the leader asks for a follow-up rebalance (`follow_up`), in which the shard
  is free and placed. So no shard is ever assigned to two instances in one generation,
  and shards that do not move never pause. Safety does not rest on this: writes are
  fenced by producer epochs; this only keeps two owners from answering at once.
- **Holds** (docs/user/cluster.md, the safety argument): a shard that nobody claims in a
  generation where some member is *fresh* (within a session of its first JoinGroup) may
  come from a process that member replaced by static membership (KIP-345: Kafka hands the
  newcomer the old member's place at once, and the old process may still answer until its
  lease runs out): one the leader's previous map gives to a fresh member's instance id, or
  any when the leader has no previous map. Such shards are assigned with `hold`: the new
  owner serves them a membership session later. A claimed shard never moves within a
  generation, and any other unclaimed one was released (revoked, fenced, left) or its
  owner's session expired, which outlasts its lease.
- **One instance id, one member:** a second member with an instance id already present
  gets `error=DUPLICATE_INSTANCE` and no shards (two processes started with the same
  `--instance-id`, as dynamic members: Tansu). The refused member may be the live process
  that served, and it answers until its own SyncGroup answer arrives (Tansu polls a held
  SyncGroup once a second), so the shards it claimed are assigned with `hold` too.
- **Plain serves are watchers:** a member whose metadata has `solo_since_ms` is a plain
  `kcoord serve` (one process, fencing none) that joined only to see a second kcoord on its
  state topic. It gets no shards, is in nobody's map and starts no follow-up. It gets
  `error=NOT_ALONE`, with `endpoints` naming the members it yields to, when the group also
  holds a cluster member, a watcher that serves while it is still a *candidate* (it checks
  the group before serving), or an older watcher of its own kind (by `solo_since_ms`, then
  instance id): so of two plain serves the one started later stops, and a candidate never
  outranks a serving process, whoever joined first.
- **Node ids:** every instance gets a synthetic node id, `NODE_ID_BASE + ordinal`, which
  every instance lists in Metadata and FindCoordinator answers with. An instance keeps the
  one it had; a StatefulSet pod (`name-<n>`) asks for ordinal n; others get the lowest
  free ordinal. So the same node id always means the same instance, the rule clients key
  their connections by (librdkafka keys brokers by node id).
Pure functions of their input: the same join gives the same assignment on any leader.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from .protocol import Assignment, Endpoint, MemberMetadata

NODE_ID_BASE = 1 << 30
DUPLICATE_INSTANCE = 1
NOT_ALONE = 2
_ORDINAL = re.compile(r"-(\d{1,6})$")


@dataclass(frozen=True, slots=True)
class Balance:
    assignments: dict[str, Assignment]     # by member id
    follow_up: bool                          # shards are moving: rebalance again once revoked
    moved: int                               # shards revoked in this generation


def node_ids(members: Mapping[str, MemberMetadata]) -> dict[str, int]:
    """instance id -> synthetic node id (see the module rules)."""
    out: dict[str, int] = {}
    used: set[int] = set()
    by_instance = sorted({m.instance_id: m for m in members.values()}.items())
    for instance, m in by_instance:     # keep a node id already held, first come by instance id
        if m.node_id >= NODE_ID_BASE and m.node_id not in used:
            out[instance] = m.node_id
            used.add(m.node_id)
    for instance, _ in by_instance:     # a pod's ordinal
        match = _ORDINAL.search(instance)
        if instance not in out and match is not None and NODE_ID_BASE + int(match.group(1)) not in used:
            out[instance] = NODE_ID_BASE + int(match.group(1))
            used.add(out[instance])
    ordinal = 0
    for instance, _ in by_instance:
        if instance in out:
            continue
        while NODE_ID_BASE + ordinal in used:
            ordinal += 1
        out[instance] = NODE_ID_BASE + ordinal
        used.add(out[instance])
    return out


def balance(generation: int, n_shards: int, members: Mapping[str, MemberMetadata],
            previous_owners: Mapping[int, str] | None = None) -> Balance:
    """Assign shards 0..n_shards-1 to the members of `generation` (member id -> metadata).
    `previous_owners`: the leader's map of the generation before (shard -> instance id), or
    None when it has none (it just started or lost its membership)."""
    solos = {m: md for m, md in members.items() if md.solo_since_ms > 0}
    result = _balance(generation, n_shards, {m: md for m, md in members.items() if m not in solos},
                      previous_owners)
    for member_id, md in solos.items():
        ahead = {o.instance_id: o.endpoint for m, o in members.items()
                 if m != member_id and _ahead_of(o, m, md, member_id)}
        result.assignments[member_id] = Assignment(generation, frozenset(), {}, ahead, {},
                                                   error=NOT_ALONE if ahead else 0)
    return result


def _ahead_of(other: MemberMetadata, other_id: str, me: MemberMetadata, my_id: str) -> bool:
    """Whether watcher `me` yields to `other` (see the module rules)."""
    if other.solo_since_ms == 0:
        return True                      # a cluster member
    if other.solo_candidate != me.solo_candidate:
        return me.solo_candidate         # the one serving already stays
    return (other.solo_since_ms, other.instance_id, other_id) < (me.solo_since_ms, me.instance_id, my_id)


def _balance(generation: int, n_shards: int, members: Mapping[str, MemberMetadata],
             previous_owners: Mapping[int, str] | None) -> Balance:
    # One member per instance id: the first by member id keeps it.
    by_instance: dict[str, str] = {}
    duplicates: list[str] = []
    for member_id in sorted(members):
        instance = members[member_id].instance_id
        if instance in by_instance:
            duplicates.append(member_id)
        else:
            by_instance[instance] = member_id
    instances = sorted(by_instance)
    meta = {i: members[by_instance[i]] for i in instances}

    # Current owners: the newest claim wins a conflict.
    claim: dict[int, tuple[int, str]] = {}
    for i in instances:
        for shard in meta[i].owned:
            if 0 <= shard < n_shards:
                best = claim.get(shard)
                # Instances come in id order, so on a tie the smaller id keeps it.
                if best is None or meta[i].generation > best[0]:
                    claim[shard] = (meta[i].generation, i)
    owned: dict[str, list[int]] = {i: [] for i in instances}
    for shard, (_, i) in claim.items():
        owned[i].append(shard)

    # Quotas: the instances holding the most get the ⌈N/M⌉ slots.
    quota: dict[str, int] = {}
    if instances:
        base, extra = divmod(n_shards, len(instances))
        for rank, i in enumerate(sorted(instances, key=lambda i: (-len(owned[i]), i))):
            quota[i] = base + (1 if rank < extra else 0)

    kept: dict[str, list[int]] = {}
    revoked: set[int] = set()
    for i in instances:
        mine = sorted(owned[i])
        kept[i] = mine[:quota[i]]
        revoked.update(mine[quota[i]:])
    taken = {s for shards in kept.values() for s in shards}
    free = [s for s in range(n_shards) if s not in taken and s not in revoked]
    for i in sorted(instances, key=lambda i: (len(kept[i]) - quota[i], i)):
        while len(kept[i]) < quota[i] and free:
            kept[i].append(free.pop(0))

    owners = {s: i for i in instances for s in kept[i]}
    endpoints: dict[str, Endpoint] = {i: meta[i].endpoint for i in instances}
    ids = node_ids({by_instance[i]: meta[i] for i in instances})
    # A fresh member may have replaced a live process whose claims are hidden from this join:
    # the shards that process held (by the previous map; all unclaimed ones without a map).
    fresh = {m.instance_id for m in members.values() if m.fresh}
    # A refused duplicate's claims: it may be the process that served them, still answering.
    refused = {s for member_id in duplicates for s in members[member_id].owned}

    def hold(shards: list[int]) -> frozenset[int]:
        if not fresh and not refused:
            return frozenset()
        return frozenset(s for s in shards if s not in claim and (s in refused or fresh and (
            previous_owners is None or previous_owners.get(s) in fresh)))

    out = {by_instance[i]: Assignment(generation, frozenset(kept[i]), owners, endpoints, ids, hold=hold(kept[i]))
           for i in instances}
    for member_id in duplicates:
        out[member_id] = Assignment(generation, frozenset(), owners, endpoints, ids, error=DUPLICATE_INSTANCE)
    # Shards left unplaced (revoked ones, or more quota than free shards after revocations)
    # are placed by the follow-up rebalance.
    return Balance(out, follow_up=bool(revoked) or len(owners) < n_shards and bool(instances), moved=len(revoked))

