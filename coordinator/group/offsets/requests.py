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
  replaces, which miss, and so raise, on every version that lacks the field);
- what a version changes in the answer is a field too: the version's response classes
  (`answer`: `CommitAnswer`, `FetchAnswer`, built once per version and shared), and
  OffsetCommit's `group_id_not_found` (v9+, KIP-848: a commit to an unknown group with a
  generation answers GROUP_ID_NOT_FOUND, older versions ILLEGAL_GENERATION).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from ..kio_util import schema
from ..timeutil import to_ms


@dataclass(frozen=True, slots=True)
class CommitAnswer:
    """OffsetCommit's answer classes at one version, whether it has a throttle time (v3+), and
    its accepted partitions by index and its answers to one topic's all-accepted commits by
    (topic, partitions) (kio's messages are frozen: one object serves every answer; ops.py
    bounds both). The commit path builds them directly: `build`'s filtering of a superset
    of fields cost a sixth of a 10-partition commit (docs/measurements/cpu-per-commit.md)."""
    response: Any
    topic: Any
    partition: Any
    has_throttle: bool
    accepted: dict[int, Any] = field(default_factory=dict, compare=False)
    accepted_responses: dict[tuple[Any, tuple[int, ...]], Any] = field(default_factory=dict, compare=False)


@functools.cache
def commit_answer(version: int) -> CommitAnswer:
    mod = schema("offset_commit", version)
    response = mod.OffsetCommitResponse
    return CommitAnswer(response, mod.OffsetCommitResponseTopic, mod.OffsetCommitResponsePartition,
                        "throttle_time" in response.__dataclass_fields__)


@dataclass(frozen=True, slots=True)
class FetchAnswer:
    """OffsetFetch's answer classes at one version: kio names the answer's entities after
    Kafka's JSON, which renamed them with the v8 groups; v10+ names topics by id."""
    response_schema: ModuleType
    topic: Any
    partition: Any
    by_id: bool


@functools.cache
def fetch_answer(version: int) -> FetchAnswer:
    mod = schema("offset_fetch", version)
    if version >= 8:
        return FetchAnswer(mod, mod.OffsetFetchResponseTopics, mod.OffsetFetchResponsePartitions, version >= 10)
    return FetchAnswer(mod, mod.OffsetFetchResponseTopic, mod.OffsetFetchResponsePartition, False)


class OffsetCommit:
    """Built by `offset_commit_shape` (the shard's shape of every OffsetCommit), or a subclass
    of it decoded by the gateway with these fields set (gateway/commit_decode.py)."""
    __slots__ = ("group_id", "generation_id_or_member_epoch", "member_id", "group_instance_id",
                 "retention_ms", "by_id", "leader_epochs", "topics", "group_id_not_found", "answer")
    group_id: str
    generation_id_or_member_epoch: int
    member_id: str
    group_instance_id: str | None
    retention_ms: int
    by_id: bool               # topics named by `topic_id` (v10+), else by `name`
    leader_epochs: bool       # partitions carry `committed_leader_epoch` (v6+)
    topics: Any
    group_id_not_found: bool
    answer: CommitAnswer


def offset_commit_shape(req: Any) -> OffsetCommit:
    """The OffsetCommit shape of kio's request ``req``. A function that sets the slots of
    ``OffsetCommit()`` (a class without `__init__`, so its call runs C only): a class's
    `__init__` costs the call through the type's slot on every commit."""
    if isinstance(req, OffsetCommit):
        # The gateway's one-pass decoded request (gateway/commit_decode.py) is its own shape:
        # its class has these slots and its decoder sets them by these rules.
        return req
    version = req.__version__
    shape = OffsetCommit()
    shape.group_id = req.group_id
    shape.generation_id_or_member_epoch = req.generation_id_or_member_epoch
    shape.member_id = req.member_id
    shape.group_instance_id = req.group_instance_id if version >= 7 else None
    shape.retention_ms = to_ms(req.retention_time) if version <= 4 else -1
    shape.by_id = version >= 10
    shape.leader_epochs = version >= 6
    shape.topics = req.topics
    shape.group_id_not_found = version >= 9
    shape.answer = commit_answer(version)
    return shape


class OffsetFetch:
    """The single-group OffsetFetch (v1-v7; v8+ name several groups and the service splits
    them per group: ops.fetch_offsets). `topics` None: every committed topic."""

    __slots__ = ("group_id", "topics", "require_stable", "answer")

    def __init__(self, req: Any) -> None:
        version = req.__version__
        self.group_id: str = req.group_id
        self.topics: Any = req.topics
        self.require_stable: bool = req.require_stable if version >= 7 else False
        self.answer: FetchAnswer = fetch_answer(version)


class OffsetDelete:
    __slots__ = ("group_id", "topics", "response_schema")

    def __init__(self, req: Any) -> None:
        self.group_id: str = req.group_id
        self.topics: Any = req.topics
        self.response_schema: ModuleType = schema("offset_delete", req.__version__)
