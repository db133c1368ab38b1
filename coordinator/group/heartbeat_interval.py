"""kcoord's adaptive heartbeat interval, shared by the group types whose members adopt the
interval of each heartbeat response (KIP-848 consumers, KIP-1071 Streams clients: both the
Java consumer's and Kafka Streams' heartbeat managers take `HeartbeatIntervalMs` as sent).

Rules (the why: modern/consumer/heartbeat_policy.py; docs/user/configuration.md):
- `consumer_heartbeat_policy` = "fixed" is Kafka's behaviour: each type hands out its own
  configured interval, and nothing here is used;
- under "adaptive", a member with reconciliation work pending is told
  `consumer_heartbeat_pending_interval_ms` (`pending_ms`);
- a member with nothing to do is told `consumer_heartbeat_stable_interval_ms`, stretched so
  that all members of this process together stay within
  `consumer_heartbeat_budget_per_second`, and capped at a third of its session timeout, so
  the stretch never costs a member its session (`stable_ms`);
- `floor`: the group's own configured interval when the operator set one on the group; the
  operator asked its members not to heartbeat more often, so neither interval goes below it.
"""
from __future__ import annotations

from typing import Any

from ..config import CoordinatorConfig


def adaptive(config: CoordinatorConfig) -> bool:
    return config.consumer_heartbeat_policy != "fixed"


def pending_ms(config: CoordinatorConfig, floor: int) -> int:
    return max(config.consumer_heartbeat_pending_interval_ms, floor)


def stable_ms(config: CoordinatorConfig, members: int, session_ms: int, floor: int) -> int:
    """``members``: the members heartbeating into this process (the budget is the process's)."""
    stable = config.consumer_heartbeat_stable_interval_ms
    stretched = members * 1000 // max(1, config.consumer_heartbeat_budget_per_second)
    return max(min(max(stable, stretched), max(stable, session_ms // 3)), floor)


def members_in_process(shard: Any) -> int:
    """The process-wide member count the service gives the shard's heartbeat policy
    (service/wiring.py), else the shard's own count (a shard built without the consumer type)."""
    policy = shard.heartbeat_policy
    if policy is not None:
        return policy.member_count()
    return sum(len(g.members) for g in shard.groups.values())
