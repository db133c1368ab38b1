"""The heartbeat interval handed to KIP-848 members in every heartbeat response.

KIP-848 clients adopt the `HeartbeatIntervalMs` of each response (both librdkafka and
the Java client do, up or down), and a coordinator cannot push: a member learns about a
new target, or about partitions it may now take, only on its next heartbeat. Kafka hands
out a fixed 5 s (`group.consumer.heartbeat.interval.ms`), so a joiner that needs
partitions revoked from others waits up to about two intervals.

`adaptive` (kcoord's default):
- a member with reconciliation work pending (partitions to revoke, partitions waiting to
  be released, a target it has not received, or a target still being computed) is told
  `consumer_heartbeat_pending_interval_ms`;
- a stable member is told `consumer_heartbeat_stable_interval_ms`, stretched so that all
  members of this process together never ask for more than
  `consumer_heartbeat_budget_per_second` heartbeats per second (capped at a third of the
  session timeout, so the stretch never costs a member its session).

`fixed`: Kafka's behaviour, `consumer_heartbeat_interval_ms` for everyone.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..config import CoordinatorConfig
from .consumer_group import MemberState

if TYPE_CHECKING:
    from .consumer_group import ConsumerGroup, ConsumerGroupMember


def has_pending_work(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    return (member.state is not MemberState.STABLE
            or member.member_epoch < group.assignment_epoch
            or group.assignment_epoch < group.group_epoch)


class HeartbeatIntervalPolicy:
    def __init__(self, config: CoordinatorConfig, member_count: Callable[[], int] | None = None) -> None:
        self.config = config
        # Members heartbeating into this process (all shards); a shard alone counts its own.
        self.member_count = member_count

    def interval_ms(self, shard, group: ConsumerGroup, member: ConsumerGroupMember,
                    target_behind: bool = False) -> int:
        """`target_behind`: this very heartbeat started a new group epoch whose target is
        not computed yet (the group state seen here predates the heartbeat's records)."""
        c = self.config
        if c.consumer_heartbeat_policy == "fixed":
            return c.consumer_heartbeat_interval_ms
        if target_behind or has_pending_work(group, member):
            return c.consumer_heartbeat_pending_interval_ms
        members = self.member_count() if self.member_count is not None else \
            sum(len(g.members) for g in shard.groups.values())
        stretched = members * 1000 // max(1, c.consumer_heartbeat_budget_per_second)
        ceiling = max(c.consumer_heartbeat_stable_interval_ms, shard.session_timeout_ms(group, member) // 3)
        return min(max(c.consumer_heartbeat_stable_interval_ms, stretched), ceiling)
