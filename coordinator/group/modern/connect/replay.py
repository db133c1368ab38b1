"""Replay of the connect group's records (types 1000-1004): the only way a ConnectGroup changes.

Rules (those of replay.py for consumer groups, docs/design/kafka-facts.md §2.4):
- each key type has one rule, in `REPLAY_RULES`, which the connect contribution hands to the
  shard's registry (contribution.py; nothing registers at import);
- a record creates its group when it has a value (`Replayer.group_as`: a connect record
  also replaces a simple classic group, or, after compaction removed a conversion's
  tombstones, a group of another type); a tombstone never creates one, and a tombstone
  for an unknown group or worker is ignored;
- the group-epoch tombstone deletes the group with whatever is left (compaction may have
  dropped the tombstones that came before it).
"""
from __future__ import annotations

import logging
from dataclasses import replace

from records.connect_records import (
    ConnectGroupCurrentMemberAssignmentKey,
    ConnectGroupMemberMetadataKey,
    ConnectGroupMetadataKey,
    ConnectGroupTargetAssignmentMemberKey,
    ConnectGroupTargetAssignmentMetadataKey,
    ConnectorUnits,
)

from ...replay import Replayer
from ..client_assignment import spec_tuple
from ..group import MemberState
from .group import EMPTY_UNITS, ConnectGroup, ConnectMember, ConnectTarget, Units

log = logging.getLogger("kcoord.replay")


def _group(replayer: Replayer, group_id: str, create: bool) -> ConnectGroup | None:
    return replayer.group_as(group_id, ConnectGroup, create)


def _member(group: ConnectGroup, member_id: str) -> ConnectMember:
    m = group.members.get(member_id)
    return m if m is not None else ConnectMember(member_id)


def units_from(entries: tuple[ConnectorUnits, ...], member_epoch: int) -> Units:
    """Epochs aligned with tasks; missing epochs mean max(member epoch, 0), as KIP-1251's
    `assignmentFromTopicPartitions` reads partitions without epochs."""
    if not entries:
        return EMPTY_UNITS
    default = max(member_epoch, 0)
    out: Units = {}
    for u in entries:
        if not u.tasks:
            continue
        epochs = u.epochs if len(u.epochs) == len(u.tasks) else (default,) * len(u.tasks)
        out.setdefault(u.connector, {}).update(zip(u.tasks, epochs))
    return out or EMPTY_UNITS


def _group_epoch(replayer: Replayer, key, value, offset: int, producer_id: int) -> None:
    if value is None:
        group = _group(replayer, key.group_id, False)
        if group is None:
            return
        if group.members or group.targets:
            log.warning("connect group %s: ConnectGroupMetadata tombstone while %d workers remain; removing "
                        "the group", key.group_id, len(group.members))
        del replayer.groups[key.group_id]
        return
    group = _group(replayer, key.group_id, True)
    assert group is not None
    group.group_epoch = value.epoch


def _member_metadata(replayer: Replayer, key, value, offset: int, producer_id: int) -> None:
    group = _group(replayer, key.group_id, value is not None)
    if group is None:
        return
    if value is None:
        if key.member_id in group.members:
            group.targets.pop(key.member_id, None)
            group.remove_member(key.member_id)
        return
    m = _member(group, key.member_id)
    group.put_member(replace(
        m, instance_id=value.instance_id, client_id=value.client_id, client_host=value.client_host,
        rebalance_timeout_ms=value.rebalance_timeout_ms,
        client_assignors=spec_tuple(value.assignors)))


def _target_metadata(replayer: Replayer, key, value, offset: int, producer_id: int) -> None:
    group = _group(replayer, key.group_id, value is not None)
    if group is None:
        return
    if value is None:
        group.assignment_epoch, group.assignment_error, group.assignor_name = -1, 0, None
        group.assignment_timestamp_ms = 0
        return
    group.assignment_epoch = value.assignment_epoch
    group.assignment_error = value.assignment_error
    group.assignor_name = value.assignor_name
    group.assignment_timestamp_ms = value.assignment_timestamp


def _target_member(replayer: Replayer, key, value, offset: int, producer_id: int) -> None:
    group = _group(replayer, key.group_id, value is not None)
    if group is None:
        return
    if value is None:
        group.targets.pop(key.member_id, None)
        return
    units = {u.connector: frozenset(u.tasks) for u in value.units if u.tasks}
    group.targets[key.member_id] = ConnectTarget(units, value.version, value.metadata)


def _current_assignment(replayer: Replayer, key, value, offset: int, producer_id: int) -> None:
    group = _group(replayer, key.group_id, value is not None)
    if group is None:
        return
    if value is None:
        m = group.members.get(key.member_id)
        if m is not None:
            group.put_member(replace(m, member_epoch=-1, previous_member_epoch=-1, state=MemberState.STABLE,
                                     assigned=EMPTY_UNITS, pending_revocation=EMPTY_UNITS))
        return
    m = _member(group, key.member_id)
    group.put_member(replace(
        m, member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
        state=MemberState.from_byte(value.state), error=value.error,
        assigned=units_from(value.assigned, value.member_epoch),
        pending_revocation=units_from(value.pending_revocation, value.member_epoch),
        metadata_version=value.version, metadata=value.metadata))


REPLAY_RULES = {
    ConnectGroupMetadataKey: _group_epoch,
    ConnectGroupMemberMetadataKey: _member_metadata,
    ConnectGroupTargetAssignmentMetadataKey: _target_metadata,
    ConnectGroupTargetAssignmentMemberKey: _target_member,
    ConnectGroupCurrentMemberAssignmentKey: _current_assignment,
}
