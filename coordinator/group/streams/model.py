"""The streams group's model (Kafka: `StreamsGroup`, `StreamsGroupMember`, `TasksTuple`,
streams `MemberState`): tasks instead of partitions, process ids, a topology.

Rules:
- a task is (subtopology id, partition); a set of tasks is a frozenset of them, and a
  member's tasks are a `Tasks` triple (active, standby, warm-up);
- members are immutable values (`dataclasses.replace`); only replay (replay.py) puts or
  removes them, and only replay sets the group's epochs, topology and target assignment;
- what is not in the log is soft state, kept on the shard by group id (`Soft`, attached by
  contribution.py, so a group that only exists once its first records replay has it too):
  the configured topology (recomputed from the topology and the metadata image), the member
  that asked for the application's shutdown, the initial rebalance delay's deadline, the
  endpoint-information epoch;
- the state is derived (`StreamsGroup.state`), as Kafka's `StreamsGroup.state()` is:
  EMPTY without members, NOT_READY until the topology's topics are validated against the
  metadata (record 17's ValidatedTopologyEpoch equals the topology's epoch), then
  ASSIGNING, RECONCILING or STABLE.
"""
from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

Task = tuple[str, int]
TaskSet = frozenset[Task]
NO_TASKS: TaskSet = frozenset()
NO_EPOCHS: Mapping[Task, int] = MappingProxyType({})


class Tasks(NamedTuple):
    """Kafka's `TasksTuple`."""
    active: TaskSet = NO_TASKS
    standby: TaskSet = NO_TASKS
    warmup: TaskSet = NO_TASKS

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)

    def union(self, other: Tasks) -> Tasks:
        return Tasks(self.active | other.active, self.standby | other.standby, self.warmup | other.warmup)

    def minus(self, other: Tasks) -> Tasks:
        return Tasks(self.active - other.active, self.standby - other.standby, self.warmup - other.warmup)


EMPTY_TASKS = Tasks()


def task_set(pairs: Iterable[tuple[str, Iterable[int]]]) -> TaskSet:
    """(subtopology id, partitions) pairs, as TaskIds carry them, to a set of tasks."""
    return frozenset((sub, p) for sub, parts in pairs for p in parts)


def by_subtopology(tasks: TaskSet) -> list[tuple[str, list[int]]]:
    """A set of tasks as sorted (subtopology id, sorted partitions) pairs, as Kafka writes them."""
    out: dict[str, list[int]] = {}
    for sub, p in tasks:
        out.setdefault(sub, []).append(p)
    return [(sub, sorted(out[sub])) for sub in sorted(out)]


class MemberState(enum.IntEnum):
    """Streams `MemberState`: the byte written in StreamsGroupCurrentMemberAssignmentValue.State.
    Kafka's streams bytes start at 1 (org.apache.kafka.coordinator.group.streams.MemberState:
    STABLE 1, UNREVOKED_TASKS 2, UNRELEASED_TASKS 3), unlike the consumer group's 0-2: a
    log Kafka wrote replays to the same states, and Kafka reads kcoord's log the same way
    (tests/integration/streams/test_streams_log_replay.py)."""
    STABLE = 1
    UNREVOKED_TASKS = 2
    UNRELEASED_TASKS = 3
    UNKNOWN = 127

    @classmethod
    def from_byte(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


class StreamsGroupState(enum.Enum):
    """`StreamsGroup.StreamsGroupState` (the names ListGroups and the describe show)."""
    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class StreamsMember:
    """`StreamsGroupMember`: its metadata (record 19) and its current assignment (record 22)."""
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = -1
    process_id: str = ""
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    assigned: Tasks = EMPTY_TASKS
    pending_revocation: Tasks = EMPTY_TASKS
    # the epoch at which each active task, assigned or pending revocation, was given
    # (KIP-1251's assignment epochs, record 22)
    active_epochs: Mapping[Task, int] = field(default_factory=lambda: NO_EPOCHS)

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """An internal topic of a subtopology (a repartition source or a changelog)."""
    name: str
    partitions: int = 0
    replication_factor: int = 0
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Subtopology:
    """One subtopology of StreamsGroupTopologyValue (copartition groups hold indexes, as there)."""
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    # (source topic indexes, regex indexes, repartition source topic indexes)
    copartition_groups: tuple[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]], ...] = ()

    def copartitioned_topic_sets(self) -> list[set[str]]:
        """The copartition groups as sets of topic names (regexes are not supported yet)."""
        return [{self.source_topics[i] for i in src if 0 <= i < len(self.source_topics)}
                | {self.repartition_source_topics[i].name for i in rep
                   if 0 <= i < len(self.repartition_source_topics)}
                for src, _regex, rep in self.copartition_groups]


