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

This module also owns the session timeout a member is held to (`session_timeout_ms`):
the stretch above is capped by it, and every session timer is armed with it.

Metric: `kcoord_heartbeat_interval_ms{kind="stable"|"pending"}` is what the
policy tells members *now* (`handed_out_ms`), read by the metrics collector at scrape time.
Heartbeats are the hot path (about 110k instructions each, callgrind), so nothing is
observed per heartbeat: the interval only changes with the member count (the stretch) or
the configuration, and a scrape-time gauge shows every change that lasts a scrape interval
at no cost to `interval_ms`, which is left exactly as it was.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ....config import CoordinatorConfig
from .group import MemberState

if TYPE_CHECKING:
    from .group import ConsumerGroup, ConsumerGroupMember


def session_timeout_ms(config: CoordinatorConfig, member: ConsumerGroupMember) -> int:
    """A classic member of a consumer group keeps the session timeout it joined with
    (KIP-848 migration); a consumer-protocol member gets the group's."""
    if member.classic_member_metadata is not None:
        return member.classic_member_metadata.session_timeout_ms
    return config.consumer_session_timeout_ms


def has_pending_work(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    return (member.state is not MemberState.STABLE
            or member.member_epoch < group.assignment_epoch
            or group.assignment_epoch < group.group_epoch)


class HeartbeatIntervalPolicy:
    def __init__(self, config: CoordinatorConfig, member_count: Callable[[], int]) -> None:
        self.config = config
        # Members heartbeating into this process (all shards; the service sets it). A shard
        # alone counts its own.
        self.member_count = member_count

    def interval_ms(self, group: ConsumerGroup, member: ConsumerGroupMember, target_behind: bool = False) -> int:
        """`target_behind`: this very heartbeat started a new group epoch whose target is
        not computed yet (the group state seen here predates the heartbeat's records)."""
        c = self.config
        if c.consumer_heartbeat_policy == "fixed":
            return c.consumer_heartbeat_interval_ms
        if target_behind or has_pending_work(group, member):
            return c.consumer_heartbeat_pending_interval_ms
        stretched = self.member_count() * 1000 // max(1, c.consumer_heartbeat_budget_per_second)
        ceiling = max(c.consumer_heartbeat_stable_interval_ms, session_timeout_ms(c, member) // 3)
        return min(max(c.consumer_heartbeat_stable_interval_ms, stretched), ceiling)

    def handed_out_ms(self) -> dict[str, int]:
        """{"stable": ..., "pending": ...}: what `interval_ms` answers now a consumer-protocol
        member with nothing to reconcile, and one with reconciliation work. Called at scrape
        time, never per heartbeat; the same formula as `interval_ms` (a unit test holds
        them equal), not shared through a helper so that `interval_ms` gains no call."""
        c = self.config
        if c.consumer_heartbeat_policy == "fixed":
            return {"stable": c.consumer_heartbeat_interval_ms, "pending": c.consumer_heartbeat_interval_ms}
        stretched = self.member_count() * 1000 // max(1, c.consumer_heartbeat_budget_per_second)
        ceiling = max(c.consumer_heartbeat_stable_interval_ms, c.consumer_session_timeout_ms // 3)
        return {"stable": min(max(c.consumer_heartbeat_stable_interval_ms, stretched), ceiling),
                "pending": c.consumer_heartbeat_pending_interval_ms}
