"""Serving the streams group APIs (KIP-1071; docs/design/streams-groups.md): StreamsGroupHeartbeat
(88) v0-v1, StreamsGroupDescribe (89) v0-v1 and StreamsGroupTopologyDescriptionUpdate (93) v0,
as Kafka 4.4's KafkaApis serves them around its group coordinator.

Rules of this module:
- `STREAMS_ROWS` are an extension's rows of the service's API table
  (coordinator/protocol/api_table.py): the handlers are the callables below, the group core
  (coordinator/group/streams/) builds the answers as shard operations.
- StreamsGroupHeartbeat: Group READ (the row); with a topology, the Kafka internal topics it
  names (or kcoord's state topic) and invalid names answer STREAMS_INVALID_TOPOLOGY before
  anything else (group/streams/topic_names.py), then, with an authorizer, a topology with any
  topic the member may not DESCRIBE answers TOPIC_AUTHORIZATION_FAILED unrun. After the shard
  answered with MISSING_INTERNAL_TOPICS, the internal topics it misses are created through
  kcoord's link (streams_topics.py) only if the member's principal has CREATE on the CLUSTER or
  on every one of them; else "; Unauthorized to CREATE on topics a, b." is appended to the
  status (or the status added). Remembered creation failures are appended as "; Creation
  failed: a (message)." (Kafka 4.4's `handleStreamsGroupHeartbeat`.)
- StreamsGroupDescribe: Group DESCRIBE per group; refused groups answer
  GROUP_AUTHORIZATION_FAILED first, then the described ones in request order (Kafka's order);
  with an authorizer, topics the client may not DESCRIBE are left out of every topology shown.
  AuthorizedOperations is filled for groups described without error when asked.
- StreamsGroupTopologyDescriptionUpdate: Group READ, then UNSUPPORTED_VERSION "The broker has no
  streams group topology description plugin configured." (kcoord has no such plugin, as a Kafka
  broker by default).
- A shard that cannot serve (loading, not the coordinator, a failed write) answers the API's
  error response with that code, as the other group APIs do.
"""
from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from kio.schema.errors import ErrorCode

from .. import authz
from ..authz import Action, authorized_operations
from ..group.errors import ApiError
from ..group.kio_util import build
from ..group.shard import RequestContext
from ..group.streams.membership import group_settings
from ..group.streams.records import topology_from
from ..group.streams.responses import error_response
from ..group.streams.topic_names import (
    CreatableTopic,
    internal_topics_to_create,
    invalid_topology,
    required_topics,
)
from ..group.streams.topology import MISSING_INTERNAL_TOPICS
from ..protocol.api_table import DESCRIBE, READ, ApiSpec, Groups, group_ids_field
from ..protocol.apis import (
    STREAMS_GROUP_DESCRIBE,
    STREAMS_GROUP_HEARTBEAT,
    STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE,
)
from ..protocol.kio_build import NO_THROTTLE
from ..protocol.messages import schema
from ..protocol.service import ClientInfo
from ..security.metrics import count_denied
from .streams_topics import InternalTopicCreator, link_opener

CREATE = "CREATE"
NO_PLUGIN = "The broker has no streams group topology description plugin configured."

# The service (wiring.py) is handed to the handlers; this module never imports it.
Service = Any
# topic names -> those the member's principal may not create (None: no authorizer, all allowed)
RefusedCreates = Callable[[list[str]], Awaitable[list[str]]]

_creators: weakref.WeakKeyDictionary[Any, InternalTopicCreator] = weakref.WeakKeyDictionary()


def creator_of(service: Service) -> InternalTopicCreator:
    """The service's internal-topic creator, made on first use with kcoord's upstream link."""
    creator = _creators.get(service)
    if creator is None:
        creator = _creators[service] = InternalTopicCreator(
            link_opener(service.state_topic), lambda: service.image,
            on_created=lambda: getattr(service, "request_metadata_refresh", lambda: None)(),
            fresh=getattr(service, "fresh_topics", None))
    return creator


# ------------------------------------------------------------------ error responses
def heartbeat_error(version: int, error: Any, request: Any = None) -> Any:
    return error_response(version, error.code, error.message)


def _failed_group(mod: Any, group_id: str, code: ErrorCode, message: str | None = None) -> Any:
    return build(mod.DescribedGroup, error_code=code, error_message=message, group_id=group_id, group_state="",
                 group_epoch=0, assignment_epoch=0, topology=None, members=())


def describe_error(version: int, error: Any, request: Any = None) -> Any:
    mod = schema("streams_group_describe", version)
    ids = request.group_ids if request is not None else ()
    return build(mod.StreamsGroupDescribeResponse, throttle_time=NO_THROTTLE,
                 groups=tuple(_failed_group(mod, g, error.code, error.message) for g in ids))


