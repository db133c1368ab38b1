"""ConnectGroupDescribe (32706, kcoord's addition to docs/design/connect-groups-spec.md §1): what
ConsumerGroupDescribe says of a consumer group, for connect groups.

Rules: a missing group, or one of another type, answers GROUP_ID_NOT_FOUND per group (as
ConsumerGroupDescribe answers a connect group); an empty id INVALID_GROUP_ID. A worker is
described with every unit it still owns (pending revocation included, as Kafka's
`asConsumerGroupDescribeMember` accumulates them), its target, and its metadata (for
Connect: the leader url and config offset the assigner wrote for it).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from ....protocol import connect_messages as cm
from ...result import Result
from .assignment import wire_units
from .group import ConnectGroup

if TYPE_CHECKING:
    from ...context import ConnectView, RequestContext


def describe_group(shard: ConnectView, group_id: str, denied: frozenset[str] = frozenset()) -> cm.ConnectDescribedGroup:
    if not group_id:
        return cm.described_group(error_code=int(ErrorCode.invalid_group_id), group_id=group_id)
    if group_id in denied:
        return cm.described_group(error_code=int(ErrorCode.group_authorization_failed), group_id=group_id)
    group: Any = shard.groups.get(group_id)
    if not isinstance(group, ConnectGroup):
        msg = f"Group {group_id} not found." if group is None else f"Group {group_id} is not a connect group."
        return cm.described_group(error_code=int(ErrorCode.group_id_not_found), error_message=msg, group_id=group_id)
    members = []
    for m in group.members.values():
        owned: dict[str, set[int]] = {c: set(ts) for c, ts in m.assigned.items()}
        for c, ts in m.pending_revocation.items():
            owned.setdefault(c, set()).update(ts)
        members.append(cm.described_member(
            member_id=m.member_id, instance_id=m.instance_id, client_id=m.client_id, client_host=m.client_host,
            member_epoch=m.member_epoch, state=m.state.name, assignment=wire_units(owned),
            target_assignment=wire_units(group.target_of(m.member_id).units),
            metadata_version=m.metadata_version, metadata=m.metadata))
    return cm.described_group(
        error_code=0, group_id=group_id, group_state=group.state.value, group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch, assignor_name=group.assignor_name or "", members=tuple(members))


def describe(shard: ConnectView, ctx: RequestContext, req, now_ms: int) -> Result:
    return Result(response=cm.describe_response(
        tuple(describe_group(shard, g, ctx.denied_groups) for g in req.group_ids)))
