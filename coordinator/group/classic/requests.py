"""JoinGroup and SyncGroup in one shape each, whatever the version: the shard builds them at
its door (shard.py), so classic/ and migration/ read fields, never versions.

Rules:
- the shape has the newest version's field names; a field an older version lacks gets what
  Kafka assumes for it (JoinGroup v0 has no rebalance timeout: the session timeout is used;
  no group instance id before v5, no reason before v8; SyncGroup names its protocol from v5);
- one copy per request, on APIs that run once per rebalance: the consumer group heartbeat and
  OffsetCommit, which run all the time, read kio's request directly.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any


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

    @classmethod
    def of(cls, req: Any) -> JoinGroup:
        return cls(req.group_id, req.member_id, getattr(req, "group_instance_id", None), req.session_timeout,
                   getattr(req, "rebalance_timeout", req.session_timeout), req.protocol_type, tuple(req.protocols),
                   getattr(req, "reason", None))


@dataclass(frozen=True, slots=True)
class SyncGroup:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: tuple[Any, ...]      # each with .member_id and .assignment

    @classmethod
    def of(cls, req: Any) -> SyncGroup:
        return cls(req.group_id, req.generation_id, req.member_id, getattr(req, "group_instance_id", None),
                   getattr(req, "protocol_type", None), getattr(req, "protocol_name", None), tuple(req.assignments))
