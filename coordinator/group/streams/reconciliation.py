"""Incremental reconciliation of one streams member towards its target (Kafka: streams
`CurrentAssignmentBuilder`).

Rules:
- revoke before assign: while the member holds tasks its target no longer has, it keeps only
  the others, the rest are pending revocation (UNREVOKED_TASKS) and its epoch does not move;
  once its heartbeat shows none of them (all three kinds), it moves on;
- a task is given only once it is free: an active task held active by a member of another
  process is unreleased; a standby or warm-up task is unreleased while another member of the
  same process holds it active (one state directory per process). A member with unreleased
  tasks gets the target epoch and the free tasks (UNRELEASED_TASKS), the rest come later;
- an active task carries the epoch it was given at (KIP-1251): kept tasks keep theirs.
"""
from __future__ import annotations

from dataclasses import replace

from .model import MemberState, StreamsMember, Task, Tasks


def _overlaps(owned: Tasks, pending: Tasks) -> bool:
    return bool(owned.active & pending.active or owned.standby & pending.standby or owned.warmup & pending.warmup)


def reconcile(member: StreamsMember, target_epoch: int, target: Tasks, owned: Tasks | None,
              active_owner: dict[Task, str], process_of: dict[str, str]) -> StreamsMember:
    """The member's next state. `owned` is what its heartbeat reports (None: not reported);
    `active_owner` maps each active task held now (assigned or pending revocation) to its
    member, `process_of` each member to its process."""
    if member.state is MemberState.UNREVOKED_TASKS:
        if owned is None or _overlaps(owned, member.pending_revocation):
            return member
    elif member.state is MemberState.STABLE and member.member_epoch == target_epoch:
        return member
    return _next(member, target_epoch, target, active_owner, process_of)


def _next(member: StreamsMember, target_epoch: int, target: Tasks, active_owner: dict[Task, str],
          process_of: dict[str, str]) -> StreamsMember:
    held = member.assigned
    revoke = held.minus(target)
    if not revoke.is_empty():
        kept = Tasks(held.active & target.active, held.standby & target.standby, held.warmup & target.warmup)
        return replace(member, state=MemberState.UNREVOKED_TASKS, assigned=kept, pending_revocation=revoke,
                       active_epochs={t: e for t, e in member.active_epochs.items() if t in kept.active})
    me, my_process = member.member_id, member.process_id

    def active_free(t: Task) -> bool:
        owner = active_owner.get(t)
        return owner is None or owner == me or process_of.get(owner) == my_process

    def other_free(t: Task) -> bool:
        owner = active_owner.get(t)
        return owner is None or owner == me or process_of.get(owner) != my_process

    active = {t for t in target.active if t in held.active or active_free(t)}
    standby = {t for t in target.standby if t in held.standby or other_free(t)}
    warmup = {t for t in target.warmup if t in held.warmup or other_free(t)}
    given = Tasks(frozenset(active), frozenset(standby), frozenset(warmup))
    epochs = {t: member.active_epochs.get(t, target_epoch) for t in given.active}
    state = MemberState.STABLE if given == target else MemberState.UNRELEASED_TASKS
    return replace(member, state=state, member_epoch=target_epoch, previous_member_epoch=member.member_epoch,
                   assigned=given, pending_revocation=Tasks(), active_epochs=epochs)
