"""kcoord's adaptive policy hands a member waiting for unreleased tasks the released ones
together, not one holder's at a time as each acknowledges (Kafka's `CurrentAssignmentBuilder`
gives each task at the member's first heartbeat after it is free).

Why: a Streams client reconciles one assignment at a time on its stream thread. Handed a
holder's task or two, it creates and initializes them (the first RocksDB store of a JVM
takes 0.2 to 0.5 s to open) before it even looks at the next answer. In the benchmark's join (an 11th
instance taking one task from each of 8 holders, docs/measurements/streams-rebalance.md),
kcoord's 100 ms interval handed the new member its 8 tasks in five answers, and the
client saw the whole set 0.75 to 1.0 s after its first heartbeat, against 0.59 to 0.91 s on
Kafka 4.4 tuned, whose 500 ms interval mostly brought it back once every holder was done;
with this, in one answer, seen 0.61 to 0.79 s after. On the simulated clock it gains with
slow client callbacks (as real ones are) and costs some tens of ms with fast ones (the
measurements page has both).

Rules:
- only under the adaptive heartbeat policy (Kafka's fixed one keeps Kafka's behaviour) and
  without the quiet hold's trickle cap (which decides what a member is handed itself);
- a member that would be handed newly released active tasks while other active tasks of its
  target are still held keeps what it had (its answer lists no new tasks) when every one of
  those still held is pending revocation at its holder, and held by nobody as an assigned
  task: each holder was told, so each release waits only for an acknowledgement;
- bounded: for at most the stable interval from the first answer that held tasks back; after
  that each answer hands what is free, as Kafka's does. A holder not told yet ends it too;
- the member held back is told the short interval (membership.release_due_ms: every holder
  was told), so it is back soon after the last acknowledgement.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..heartbeat_interval import adaptive, members_in_process, stable_ms
from .model import MemberState, Soft, StreamsMember, StreamsSettings, Task, Tasks


def hold_back_cap(shard: Any, soft: Soft, settings: StreamsSettings, before: StreamsMember, probe: StreamsMember,
                  target: Tasks, others: Iterable[StreamsMember], now_ms: int) -> int | None:
    """The cap on active tasks (reconciliation.reconcile's) that holds ``probe``'s newly
    released tasks back, or None to hand them. ``before``: the member before this heartbeat;
    ``probe``: what reconciliation would make of it; ``others``: the group's other members."""
    mid = probe.member_id
    if not adaptive(shard.config) or probe.state is not MemberState.UNRELEASED_TASKS:
        soft.held_back_since.pop(mid, None)
        return None
    kept = before.assigned.active & target.active
    if probe.assigned.active <= kept:
        return None               # nothing new to hand: nothing to hold back
    still_held = target.active - probe.assigned.active
    told: set[Task] = set()
    for m in others:
        if not still_held.isdisjoint(m.assigned.active):
            soft.held_back_since.pop(mid, None)
            return None           # a holder not told yet: its release is a heartbeat away at least
        told |= m.pending_revocation.active & still_held
    if told != still_held:        # held in another role (a standby here): not a revocation away
        soft.held_back_since.pop(mid, None)
        return None
    since = soft.held_back_since.setdefault(mid, now_ms)
    bound = stable_ms(shard.config, members_in_process(shard), settings.session_timeout_ms, settings.heartbeat_floor_ms)
    if now_ms - since >= bound:
        return None
    return len(kept)