@dataclass(frozen=True, slots=True)
class Topology:
    """`StreamsTopology`: the epoch and the subtopologies, in a canonical order (by id), so
    two topologies compare equal exactly when Kafka's would."""
    epoch: int
    subtopologies: tuple[Subtopology, ...]

    @classmethod
    def of(cls, epoch: int, subtopologies: Iterable[Subtopology]) -> Topology:
        return cls(epoch, tuple(sorted(subtopologies, key=lambda s: s.subtopology_id)))

    def by_id(self) -> dict[str, Subtopology]:
        return {s.subtopology_id: s for s in self.subtopologies}

    def readers(self) -> dict[str, str]:
        """Each source and repartition source topic and the subtopology that reads it (Kafka's
        `sourceTopicMap`): a committed offset belongs to the task (that subtopology, the partition)."""
        return {t: s.subtopology_id for s in self.subtopologies
                for t in (*s.source_topics, *(r.name for r in s.repartition_source_topics))}

    def required_topics(self) -> set[str]:
        """Every topic the topology reads or creates (Kafka's `requiredTopics`)."""
        out: set[str] = set()
        for s in self.subtopologies:
            out.update(s.source_topics)
            out.update(t.name for t in s.repartition_source_topics)
            out.update(t.name for t in s.state_changelog_topics)
        return out


@dataclass(slots=True)
class Soft:
    """What the log does not hold (rebuilt from it and the image, or lost on a reload as in Kafka)."""
    configured: Any = None                  # topology.ConfiguredTopology, for (topology epoch, hash)
    shutdown_requester: str | None = None   # Kafka's `shutdownRequestMemberId`
    initial_delay_until_ms: int | None = None   # the first assignment waits until then
    # (first join, last join) while kcoord's quiet hold of the first target with tasks lasts
    # (membership.quiet_until)
    quiet_hold: tuple[int, int] | None = None
    endpoint_epoch: int = 0                 # Kafka's `endpointInformationEpoch` (endpoints.py)
    # when each member is due to heartbeat next (the interval it was last told), for kcoord's
    # adaptive interval of a member waiting for tasks (membership.release_due_ms)
    due_ms: dict[str, int] = field(default_factory=dict)
    # since when each member waiting for unreleased tasks has had released ones held back
    # (release.py: the adaptive policy hands them together, for at most the stable interval)
    held_back_since: dict[str, int] = field(default_factory=dict)
    # each member's last TaskOffsets / TaskEndOffsets (offsets.MemberOffsets; Kafka keeps them
    # in memory only, StreamsGroup.taskOffsets)
    task_offsets: dict[str, Any] = field(default_factory=dict)
    # kcoord's warm-ups (warmup.Plan, off by default): the refined assignment of the current
    # target, which members reconcile against (Kafka 4.4 keeps its refined one in memory too)
    warmups: Any = None


class StreamsGroup:
    """`StreamsGroup`: implements the group interface directly, as in Kafka (not `ModernGroup`)."""

    group_type = "streams"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        # Epoch 1 and target epoch 1 before any record, as Kafka 4.3's modern groups start
        # (KAFKA-20268): the first join is epoch 2, and a member that joins while the first
        # target is held back (the initial rebalance delay) still gets a non-zero epoch.
        self.group_epoch = 1
        self.metadata_hash = 0
        self.validated_topology_epoch = -1
        self.last_assignment_configs: tuple[tuple[str, str], ...] = ()
        self.stored_description_topology_epoch = -1
        self.failed_description_topology_epoch = -1
        self.topology: Topology | None = None
        self.members: dict[str, StreamsMember] = {}
        self.target: dict[str, Tasks] = {}
        self.target_assignment_epoch = 1
        self.assignment_timestamp_ms = 0

    def is_empty(self) -> bool:
        return not self.members

    def is_ready(self) -> bool:
        return self.topology is not None and self.validated_topology_epoch == self.topology.epoch

    def warmup_tasks(self) -> int:
        """The warm-up tasks the members hold, assigned or being revoked (kcoord's warm-ups,
        coordinator/group/streams/warmup.py; 0 once members let go of them after the switch is
        turned off): read at scrape time by coordinator/metrics.py, on another thread, so the
        members are walked as a copy."""
        return sum(len(m.assigned.warmup) + len(m.pending_revocation.warmup) for m in list(self.members.values()))

    def state(self) -> StreamsGroupState:
        if not self.members:
            return StreamsGroupState.EMPTY
        if not self.is_ready():
            return StreamsGroupState.NOT_READY
        if self.group_epoch > self.target_assignment_epoch:
            return StreamsGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.target_assignment_epoch) for m in self.members.values()):
            return StreamsGroupState.RECONCILING
        return StreamsGroupState.STABLE


