"""Group admin APIs served per shard: ConsumerGroupDescribe, DescribeGroups, ListGroups,
DeleteGroups. The service splits multi-group requests by shard and merges answers.

Each handler reads its request in one shape, whatever the version (admin_requests.py, built
at the shard's door, or by the service for a request it fans out), and builds its answer
with the response classes that shape names: kio's, or the versions generated from Kafka
4.4's definitions where kio has none (DeleteGroups v3). No handler reads a version.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from . import record_helpers as rh
from .classic.group import ClassicGroup, ClassicGroupState
from .group_types import group_type
from .kio_util import build
from .modern.consumer.client_mode import in_client_mode
from .modern.consumer.group import ConsumerGroup
from .result import Result
from .timeutil import from_ms

if TYPE_CHECKING:
    from records import CoordinatorRecord

    from .admin_requests import ConsumerGroupDescribe, DeleteGroups, DescribeGroups, ListGroups
    from .context import RequestContext, ShardView

# Kafka's default when authorized operations were not requested (Integer.MIN_VALUE).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
# Without an authorizer every group operation is allowed: READ(3), DELETE(6), DESCRIBE(8),
# DESCRIBE_CONFIGS(10), ALTER_CONFIGS(11) as `AclOperation` bits.
GROUP_OPERATIONS = sum(1 << op for op in (3, 6, 8, 10, 11))


def group_type_name(group) -> str:
    return group_type(group).name


def group_state_name(group) -> str:
    return group_type(group).state(group)


def protocol_type_of(group) -> str:
    return group_type(group).protocol_type(group)


def subscribed_topics(group) -> set[str]:
    """Kafka's `isSubscribedToTopic` set (group_types.py)."""
    return group_type(group).subscribed_topics(group)


# --------------------------------------------------- ConsumerGroupDescribe
def _described_assignment(mod, image, assignment, pending=None) -> object:
    """`assignment` {topic id: partitions}; `pending` (a member's partitions pending
    revocation) joins it as in Kafka's `asConsumerGroupDescribeMember`, which accumulates
    the assigned partitions and then those pending revocation, per topic: a member in
    UNREVOKED_PARTITIONS is described with every partition it still owns."""
    parts_by_topic = {tid: sorted(parts) for tid, parts in assignment.items()}
    for tid, parts in (pending or {}).items():
        parts_by_topic.setdefault(tid, []).extend(sorted(parts))
    tps = []
    for topic_id, parts in parts_by_topic.items():
        t = image.topics_by_id.get(topic_id)
        if t is None:
            continue  # deleted topic: Kafka skips ids the image no longer knows
        tps.append(mod.TopicPartitions(topic_id=topic_id, topic_name=t.name, partitions=tuple(parts)))
    return mod.Assignment(topic_partitions=tuple(tps))


def describe_consumer_group(shard: ShardView, mod, group_id: str, include_ops: bool):
    ops = GROUP_OPERATIONS if include_ops else AUTHORIZED_OPERATIONS_OMITTED
    if not group_id:
        # Kafka's `getErrorDescribedGroupList`: the error code alone, no message (Kafka 4.3.1).
        return build(mod.DescribedGroup, error_code=ErrorCode.invalid_group_id,
                     error_message=None, group_id=group_id, group_state="",
                     group_epoch=0, assignment_epoch=0, assignor_name="", members=(),
                     authorized_operations=ops)
    group = shard.groups.get(group_id)
    if not isinstance(group, ConsumerGroup):
        msg = (f"Group {group_id} not found." if group is None
               else f"Group {group_id} is not a consumer group.")
        # Kafka answers from the exception (GroupIdNotFoundException): every other field keeps
        # its default, GroupState "" included (observed on Kafka 4.3.1, docs/design/differential.md).
        return build(mod.DescribedGroup, error_code=ErrorCode.group_id_not_found, error_message=msg,
                     group_id=group_id, group_state="", group_epoch=0,
                     assignment_epoch=0, assignor_name="", members=(), authorized_operations=ops)
    image = shard.image
    members = []
    for m in group.members.values():
        members.append(build(
            mod.Member, member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
            member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=tuple(m.subscribed_topic_names),
            # Kafka's `asConsumerGroupDescribeMember` returns the member's regex as is, and a
            # ConsumerGroupMember's default is "" (never null) for a member subscribed by names.
            subscribed_topic_regex=m.subscribed_topic_regex,
            assignment=_described_assignment(mod, image, m.assigned_partitions,
                                             m.partitions_pending_revocation),
            target_assignment=_described_assignment(mod, image, group.target_of(m.member_id)),
            member_type=0 if m.uses_classic_protocol else 1))
    return build(mod.DescribedGroup, error_code=ErrorCode.none, group_id=group_id,
                 group_state=group.state.value, group_epoch=group.group_epoch,
                 assignment_epoch=group.assignment_epoch,
                 # the client-side assignor spec: a client-mode group shows its client assignor (A16)
                 assignor_name=in_client_mode(group, None) or group.preferred_server_assignor(
                     shard.config.default_assignor),
                 members=tuple(members), authorized_operations=ops)


