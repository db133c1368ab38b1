"""Incremental reconciliation of one streams member towards its target (Kafka: streams
`CurrentAssignmentBuilder`).

Rules:
- revoke before assign: while the member holds tasks its target no longer has, it keeps only
  the others, the rest are pending revocation (UNREVOKED_TASKS) and its epoch does not move,
  until a heartbeat's report shows the revocation done (`revoked`); then it moves on. As in
  Kafka 4.4, the report that starts a revocation may already show it done (no wait);
- a report shows a revocation done when it lists none of the pending tasks (Kafka's rule) and
  every task the member keeps (kcoord's addition). A Streams client reports its last
  *reconciled* assignment (in full on the first heartbeat after its join and after any failed
  one), so a report lacking a task it was given can come from before the reconciliation in
  progress, which will still start that task; such a report usually lacks the kept tasks of
  that assignment too. Kafka's rule alone lets the task go to another member while the first
  one is about to start it (tests/unit/group/streams/test_task_ownership.py);
- a task is given only once it is free, by Kafka's rules keyed by process (model.Holders):
  an active task while any member holds it active (whatever its process: one process's
  stream threads hand a task over through the same revoke-then-assign), or while the
  member's process holds it as a standby or warm-up; a standby or warm-up task while the
  member's process holds it in any role (one state directory per process). A member with
  unreleased tasks gets the target epoch and the free tasks (UNRELEASED_TASKS), the rest
  come later;
- kcoord's quiet-hold trickle (membership.trickle_cap; off by default) caps the active tasks a
  member holds while it lasts: the kept ones, then new ones in task order up to the cap; the
  rest wait as unreleased tasks do;
- an active task carries the epoch it was given at (KIP-1251): kept tasks keep theirs, and so
  do tasks pending revocation until the member reports them revoked (Kafka 4.4 writes their
  epochs in record 22 and accepts their commits at those epochs meanwhile).
"""
from __future__ import annotations

from dataclasses import replace

from .model import Holders, MemberState, StreamsMember, Task, Tasks


def _overlaps(owned: Tasks, pending: Tasks) -> bool:
    return bool(owned.active & pending.active or owned.standby & pending.standby or owned.warmup & pending.warmup)


def within(tasks: Tasks, owned: Tasks) -> bool:
    """Every task of `tasks` is in `owned` (each kind)."""
    return tasks.active <= owned.active and tasks.standby <= owned.standby and tasks.warmup <= owned.warmup


def revoked(owned: Tasks | None, pending: Tasks, kept: Tasks) -> bool:
    """Whether the member's report shows the revocation of `pending` done: it lists none of
    them (Kafka's rule) and every task the member keeps (kcoord's: a report lacking what the
    member was given and keeps is one from before its latest assignment; see the rules)."""
    return owned is not None and not _overlaps(owned, pending) and within(kept, owned)


def reconcile(member: StreamsMember, target_epoch: int, target: Tasks, owned: Tasks | None,
              holders: Holders, cap: int | None = None) -> StreamsMember:
    """The member's next state. `owned` is what its heartbeat reports (None: not reported);
    `holders` says which processes hold each task now (the group's members before this step);
    `cap`: the most active tasks it may hold (the trickle), None for no cap."""
    if member.state is MemberState.UNREVOKED_TASKS:
        if not revoked(owned, member.pending_revocation, member.assigned):
            return member
    elif member.state is MemberState.STABLE and member.member_epoch == target_epoch:
        return member
    return _next(member, target_epoch, target, owned, holders, cap)


def _next(member: StreamsMember, target_epoch: int, target: Tasks, owned: Tasks | None,
          holders: Holders, cap: int | None) -> StreamsMember:
    held = member.assigned
    revoke = held.minus(target)
    kept = Tasks(held.active & target.active, held.standby & target.standby, held.warmup & target.warmup)
    if not revoke.is_empty() and not revoked(owned, revoke, kept):
        return replace(member, state=MemberState.UNREVOKED_TASKS, assigned=kept, pending_revocation=revoke,
                       active_epochs={t: e for t, e in member.active_epochs.items() if t in held.active})
    mine = member.process_id
    no: set[str] = set()

    def here_in_other_role(t: Task) -> bool:
        return mine in holders.standby.get(t, no) or mine in holders.warmup.get(t, no)

    def active_free(t: Task) -> bool:
        return t not in holders.active and not here_in_other_role(t)

    def other_free(t: Task) -> bool:
        return holders.active.get(t) != mine and not here_in_other_role(t)

    active = {t for t in target.active if t in kept.active or active_free(t)}
    if cap is not None and len(active) > max(cap, len(kept.active)):
        new = sorted(active - kept.active)[:max(0, cap - len(kept.active))]
        active = set(kept.active) | set(new)
    standby = {t for t in target.standby if t in kept.standby or other_free(t)}
    warmup = {t for t in target.warmup if t in kept.warmup or other_free(t)}
    given = Tasks(frozenset(active), frozenset(standby), frozenset(warmup))
    # A kept task keeps the epoch it was given at; a new one (or one given back) gets the target's.
    epochs = {t: member.active_epochs.get(t, target_epoch) if t in kept.active else target_epoch
              for t in given.active}
    state = MemberState.STABLE if given == target else MemberState.UNRELEASED_TASKS
    return replace(member, state=state, member_epoch=target_epoch, previous_member_epoch=member.member_epoch,
                   assigned=given, pending_revocation=Tasks(), active_epochs=epochs)
