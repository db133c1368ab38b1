"""Serving the connect group APIs 32703-32706 (docs/design/connect-groups-spec.md; docs/design/connect-groups.md).

Rules of this module:
- Served only with `group.connect.groups.enabled` (default on): the wiring builds the
  service's API table with `CONNECT_ROWS` then (coordinator/protocol/api_table.py), and only
  then are the keys advertised in ApiVersions and routed (the private block's rule,
  coordinator/private_apis.py: off, a request for one closes the connection).
- Authorization as for consumer groups: Group READ for the heartbeat, Prepare and Install
  (Prepare reveals every worker's assignor metadata), Group DESCRIBE for ConnectGroupDescribe
  (a denied group answers GROUP_AUTHORIZATION_FAILED in its entry), DELETE through
  DeleteGroups as any group.
- The group core (coordinator/group/modern/connect/) builds the responses. The heartbeat,
  Prepare and Install are single-group APIs: the service runs their rows' shard operations
  and a shard-level failure (loading, not the coordinator, a failed write) answers the API's
  own error response (coordinator/protocol/error_responses.py) with that code.
  ConnectGroupDescribe is split by shard, like ConsumerGroupDescribe, and answered in the
  request's order.
"""
from __future__ import annotations

from typing import Any

from .group.errors import ApiError
from .protocol import connect_messages as cm
from .protocol import error_responses
from .protocol.api_table import DESCRIBE, READ, ApiSpec, Groups, group_ids_field

# The service (coordinator/service/) imports this module; never the reverse.
GroupCoordinatorService = Any


async def _describe(service: GroupCoordinatorService, ctx, req) -> cm.ConnectGroupDescribeResponse:
    by_runtime: dict[int, list[str]] = {}
    for g in req.group_ids:
        by_runtime.setdefault(service.partition_for(g), []).append(g)
    described: dict[str, Any] = {}
    for partition, ids in by_runtime.items():
        part = cm.ConnectGroupDescribeRequest(group_ids=tuple(ids))

        def op(shard, now, part=part):
            return shard.connect_group_describe(ctx, part, now)
        try:
            answer = await service.runtimes[partition].run(op)
        except ApiError as e:
            answer = error_responses.connect_group_describe(0, e, part)
        for g in answer.groups:
            described.setdefault(g.group_id, g)
    return cm.describe_response(tuple(described[g] for g in req.group_ids))


# The rows this extension adds to the service's API table (coordinator/protocol/api_table.py).
CONNECT_ROWS: tuple[ApiSpec, ...] = (
    ApiSpec(cm.CONNECT_GROUP_HEARTBEAT, cm.NAMES[cm.CONNECT_GROUP_HEARTBEAT], (0, 0),
            error_responses.connect_group_heartbeat, shard_operation="connect_group_heartbeat",
            group_operation=READ),
    ApiSpec(cm.CONNECT_GROUP_PREPARE_ASSIGNMENT, cm.NAMES[cm.CONNECT_GROUP_PREPARE_ASSIGNMENT], (0, 0),
            error_responses.connect_prepare_assignment, shard_operation="connect_group_prepare_assignment",
            group_operation=READ),
    ApiSpec(cm.CONNECT_GROUP_INSTALL_ASSIGNMENT, cm.NAMES[cm.CONNECT_GROUP_INSTALL_ASSIGNMENT], (0, 0),
            error_responses.connect_install_assignment, shard_operation="connect_group_install_assignment",
            group_operation=READ),
    ApiSpec(cm.CONNECT_GROUP_DESCRIBE, cm.NAMES[cm.CONNECT_GROUP_DESCRIBE], (0, 0),
            error_responses.connect_group_describe, _describe, shard_operation="connect_group_describe",
            group_operation=DESCRIBE, groups=Groups.MANY, group_ids=group_ids_field),
)
