"""`kcoord_heartbeat_interval_ms` (issue 15, §3): what the heartbeat policy hands out,
read at scrape time. `handed_out_ms` repeats `interval_ms`'s formula rather than sharing a
helper (so the heartbeat path gains no call): these tests hold the two equal."""
from __future__ import annotations

import itertools

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from coordinator.config import CoordinatorConfig
from coordinator.group.group_admin import group_state_name
from coordinator.group.modern.consumer.group import MemberState
from coordinator.group.modern.consumer.heartbeat_policy import HeartbeatIntervalPolicy
from coordinator.group.shard import GroupCoordinatorShard
from coordinator.metrics import GroupCollector
from tests.unit.group.context import ShardContext, topic


def _stable_and_pending(config: CoordinatorConfig, members: int) -> tuple[int, int]:
    """interval_ms for a stable member and a member with work, through a real shard."""
    c = ShardContext(topic("foo", 4), config=config)
    c.heartbeat("g", "m1", 0, topics=["foo"])
    group, member = c.group("g"), c.member("g", "m1")
    assert member.state is MemberState.STABLE and member.member_epoch == group.assignment_epoch
    policy = c.shard.heartbeat_policy
    policy.member_count = lambda: members
    stable = policy.interval_ms(group, member)
    pending = policy.interval_ms(group, member, target_behind=True)
    return stable, pending


@pytest.mark.parametrize("policy,members,budget", list(itertools.product(
    ("adaptive", "fixed"), (0, 1, 5_000, 40_000, 10_000_000), (1, 10_000))))
def test_handed_out_equals_what_heartbeats_are_told(policy, members, budget):
    config = CoordinatorConfig(consumer_assignment_interval_ms=0, consumer_heartbeat_policy=policy,
                               consumer_heartbeat_budget_per_second=budget)
    stable, pending = _stable_and_pending(config, members)
    assert HeartbeatIntervalPolicy(config, lambda: members).handed_out_ms() == {"stable": stable, "pending": pending}


def test_hand_computed_values():
    config = CoordinatorConfig(consumer_heartbeat_stable_interval_ms=500, consumer_heartbeat_pending_interval_ms=100,
                               consumer_heartbeat_budget_per_second=10_000, consumer_session_timeout_ms=45_000)
    # 40k members at 10k heartbeats/s: each is told 4 s; 1M members would be 100 s, capped at 45 s / 3.
    assert HeartbeatIntervalPolicy(config, lambda: 40_000).handed_out_ms() == {"stable": 4_000, "pending": 100}
    assert HeartbeatIntervalPolicy(config, lambda: 1_000_000).handed_out_ms() == {"stable": 15_000, "pending": 100}
    assert HeartbeatIntervalPolicy(config, lambda: 10).handed_out_ms() == {"stable": 500, "pending": 100}


def test_the_collector_exports_the_gauge_and_follows_the_member_count():
    shard = GroupCoordinatorShard(0, CoordinatorConfig(consumer_heartbeat_budget_per_second=1_000))
    count = [3]
    shard.heartbeat_policy.member_count = lambda: count[0]
    registry = CollectorRegistry()
    registry.register(GroupCollector(lambda: [shard], group_state_name))
    text = generate_latest(registry).decode()
    assert 'kcoord_heartbeat_interval_ms{kind="stable"} 500.0' in text
    assert 'kcoord_heartbeat_interval_ms{kind="pending"} 100.0' in text
    count[0] = 2_000     # 2000 members at 1000/s: 2 s each
    assert 'kcoord_heartbeat_interval_ms{kind="stable"} 2000.0' in generate_latest(registry).decode()
    # No shard in this process (an instance that holds none): the metric is declared, without samples.
    empty = CollectorRegistry()
    empty.register(GroupCollector(lambda: [], group_state_name))
    text = generate_latest(empty).decode()
    assert "# TYPE kcoord_heartbeat_interval_ms gauge" in text and 'kcoord_heartbeat_interval_ms{' not in text
