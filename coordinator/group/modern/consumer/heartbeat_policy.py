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

A group's own configuration (`kafka-configs --entity-type groups`, coordinator/group/configs/)
comes before the broker's: `consumer.session.timeout.ms` is the session its members are held
to; `consumer.heartbeat.interval.ms` is what `fixed` hands out, and under `adaptive` the
member's floor: the operator asked members of that group not to heartbeat more often, so
neither the pending nor the stable interval goes below it (docs/user/group-configs.md).

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

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ....config import CoordinatorConfig
from ...heartbeat_interval import adaptive, pending_ms, stable_ms
from .group import MemberState

if TYPE_CHECKING:
    from .group import ConsumerGroup, ConsumerGroupMember


SESSION_TIMEOUT, HEARTBEAT_INTERVAL = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"


def group_overrides(shard: Any, group_id: str) -> Mapping[str, Any] | None:
    """The keys set on the group (coordinator/group/configs/ keeps the store on the shard),
    or None: nothing set, or a shard built without the configs contribution (a test's own
    registry)."""
    store = getattr(shard, "group_configs", None)
    return None if store is None else store.overrides(group_id)


def group_value(shard: Any, group_id: str, name: str, default: int) -> int:
    """The group's own value of a `consumer.*` key, else ``default``, the broker's."""
    overrides = group_overrides(shard, group_id)
    return default if overrides is None else overrides.get(name, default)


def session_timeout_ms(shard: Any, group_id: str, member: ConsumerGroupMember) -> int:
    """A classic member of a consumer group keeps the session timeout it joined with
    (KIP-848 migration); a consumer-protocol member gets the group's: its own config, else
    the broker's."""
    if member.classic_member_metadata is not None:
        return member.classic_member_metadata.session_timeout_ms
    store = getattr(shard, "group_configs", None)      # group_overrides, inlined: every heartbeat
    own = None if store is None else store.overrides(group_id)
    default = shard.config.consumer_session_timeout_ms
    return default if own is None else own.get(SESSION_TIMEOUT, default)


def has_pending_work(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    return (member.state is not MemberState.STABLE
            or member.member_epoch < group.assignment_epoch
            or group.assignment_epoch < group.group_epoch)


def _no_overrides(group_id: str) -> None:
    return None


class HeartbeatIntervalPolicy:
    def __init__(self, config: CoordinatorConfig, member_count: Callable[[], int],
                 overrides: Callable[[str], Mapping[str, Any] | None] | None = None) -> None:
        self.config = config
        # group id -> the keys set on the group, or None (`group_overrides` above): one call
        # per heartbeat, whatever the number of keys read
        self.overrides = overrides or _no_overrides
        # Members heartbeating into this process (all shards; the service sets it). A shard
        # alone counts its own.
        self.member_count = member_count

    def interval_ms(self, group: ConsumerGroup, member: ConsumerGroupMember, target_behind: bool = False) -> int:
        """`target_behind`: this very heartbeat started a new group epoch whose target is
        not computed yet (the group state seen here predates the heartbeat's records).
        The adaptive rule itself is the kernel's (coordinator/group/heartbeat_interval.py),
        shared with streams groups."""
        c = self.config
        own = self.overrides(group.group_id)
        floor = 0 if own is None else own.get(HEARTBEAT_INTERVAL, 0)
        if not adaptive(c):
            return floor or c.consumer_heartbeat_interval_ms
        if target_behind or has_pending_work(group, member):
            return pending_ms(c, floor)
        session = (member.classic_member_metadata.session_timeout_ms if member.classic_member_metadata is not None
                   else c.consumer_session_timeout_ms if own is None
                   else own.get(SESSION_TIMEOUT, c.consumer_session_timeout_ms))
        return stable_ms(c, self.member_count(), session, floor)

    def steady_ms(self, group_id: str) -> tuple[int, int]:
        """(`interval_ms`, `session_timeout_ms`) of a consumer-protocol member with nothing
        to reconcile, as the steady heartbeat asks for both: the group's keys looked up
        once. The same values as the two calls (the tests compare them)."""
        c = self.config
        own = self.overrides(group_id)
        if own is None:
            floor, session = 0, c.consumer_session_timeout_ms
        else:
            floor, session = own.get(HEARTBEAT_INTERVAL, 0), own.get(SESSION_TIMEOUT, c.consumer_session_timeout_ms)
        if c.consumer_heartbeat_policy == "fixed":     # heartbeat_interval.adaptive, inlined
            return floor or c.consumer_heartbeat_interval_ms, session
        return stable_ms(c, self.member_count(), session, floor), session

    def handed_out_ms(self) -> dict[str, int]:
        """{"stable": ..., "pending": ...}: what `interval_ms` answers now a consumer-protocol
        member with nothing to reconcile, and one with reconciliation work. Called at scrape
        time, never per heartbeat."""
        c = self.config
        if not adaptive(c):
            return {"stable": c.consumer_heartbeat_interval_ms, "pending": c.consumer_heartbeat_interval_ms}
        return {"stable": stable_ms(c, self.member_count(), c.consumer_session_timeout_ms, 0),
                "pending": pending_ms(c, 0)}
