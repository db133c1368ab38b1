"""Serving kcoord's private client-assignor APIs 32700-32702 (docs/design/client-assignors-spec.md;
docs/design/client-assignors.md).

Rules of this module:
- Served only with `group.consumer.client.assignors.enabled` (default on): the wiring
  builds the service's API table with `CLIENT_ASSIGNOR_ROWS` then
  (coordinator/protocol/api_table.py), and only then are the keys advertised in ApiVersions
  and routed. Off, they are neither: a request for one closes the connection, the gateway's
  rule for any API it does not advertise (X4).
- All three need Group READ (Prepare reveals every member's subscriptions and assignor
  metadata); the heartbeat also needs Topic DESCRIBE on its SubscribedTopicNames, as key 68
  does (KAFKA-18813).
- The group core answers in plain data (coordinator/group/modern/consumer/client_mode.py);
  this module is the one place that writes the wire messages
  (coordinator/protocol/private_messages.py). Key 68 is untouched: 32700 runs the core's
  heartbeat with key 68 v1's rules (KIP-1082 client-generated member ids) plus ClientAssignors.
- Error codes go out as plain int16: the private ones (COMPUTE_ASSIGNMENT 32700,
  INVALID_ASSIGNMENT 32701) are not in kio's ErrorCode. The error-only answers are built with
  the other APIs' (coordinator/protocol/error_responses.py).
"""
from __future__ import annotations

import dataclasses
import datetime
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i16, i32

from . import authz
from .group.errors import ApiError
from .group.modern.consumer.client_mode import CsaAnswer, InstallAnswer, PrepareAnswer
from .protocol import error_responses
from .protocol import private_messages as pm
from .protocol.api_table import READ, ApiSpec
from .protocol.private_apis import CLIENT_ASSIGNOR_APIS, COMPUTE_ASSIGNMENT

if TYPE_CHECKING:
    from .group.modern.client_assignment import PreparedGroup

# The service (coordinator/service/, which imports this module; never the reverse).
GroupCoordinatorService = Any

_ZERO = datetime.timedelta(0)
# The core runs a 32700 heartbeat under key 68 v1's rules (member ids made by the client).
_CORE_VERSION = 1


def _tps(assignment) -> tuple[pm.TopicPartitions, ...]:
    return tuple(pm.TopicPartitions(topic_id=t, partitions=tuple(i32(p) for p in sorted(ps)))
                 for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0])))


# ------------------------------------------------------------------ responses
def csa_response(answer: Any) -> pm.CsaHeartbeatResponse:
    """A CsaAnswer, or key 68's own response (an error the core or the service answered)."""
    if isinstance(answer, CsaAnswer):
        base, compute = answer.response, answer.compute
    else:
        base, compute = answer, False
    assignment = None
    if base.assignment is not None:
        assignment = pm.CsaAssignment(
            topic_partitions=tuple(pm.TopicPartitions(topic_id=tp.topic_id, partitions=tuple(tp.partitions))
                                   for tp in base.assignment.topic_partitions),
            error=i8(answer.error if isinstance(answer, CsaAnswer) else 0),
            metadata_version=i16(answer.metadata_version if isinstance(answer, CsaAnswer) else -1),
            metadata_bytes=answer.metadata_bytes if isinstance(answer, CsaAnswer) else None)
    code = int(base.error_code)
    if compute and code == ErrorCode.none:
        code = COMPUTE_ASSIGNMENT   # informational: everything else in the answer is valid too
    return pm.CsaHeartbeatResponse(
        throttle_time=base.throttle_time, error_code=i16(code), error_message=base.error_message,
        member_id=base.member_id, member_epoch=base.member_epoch, heartbeat_interval=base.heartbeat_interval,
        assignment=assignment)


