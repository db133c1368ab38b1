"""Building the streams group's records from its model, and reading the model back from them
(Kafka: `StreamsCoordinatorRecordHelpers`).

Rules:
- a builder takes model values and returns a `CoordinatorRecord` (record_types.record);
  tasks are written as Kafka writes them: by subtopology id, partitions sorted;
- an active task's assignment epoch is written beside it (AssignmentEpochs, KIP-1251) in the
  current assignment only; standby and warm-up tasks carry none;
- the readers (`*_from`) are what replay.py uses, so a written record reads back to the value
  it was built from (tests/unit/group/streams/test_records.py).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace as _replace
from datetime import timedelta

from records import CoordinatorRecord

from ..kio_util import build
from . import record_types as rt
from .model import (
    MemberState,
    StreamsMember,
    Subtopology,
    Task,
    Tasks,
    TaskSet,
    TopicInfo,
    Topology,
    by_subtopology,
    task_set,
)


def group_metadata(group_id: str, epoch: int, metadata_hash: int, validated_topology_epoch: int,
                   last_assignment_configs: Iterable[tuple[str, str]] = (),
                   stored_description_epoch: int = -1, failed_description_epoch: int = -1) -> CoordinatorRecord:
    """Record 17. The description epochs (Kafka 4.4's tagged fields 2 and 3) are carried over
    from the group as replayed, so a rewrite never drops what Kafka's plugin path set."""
    configs = tuple(build(rt.LastAssignmentConfig, key=k, value=v) for k, v in last_assignment_configs) or None
    return rt.record(rt.StreamsGroupMetadataKey(group_id=group_id), build(rt.StreamsGroupMetadataValue,
        epoch=epoch, metadata_hash=metadata_hash, validated_topology_epoch=validated_topology_epoch,
        last_assignment_configs=configs, stored_description_topology_epoch=stored_description_epoch,
        failed_description_topology_epoch=failed_description_epoch))


def group_tombstone(group_id: str) -> CoordinatorRecord:
    return rt.record(rt.StreamsGroupMetadataKey(group_id=group_id), None)


def member_metadata(group_id: str, m: StreamsMember) -> CoordinatorRecord:
    """Record 19: what the member said of itself."""
    endpoint = None if m.user_endpoint is None else build(rt.Endpoint, host=m.user_endpoint[0], port=m.user_endpoint[1])
    return rt.record(rt.StreamsGroupMemberMetadataKey(group_id=group_id, member_id=m.member_id),
                     build(rt.StreamsGroupMemberMetadataValue,
                         instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
                         client_host=m.client_host, rebalance_timeout=timedelta(milliseconds=m.rebalance_timeout_ms),
                         topology_epoch=m.topology_epoch, process_id=m.process_id, user_endpoint=endpoint,
                         client_tags=tuple(build(rt.KeyValue, key=k, value=v) for k, v in sorted(m.client_tags))))


def member_tombstone(group_id: str, member_id: str) -> CoordinatorRecord:
    return rt.record(rt.StreamsGroupMemberMetadataKey(group_id=group_id, member_id=member_id), None)


def _target_ids(tasks: TaskSet) -> tuple:
    return tuple(build(rt.TargetTaskIds, subtopology_id=s, partitions=tuple(ps)) for s, ps in by_subtopology(tasks))


def target_member(group_id: str, member_id: str, tasks: Tasks) -> CoordinatorRecord:
    """Record 21: the member's target assignment."""
    return rt.record(rt.StreamsGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id),
                     build(rt.StreamsGroupTargetAssignmentMemberValue,
                         active_tasks=_target_ids(tasks.active), standby_tasks=_target_ids(tasks.standby),
                         warmup_tasks=_target_ids(tasks.warmup)))


def target_member_tombstone(group_id: str, member_id: str) -> CoordinatorRecord:
    return rt.record(rt.StreamsGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id), None)


def target_metadata(group_id: str, assignment_epoch: int, timestamp_ms: int) -> CoordinatorRecord:
    """Record 20: the epoch of the target assignment and when it was computed."""
    return rt.record(rt.StreamsGroupTargetAssignmentMetadataKey(group_id=group_id),
                     build(rt.StreamsGroupTargetAssignmentMetadataValue, assignment_epoch=assignment_epoch,
                                                                  assignment_timestamp=timestamp_ms))


def target_metadata_tombstone(group_id: str) -> CoordinatorRecord:
    return rt.record(rt.StreamsGroupTargetAssignmentMetadataKey(group_id=group_id), None)


def _current_ids(tasks: TaskSet, epochs: Mapping[Task, int] | None) -> tuple:
    out = []
    for s, ps in by_subtopology(tasks):
        ep = None if epochs is None else tuple(epochs.get((s, p), -1) for p in ps)
        out.append(build(rt.CurrentTaskIds, subtopology_id=s, partitions=tuple(ps), assignment_epochs=ep))
    return tuple(out)


