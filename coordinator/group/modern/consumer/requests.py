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
  (the topics and partitions are never copied), and is one small object per distinct kio
  message, less than the two attribute probes it replaces, which missed (and so raised) on
  every key-68 request; nothing writes to a shape, so a repeated message gets the same one.
"""
from __future__ import annotations

from types import ModuleType
from typing import Any

from kio.schema.consumer_group_heartbeat.v0 import response as v0
from kio.schema.consumer_group_heartbeat.v1 import response as v1

from ...timeutil import to_ms

_RESPONSES = (v0, v1)


class ConsumerGroupHeartbeat:
    __slots__ = ("group_id", "member_id", "member_epoch", "instance_id", "rack_id", "rebalance_timeout",
                 "subscribed_topic_names", "subscribed_topic_regex", "server_assignor", "topic_partitions",
                 "client_assignors", "member_id_required", "response_schema", "steady_form")
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout: Any
    subscribed_topic_names: Any
    subscribed_topic_regex: str | None
    server_assignor: str | None
    topic_partitions: Any
    client_assignors: Any
    member_id_required: bool
    response_schema: ModuleType
    # A member's keep-alive: a positive epoch and every optional field null (no rebalance
    # timeout, -1), as clients send in steady state; heartbeat.py's `_steady` serves only
    # these. Read once per distinct message, since the shape is kept.
    steady_form: bool

    def __new__(cls, req: Any, csa: bool = False) -> ConsumerGroupHeartbeat:
        """Key 68's request, or 32700's (`csa`: v1's body plus ClientAssignors, answered at its
        own version 0; client_mode.csa_answer wraps that answer). The gateway hands a steady
        member's repeated heartbeat over as the same kio message (protocol/codec.py's memo),
        and nothing writes to a shape: a keep-alive's is kept by the message's identity and
        handed out again (an entry holds its message, so the id names no other object;
        bounded in entries and in size)."""
        kept = _SHAPES.get(id(req))
        if kept is not None and kept[0] is req and kept[1] is csa:
            return kept[2]
        self = object.__new__(cls)
        version = req.__version__
        self.group_id = req.group_id
        self.member_id = req.member_id
        self.member_epoch = req.member_epoch
        self.instance_id = req.instance_id
        self.rack_id = req.rack_id
        self.rebalance_timeout = req.rebalance_timeout
        self.subscribed_topic_names = req.subscribed_topic_names
        self.subscribed_topic_regex = req.subscribed_topic_regex if csa or version >= 1 else None
        self.server_assignor = req.server_assignor
        self.topic_partitions = req.topic_partitions
        self.client_assignors = req.client_assignors if csa else None
        self.member_id_required = version >= 1
        self.response_schema = _RESPONSES[version]
        self.steady_form = (self.member_epoch > 0 and self.instance_id is None and self.rack_id is None
                            and self.server_assignor is None and self.subscribed_topic_names is None
                            and self.topic_partitions is None and self.subscribed_topic_regex is None
                            and self.client_assignors is None and to_ms(self.rebalance_timeout) == -1)
        if self.steady_form and len(self.group_id) + len(self.member_id) <= _KEPT_IDS_MAX:
            # Only keep-alives are kept, and only with ids of a sane size: an entry holds its
            # message alive, and a join may carry megabytes of topic names.
            if len(_SHAPES) >= SHAPES_KEPT:
                _SHAPES.clear()
            _SHAPES[id(req)] = (req, csa, self)
        return self


SHAPES_KEPT = 16_384
_KEPT_IDS_MAX = 512      # characters of group id and member id together
_SHAPES: dict[int, tuple[Any, bool, ConsumerGroupHeartbeat]] = {}


def csa_heartbeat(req: Any) -> ConsumerGroupHeartbeat:
    return ConsumerGroupHeartbeat(req, True)
