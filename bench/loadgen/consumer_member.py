"""A simulated KIP-848 consumer, sans IO: what it sends and how it reacts to responses.

It behaves as the Java (`ConsumerMembershipManager` + `HeartbeatRequestManager`) and
librdkafka consumers do on the wire:
- join: member epoch 0, a client-generated member id (ConsumerGroupHeartbeat v1), the
  subscribed topic names, the rebalance timeout and an empty owned-partitions list;
- steady state: group id, member id and member epoch only; every other field is null
  ("did not change since the last heartbeat");
- a response carrying an assignment that differs from what the member owns is
  reconciled at once (partitions no longer assigned are revoked, new ones taken) and
  acknowledged with an immediate heartbeat that reports the owned partitions in full
  (KIP-848 client state ACK_ASSIGNMENT; Java sends TopicPartitions "when joining or
  with the first heartbeat after a new assignment is reconciled");
- the next regular heartbeat is due HeartbeatIntervalMs (from the latest response)
  after the latest send;
- FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID: drop every partition and rejoin with epoch 0
  and the same member id.
"""
from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest, TopicPartitions
from kio.schema.errors import ErrorCode

from .wire import CONSUMER_GROUP_HEARTBEAT, FrameTemplate

API_VERSION = 1
_NO_TIMEOUT = timedelta(milliseconds=-1)
_REJOIN_ERRORS = frozenset({ErrorCode.fenced_member_epoch, ErrorCode.unknown_member_id})

Owned = dict[uuid.UUID, frozenset[int]]


def new_member_id() -> str:
    """22 characters, like Java's `Uuid.randomUuid().toString()` (URL-safe base64)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass(slots=True)
class ConsumerMember:
    group_id: str
    topics: tuple[str, ...]
    member_id: str = field(default_factory=new_member_id)
    rebalance_timeout_ms: int = 300_000
    member_epoch: int = 0
    owned: Owned = field(default_factory=dict)
    sent_owned: Owned | None = None            # what the last request reported; None: resend
    heartbeat_interval_ms: int = 0
    joined: bool = False
    ack_pending: bool = False
    revocations: int = 0                        # partitions given up, over the member's life
    errors: dict[int, int] = field(default_factory=dict)
    _steady: tuple[int, FrameTemplate] | None = None

    # --- requests ------------------------------------------------------------------

    def next_request(self) -> ConsumerGroupHeartbeatRequest:
        """The request to send now (join, acknowledgement or steady heartbeat)."""
        if not self.joined:
            self.sent_owned = {}
            return ConsumerGroupHeartbeatRequest(
                group_id=self.group_id, member_id=self.member_id, member_epoch=0,
                rebalance_timeout=timedelta(milliseconds=self.rebalance_timeout_ms),
                subscribed_topic_names=self.topics, topic_partitions=())
        report = None
        if self.sent_owned != self.owned:
            report = tuple(TopicPartitions(topic_id=t, partitions=tuple(sorted(ps)))
                           for t, ps in sorted(self.owned.items()))
            self.sent_owned = dict(self.owned)
        self.ack_pending = False
        return ConsumerGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=self.member_epoch,
            rebalance_timeout=_NO_TIMEOUT, topic_partitions=report)

    def is_steady(self) -> bool:
        """True when the next request carries only group id, member id and epoch."""
        return self.joined and not self.ack_pending and self.sent_owned == self.owned

    def steady_template(self) -> FrameTemplate:
        """The encoded steady heartbeat at the current epoch (cached per epoch)."""
        cached = self._steady
        if cached is None or cached[0] != self.member_epoch:
            request = ConsumerGroupHeartbeatRequest(
                group_id=self.group_id, member_id=self.member_id, member_epoch=self.member_epoch,
                rebalance_timeout=_NO_TIMEOUT, topic_partitions=None)
            cached = self._steady = (self.member_epoch,
                                     FrameTemplate.of(CONSUMER_GROUP_HEARTBEAT, API_VERSION, request))
        return cached[1]

    # --- responses -----------------------------------------------------------------

    def on_response(self, response: Any) -> bool:
        """Apply a ConsumerGroupHeartbeat response; True when a heartbeat must go at once."""
        code = response.error_code
        if code != ErrorCode.none:
            self.errors[int(code)] = self.errors.get(int(code), 0) + 1
            if code in _REJOIN_ERRORS:
                self.revocations += sum(len(p) for p in self.owned.values())
                self.owned = {}
                self.member_epoch = 0
                self.joined = False
                self.sent_owned = None
                return True
            return False
        self.joined = True
        self.member_epoch = response.member_epoch
        interval = response.heartbeat_interval
        self.heartbeat_interval_ms = interval if isinstance(interval, int) else interval // timedelta(milliseconds=1)
        assignment = response.assignment
        if assignment is None:
            return False
        new = {tp.topic_id: frozenset(tp.partitions) for tp in assignment.topic_partitions if tp.partitions}
        if new == self.owned:
            return False
        for topic_id, parts in self.owned.items():
            self.revocations += len(parts - new.get(topic_id, frozenset()))
        self.owned = new
        self.ack_pending = True
        return True

    def owned_count(self) -> int:
        return sum(len(p) for p in self.owned.values())
