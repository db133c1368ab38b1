"""StreamsGroupDescribe (API 89) from the shard's state (Kafka: `GroupMetadataManager.streamsGroupDescribe`,
`StreamsGroup.asDescribedGroup`).

Rules:
- a group that does not exist is GROUP_ID_NOT_FOUND "Group X not found."; a group of another
  type is GROUP_ID_NOT_FOUND "Group X is not a streams group.";
- a member's assignment is its current one, its target assignment the group's target for it;
  the topology is the stored one, its internal topics with the partition counts it was last
  configured with (as Kafka's describe shows the configured topology);
- v1's AssignorName is the group's `streams.assignor.name` (the built-in `sticky` by default);
  the topology description needs Kafka's plugin, which kcoord does not have: none is sent
  (TopologyDescriptionStatus NOT_REQUESTED, or NOT_STORED when the request asks for it);
- a member's TaskOffsets and TaskEndOffsets are its last reported ones (offsets.py, soft state:
  none after a reload), sorted by subtopology id then partition, values as sent
  (`StreamsGroupMember.asStreamsGroupDescribeMember`, `taskOffsetsFromMap`). Authorization and
  filtering of unauthorized topics is the service's work.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from ...authz import GROUP_REPORTED_OPERATIONS
from ...protocol.kio_build import NO_THROTTLE
from ..kio_util import build, schema
from ..result import Result
from .membership import group_settings, soft_of
from .model import StreamsGroup, StreamsMember, Task, Tasks, TaskSet, Topology, by_subtopology
from .offsets import EMPTY as NO_OFFSETS
from .offsets import MemberOffsets

API = "streams_group_describe"
OMITTED = -(2**31)
ALL_GROUP_OPERATIONS = sum(1 << code for _, code in GROUP_REPORTED_OPERATIONS)


def streams_group_describe(shard: Any, ctx: Any, req: Any, now_ms: int) -> Result:
    mod = schema(API, ctx.api_version, "response")
    # Without Kafka's description plugin none is ever stored: NOT_STORED (1) when asked for.
    status = 1 if getattr(req, "include_topology_description", False) else 0
    # Without an authorizer every operation is allowed, as Kafka reports it; with one the
    # service fills the client's own (service/streams_apis.py).
    ops = ALL_GROUP_OPERATIONS if req.include_authorized_operations else OMITTED
    groups = tuple(_described(shard, mod, shard.groups.get(gid), gid, status, ops) for gid in req.group_ids)
    return Result(response=build(mod.StreamsGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=groups))


def _failed(mod, gid: str, message: str):
    return build(mod.DescribedGroup, error_code=ErrorCode.group_id_not_found, error_message=message, group_id=gid,
                 group_state="", group_epoch=0, assignment_epoch=0, topology=None, members=())


def _described(shard: Any, mod, group: Any, gid: str, description_status: int, ops: int):
    if group is None:
        return _failed(mod, gid, f"Group {gid} not found.")
    if not isinstance(group, StreamsGroup):
        return _failed(mod, gid, f"Group {gid} is not a streams group.")
    offsets = soft_of(shard, gid).task_offsets
    return build(mod.DescribedGroup, error_code=ErrorCode.none, error_message=None, group_id=gid,
                 group_state=group.state().value, group_epoch=group.group_epoch,
                 assignment_epoch=group.target_assignment_epoch,
                 topology=None if group.topology is None else _topology(mod, group.topology, _resolved(shard, group)),
                 members=tuple(_member(mod, m, group.target.get(m.member_id, Tasks()),
                                       offsets.get(m.member_id, NO_OFFSETS))
                               for m in sorted(group.members.values(), key=lambda m: m.member_id)),
                 assignor_name=group_settings(shard, gid).assignor_name,
                 topology_description_status=description_status, authorized_operations=ops)


def _ids(mod, tasks: TaskSet) -> tuple:
    return tuple(build(mod.TaskIds, subtopology_id=s, partitions=tuple(ps)) for s, ps in by_subtopology(tasks))


def _assignment(mod, tasks: Tasks):
    return build(mod.Assignment, active_tasks=_ids(mod, tasks.active), standby_tasks=_ids(mod, tasks.standby),
                 warmup_tasks=_ids(mod, tasks.warmup))


def _offsets(mod, by_task: Mapping[Task, int]) -> tuple:
    return tuple(build(mod.TaskOffset, subtopology_id=s, partition=p, offset=by_task[(s, p)])
                 for s, p in sorted(by_task))


def _member(mod, m: StreamsMember, target: Tasks, offsets: MemberOffsets):
    endpoint = None if m.user_endpoint is None else build(mod.Endpoint, host=m.user_endpoint[0],
                                                          port=m.user_endpoint[1])
    return build(mod.Member, member_id=m.member_id, member_epoch=m.member_epoch, instance_id=m.instance_id,
                 rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
                 topology_epoch=m.topology_epoch, process_id=m.process_id, user_endpoint=endpoint,
                 client_tags=tuple(build(mod.KeyValue, key=k, value=v) for k, v in m.client_tags),
                 task_offsets=_offsets(mod, offsets.offsets), task_end_offsets=_offsets(mod, offsets.end_offsets),
                 assignment=_assignment(mod, m.assigned),
                 target_assignment=_assignment(mod, target), is_classic=False)


def _resolved(shard: Any, group: StreamsGroup) -> dict[str, int]:
    """The internal topics' partition counts the topology was configured with (Kafka's describe
    shows the configured topology), or none if it was not configured for this epoch."""
    configured = soft_of(shard, group.group_id).configured
    if configured is None or group.topology is None or configured.topology_epoch != group.topology.epoch:
        return {}
    return configured.internal_partitions


def _topology(mod, top: Topology, resolved: dict[str, int]):
    def info(t):
        return build(mod.TopicInfo, name=t.name, partitions=resolved.get(t.name, t.partitions),
                     replication_factor=t.replication_factor,
                     topic_configs=tuple(build(mod.KeyValue, key=k, value=v) for k, v in t.configs))
    return build(mod.Topology, epoch=top.epoch, subtopologies=tuple(
        build(mod.Subtopology, subtopology_id=s.subtopology_id, source_topics=s.source_topics,
              repartition_sink_topics=s.repartition_sink_topics,
              state_changelog_topics=tuple(info(t) for t in s.state_changelog_topics),
              repartition_source_topics=tuple(info(t) for t in s.repartition_source_topics))
        for s in top.subtopologies))