def topology_update_error(version: int, error: Any, request: Any = None) -> Any:
    mod = schema("streams_group_topology_description_update", version)
    return mod.StreamsGroupTopologyDescriptionUpdateResponse(throttle_time=NO_THROTTLE, error_code=error.code,
                                                             error_message=error.message)


# ------------------------------------------------------------------ StreamsGroupHeartbeat
async def heartbeat(service: Service, ctx: RequestContext, req: Any, refused_creates: RefusedCreates | None = None):
    version = ctx.api_version
    if req.topology is not None:
        message = invalid_topology(required_topics(req.topology), service.config.state_topic)
        if message is not None:
            return error_response(version, ErrorCode.streams_invalid_topology, message)
    gid = req.group_id
    creatable: list[CreatableTopic] = []
    interval: list[int] = []

    def op(shard, now_ms):
        result = shard.streams_group_heartbeat(ctx, req, now_ms)
        if result.response.error_code == ErrorCode.none and _missing_internal(result.response):
            group = shard.groups.get(gid)
            topology = getattr(group, "topology", None)
            if topology is None and req.topology is not None:
                topology = topology_from(req.topology)
            creatable.extend(internal_topics_to_create(shard, gid, topology))
            interval.append(group_settings(shard, gid).heartbeat_interval_ms)
        return result
    try:
        response = await service.runtime_for(gid).run(op)
    except ApiError as e:
        return heartbeat_error(version, e)
    if not creatable:
        return response
    return await _create_internal_topics(service, response, creatable, interval[0], refused_creates)


def _missing_internal(response: Any) -> bool:
    return any(s.status_code == MISSING_INTERNAL_TOPICS for s in response.status or ())


async def _create_internal_topics(service: Service, response: Any, topics: list[CreatableTopic], interval_ms: int,
                                  refused_creates: RefusedCreates | None) -> Any:
    """Kafka 4.4's creation step after the coordinator answered (module rules)."""
    names = [t.name for t in topics]
    refused = await refused_creates(names) if refused_creates is not None else []
    if refused:
        return _with_detail(response, f"Unauthorized to CREATE on topics {', '.join(refused)}.")
    creator = creator_of(service)
    creator.create(topics, 2 * interval_ms)
    failures = creator.failures(names)
    if not failures:
        return response
    return _with_detail(response, "Creation failed: " + ", ".join(f"{t} ({m})" for t, m in failures) + ".")


def _with_detail(response: Any, detail: str) -> Any:
    """The MISSING_INTERNAL_TOPICS status with ``detail`` appended after "; " (or added)."""
    statuses = list(response.status or ())
    for i, s in enumerate(statuses):
        if s.status_code == MISSING_INTERNAL_TOPICS:
            statuses[i] = dataclasses.replace(s, status_detail=f"{s.status_detail}; {detail}")
            break
    else:
        statuses.append(type(statuses[0])(status_code=MISSING_INTERNAL_TOPICS, status_detail=detail)
                        if statuses else schema("streams_group_heartbeat", response.__version__).Status(
                            status_code=MISSING_INTERNAL_TOPICS, status_detail=detail))
    return dataclasses.replace(response, status=tuple(statuses))


async def heartbeat_topics(checks: Any, handler, ctx: RequestContext, req: Any, client: ClientInfo):
    """The heartbeat's topic checks with an authorizer (topic_checks.TopicChecks is ``checks``):
    the names first, then DESCRIBE on every topic of the topology, then the handler with the
    member's CREATE rights for the internal topics."""
    if req.topology is not None:
        names = required_topics(req.topology)
        message = invalid_topology(names)
        if message is not None:
            return error_response(ctx.api_version, ErrorCode.streams_invalid_topology, message)
        if names:
            actions = [Action(authz.DESCRIBE, authz.TOPIC, n) for n in names]
            await checks.prepare(client, actions)
            verdicts = checks.authorizer.authorize(client, actions)
            if not all(verdicts):
                count_denied(checks.apis[STREAMS_GROUP_HEARTBEAT].name, authz.TOPIC, verdicts.count(False))
                return error_response(ctx.api_version, ErrorCode.topic_authorization_failed, None)

    async def refused_creates(topics: list[str]) -> list[str]:
        cluster = Action(CREATE, authz.CLUSTER, authz.CLUSTER_NAME)
        per_topic = [Action(CREATE, authz.TOPIC, t) for t in topics]
        await checks.prepare(client, [cluster, *per_topic])
        if checks.authorizer.authorize(client, [cluster])[0]:
            return []
        verdicts = checks.authorizer.authorize(client, per_topic)
        refused = [t for t, ok in zip(topics, verdicts) if not ok]
        if refused:
            count_denied(checks.apis[STREAMS_GROUP_HEARTBEAT].name, authz.TOPIC, len(refused))
        return refused
    return await handler(ctx, req, refused_creates)