def consumer_group_describe(shard: ShardView, ctx: RequestContext, req: ConsumerGroupDescribe) -> Result:
    mod = req.response_schema
    groups = tuple(describe_consumer_group(shard, mod, gid, req.include_authorized_operations)
                   for gid in req.group_ids)
    return Result(response=mod.ConsumerGroupDescribeResponse(throttle_time=from_ms(0), groups=groups))


# ----------------------------------------------------------- DescribeGroups
def describe_group(shard: ShardView, mod, group_id: str, include_ops: bool, not_found_error: bool):
    """DescribeGroups (API 15) only describes classic groups (`GroupMetadataManager.describeGroups`
    looks groups up as classic ones): a consumer group, like a missing one, is "Dead", with
    GROUP_ID_NOT_FOUND where the version has it (`not_found_error`: v6+, KIP-1043).
    Tools must use ConsumerGroupDescribe for those."""
    ops = GROUP_OPERATIONS if include_ops else AUTHORIZED_OPERATIONS_OMITTED
    group = shard.groups.get(group_id)
    if not isinstance(group, ClassicGroup) or group.state is ClassicGroupState.DEAD:
        code, why = ErrorCode.none, None
        if not_found_error:
            code = ErrorCode.group_id_not_found
            why = f"Group {group_id} not found." if group is None else f"Group {group_id} is not a classic group."
        return build(mod.DescribedGroup, error_code=code, error_message=why, group_id=group_id, group_state="Dead",
                     protocol_type="", protocol_data="", members=(), authorized_operations=ops)
    stable = group.state is ClassicGroupState.STABLE
    # Outside Stable Kafka describes members without their metadata but with their
    # current assignment (`describeNoMetadata`), and leaves the protocol name unset.
    members = tuple(build(mod.DescribedGroupMember, member_id=m.member_id, group_instance_id=m.group_instance_id,
                          client_id=m.client_id, client_host=m.client_host,
                          member_metadata=m.metadata_for(group.protocol_name) if stable else b"",
                          member_assignment=m.assignment)
                    for m in group.members.values())
    return build(mod.DescribedGroup, error_code=ErrorCode.none, group_id=group_id,
                 group_state=group.state.value, protocol_type=group.protocol_type or "",
                 protocol_data=(group.protocol_name or "") if stable else "", members=members,
                 authorized_operations=ops)


def describe_groups(shard: ShardView, ctx: RequestContext, req: DescribeGroups) -> Result:
    mod = req.response_schema
    groups = tuple(describe_group(shard, mod, gid, req.include_authorized_operations, req.not_found_error)
                   for gid in req.groups)
    return Result(response=build(mod.DescribeGroupsResponse, throttle_time=from_ms(0), groups=groups))


# -------------------------------------------------------------- ListGroups
def list_groups(shard: ShardView, ctx: RequestContext, req: ListGroups) -> Result:
    mod = req.response_schema
    states = {s.strip().lower() for s in req.states_filter}
    types = {t.strip().lower() for t in req.types_filter}
    out = []
    for group in shard.groups.values():
        state = group_state_name(group)
        kind = group_type_name(group)
        if states and state.lower() not in states:
            continue
        if types and kind not in types:
            continue
        out.append(build(mod.ListedGroup, group_id=group.group_id, protocol_type=protocol_type_of(group),
                         group_state=state, group_type=kind))
    return Result(response=build(mod.ListGroupsResponse, throttle_time=from_ms(0),
                                 error_code=ErrorCode.none, groups=tuple(out)))


# ------------------------------------------------------------ DeleteGroups
def group_tombstones(group) -> list:
    """Kafka's `createGroupTombstoneRecords`, for any registered group type."""
    return group_type(group).tombstones(group)


def delete_groups(shard: ShardView, ctx: RequestContext, req: DeleteGroups, now_ms: int) -> Result:
    """Kafka's `GroupCoordinatorShard.deleteGroups`. v3's ErrorMessage (KIP-1331) stays null:
    Kafka 4.4 sets it only when its streams topology-description plugin fails to delete
    (GROUP_DELETION_FAILED), and the shard answers every other refusal by its code alone."""
    mod = req.response_schema
    records: list[CoordinatorRecord] = []
    results = []
    for gid in req.groups_names:
        group = shard.groups.get(gid)
        refused = ErrorCode.group_id_not_found if group is None else group_type(group).delete_error(group)
        if refused is not None:
            code = refused
        else:
            code = ErrorCode.none
            # Kafka's deleteAllOffsets: committed offsets, and pending transactional ones.
            records.extend(rh.offset_tombstone(gid, t, p) for t, p in shard.offsets.deletable_partitions(gid))
            records.extend(group_tombstones(group))
        results.append(build(mod.DeletableGroupResult, group_id=gid, error_code=code))
    return Result(response=build(mod.DeleteGroupsResponse, throttle_time=from_ms(0),
                                 results=tuple(results)), records=records)
