"""Each group API's error response, built in one place (Kafka: `handleOperationException`
once per API in `GroupCoordinatorService`).

Rule: whoever answers an API with an error (a handler catching its own `ApiError`, or the
service when the shard cannot serve: loading, failed, write timed out) calls
`ERROR_RESPONSES[api_key](version, error, request)`. The shape per API is Kafka's:
- a single-group API answers the error at the top level with every other field at its
  default (ConsumerGroupHeartbeat: member epoch 0, interval 0);
- OffsetCommit / TxnOffsetCommit answer it on every partition of the request;
- OffsetFetch v8+ answers it per group (`fetch_group_error`); the multi-group describe and
  delete APIs answer per group too (`described_*_error`, `deletable_group_error`).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from ..protocol import apis
from .classic.rebalance import join_response, sync_response
from .errors import ApiError
from .kio_util import build, schema
from .timeutil import from_ms

# Authorized operations in a describe answered with an error (Kafka's "not requested" value).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def consumer_group_heartbeat(version: int, error: ApiError, req: Any = None) -> Any:
    return schema("consumer_group_heartbeat", version).ConsumerGroupHeartbeatResponse(
        throttle_time=from_ms(0), error_code=error.code, error_message=error.message, member_epoch=0,
        heartbeat_interval=from_ms(0))


def join_group(version: int, error: ApiError, req: Any = None) -> Any:
    return join_response(version, error=error.code, member_id=getattr(req, "member_id", "") or "")


def sync_group(version: int, error: ApiError, req: Any = None) -> Any:
    return sync_response(version, error=error.code)


def heartbeat(version: int, error: ApiError, req: Any = None) -> Any:
    return build(schema("heartbeat", version).HeartbeatResponse, throttle_time=from_ms(0), error_code=error.code)


def leave_group(version: int, error: ApiError, req: Any = None) -> Any:
    return build(schema("leave_group", version).LeaveGroupResponse, throttle_time=from_ms(0),
                 error_code=error.code, members=())


def offset_delete(version: int, error: ApiError, req: Any = None) -> Any:
    return build(schema("offset_delete", version).OffsetDeleteResponse, error_code=error.code,
                 throttle_time=from_ms(0), topics=())


def offset_fetch(version: int, error: ApiError, req: Any = None) -> Any:
    """v0-7 (one group): the error at the top level. v8+: see `fetch_group_error`."""
    mod = schema("offset_fetch", version)
    if version < 8:
        return build(mod.OffsetFetchResponse, throttle_time=from_ms(0), topics=(), error_code=error.code)
    groups = tuple(fetch_group_error(mod, g.group_id, error.code) for g in req.groups)
    return build(mod.OffsetFetchResponse, throttle_time=from_ms(0), groups=groups)


def fetch_group_error(mod: Any, group_id: str, code: ErrorCode) -> Any:
    return build(mod.OffsetFetchResponseGroup, group_id=group_id, topics=(), error_code=code)


def _commit(api: str, prefix: str) -> Callable[[int, ApiError, Any], Any]:
    def respond(version: int, error: ApiError, req: Any = None) -> Any:
        """Every partition of the commit answered with the group-level error."""
        mod = schema(api, version)
        part_cls, topic_cls = getattr(mod, f"{prefix}ResponsePartition"), getattr(mod, f"{prefix}ResponseTopic")
        topics = tuple(build(topic_cls, name=getattr(t, "name", None), topic_id=getattr(t, "topic_id", None),
                             partitions=tuple(build(part_cls, partition_index=p.partition_index,
                                                    error_code=error.code) for p in t.partitions))
                       for t in req.topics)
        return build(getattr(mod, f"{prefix}Response"), throttle_time=from_ms(0), topics=topics)
    return respond


offset_commit = _commit("offset_commit", "OffsetCommit")
txn_offset_commit = _commit("txn_offset_commit", "TxnOffsetCommit")


def described_group_error(mod: Any, group_id: str, error: ApiError) -> Any:
    """DescribeGroups: one group's entry answered with an error."""
    return build(mod.DescribedGroup, error_code=error.code, error_message=error.message, group_id=group_id,
                 group_state="", protocol_type="", protocol_data="", members=(),
                 authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


def described_consumer_group_error(mod: Any, group_id: str, error: ApiError) -> Any:
    """ConsumerGroupDescribe: one group's entry answered with an error."""
    return build(mod.DescribedGroup, error_code=error.code, error_message=error.message, group_id=group_id,
                 group_state="", group_epoch=0, assignment_epoch=0, assignor_name="", members=(),
                 authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


def deletable_group_error(mod: Any, group_id: str, code: ErrorCode) -> Any:
    return build(mod.DeletableGroupResult, group_id=group_id, error_code=code)


def list_groups(version: int, error: ApiError, req: Any = None) -> Any:
    return build(schema("list_groups", version).ListGroupsResponse, throttle_time=from_ms(0),
                 error_code=error.code, groups=())


def describe_groups(version: int, error: ApiError, req: Any = None) -> Any:
    mod = schema("describe_groups", version)
    return build(mod.DescribeGroupsResponse, throttle_time=from_ms(0),
                 groups=tuple(described_group_error(mod, g, error) for g in req.groups))


def consumer_group_describe(version: int, error: ApiError, req: Any = None) -> Any:
    mod = schema("consumer_group_describe", version)
    return mod.ConsumerGroupDescribeResponse(
        throttle_time=from_ms(0), groups=tuple(described_consumer_group_error(mod, g, error) for g in req.group_ids))


def delete_groups(version: int, error: ApiError, req: Any = None) -> Any:
    mod = schema("delete_groups", version)
    return build(mod.DeleteGroupsResponse, throttle_time=from_ms(0),
                 results=tuple(deletable_group_error(mod, g, error.code) for g in req.groups_names))


ERROR_RESPONSES: dict[int, Callable[[int, ApiError, Any], Any]] = {
    apis.CONSUMER_GROUP_HEARTBEAT: consumer_group_heartbeat,
    apis.CONSUMER_GROUP_DESCRIBE: consumer_group_describe,
    apis.JOIN_GROUP: join_group,
    apis.SYNC_GROUP: sync_group,
    apis.HEARTBEAT: heartbeat,
    apis.LEAVE_GROUP: leave_group,
    apis.OFFSET_COMMIT: offset_commit,
    apis.TXN_OFFSET_COMMIT: txn_offset_commit,
    apis.OFFSET_FETCH: offset_fetch,
    apis.OFFSET_DELETE: offset_delete,
    apis.DESCRIBE_GROUPS: describe_groups,
    apis.LIST_GROUPS: list_groups,
    apis.DELETE_GROUPS: delete_groups,
}
