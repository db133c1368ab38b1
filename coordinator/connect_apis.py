"""Serving the connect group APIs 32703-32706 (docs/design/connect-groups-spec.md; docs/design/connect-groups.md).

Rules of this module:
- Served only with `group.connect.groups.enabled` (default on): the service registers
  `CONNECT_APIS` then, and only then are the keys advertised in ApiVersions and routed
  (the private block's rule, coordinator/private_apis.py: off, a request for one closes
  the connection).
- Authorization as for consumer groups: Group READ for the heartbeat, Prepare and Install
  (Prepare reveals every worker's assignor metadata), Group DESCRIBE for ConnectGroupDescribe
  (a denied group answers GROUP_AUTHORIZATION_FAILED in its entry), DELETE through
  DeleteGroups as any group.
- The group core (coordinator/group/connect_*.py) builds the responses; a shard-level
  failure (loading, not the coordinator, a failed write) answers the API's own error
  response with that code. ConnectGroupDescribe is split by shard, like
  ConsumerGroupDescribe, and answered in the request's order.
"""
from __future__ import annotations

from typing import Any

from . import authz
from .group.error_responses import ERROR_RESPONSES
from .group.errors import ApiError
from .protocol import connect_messages as cm

# The service (coordinator/service/) imports this module; never the reverse.
GroupCoordinatorService = Any


def _heartbeat_error(version: int, error: ApiError, req: Any = None) -> cm.ConnectGroupHeartbeatResponse:
    return cm.heartbeat_response(error_code=int(error.code), error_message=error.message)


def _prepare_error(version: int, error: ApiError, req: Any = None) -> cm.ConnectPrepareAssignmentResponse:
    return cm.prepare_response(error_code=int(error.code), error_message=error.message)


def _install_error(version: int, error: ApiError, req: Any = None) -> cm.ConnectInstallAssignmentResponse:
    return cm.install_response(error_code=int(error.code), error_message=error.message)


def _describe_error(version: int, error: ApiError, req: Any = None) -> cm.ConnectGroupDescribeResponse:
    ids = tuple(getattr(req, "group_ids", ()) or ())
    return cm.describe_response(tuple(cm.described_group(error_code=int(error.code), error_message=error.message,
                                                         group_id=g) for g in ids))


async def _run(service: GroupCoordinatorService, group_id: str, method: str, ctx, req, on_error) -> Any:
    try:
        return await service.runtime_for(group_id).run(
            lambda shard, now: getattr(shard, method)(ctx, req, now))
    except ApiError as e:
        return on_error(0, e, req)


async def _heartbeat(service: GroupCoordinatorService, ctx, req) -> Any:
    return await _run(service, req.group_id, "connect_group_heartbeat", ctx, req, _heartbeat_error)


async def _prepare(service: GroupCoordinatorService, ctx, req) -> Any:
    return await _run(service, req.group_id, "connect_group_prepare_assignment", ctx, req, _prepare_error)


async def _install(service: GroupCoordinatorService, ctx, req) -> Any:
    return await _run(service, req.group_id, "connect_group_install_assignment", ctx, req, _install_error)


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
            answer = _describe_error(0, e, part)
        for g in answer.groups:
            described.setdefault(g.group_id, g)
    return cm.describe_response(tuple(described[g] for g in req.group_ids))


_SERVED = {
    cm.CONNECT_GROUP_HEARTBEAT: (_heartbeat, _heartbeat_error, authz.READ),
    cm.CONNECT_GROUP_PREPARE_ASSIGNMENT: (_prepare, _prepare_error, authz.READ),
    cm.CONNECT_GROUP_INSTALL_ASSIGNMENT: (_install, _install_error, authz.READ),
    cm.CONNECT_GROUP_DESCRIBE: (_describe, _describe_error, authz.DESCRIBE),
}

# (api_key, name, versions, handler(service, ctx, request)): what the service registers when enabled.
CONNECT_APIS = tuple((key, cm.NAMES[key], (0, 0), handler) for key, (handler, _, _) in _SERVED.items())
for _key, (_, _error, _operation) in _SERVED.items():
    # Registries keyed by API: used only for a request that is routed, i.e. when enabled.
    authz.GROUP_OPERATIONS.setdefault(_key, _operation)
    ERROR_RESPONSES.setdefault(_key, _error)