def current_assignment(group_id: str, m: StreamsMember) -> CoordinatorRecord:
    """Record 22: the member's epochs, state, assigned tasks and tasks pending revocation."""
    a, r = m.assigned, m.pending_revocation
    return rt.record(rt.StreamsGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=m.member_id),
                     build(rt.StreamsGroupCurrentMemberAssignmentValue,
                         member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
                         state=int(m.state),
                         active_tasks=_current_ids(a.active, m.active_epochs),
                         standby_tasks=_current_ids(a.standby, None), warmup_tasks=_current_ids(a.warmup, None),
                         # Kafka 4.4 writes the epochs of active tasks pending revocation too;
                         # a member read from a record without them has none to write.
                         active_tasks_pending_revocation=_current_ids(
                             r.active, m.active_epochs if r.active <= m.active_epochs.keys() else None),
                         standby_tasks_pending_revocation=_current_ids(r.standby, None),
                         warmup_tasks_pending_revocation=_current_ids(r.warmup, None)))


def current_assignment_tombstone(group_id: str, member_id: str) -> CoordinatorRecord:
    return rt.record(rt.StreamsGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member_id), None)


def _topic_info(t: TopicInfo) -> rt.TopologyTopicInfo:
    configs = tuple(build(rt.TopologyTopicConfig, key=k, value=v) for k, v in t.configs)
    return build(rt.TopologyTopicInfo, name=t.name, partitions=t.partitions,
                 replication_factor=t.replication_factor, topic_configs=configs)


def topology(group_id: str, top: Topology) -> CoordinatorRecord:
    """Record 23: the topology, subtopologies by id."""
    subs = tuple(build(rt.TopologySubtopology,
        subtopology_id=s.subtopology_id, source_topics=s.source_topics, source_topic_regex=s.source_topic_regex,
        state_changelog_topics=tuple(_topic_info(t) for t in s.state_changelog_topics),
        repartition_sink_topics=s.repartition_sink_topics,
        repartition_source_topics=tuple(_topic_info(t) for t in s.repartition_source_topics),
        copartition_groups=tuple(build(rt.TopologyCopartitionGroup, source_topics=a, source_topic_regex=b,
                                                             repartition_source_topics=c)
                                 for a, b, c in s.copartition_groups))
        for s in top.subtopologies)
    return rt.record(rt.StreamsGroupTopologyKey(group_id=group_id),
                     build(rt.StreamsGroupTopologyValue, epoch=top.epoch, subtopologies=subs))


def topology_tombstone(group_id: str) -> CoordinatorRecord:
    return rt.record(rt.StreamsGroupTopologyKey(group_id=group_id), None)


# ------------------------------------------------------------------ readers
def topic_info_from(t) -> TopicInfo:
    """A TopicInfo of record 23 or of the heartbeat request (same fields)."""
    return TopicInfo(t.name, int(t.partitions), int(t.replication_factor),
                     tuple((c.key, c.value) for c in t.topic_configs))


def topology_from(value) -> Topology:
    """The topology of record 23, or of a heartbeat request's Topology (same shape)."""
    return Topology.of(value.epoch, (Subtopology(
        subtopology_id=s.subtopology_id, source_topics=tuple(s.source_topics),
        source_topic_regex=tuple(s.source_topic_regex),
        state_changelog_topics=tuple(topic_info_from(t) for t in s.state_changelog_topics),
        repartition_sink_topics=tuple(s.repartition_sink_topics),
        repartition_source_topics=tuple(topic_info_from(t) for t in s.repartition_source_topics),
        copartition_groups=tuple((tuple(c.source_topics), tuple(c.source_topic_regex),
                                  tuple(c.repartition_source_topics)) for c in s.copartition_groups))
        for s in value.subtopologies))


def tasks_from(ids) -> TaskSet:
    return task_set((t.subtopology_id, t.partitions) for t in ids)


def target_from(value) -> Tasks:
    return Tasks(tasks_from(value.active_tasks), tasks_from(value.standby_tasks), tasks_from(value.warmup_tasks))


def apply_member_metadata(m: StreamsMember, value) -> StreamsMember:
    ep = value.user_endpoint
    return _replace(m, instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
                    client_host=value.client_host, rebalance_timeout_ms=_ms(value.rebalance_timeout),
                    topology_epoch=value.topology_epoch, process_id=value.process_id,
                    user_endpoint=None if ep is None else (ep.host, int(ep.port)),
                    client_tags=tuple((kv.key, kv.value) for kv in value.client_tags))


def apply_current_assignment(m: StreamsMember, value) -> StreamsMember:
    epochs = {(t.subtopology_id, p): e for t in (*value.active_tasks, *value.active_tasks_pending_revocation)
              if t.assignment_epochs is not None for p, e in zip(t.partitions, t.assignment_epochs, strict=False)}
    return _replace(m, member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
                    state=MemberState.from_byte(value.state),
                    assigned=Tasks(tasks_from(value.active_tasks), tasks_from(value.standby_tasks),
                                   tasks_from(value.warmup_tasks)),
                    pending_revocation=Tasks(tasks_from(value.active_tasks_pending_revocation),
                                             tasks_from(value.standby_tasks_pending_revocation),
                                             tasks_from(value.warmup_tasks_pending_revocation)),
                    active_epochs=epochs)


def _ms(v) -> int:
    """A kio timedelta field (or a plain int) in milliseconds."""
    return v if isinstance(v, int) else int(v.total_seconds() * 1000)
