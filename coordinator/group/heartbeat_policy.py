"""The heartbeat interval handed to KIP-848 members in every heartbeat response.

Kafka hands out a fixed `group.consumer.heartbeat.interval.ms` (5 s). Clients adopt
the interval of every response, so a coordinator can steer them.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..config import CoordinatorConfig

if TYPE_CHECKING:
    from .consumer_group import ConsumerGroup, ConsumerGroupMember


class HeartbeatIntervalPolicy:
    def __init__(self, config: CoordinatorConfig) -> None:
        self.config = config

    def interval_ms(self, shard, group: ConsumerGroup, member: ConsumerGroupMember) -> int:
        return self.config.consumer_heartbeat_interval_ms