# ------------------------------------------------------------------ StreamsGroupDescribe
async def describe(service: Service, ctx: RequestContext, req: Any):
    version = ctx.api_version
    mod = schema("streams_group_describe", version)
    denied = ctx.denied_groups
    allowed = [g for g in req.group_ids if g not in denied]
    by_partition: dict[int, list[str]] = {}
    for g in allowed:
        by_partition.setdefault(service.partition_for(g), []).append(g)
    described: dict[str, Any] = {}
    for partition, ids in by_partition.items():
        part = dataclasses.replace(req, group_ids=tuple(ids))
        try:
            answer = await service.runtimes[partition].run(
                lambda shard, now, part=part: shard.streams_group_describe(ctx, part, now))
            described.update((g.group_id, g) for g in answer.groups)
        except ApiError as e:
            described.update((g, _failed_group(mod, g, e.code, e.message)) for g in ids)
    groups = [_failed_group(mod, g, ErrorCode.group_authorization_failed) for g in req.group_ids if g in denied]
    groups += [described[g] for g in allowed]
    return build(mod.StreamsGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=tuple(groups))


async def describe_topics(checks: Any, handler, ctx: RequestContext, req: Any, client: ClientInfo):
    """With an authorizer: AuthorizedOperations when asked, and every topology shown without
    the topics the client may not DESCRIBE (Kafka 4.4's `handleStreamsGroupDescribe`)."""
    response = await handler(ctx, req)
    topics = sorted({n for g in response.groups if g.topology is not None for s in g.topology.subtopologies or ()
                     for n in _topics_of(s)})
    allowed: frozenset[str] = frozenset()
    if topics:
        actions = [Action(authz.DESCRIBE, authz.TOPIC, t) for t in topics]
        await checks.prepare(client, actions)
        allowed = frozenset(t for t, ok in zip(topics, checks.authorizer.authorize(client, actions)) if ok)
    groups = []
    for g in response.groups:
        if g.topology is not None and g.topology.subtopologies:
            g = dataclasses.replace(g, topology=dataclasses.replace(g.topology, subtopologies=tuple(
                _visible(s, allowed) for s in g.topology.subtopologies)))
        if req.include_authorized_operations and g.error_code == ErrorCode.none:
            g = dataclasses.replace(g, authorized_operations=authorized_operations(checks.authorizer, client,
                                                                                   g.group_id))
        groups.append(g)
    return dataclasses.replace(response, groups=tuple(groups))


def _topics_of(s: Any) -> list[str]:
    return [*s.source_topics, *s.repartition_sink_topics, *(t.name for t in s.repartition_source_topics),
            *(t.name for t in s.state_changelog_topics)]


def _visible(s: Any, allowed: frozenset[str]) -> Any:
    return dataclasses.replace(
        s, source_topics=tuple(t for t in s.source_topics if t in allowed),
        repartition_sink_topics=tuple(t for t in s.repartition_sink_topics if t in allowed),
        repartition_source_topics=tuple(t for t in s.repartition_source_topics if t.name in allowed),
        state_changelog_topics=tuple(t for t in s.state_changelog_topics if t.name in allowed))


# ------------------------------------------------------------------ API 93
async def topology_description_update(service: Service, ctx: RequestContext, req: Any):
    return topology_update_error(ctx.api_version, ApiError(ErrorCode.unsupported_version, NO_PLUGIN))


# The rows this extension adds to the service's API table (coordinator/protocol/api_table.py).
STREAMS_ROWS: tuple[ApiSpec, ...] = (
    ApiSpec(STREAMS_GROUP_HEARTBEAT, "StreamsGroupHeartbeat", (0, 1), heartbeat_error, heartbeat,
            shard_operation="streams_group_heartbeat", group_operation=READ, topic_check=heartbeat_topics),
    ApiSpec(STREAMS_GROUP_DESCRIBE, "StreamsGroupDescribe", (0, 1), describe_error, describe,
            shard_operation="streams_group_describe", group_operation=DESCRIBE, groups=Groups.MANY,
            group_ids=group_ids_field, topic_check=describe_topics),
    ApiSpec(STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE, "StreamsGroupTopologyDescriptionUpdate", (0, 0),
            topology_update_error, topology_description_update, group_operation=READ),
)
