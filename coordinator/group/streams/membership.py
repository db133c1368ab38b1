"""What the heartbeat and the timers share: the shard's soft state of a group, the configured
topology, the target assignment, a member's removal, and the timers' keys.

Rules:
- timers are one kind, `streams`, whose keys name what is due: ("streams", "session", group,
  member), ("streams", "rebalance", group, member) with the epoch the member had to leave as
  payload, ("streams", "assignment", group);
- a member leaves (or is fenced) by the tombstones of its current assignment, its target and
  its metadata, and a group epoch bump (Kafka's `removeStreamsMember` + `bumpGroupEpoch`);
- the target is computed by the built-in sticky assignor over the configured topology's tasks,
  given the members' reported task offsets (offsets.py), which rank its standby candidates;
  a topology that is not ready has no tasks (every member's target is empty);
- pacing: a group's first target waits out the initial rebalance delay after a member joined
  the empty group; later ones wait `assignment_interval_ms` after the last (KIP-1263); a
  held-back target is computed by the assignment timer, as kcoord's consumer groups do, not
  by the next heartbeat after the interval (Kafka's way);
- kcoord's quiet hold (`initial_rebalance_quiet_ms` > 0, off by default): a member joining an
  empty group starts it, each later join moves it on, and the group's first target with tasks
  waits until no member joined for that long, but never past
  max(initial rebalance delay, `initial_rebalance_quiet_max_ms`) after the first join. A
  target without tasks (the topology not ready yet) does not end it, so the first tasks are
  handed out once the joins pause, not as soon as the internal topics appear; the topology's
  validation moves the hold on as a join does (`note_validated`). Soft, like the initial
  delay: a reload computes the target at once (timers.on_loaded);
- its trickle (`initial_rebalance_quiet_tasks` = k > 0, with the hold on): the hold no longer
  holds the target back; targets are computed at every join as without it, but until the hold
  ends (the same quiet period and bound) each member is handed at most k active tasks, the
  first ones of its target in task order (`trickle_cap`, reconciliation.py). The sticky
  assignor starts from what members hold (Kafka's rule, `compute_target`) and keeps it up to
  each member's share, so while every member's share is at least k nothing handed out has to
  move; the rest of each
  target is held by nobody and goes to whoever joins. A capped member is told to come back
  when the hold may end, and gets the rest then. The hold ends sooner once the current target
  is over floor(tasks / k) members (two at least): the trickle is full (`filled`);
- the heartbeat interval: Kafka's fixed `streams.heartbeat.interval.ms` under
  `consumer_heartbeat_policy=fixed`, else kcoord's adaptive one (the kernel's
  heartbeat_interval.py): short while the member waits for tasks to receive, the stable one
  otherwise; a member waiting only for a held-back target is told to come back when the
  target is due (never sooner than the short interval, never later than the stable one). A
  member with tasks to revoke is told the stable one: a Streams client acknowledges its
  revocation with a heartbeat as soon as its callbacks ran, whatever the interval
  (StreamsGroupHeartbeatRequestManager: ACKNOWLEDGING heartbeats before the interval
  expires), so shorter heartbeats before that only repeat its old report;
- at DEBUG (logger `kcoord.streams.membership`) each computed target is one line.
"""
from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from typing import Any

from ..heartbeat_interval import adaptive, members_in_process, pending_ms, stable_ms
from ..image import MetadataImage
from ..result import CancelTimer, ScheduleTimer
from . import records as rh
from .assignor import MemberSpec, assign
from .client_tags import MAX_CLIENT_TAGS
from .model import (
    MemberState,
    Soft,
    StreamsGroup,
    StreamsMember,
    StreamsSettings,
    Tasks,
    Topology,
    settings_of,
)
from .offsets import NONE, of_members
from .topology import ConfiguredTopology, configure, metadata_hash

KIND = "streams"
log = logging.getLogger("kcoord.streams.membership")


def session_key(group_id: str, member_id: str) -> tuple:
    return (KIND, "session", group_id, member_id)


def rebalance_key(group_id: str, member_id: str) -> tuple:
    return (KIND, "rebalance", group_id, member_id)


def assignment_key(group_id: str) -> tuple:
    return (KIND, "assignment", group_id)


def soft_of(shard: Any, group_id: str) -> Soft:
    """The group's soft state on the shard (contribution.attach creates the table). Groups are
    deleted elsewhere (DeleteGroups, expiry, a conversion), so the table drops the entries of
    groups that are gone whenever it has grown past twice the shard's groups: bounded memory."""
    table: dict[str, Soft] = shard.streams_soft
    soft = table.get(group_id)
    if soft is None:
        if len(table) >= 2 * len(shard.groups) + 1_000:
            groups = shard.groups
            for gone in [g for g in table if not isinstance(groups.get(g), StreamsGroup)]:
                del table[gone]
        soft = table[group_id] = Soft()
    return soft