def prepare_response(answer: PrepareAnswer) -> pm.PrepareAssignmentResponse:
    view: PreparedGroup | None = answer.prepared
    if view is None:
        return pm.PrepareAssignmentResponse(throttle_time=_ZERO, error_code=i16(answer.error_code),  # type: ignore[arg-type]
                                            error_message=answer.message)
    members = tuple(pm.PreparedMember(
        member_id=m.member_id, member_epoch=i32(m.member_epoch), instance_id=m.instance_id, rack_id=m.rack_id,
        subscriptions=m.subscriptions, assignor_version=i16(m.spec.version), assignor_reason=i8(m.spec.reason),
        assignor_metadata=m.spec.metadata, topic_partitions=_tps(m.target)) for m in view.members)
    partitions = tuple(pm.PartitionMetadata(topic_id=t, topic_name=view.topic_names[t], num_partitions=i32(n))
                       for t, n in view.snapshot.partitions.items())
    return pm.PrepareAssignmentResponse(
        throttle_time=_ZERO, error_code=i16(0), group_epoch=i32(view.snapshot.group_epoch),  # type: ignore[arg-type]
        client_assignor_name=view.snapshot.assignor, members=members, partition_metadata=partitions)


def install_response(answer: InstallAnswer) -> pm.InstallAssignmentResponse:
    return pm.InstallAssignmentResponse(throttle_time=_ZERO, error_code=i16(answer.error_code),  # type: ignore[arg-type]
                                        error_message=answer.message)


# ------------------------------------------------------------------ handlers
async def _csa_heartbeat(service: GroupCoordinatorService, ctx, req) -> pm.CsaHeartbeatResponse:
    core_ctx = dataclasses.replace(ctx, api_version=_CORE_VERSION)
    try:
        answer = await service.runtime_for(req.group_id).run(
            lambda shard, now: shard.consumer_group_csa_heartbeat(core_ctx, req, now))
    except ApiError as e:
        return error_responses.csa_heartbeat(0, e, req)
    return csa_response(answer)


async def _prepare(service: GroupCoordinatorService, ctx, req) -> pm.PrepareAssignmentResponse:
    try:
        answer = await service.runtime_for(req.group_id).run(
            lambda shard, now: shard.consumer_group_prepare_assignment(ctx, req, now))
    except ApiError as e:
        return error_responses.prepare_assignment(0, e, req)
    return prepare_response(answer)


async def _install(service: GroupCoordinatorService, ctx, req) -> pm.InstallAssignmentResponse:
    try:
        answer = await service.runtime_for(req.group_id).run(
            lambda shard, now: shard.consumer_group_install_assignment(ctx, req, now))
    except ApiError as e:
        return error_responses.install_assignment(0, e, req)
    return install_response(answer)


async def check_csa_heartbeat(service: GroupCoordinatorService, handler, ctx, req, client):
    """Topic DESCRIBE on every SubscribedTopicNames, as key 68 (KAFKA-18813)."""
    names = req.subscribed_topic_names
    if names:
        verdicts = service.authorizer.authorize(client, [authz.Action(authz.DESCRIBE, authz.TOPIC, n)
                                                         for n in names])
        if not all(verdicts):
            return error_responses.csa_heartbeat(0, ApiError(ErrorCode.topic_authorization_failed), req)
    return await handler(ctx, req)


# The rows this extension adds to the service's API table (coordinator/protocol/api_table.py).
# Group READ on all three; the heartbeat subscribes to topics like key 68.
CLIENT_ASSIGNOR_ROWS: tuple[ApiSpec, ...] = (
    ApiSpec(pm.CSA_HEARTBEAT, CLIENT_ASSIGNOR_APIS[pm.CSA_HEARTBEAT], (0, 0), error_responses.csa_heartbeat,
            _csa_heartbeat, shard_operation="consumer_group_csa_heartbeat", group_operation=READ,
            topic_check=check_csa_heartbeat, subscribes=True),
    ApiSpec(pm.CONSUMER_GROUP_PREPARE_ASSIGNMENT, CLIENT_ASSIGNOR_APIS[pm.CONSUMER_GROUP_PREPARE_ASSIGNMENT], (0, 0),
            error_responses.prepare_assignment, _prepare, shard_operation="consumer_group_prepare_assignment",
            group_operation=READ),
    ApiSpec(pm.CONSUMER_GROUP_INSTALL_ASSIGNMENT, CLIENT_ASSIGNOR_APIS[pm.CONSUMER_GROUP_INSTALL_ASSIGNMENT], (0, 0),
            error_responses.install_assignment, _install, shard_operation="consumer_group_install_assignment",
            group_operation=READ),
)
