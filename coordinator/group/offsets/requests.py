"""OffsetCommit and OffsetFetch (one group) in one shape each, whatever the version: the shard
builds them at its door (the offsets contribution's request shapes), so ops.py reads fields,
never versions, for what the request says.

Rules:
- the shape has the newest version's meaning; a field an older version lacks gets what Kafka
  assumes for it (no group instance id before OffsetCommit v7; a retention time only in
  v2-v4, else the broker's (-1); no leader epoch before v6, -1; no require_stable before
  OffsetFetch v7);
- no copy of what grows with the request: the topics and partitions are kio's, as sent. The
  shape says how to read them (`by_id`: v10+ names topics by id; `leader_epochs`: v6+
  partitions carry one), and ops.py reads each field once per partition, as it did; the
  commit path pays one small object per request (callgrind: less than the getattr probes it
  replaces, which miss, and so raise, on every version that lacks the field).
"""
from __future__ import annotations

from typing import Any

from ..timeutil import to_ms


class OffsetCommit:
    __slots__ = ("group_id", "generation_id_or_member_epoch", "member_id", "group_instance_id",
                 "retention_ms", "by_id", "leader_epochs", "topics")

    def __init__(self, req: Any) -> None:
        version = req.__version__
        self.group_id: str = req.group_id
        self.generation_id_or_member_epoch: int = req.generation_id_or_member_epoch
        self.member_id: str = req.member_id
        self.group_instance_id: str | None = req.group_instance_id if version >= 7 else None
        self.retention_ms: int = to_ms(req.retention_time) if version <= 4 else -1
        self.by_id: bool = version >= 10          # topics named by `topic_id`, else by `name`
        self.leader_epochs: bool = version >= 6   # partitions carry `committed_leader_epoch`
        self.topics: Any = req.topics


class OffsetFetch:
    """The single-group OffsetFetch (v1-v7; v8+ name several groups and the service splits
    them per group: ops.fetch_group). `topics` None: every committed topic."""

    __slots__ = ("group_id", "topics", "require_stable")

    def __init__(self, req: Any) -> None:
        self.group_id: str = req.group_id
        self.topics: Any = req.topics
        self.require_stable: bool = req.require_stable if req.__version__ >= 7 else False
