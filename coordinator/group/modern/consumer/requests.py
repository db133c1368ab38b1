"""ConsumerGroupHeartbeat (key 68, and 32700's variant with client assignors) in one shape,
whatever the version: the shard builds it at its door (migration/'s request shapes, since
the heartbeat's rows are migration's), so heartbeat.py and client_mode.py read fields,
never versions, for what the request says.

Rules:
- the shape has the newest version's field names; a field the request's class lacks gets
  what Kafka assumes for it (no SubscribedTopicRegex before v1, no ClientAssignors outside
  32700: None);
- what a version changes is a field too: `member_id_required` (v1+, KIP-848's client-made
  member id: an empty one is refused even when joining) and `response_schema`, the
  version's response classes;
- the version is read once, from the request's kio class (`__version__`), never probed
  field by field;
- the heartbeat is the hottest path: the shape holds references to kio's fields, as sent
  (the topics and partitions are never copied), and is one small object per request, less
  than the two attribute probes it replaces, which missed (and so raised) on every key-68
  request.
"""
from __future__ import annotations

from types import ModuleType
from typing import Any

from kio.schema.consumer_group_heartbeat.v0 import response as v0
from kio.schema.consumer_group_heartbeat.v1 import response as v1

_RESPONSES = (v0, v1)


class ConsumerGroupHeartbeat:
    __slots__ = ("group_id", "member_id", "member_epoch", "instance_id", "rack_id", "rebalance_timeout",
                 "subscribed_topic_names", "subscribed_topic_regex", "server_assignor", "topic_partitions",
                 "client_assignors", "member_id_required", "response_schema")

    def __init__(self, req: Any, csa: bool = False) -> None:
        """Key 68's request, or 32700's (`csa`: v1's body plus ClientAssignors, answered at its
        own version 0; client_mode.csa_answer wraps that answer)."""
        version = req.__version__
        self.group_id: str = req.group_id
        self.member_id: str = req.member_id
        self.member_epoch: int = req.member_epoch
        self.instance_id: str | None = req.instance_id
        self.rack_id: str | None = req.rack_id
        self.rebalance_timeout: Any = req.rebalance_timeout
        self.subscribed_topic_names: Any = req.subscribed_topic_names
        self.subscribed_topic_regex: str | None = req.subscribed_topic_regex if csa or version >= 1 else None
        self.server_assignor: str | None = req.server_assignor
        self.topic_partitions: Any = req.topic_partitions
        self.client_assignors: Any = req.client_assignors if csa else None
        self.member_id_required: bool = version >= 1
        self.response_schema: ModuleType = _RESPONSES[version]


def csa_heartbeat(req: Any) -> ConsumerGroupHeartbeat:
    return ConsumerGroupHeartbeat(req, True)
