"""Each group API's error response, built in one place (Kafka: `handleOperationException`
once per API in `GroupCoordinatorService`). Wire knowledge: the shape of an answer that
carries only an error.

Rules of this module:
- Whoever answers an API with an error (a handler catching its own error, the service when
  the shard cannot serve it: loading, failed, write timed out; the authorization stage; the
  gateway refusing a request) calls the builder its row names in the API table
  (api_table.py `ApiSpec.error_response`): ``builder(version, error, request)``, where
  ``error`` has a Kafka `code` and a `message` (the core's `ApiError`).
- The shape per API is Kafka's:
  - a single-group API answers the error at the top level with every other field at its
    default (ConsumerGroupHeartbeat: member epoch 0, interval 0);
  - OffsetCommit / TxnOffsetCommit answer it on every partition of the request, each topic
    named as the request named it (by name, or by id from OffsetCommit v10 / TxnOffsetCommit v6);
- Builders answer the versions kio lacks too (coordinator/protocol/messages: DeleteGroups v3,
  TxnOffsetCommit v6, generated from Kafka 4.4's definitions).
- An error code a version does not know is mapped here, once, to the one Kafka answers at
  that version (`txn_offset_commit_code`): the core raises the newest version's codes.
  - OffsetFetch v8+ answers it per group (`fetch_group_error`); the multi-group describe
    and delete APIs answer per group too (`described_*_error`, `deletable_group_error`).
- kcoord's private APIs (client assignors 32700-32702, connect groups 32703-32706) carry
  their code as a plain int16: the private codes are no kio ErrorCode.
- This module names no API key: the API table pairs keys with builders.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i32

from . import connect_messages as cm
from . import private_messages as pm
from .kio_build import NO_THROTTLE, build
from .messages import schema

# Authorized operations in a describe answered with an error (Kafka's "not requested" value).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


class Error(Protocol):
    """What a builder reads of an error (the core's `ApiError`)."""

    code: ErrorCode
    message: str | None


# builder(version, error, request): the API's response carrying only ``error``.
ErrorResponse = Callable[[int, Any, Any], Any]


def consumer_group_heartbeat(version: int, error: Error, req: Any = None) -> Any:
    return schema("consumer_group_heartbeat", version).ConsumerGroupHeartbeatResponse(
        throttle_time=NO_THROTTLE, error_code=error.code, error_message=error.message, member_epoch=0,
        heartbeat_interval=NO_THROTTLE)


def join_group(version: int, error: Error, req: Any = None) -> Any:
    """JoinGroup's answer with no member list (the member id the request carried, if any)."""
    mod = schema("join_group", version)
    return build(mod.JoinGroupResponse, throttle_time=NO_THROTTLE, error_code=error.code, generation_id=-1,
                 protocol_type=None, protocol_name="" if version < 7 else None,  # not nullable before v7
                 leader="", skip_assignment=False, member_id=getattr(req, "member_id", "") or "", members=())


def sync_group(version: int, error: Error, req: Any = None) -> Any:
    return build(schema("sync_group", version).SyncGroupResponse, throttle_time=NO_THROTTLE, error_code=error.code,
                 protocol_type=None, protocol_name=None, assignment=b"")


def heartbeat(version: int, error: Error, req: Any = None) -> Any:
    return build(schema("heartbeat", version).HeartbeatResponse, throttle_time=NO_THROTTLE, error_code=error.code)


def leave_group(version: int, error: Error, req: Any = None) -> Any:
    return build(schema("leave_group", version).LeaveGroupResponse, throttle_time=NO_THROTTLE,
                 error_code=error.code, members=())


def offset_delete(version: int, error: Error, req: Any = None) -> Any:
    return build(schema("offset_delete", version).OffsetDeleteResponse, error_code=error.code,
                 throttle_time=NO_THROTTLE, topics=())


def offset_fetch(version: int, error: Error, req: Any = None) -> Any:
    """v0-7 (one group): the error at the top level. v8+: see `fetch_group_error`."""
    mod = schema("offset_fetch", version)
    if version < 8:
        return build(mod.OffsetFetchResponse, throttle_time=NO_THROTTLE, topics=(), error_code=error.code)
    groups = tuple(fetch_group_error(mod, g.group_id, error.code) for g in req.groups)
    return build(mod.OffsetFetchResponse, throttle_time=NO_THROTTLE, groups=groups)


def fetch_group_error(mod: Any, group_id: str, code: ErrorCode) -> Any:
    return build(mod.OffsetFetchResponseGroup, group_id=group_id, topics=(), error_code=code)


def _commit(api: str, prefix: str, wire_code: Callable[[int, ErrorCode], ErrorCode] | None = None) -> ErrorResponse:
    def respond(version: int, error: Error, req: Any = None) -> Any:
        """Every partition of the commit answered with the group-level error."""
        mod = schema(api, version)
        code = error.code if wire_code is None else wire_code(version, error.code)
        part_cls, topic_cls = getattr(mod, f"{prefix}ResponsePartition"), getattr(mod, f"{prefix}ResponseTopic")
        topics = tuple(build(topic_cls, name=getattr(t, "name", None), topic_id=getattr(t, "topic_id", None),
                             partitions=tuple(build(part_cls, partition_index=p.partition_index,
                                                    error_code=code) for p in t.partitions))
                       for t in req.topics)
        return build(getattr(mod, f"{prefix}Response"), throttle_time=NO_THROTTLE, topics=topics)
    return respond


# TxnOffsetCommit's codes that older versions do not know, and what Kafka 4.4 answers instead.
_TXN_COMMIT_FIRST = {
    # KIP-1319: TxnOffsetCommitRequest.supportsGroupIdNotFoundError / supportsStaleMemberEpochError
    # (v6+); OffsetMetadataManager throws ILLEGAL_GENERATION below.
    ErrorCode.group_id_not_found: (6, ErrorCode.illegal_generation),
    ErrorCode.stale_member_epoch: (6, ErrorCode.illegal_generation),
    # KIP-890: "Version 4 adds support for new error code TRANSACTION_ABORTABLE"; older requests
    # get INVALID_TXN_STATE (AddPartitionsToTxnManager, "for backward compatibility").
    ErrorCode.transaction_abortable: (4, ErrorCode.invalid_txn_state),
    # KafkaApis.handleTxnOffsetCommitRequest answers v0-1 COORDINATOR_NOT_AVAILABLE where the
    # coordinator says COORDINATOR_LOAD_IN_PROGRESS (Kafka 4.4's sendResponse, version < 2).
    ErrorCode.coordinator_load_in_progress: (2, ErrorCode.coordinator_not_available),
}


def txn_offset_commit_code(version: int, code: ErrorCode) -> ErrorCode:
    """``code`` as TxnOffsetCommit ``version`` carries it (the table above)."""
    mapped = _TXN_COMMIT_FIRST.get(code)
    return code if mapped is None or version >= mapped[0] else mapped[1]


offset_commit = _commit("offset_commit", "OffsetCommit")
txn_offset_commit = _commit("txn_offset_commit", "TxnOffsetCommit", txn_offset_commit_code)


def add_offsets_to_txn(version: int, error: Error, req: Any = None) -> Any:
    return build(schema("add_offsets_to_txn", version).AddOffsetsToTxnResponse, throttle_time=NO_THROTTLE,
                 error_code=error.code)


def described_group_error(mod: Any, group_id: str, error: Error) -> Any:
    """DescribeGroups: one group's entry answered with an error."""
    return build(mod.DescribedGroup, error_code=error.code, error_message=error.message, group_id=group_id,
                 group_state="", protocol_type="", protocol_data="", members=(),
                 authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


def described_consumer_group_error(mod: Any, group_id: str, error: Error) -> Any:
    """ConsumerGroupDescribe: one group's entry answered with an error."""
    return build(mod.DescribedGroup, error_code=error.code, error_message=error.message, group_id=group_id,
                 group_state="", group_epoch=0, assignment_epoch=0, assignor_name="", members=(),
                 authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


def deletable_group_error(mod: Any, group_id: str, code: ErrorCode) -> Any:
    return build(mod.DeletableGroupResult, group_id=group_id, error_code=code)


def list_groups(version: int, error: Error, req: Any = None) -> Any:
    return build(schema("list_groups", version).ListGroupsResponse, throttle_time=NO_THROTTLE,
                 error_code=error.code, groups=())


def describe_groups(version: int, error: Error, req: Any = None) -> Any:
    mod = schema("describe_groups", version)
    return build(mod.DescribeGroupsResponse, throttle_time=NO_THROTTLE,
                 groups=tuple(described_group_error(mod, g, error) for g in req.groups))


def consumer_group_describe(version: int, error: Error, req: Any = None) -> Any:
    mod = schema("consumer_group_describe", version)
    return mod.ConsumerGroupDescribeResponse(
        throttle_time=NO_THROTTLE,
        groups=tuple(described_consumer_group_error(mod, g, error) for g in req.group_ids))


def delete_groups(version: int, error: Error, req: Any = None) -> Any:
    mod = schema("delete_groups", version)
    return build(mod.DeleteGroupsResponse, throttle_time=NO_THROTTLE,
                 results=tuple(deletable_group_error(mod, g, error.code) for g in req.groups_names))


# ------------------------------------------------- kcoord's private APIs (v0 only)
def csa_heartbeat(version: int, error: Error, req: Any = None) -> pm.CsaHeartbeatResponse:
    return pm.CsaHeartbeatResponse(throttle_time=NO_THROTTLE, error_code=i16(int(error.code)),  # type: ignore[arg-type]
                                   error_message=error.message, member_epoch=i32(0),
                                   heartbeat_interval=NO_THROTTLE)  # type: ignore[arg-type]


def prepare_assignment(version: int, error: Error, req: Any = None) -> pm.PrepareAssignmentResponse:
    return pm.PrepareAssignmentResponse(throttle_time=NO_THROTTLE, error_code=i16(int(error.code)),  # type: ignore[arg-type]
                                        error_message=error.message)


def install_assignment(version: int, error: Error, req: Any = None) -> pm.InstallAssignmentResponse:
    return pm.InstallAssignmentResponse(throttle_time=NO_THROTTLE, error_code=i16(int(error.code)),  # type: ignore[arg-type]
                                        error_message=error.message)


def connect_group_heartbeat(version: int, error: Error, req: Any = None) -> cm.ConnectGroupHeartbeatResponse:
    return cm.heartbeat_response(error_code=int(error.code), error_message=error.message)


def connect_prepare_assignment(version: int, error: Error, req: Any = None) -> cm.ConnectPrepareAssignmentResponse:
    return cm.prepare_response(error_code=int(error.code), error_message=error.message)


def connect_install_assignment(version: int, error: Error, req: Any = None) -> cm.ConnectInstallAssignmentResponse:
    return cm.install_response(error_code=int(error.code), error_message=error.message)


def connect_group_describe(version: int, error: Error, req: Any = None) -> cm.ConnectGroupDescribeResponse:
    """Every group of the request answered with the error."""
    ids = tuple(getattr(req, "group_ids", ()) or ())
    return cm.describe_response(tuple(cm.described_group(error_code=int(error.code), error_message=error.message,
                                                         group_id=g) for g in ids))
