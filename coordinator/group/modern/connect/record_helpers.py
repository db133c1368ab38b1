"""Build the connect group's records (types 1000-1004, records/connect_records.py) from its
model, as record_helpers.py does for consumer groups.

Rules: every value is written at version 0; units are written sorted (connector, then
task) so that equal assignments give equal bytes; removing a worker writes its
tombstones in Kafka's order for consumer groups: current assignment, target, member
(docs/design/connect-groups-spec.md §3).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from records import CoordinatorRecord
from records.connect_records import (
    ConnectAssignor,
    ConnectGroupCurrentMemberAssignmentKey,
    ConnectGroupCurrentMemberAssignmentValue,
    ConnectGroupMemberMetadataKey,
    ConnectGroupMemberMetadataValue,
    ConnectGroupMetadataKey,
    ConnectGroupMetadataValue,
    ConnectGroupTargetAssignmentMemberKey,
    ConnectGroupTargetAssignmentMemberValue,
    ConnectGroupTargetAssignmentMetadataKey,
    ConnectGroupTargetAssignmentMetadataValue,
    ConnectorUnits,
)

from .group import ConnectGroup, ConnectMember, ConnectTarget, Units


def _record(key, value) -> CoordinatorRecord:
    return CoordinatorRecord(key=key, value=value, value_version=0)


def _tombstone(key) -> CoordinatorRecord:
    return CoordinatorRecord(key=key, value=None, value_version=0)


def units_with_epochs(units: Units) -> tuple[ConnectorUnits, ...]:
    out = []
    for connector in sorted(units):
        tasks = sorted(units[connector])
        out.append(ConnectorUnits(connector, tuple(tasks), tuple(units[connector][t] for t in tasks)))
    return tuple(out)


def units_plain(units: Mapping[str, Iterable[int]]) -> tuple[ConnectorUnits, ...]:
    return tuple(ConnectorUnits(c, tuple(sorted(units[c]))) for c in sorted(units) if units[c])


def group_epoch_record(group_id: str, epoch: int) -> CoordinatorRecord:
    return _record(ConnectGroupMetadataKey(group_id), ConnectGroupMetadataValue(epoch))


def member_metadata_record(group_id: str, m: ConnectMember) -> CoordinatorRecord:
    return _record(ConnectGroupMemberMetadataKey(group_id, m.member_id), ConnectGroupMemberMetadataValue(
        instance_id=m.instance_id, client_id=m.client_id, client_host=m.client_host,
        rebalance_timeout_ms=m.rebalance_timeout_ms,
        assignors=tuple(ConnectAssignor(s.name, s.minimum_version, s.maximum_version, s.reason, s.version,
                                        s.metadata) for s in m.client_assignors)))


def target_metadata_record(group_id: str, epoch: int, error: int, assignor: str | None,
                           now_ms: int) -> CoordinatorRecord:
    return _record(ConnectGroupTargetAssignmentMetadataKey(group_id),
                   ConnectGroupTargetAssignmentMetadataValue(epoch, error, assignor, now_ms))


def target_member_record(group_id: str, member_id: str, target: ConnectTarget) -> CoordinatorRecord:
    return _record(ConnectGroupTargetAssignmentMemberKey(group_id, member_id),
                   ConnectGroupTargetAssignmentMemberValue(units_plain(target.units), target.version,
                                                           target.metadata))


def current_assignment_record(group_id: str, m: ConnectMember) -> CoordinatorRecord:
    return _record(ConnectGroupCurrentMemberAssignmentKey(group_id, m.member_id),
                   ConnectGroupCurrentMemberAssignmentValue(
                       member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
                       state=int(m.state), error=m.error, assigned=units_with_epochs(m.assigned),
                       pending_revocation=units_with_epochs(m.pending_revocation),
                       version=m.metadata_version, metadata=m.metadata))


def remove_member_records(group_id: str, member_id: str) -> list[CoordinatorRecord]:
    return [_tombstone(ConnectGroupCurrentMemberAssignmentKey(group_id, member_id)),
            _tombstone(ConnectGroupTargetAssignmentMemberKey(group_id, member_id)),
            _tombstone(ConnectGroupMemberMetadataKey(group_id, member_id))]


def group_tombstones(group: ConnectGroup) -> list[CoordinatorRecord]:
    """Every record of the group, deleted (DeleteGroups, expiry, a conversion to classic)."""
    gid = group.group_id
    records = [_tombstone(ConnectGroupCurrentMemberAssignmentKey(gid, m)) for m in group.members]
    records += [_tombstone(ConnectGroupTargetAssignmentMemberKey(gid, m)) for m in group.targets]
    records.append(_tombstone(ConnectGroupTargetAssignmentMetadataKey(gid)))
    records += [_tombstone(ConnectGroupMemberMetadataKey(gid, m)) for m in group.members]
    records.append(_tombstone(ConnectGroupMetadataKey(gid)))
    return records
