"""A consumer group whose shard moves to a kcoord process that has not listed its topic yet.

Each process refreshes its own image of the upstream's topics (metadata_refresh_interval_ms),
so right after a topic is created one process may list it and another not. A group whose
target assignment is pending (the KIP-1263 assignment interval) when its shard moves has
that target computed by the new owner's timer from an image without the topic: nobody is
given a partition. Once that process lists the topic, the group must be assigned it.

Process B here refreshes only when a CreateTopics passes through it (routes.py
FORWARD_REFRESH), and the members are raw ConsumerGroupHeartbeats, so the test decides
when B lists the topic and that no heartbeat reaches B before its timer fires (a real
client's heartbeat there first would take the path that refreshes the group's metadata)."""
from __future__ import annotations

from datetime import timedelta

import pytest
from kio.schema.consumer_group_heartbeat.v1 import request as heartbeat_v1
from kio.schema.consumer_group_heartbeat.v1.request import TopicPartitions
from kio.schema.errors import ErrorCode

from support import group_probe as probe
from support import raw_client
from support.admin import create_topic
from support.kcoord import CLUSTER, KcoordProcess, start_all
from support.wait import wait_until

pytestmark = pytest.mark.integration

PARTITIONS = 4
SHARDS = 4
# A join within this long of the previous target computation waits for the timer (KIP-1263).
INTERVAL_MS = 3_000
# Longer than the test keeps its members silent: none is fenced meanwhile.
SESSION_MS = 60_000
CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69


def _settled(procs: list[KcoordProcess]) -> bool:
    """Both processes name the same coordinator for every probe group, and both coordinate some."""
    try:
        answers = [{probe.find(p.bootstrap, f"g-{i}") for p in procs} for i in range(20)]
    except OSError:
        return False
    if any(len(a) != 1 or next(iter(a))[0] != 0 for a in answers):
        return False
    return len({next(iter(a))[1] for a in answers}) == len(procs)


def _owned_group(owner: KcoordProcess, prefix: str) -> str:
    """A group name whose coordinator is `owner`."""
    return next(g for g in (f"{prefix}-{i}" for i in range(500)) if probe.find(owner.bootstrap, g)[3] == owner.port)


def _described(process: KcoordProcess, group: str):
    answer = raw_client.call_with(process.bootstrap, CONSUMER_GROUP_DESCRIBE, 0, group_ids=[group],
                                  include_authorized_operations=False)
    return answer.groups[0]


class _Member:
    """One KIP-848 member speaking raw ConsumerGroupHeartbeat v1: it reports as owned what it
    was last given, as a client does once it has reconciled."""

    def __init__(self, group: str, member_id: str, topic: str) -> None:
        self.group, self.member_id, self.topic = group, member_id, topic
        self.epoch = 0
        self.owned: dict = {}          # topic id -> partitions

    def heartbeat(self, process: KcoordProcess) -> int:
        owned = tuple(TopicPartitions(topic_id=t, partitions=tuple(sorted(ps))) for t, ps in self.owned.items())
        joining = self.epoch == 0
        r = raw_client.call(process.bootstrap, CONSUMER_GROUP_HEARTBEAT, 1, heartbeat_v1.ConsumerGroupHeartbeatRequest(
            group_id=self.group, member_id=self.member_id, member_epoch=self.epoch,
            rebalance_timeout=timedelta(milliseconds=300_000 if joining else -1),
            subscribed_topic_names=(self.topic,) if joining else None, topic_partitions=owned))
        if r.error_code == ErrorCode.none:
            self.epoch = r.member_epoch
            if r.assignment is not None:
                self.owned = {tp.topic_id: set(tp.partitions) for tp in r.assignment.topic_partitions}
        return r.error_code

    def partitions(self) -> set[int]:
        return set().union(*self.owned.values()) if self.owned else set()


@pytest.mark.parametrize("upstream", ["kafka44"], indirect=True)
def test_a_target_computed_where_the_topic_was_not_listed_is_computed_again_once_it_is(upstream, names):
    state = f"__kc_{names.topic()}"
    config = (*CLUSTER, f"consumer_assignment_interval_ms={INTERVAL_MS}", f"consumer_session_timeout_ms={SESSION_MS}")
    a = KcoordProcess(upstream.bootstrap, state, state_partitions=SHARDS, config=config,
                      extra_args=("--instance-id", "kc-a"))
    b = KcoordProcess(upstream.bootstrap, state, state_partitions=SHARDS,
                      config=(*config, "metadata_refresh_interval_ms=3600000"), extra_args=("--instance-id", "kc-b"))
    procs = [a, b]
    try:
        start_all(procs, timeout=120)
        wait_until(lambda: _settled(procs), 60, message="two processes settle")
        topic = names.topic()
        create_topic(upstream.bootstrap, topic, PARTITIONS)     # A lists it within a second, B not
        group = _owned_group(a, names.group())
        m1, m2 = _Member(group, "m1", topic), _Member(group, "m2", topic)
        wait_until(lambda: m1.heartbeat(a) == ErrorCode.none, 30, message="A serves the group (loaded)")
        wait_until(lambda: m1.heartbeat(a) == ErrorCode.none and m1.partitions() == set(range(PARTITIONS)), 30,
                   message="A lists the topic and gives m1 every partition")
        assert m2.heartbeat(a) == ErrorCode.none
        g = _described(a, group)
        assert len(g.members) == 2 and g.assignment_epoch < g.group_epoch, g   # m2's target waits
        assert a.stop() == 0          # SIGTERM: the shard moves to B at once, its target pending

        def computed_on_b():
            d = _described(b, group)
            return d if d.error_code == 0 and d.assignment_epoch == d.group_epoch else None
        # From an image without the topic (B's describe cannot name those partitions either).
        wait_until(computed_on_b, INTERVAL_MS / 1000 + 30, message="B's timer computes the pending target")

        create_topic(b.bootstrap, names.topic(), 1)              # through B: B refreshes its image

        def assigned() -> bool:
            assert m1.heartbeat(b) == ErrorCode.none and m2.heartbeat(b) == ErrorCode.none
            return m1.partitions() | m2.partitions() == set(range(PARTITIONS))
        # B lists the topic after its refresh; the next target follows within an interval.
        wait_until(assigned, 2 * INTERVAL_MS / 1000 + 30, interval=0.5,
                   message=lambda: f"the topic is assigned once B lists it (m1 {m1.partitions()}, "
                                   f"m2 {m2.partitions()}, {_described(b, group)})")
        assert not m1.partitions() & m2.partitions()
    finally:
        for p in procs:
            if p.running():
                p.stop()