class Holders(NamedTuple):
    """Who holds each task now, by process (Kafka's `StreamsGroup.currentActiveTaskProcessId`,
    `currentStandbyTaskProcessIds`, `currentWarmupTaskProcessIds`): a task counts as held from
    the moment it is in a member's assignment until the member confirmed its revocation (its
    tasks pending revocation count) or left."""
    active: dict[Task, str]
    standby: dict[Task, set[str]]
    warmup: dict[Task, set[str]]

    @classmethod
    def of(cls, members: Iterable[StreamsMember]) -> Holders:
        active: dict[Task, str] = {}
        standby: dict[Task, set[str]] = {}
        warmup: dict[Task, set[str]] = {}
        for m in members:
            pid = m.process_id
            for t in m.assigned.active:
                active[t] = pid
            for t in m.pending_revocation.active:
                active[t] = pid
            for tasks, table in ((m.assigned.standby, standby), (m.pending_revocation.standby, standby),
                                 (m.assigned.warmup, warmup), (m.pending_revocation.warmup, warmup)):
                for t in tasks:
                    table.setdefault(t, set()).add(pid)
        return cls(active, standby, warmup)


@dataclass(frozen=True, slots=True)
class StreamsSettings:
    """The group's settings, Kafka 4.4's defaults (GroupCoordinatorConfig, GroupConfig);
    `settings_of` reads overrides from the coordinator's configuration."""
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    num_standby_replicas: int = 0
    initial_rebalance_delay_ms: int = 3_000
    assignment_interval_ms: int = 1_000
    acceptable_recovery_lag: int = 10_000
    task_offset_interval_ms: int = 60_000
    assignor_name: str = "sticky"             # Kafka 4.4's first `group.streams.assignors`
    max_size: int = 2**31 - 1                 # `group.streams.max.size` (broker-wide only)
    # kcoord's extension (serve-wide only, no group key): hold a new group's first target with
    # tasks until joins pause for this long (0: off, Kafka's behaviour), at most
    # max(initial_rebalance_delay_ms, initial_rebalance_quiet_max_ms) after the first join
    initial_rebalance_quiet_ms: int = 0
    initial_rebalance_quiet_max_ms: int = 10_000
    # kcoord's extension (serve-wide only): during the quiet hold, targets are computed and each
    # member is handed at most this many active tasks of its target (0: the hold hands out none)
    initial_rebalance_quiet_tasks: int = 0
    # The group's own `streams.heartbeat.interval.ms` when set on the group, else 0: the floor of
    # kcoord's adaptive interval (coordinator/group/heartbeat_interval.py)
    heartbeat_floor_ms: int = 0
    # kcoord's extension (serve-wide only), off by default: warm-up tasks (warmup.py), within
    # the group's `streams.num.warmup.replicas` (Kafka's default 2 does not turn them on)
    warmups_enabled: bool = False
    num_warmup_replicas: int = 2
    # The client-tag keys every member must send (else MISSING_CLIENT_TAGS, as Kafka 4.4), and
    # kcoord's extension, off when empty: the keys the assignor spreads each stateful task's
    # standbys over (zone-aware standbys, client_tags.py; Kafka 4.4's `sticky` ignores them)
    rack_aware_assignment_tags: tuple[str, ...] = ()


# The per-group configuration keys (coordinator/group/configs/keys.py) of the settings.
GROUP_KEYS = {"session_timeout_ms": "streams.session.timeout.ms",
              "heartbeat_interval_ms": "streams.heartbeat.interval.ms",
              "num_standby_replicas": "streams.num.standby.replicas",
              "initial_rebalance_delay_ms": "streams.initial.rebalance.delay.ms",
              "assignment_interval_ms": "streams.assignment.interval.ms",
              "acceptable_recovery_lag": "streams.acceptable.recovery.lag",
              "task_offset_interval_ms": "streams.task.offset.interval.ms",
              "assignor_name": "streams.assignor.name",
              "num_warmup_replicas": "streams.num.warmup.replicas",
              "rack_aware_assignment_tags": "streams.rack.aware.assignment.tags"}


# The settings with no group key: only the coordinator's `streams_*` fields set them.
SERVE_WIDE = ("max_size", "initial_rebalance_quiet_ms", "initial_rebalance_quiet_max_ms",
              "initial_rebalance_quiet_tasks", "warmups_enabled")


def settings_of(config: Any, overrides: Mapping[str, Any] | None = None) -> StreamsSettings:
    """The streams settings: the group's own keys (``overrides``, the parsed per-group
    configuration, coordinator/group/configs/store.py), else the coordinator's `streams_*`
    fields where it has them, else Kafka's defaults."""
    base = StreamsSettings()
    values = {name: getattr(config, f"streams_{name}", getattr(base, name)) for name in (*GROUP_KEYS, *SERVE_WIDE)}
    if overrides:
        values.update((name, overrides[key]) for name, key in GROUP_KEYS.items() if key in overrides)
        values["heartbeat_floor_ms"] = overrides.get(GROUP_KEYS["heartbeat_interval_ms"], 0)
    return StreamsSettings(**values)