def group_settings(shard: Any, group_id: str) -> StreamsSettings:
    """The group's settings: its per-group configuration (the configs contribution keeps the
    store on the shard; a shard built without it has none), over the coordinator's."""
    store = getattr(shard, "group_configs", None)
    return settings_of(shard.config, None if store is None else store.overrides(group_id))


def configured_for(soft: Soft, topology: Topology, image: MetadataImage) -> ConfiguredTopology:
    """The topology configured against `image`, cached for (topology epoch, metadata hash)."""
    hash_ = metadata_hash(topology, image)
    cached = soft.configured
    if cached is None or cached.topology_epoch != topology.epoch or cached.metadata_hash != hash_:
        cached = soft.configured = configure(topology, image, hash_)
    return cached


def assignment_configs(settings: StreamsSettings) -> tuple[tuple[str, str], ...]:
    """Kafka 4.4's assignment configs of a group (`streamsGroupAssignmentConfigs`, a TreeMap):
    its standby replicas, and its client-tag keys when it has some. A heartbeat that finds them
    changed from the group's last ones (record 17's LastAssignmentConfigs) bumps the group epoch
    and records them ("Assignment configurations changed to {...}. Triggering rebalance.").
    Called on every heartbeat: the pairs are built once per distinct value (_configs)."""
    return _configs(settings.num_standby_replicas, settings.rack_aware_assignment_tags)


