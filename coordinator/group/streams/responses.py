"""StreamsGroupHeartbeat's response, at the request's version (v0 from kio, v1 generated:
docs/design/messages.md), and the request checks Kafka makes before the coordinator runs
(`throwIfStreamsGroupHeartbeatRequestIsInvalid`, `...IsUsingUnsupportedFeatures`).

Rules:
- v1's AcceptableRecoveryLag is int64, v0's int32: the value is the group's setting either way;
- MISSING_CLIENT_TAGS (status 6) exists only from v1 and is never sent to a v0 member;
- every check names the field that is wrong, with Kafka's message.
"""
from __future__ import annotations

from datetime import timedelta

from kio.schema.errors import ErrorCode

from ...protocol.kio_build import NO_THROTTLE
from ..errors import ApiError, invalid_request
from ..kio_util import build, schema
from .model import Tasks, TaskSet, by_subtopology
from .topology import MISSING_CLIENT_TAGS

API = "streams_group_heartbeat"
LEAVE_EPOCH, LEAVE_STATIC_EPOCH = -1, -2


def error_response(version: int, code: ErrorCode, message: str | None):
    mod = schema(API, version, "response")
    return build(mod.StreamsGroupHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=code,
                 error_message=message, member_id="", member_epoch=0, heartbeat_interval=timedelta(0),
                 task_offset_interval=timedelta(0), acceptable_recovery_lag=-1, status=(), active_tasks=None,
                 standby_tasks=None, warmup_tasks=None, endpoint_information_epoch=0,
                 partitions_by_user_endpoint=None)


def response_schema(version: int):
    return schema(API, version, "response")


def response(version: int, *, member_id: str, member_epoch: int, heartbeat_ms: int, task_offset_ms: int,
             recovery_lag: int, statuses: list[tuple[int, str]], tasks: Tasks | None, endpoint_epoch: int,
             endpoints: tuple | None = None):
    mod = response_schema(version)

    def ids(ts: TaskSet):
        return tuple(mod.TaskIds(subtopology_id=s, partitions=tuple(ps)) for s, ps in by_subtopology(ts))

    shown = [mod.Status(status_code=c, status_detail=d) for c, d in statuses
             if version >= 1 or c != MISSING_CLIENT_TAGS]
    return build(mod.StreamsGroupHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                 error_message=None, member_id=member_id, member_epoch=member_epoch,
                 heartbeat_interval=timedelta(milliseconds=heartbeat_ms),
                 task_offset_interval=timedelta(milliseconds=task_offset_ms),
                 acceptable_recovery_lag=recovery_lag, status=tuple(shown),
                 active_tasks=None if tasks is None else ids(tasks.active),
                 standby_tasks=None if tasks is None else ids(tasks.standby),
                 warmup_tasks=None if tasks is None else ids(tasks.warmup),
                 endpoint_information_epoch=endpoint_epoch, partitions_by_user_endpoint=endpoints)


def _empty(value: str | None, message: str) -> None:
    if value is not None and not value.strip():
        raise invalid_request(message)


def _ms(v) -> int:
    return v if isinstance(v, int) else int(v.total_seconds() * 1000)


def validate(req) -> None:
    """Kafka's request checks, in its order (unsupported features first)."""
    if req.topology is not None:
        for s in req.topology.subtopologies:
            if s.source_topic_regex:
                raise invalid_request("Regular expressions for source topics are not supported yet.")
    _empty(req.member_id, "MemberId can't be empty.")
    _empty(req.group_id, "GroupId can't be empty.")
    _empty(req.instance_id, "InstanceId can't be empty.")
    _empty(req.rack_id, "RackId can't be empty.")
    owned = (req.active_tasks, req.standby_tasks, req.warmup_tasks)
    if req.member_epoch == 0:
        if _ms(req.rebalance_timeout) == -1:
            raise invalid_request("RebalanceTimeoutMs must be provided in first request.")
        for tasks, name in zip(owned, ("ActiveTasks", "StandbyTasks", "WarmupTasks"), strict=True):
            if tasks is None or tasks:      # Kafka 4.4: null is not empty either
                raise invalid_request(f"{name} must be empty when (re-)joining.")
        if req.topology is None:
            raise invalid_request("Topology must be non-null when (re-)joining.")
        for s in req.topology.subtopologies:
            for t in s.state_changelog_topics:
                if t.partitions != 0:
                    raise ApiError(ErrorCode.streams_invalid_topology,
                                   f"Changelog topic {t.name} must have an undefined partition count, "
                                   f"but it is set to {t.partitions}.")
    elif req.member_epoch == LEAVE_STATIC_EPOCH:
        if req.instance_id is None:
            raise invalid_request("InstanceId can't be null.")
    elif req.member_epoch < LEAVE_STATIC_EPOCH:
        raise invalid_request(f"MemberEpoch is {req.member_epoch}, but must be greater than or equal to -2.")
    if any(t is not None for t in owned) and any(t is None for t in owned):
        raise invalid_request("If one task-type is non-null, all must be non-null.")
    if req.member_epoch != 0 and req.topology is not None:
        raise invalid_request("Topology can only be provided when (re-)joining.")
