"""Replay of the streams group's records (Kafka: `GroupMetadataManager.replay` for types 17, 19-23).

Rules:
- records 17, 19 and 23 create the group (`Replayer.group_as(..., create=True)`), as Kafka's
  `getOrMaybeCreatePersistedStreamsGroup(groupId, true)` (a join writes the topology first);
  the others only change an existing
  streams group, and a record for a missing group is ignored (a compacted log reaches it);
- record 17 keeps every field it carries, the tagged description epochs of Kafka 4.4 too, so
  a group kcoord rewrites keeps what Kafka's topology-description plugin path set;
- a member's current-assignment tombstone leaves the member with no tasks at epoch -1 (Kafka
  does the same), its metadata tombstone removes it; the group tombstone removes the group;
- the configured topology is soft state (model.Soft), valid for one (topology epoch,
  metadata hash): replay never touches it.
"""
from __future__ import annotations

from dataclasses import replace

from . import record_types as rt
from .model import EMPTY_TASKS, NO_EPOCHS, StreamsGroup, StreamsMember
from .records import apply_current_assignment, apply_member_metadata, target_from, topology_from


def _group(replayer, group_id: str, create: bool) -> StreamsGroup | None:
    return replayer.group_as(group_id, StreamsGroup, create=create)


def replay_group_metadata(replayer, key, value, offset: int, producer_id: int) -> None:
    if value is None:
        if isinstance(replayer.groups.get(key.group_id), StreamsGroup):
            del replayer.groups[key.group_id]
        return
    group = _group(replayer, key.group_id, True)
    assert group is not None
    group.group_epoch = value.epoch
    group.metadata_hash = value.metadata_hash
    group.validated_topology_epoch = value.validated_topology_epoch
    group.last_assignment_configs = tuple((c.key, c.value) for c in value.last_assignment_configs or ())
    group.stored_description_topology_epoch = value.stored_description_topology_epoch
    group.failed_description_topology_epoch = value.failed_description_topology_epoch


def replay_member_metadata(replayer, key, value, offset: int, producer_id: int) -> None:
    group = _group(replayer, key.group_id, value is not None)
    if group is None:
        return
    if value is None:
        group.members.pop(key.member_id, None)
        return
    member = group.members.get(key.member_id) or StreamsMember(key.member_id)
    group.members[key.member_id] = apply_member_metadata(member, value)


def replay_target_metadata(replayer, key, value, offset: int, producer_id: int) -> None:
    group = _group(replayer, key.group_id, False)
    if group is None:
        return
    group.target_assignment_epoch = 0 if value is None else value.assignment_epoch
    group.assignment_timestamp_ms = 0 if value is None else value.assignment_timestamp


def replay_target_member(replayer, key, value, offset: int, producer_id: int) -> None:
    group = _group(replayer, key.group_id, False)
    if group is None:
        return
    if value is None:
        group.target.pop(key.member_id, None)
    else:
        group.target[key.member_id] = target_from(value)


def replay_current_assignment(replayer, key, value, offset: int, producer_id: int) -> None:
    group = _group(replayer, key.group_id, False)
    if group is None:
        return
    member = group.members.get(key.member_id)
    if value is None:
        if member is not None:
            group.members[key.member_id] = replace(member, member_epoch=-1, previous_member_epoch=-1,
                                                   assigned=EMPTY_TASKS, pending_revocation=EMPTY_TASKS,
                                                   active_epochs=NO_EPOCHS)
        return
    group.members[key.member_id] = apply_current_assignment(member or StreamsMember(key.member_id), value)


def replay_topology(replayer, key, value, offset: int, producer_id: int) -> None:
    group = _group(replayer, key.group_id, value is not None)
    if group is None:
        return
    group.topology = None if value is None else topology_from(value)


RULES = {
    rt.StreamsGroupMetadataKey: replay_group_metadata,
    rt.StreamsGroupMemberMetadataKey: replay_member_metadata,
    rt.StreamsGroupTargetAssignmentMetadataKey: replay_target_metadata,
    rt.StreamsGroupTargetAssignmentMemberKey: replay_target_member,
    rt.StreamsGroupCurrentMemberAssignmentKey: replay_current_assignment,
    rt.StreamsGroupTopologyKey: replay_topology,
}