@functools.lru_cache(maxsize=256)       # few distinct values: the groups' standby counts and tag keys
def _configs(num_standby_replicas: int, tags: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    configs = [("num.standby.replicas", str(num_standby_replicas))]
    if tags:
        configs.append(("rack.aware.assignment.tags", ",".join(tags)))
    return tuple(configs)


def group_epoch_record(group: StreamsGroup, epoch: int, hash_: int, validated: int,
                       configs: tuple[tuple[str, str], ...] | None = None):
    """Record 17 at `epoch`, keeping the 4.4 description epochs the group has. ``configs``: the
    assignment configs a heartbeat (or kcoord's assignment timer, whose target uses them)
    records, else the group's last ones, as Kafka 4.4 keeps them on every other path (a member's
    removal, a session timer, a warm-up probe)."""
    return rh.group_metadata(group.group_id, epoch, hash_, validated,
                             group.last_assignment_configs if configs is None else configs,
                             group.stored_description_topology_epoch, group.failed_description_topology_epoch)


def removal_records(group: StreamsGroup, member_id: str) -> list:
    gid = group.group_id
    epoch = group.group_epoch + 1
    records = [rh.current_assignment_tombstone(gid, member_id), rh.target_member_tombstone(gid, member_id),
               rh.member_tombstone(gid, member_id),
               group_epoch_record(group, epoch, group.metadata_hash, group.validated_topology_epoch)]
    if set(group.members) <= {member_id}:
        # KAFKA-20442 (Kafka 4.4): with the last member gone, the target is (epoch, 0), so the
        # empty group's assignment epoch follows its group epoch (as StreamsGroupDescribe shows).
        records.append(rh.target_metadata(gid, epoch, 0))
    return records


def endpoint_changed(soft: Soft, before: StreamsMember | None, after: StreamsMember | None) -> None:
    """Move the endpoint-information epoch when the interactive-query map can change: a
    member's endpoint changed (it joined or left with one), or the tasks of a member with an
    endpoint changed (Kafka 4.4 keeps the epoch of a group without endpoints at 0)."""
    old = before.user_endpoint if before is not None else None
    new = after.user_endpoint if after is not None else None
    if old != new or (new is not None and before is not None and after is not None
                      and before.assigned != after.assigned):
        soft.endpoint_epoch += 1


def removal_timers(group_id: str, member_id: str) -> list:
    return [CancelTimer(session_key(group_id, member_id)), CancelTimer(rebalance_key(group_id, member_id))]


def note_join(soft: Soft, group: StreamsGroup, settings: StreamsSettings, now_ms: int) -> None:
    """A member joined ``group`` (as it was before the join): start or move the quiet hold."""
    if settings.initial_rebalance_quiet_ms <= 0:
        return
    if not group.members:
        soft.quiet_hold = (now_ms, now_ms)
    elif soft.quiet_hold is not None:
        soft.quiet_hold = (soft.quiet_hold[0], now_ms)


def note_validated(soft: Soft, now_ms: int) -> None:
    """The topology was validated (its internal topics appeared) while the quiet hold lasts:
    that moves the hold on as a join does. No member can be handed a task before it, and the
    topics' creation can outlast the quiet period: without this a lone first member would be
    handed every task at the validation, just before the next joins make it revoke most of them
    (docs/measurements/streams-rebalance.md, the seventh section: 2 starts of 9)."""
    if soft.quiet_hold is not None:
        soft.quiet_hold = (soft.quiet_hold[0], max(soft.quiet_hold[1], now_ms))


def quiet_until(soft: Soft, settings: StreamsSettings) -> int | None:
    """When the quiet hold lets the first target with tasks be computed, or None without one."""
    if soft.quiet_hold is None:
        return None
    first, last = soft.quiet_hold
    bound = max(settings.initial_rebalance_delay_ms, settings.initial_rebalance_quiet_max_ms)
    return min(last + settings.initial_rebalance_quiet_ms, first + bound)


def end_quiet_hold(soft: Soft, target: dict[str, Tasks], settings: StreamsSettings) -> None:
    """The hold ends with the first target that hands out tasks (not in the trickle: there
    it ends with the quiet period, `trickle_cap`)."""
    if (soft.quiet_hold is not None and settings.initial_rebalance_quiet_tasks <= 0
            and any(not t.is_empty() for t in target.values())):
        soft.quiet_hold = None


def trickle_cap(soft: Soft, settings: StreamsSettings, now_ms: int, ready: bool,
                members: int = 0, tasks: int = 0) -> tuple[int, int] | None:
    """(k, when the hold may end) while the quiet hold's trickle caps what members are handed,
    else None; the hold ends here once its time has come and the topology is ready (before,
    there is nothing to hand, and its validation moves the hold on: `note_validated`), or
    sooner once the trickle is `filled` (``members``: how many the group's current target is
    over, 0 while a newer one is due; ``tasks``: the active tasks of the ready topology)."""
    k = settings.initial_rebalance_quiet_tasks
    if k <= 0:
        return None
    until = quiet_until(soft, settings)
    if until is None:
        return None
    if now_ms >= until or (ready and filled(k, members, tasks)):
        if ready:
            soft.quiet_hold = None
        return None
    return k, until


def filled(k: int, members: int, tasks: int) -> bool:
    """Whether the trickle's hold may end before its quiet period: the current target is over
    at least floor(tasks / k) members, and two at least. Why: up to that many members, every
    member's share of the target is at least k, and the sticky assignor keeps each member's
    first k tasks in task order (its quota never drops below floor(tasks / members)), so no
    join inside the hold revoked anything and handing the rest of the targets now revokes
    nothing either. With one member more, some shares fall below k: that join revokes tasks
    under the hold too, the cap protects nobody from it any longer, and holding the rest back
    only delays the members that wait for it (its last tasks, one quiet period after the last
    join; docs/measurements/streams-rebalance.md, the ninth section). A lone member is no
    evidence that the start is over: it stays capped until the quiet period ends."""
    return members >= 2 and members >= tasks // k


def delay_cause(soft: Soft, settings: StreamsSettings, when: int) -> str:
    if when == soft.initial_delay_until_ms:
        return "initial rebalance delay"
    return "initial rebalance quiet period" if when == quiet_until(soft, settings) else "assignment interval"


def can_compute(group: StreamsGroup, soft: Soft, settings: StreamsSettings, now_ms: int) -> int | None:
    """None if the target may be computed now, else when it may."""
    if soft.initial_delay_until_ms is not None:
        if now_ms < soft.initial_delay_until_ms:
            return soft.initial_delay_until_ms
        soft.initial_delay_until_ms = None
    quiet = quiet_until(soft, settings)
    if quiet is not None and now_ms < quiet and settings.initial_rebalance_quiet_tasks <= 0:
        return quiet
    ts, interval = group.assignment_timestamp_ms, settings.assignment_interval_ms
    if ts == 0 or interval == 0 or now_ms >= ts + interval:
        return None
    return ts + interval


def stateful_subtopologies(topology: Topology | None) -> frozenset[str]:
    """The subtopologies with state (a changelog): only their tasks get standbys or warm-ups."""
    if topology is None:
        return frozenset()
    return frozenset(s.subtopology_id for s in topology.subtopologies if s.state_changelog_topics)


def compute_target(group: StreamsGroup, members: dict[str, StreamsMember], configured: ConfiguredTopology | None,
                   epoch: int, settings: StreamsSettings, now_ms: int,
                   topology: Topology | None = None, soft: Soft | None = None) -> tuple[list, dict[str, Tasks]]:
    """Records 21 (members whose target changed) and 20, and the new target of every member.
    ``topology``: the group's, or the one a first join stores in this same heartbeat; ``soft``:
    the group's soft state, whose members' reported task offsets rank the assignor's standby
    candidates (Kafka's `TargetAssignmentBuilder.withTaskOffsets`). Each member's previous
    tasks are its current assignment, as Kafka 4.4 hands the assignor
    `StreamsGroupMember.assignedTasks()` (not its target, as consumer groups do)."""
    tasks = configured.all_tasks() if configured is not None and configured.is_ready() else []
    reported = {} if soft is None else of_members(soft.task_offsets, members)
    tag_keys = settings.rack_aware_assignment_tags
    specs = {mid: MemberSpec(m.process_id, m.assigned, reported.get(mid, NONE),
                             m.client_tags if tag_keys and len(m.client_tags) <= MAX_CLIENT_TAGS else ())
             for mid, m in members.items()}
    target = assign(specs, tasks, settings.num_standby_replicas, stateful_subtopologies(topology or group.topology),
                    tag_keys)
    records = [rh.target_member(group.group_id, mid, t) for mid, t in sorted(target.items())
               if group.target.get(mid) != t]
    records.append(rh.target_metadata(group.group_id, epoch, now_ms))
    if log.isEnabledFor(logging.DEBUG):
        log.debug("streams group %s at %d: target epoch %d over %d members, %d tasks; active per member %s, "
                  "%d members' targets changed", group.group_id, now_ms, epoch, len(members), len(tasks),
                  sorted((len(t.active) for t in target.values()), reverse=True), len(records) - 1)
    return records, target


def assignment_timer(group_id: str, deadline_ms: int) -> ScheduleTimer:
    return ScheduleTimer(assignment_key(group_id), deadline_ms)


def release_due_ms(soft: Soft, others: Iterable[StreamsMember], missing: Tasks, now_ms: int) -> int:
    """When every holder of the ``missing`` tasks (a member's unreleased ones) has been told to
    revoke them, the latest of: now for a holder already told (its acknowledgement comes as
    soon as its callbacks ran), else when it is due to heartbeat, which tells it. The waiting
    member comes back a short interval after that and is handed what was released together
    (release.py), not once per holder as each is told."""
    due = now_ms
    wanted = missing.active | missing.standby | missing.warmup
    for m in others:
        held = m.assigned.active | m.assigned.standby | m.assigned.warmup
        if wanted.isdisjoint(held | m.pending_revocation.active | m.pending_revocation.standby
                             | m.pending_revocation.warmup):
            continue
        if m.state is not MemberState.UNREVOKED_TASKS or not wanted.isdisjoint(held):
            due = max(due, soft.due_ms.get(m.member_id, now_ms))
    return due


def remember_due(soft: Soft, group: StreamsGroup, member_id: str, due_ms: int) -> None:
    """Record when ``member_id`` is due next; entries of members gone are dropped once the
    table outgrows the group (leaves and fencing drop theirs: `forget_due`)."""
    table = soft.due_ms
    table[member_id] = due_ms
    if len(table) > 2 * len(group.members) + 16:
        for gone in [m for m in table if m not in group.members and m != member_id]:
            del table[gone]


def forget_due(soft: Soft, member_id: str) -> None:
    """A member is gone (left, fenced or replaced): nothing may stay keyed by its id, its
    reported task offsets neither (Kafka's `StreamsGroup.removeMember` drops them)."""
    soft.due_ms.pop(member_id, None)
    soft.held_back_since.pop(member_id, None)
    soft.task_offsets.pop(member_id, None)


def heartbeat_interval_ms(shard: Any, settings: StreamsSettings, member: StreamsMember, target_epoch: int,
                          group_epoch: int, held_until_ms: int | None, now_ms: int,
                          released_at_ms: int | None = None, capped_until_ms: int | None = None) -> int:
    """The interval the member is told (the module's rules). ``held_until_ms``: when the
    target this heartbeat held back may be computed, or None; ``released_at_ms``: for a
    member waiting for unreleased tasks, when its holders were all told (`release_due_ms`);
    ``capped_until_ms``: for a member the quiet hold's trickle capped, when the cap lifts."""
    config = shard.config
    if not adaptive(config):
        return settings.heartbeat_interval_ms
    floor = settings.heartbeat_floor_ms
    stable = stable_ms(config, members_in_process(shard), settings.session_timeout_ms, floor)
    pending = pending_ms(config, floor)
    if member.state is MemberState.UNREVOKED_TASKS:
        return stable      # its acknowledgement comes by itself once its callbacks ran
    if member.state is MemberState.UNRELEASED_TASKS and capped_until_ms is not None:
        return min(max(pending, capped_until_ms - now_ms), stable)
    if member.state is MemberState.UNRELEASED_TASKS and released_at_ms is not None:
        # back one short interval after the holder heard of its revocation, not every short
        # interval before that (each of those would find nothing released)
        return min(max(pending, released_at_ms - now_ms + pending), stable)
    if (member.state is not MemberState.STABLE or member.member_epoch < target_epoch
            or (target_epoch < group_epoch and held_until_ms is None)):
        return pending
    if held_until_ms is None:
        return stable
    return min(max(pending, held_until_ms - now_ms), stable)
