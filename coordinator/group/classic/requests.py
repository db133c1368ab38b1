"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup in one shape each, whatever the version: the
shard builds them at its door (the classic contribution's request shapes, shard.py), so
classic/ and migration/ read fields, never versions, for what the request says.

Rules:
- the shape has the newest version's field names; a field an older version lacks gets what
  Kafka assumes for it (JoinGroup v0 has no rebalance timeout: the session timeout is used;
  no group instance id before JoinGroup v5, SyncGroup v3, Heartbeat v3; no reason before
  JoinGroup v8; SyncGroup names its protocol from v5; LeaveGroup v0-v2 name one member, v3+
  a list of (member id, group instance id));
- what a version changes is a field too: the version's response classes (`response_schema`;
  JoinGroup's `answer`, built once per version, with what its version changes in the
  rebalance: KIP-394's MEMBER_ID_REQUIRED from v4, KIP-814's SkipAssignment from v9, a
  nullable protocol name from v7), and LeaveGroup's `lists_members` (v3+ answer per member);
- the version is read once, from the request's kio class (`__version__`, the version it was
  decoded at), never probed field by field;
- one small copy per request, on APIs that run once per rebalance or per heartbeat interval
  of a classic member: the consumer group heartbeat reads kio's request directly, and
  OffsetCommit's shape (offsets/requests.py) copies no topic.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import timedelta
from types import ModuleType
from typing import Any

from ..kio_util import schema


@dataclass(frozen=True, slots=True)
class JoinAnswer:
    """What a JoinGroup version changes in the rebalance and its answer (one per version)."""
    response_schema: ModuleType
    member_id_required: bool      # v4+: an unknown member gets MEMBER_ID_REQUIRED (KIP-394)
    skip_assignment: bool         # v9+: a static leader rejoining Stable skips the assignor (KIP-814)
    nullable_protocol_name: bool  # v7+: the protocol name may be null


@functools.cache
def join_answer(version: int) -> JoinAnswer:
    return JoinAnswer(schema("join_group", version), version >= 4, version >= 9, version >= 7)


@dataclass(frozen=True, slots=True)
class JoinGroup:
    group_id: str
    member_id: str
    group_instance_id: str | None
    session_timeout: timedelta
    rebalance_timeout: timedelta
    protocol_type: str
    protocols: tuple[Any, ...]        # each with .name and .metadata, as the client sent them
    reason: str | None
    answer: JoinAnswer

    @classmethod
    def of(cls, req: Any) -> JoinGroup:
        v = req.__version__
        return cls(req.group_id, req.member_id, req.group_instance_id if v >= 5 else None, req.session_timeout,
                   req.rebalance_timeout if v >= 1 else req.session_timeout, req.protocol_type, tuple(req.protocols),
                   req.reason if v >= 8 else None, join_answer(v))


@dataclass(frozen=True, slots=True)
class SyncGroup:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: tuple[Any, ...]      # each with .member_id and .assignment
    response_schema: ModuleType

    @classmethod
    def of(cls, req: Any) -> SyncGroup:
        v = req.__version__
        return cls(req.group_id, req.generation_id, req.member_id, req.group_instance_id if v >= 3 else None,
                   req.protocol_type if v >= 5 else None, req.protocol_name if v >= 5 else None,
                   tuple(req.assignments), schema("sync_group", v))


@dataclass(frozen=True, slots=True)
class Heartbeat:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    response_schema: ModuleType

    @classmethod
    def of(cls, req: Any) -> Heartbeat:
        v = req.__version__
        return cls(req.group_id, req.generation_id, req.member_id, req.group_instance_id if v >= 3 else None,
                   schema("heartbeat", v))


@dataclass(frozen=True, slots=True)
class LeaveGroup:
    group_id: str
    members: tuple[tuple[str, str | None], ...]    # (member id, group instance id) of each leaving member
    lists_members: bool            # v3+: the answer lists each member's error; v0-2 carry it at the top
    response_schema: ModuleType

    @classmethod
    def of(cls, req: Any) -> LeaveGroup:
        v = req.__version__
        if v >= 3:
            return cls(req.group_id, tuple((m.member_id, m.group_instance_id) for m in req.members), True,
                       schema("leave_group", v))
        return cls(req.group_id, ((req.member_id, None),), False, schema("leave_group", v))
