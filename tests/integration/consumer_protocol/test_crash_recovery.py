"""kill -9 the gateway while consumers commit, restart it: every acknowledged commit and
the group state survive (they live in the state topic upstream), and consumers carry on
without re-reading what they had committed."""
from __future__ import annotations

import time

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from support.admin import create_topic
from support.produce import BackgroundProducer, produce_records
from support.rdkafka import RdkafkaConsumer
from support.wait import wait_until

PARTITIONS = 6


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(PARTITIONS)])
    result = admin.list_consumer_group_offsets([req])[group].result(timeout=10)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def group_state(bootstrap: str, group: str):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    d = admin.describe_consumer_groups([group])[group].result(timeout=10)
    return d.state.name, sorted(m.member_id for m in d.members)


def acked_commits(consumers, before_ns: int) -> dict[int, int]:
    """Highest offset per partition whose commit a client saw acknowledged before `before_ns`."""
    out: dict[int, int] = {}
    for c in consumers:
        for ev in c.events("committed"):
            if ev["t"] < before_ns:
                for _, p, off in ev["offsets"]:
                    out[p] = max(out.get(p, -1), off)
    return out


def test_kill_dash_nine_mid_stream(kcoord, upstream, names, ledger, drivers):
    topic, group = names.topic(), names.group()
    create_topic(upstream.bootstrap, topic, PARTITIONS)
    produce_records(upstream.bootstrap, topic, 120)
    # Produce straight to the upstream so the stream does not depend on the gateway.
    producer = BackgroundProducer(upstream.bootstrap, topic, interval=0.005).start()
    consumers = [drivers.add(RdkafkaConsumer(kcoord.bootstrap, topic, group, member=f"c{i}", ledger=ledger,
                                             group_protocol="consumer")).start() for i in (1, 2)]
    wait_until(lambda: all(c.assignment() for c in consumers)
               and sum(len(c.assignment()) for c in consumers) == PARTITIONS, 30, message="assignment")
    wait_until(lambda: sum(len(c.consumed()) for c in consumers) > 200, 30, message="consumption")
    state_before = group_state(kcoord.bootstrap, group)
    assert state_before[0] == "STABLE"

    killed_at = time.monotonic_ns()
    assert kcoord.kill() == -9
    acked = acked_commits(consumers, killed_at)
    assert acked, "no commit was acknowledged before the kill"
    kcoord.restart()
    restarted_at = time.monotonic_ns()

    # Every commit acknowledged before the crash is there after the reload.
    after = committed(kcoord.bootstrap, group, topic)
    assert all(after[p] >= off for p, off in acked.items()), (acked, after)
    # The group came back as it was: same members, still stable; nobody had to rejoin.
    assert group_state(kcoord.bootstrap, group) == state_before

    produced = produce_records(upstream.bootstrap, topic, 60) + producer.stop()
    wait_until(lambda: {(r.partition, r.offset) for r in produced}
               <= {(r.partition, r.offset) for c in consumers for r in c.consumed()}, 30,
               message="records produced around the crash are consumed")
    # Consumers resumed where they were: nothing committed before the crash is read again.
    reread = [r for c in consumers for r in c.consumed()
              if r.t_ns > restarted_at and r.offset < acked.get(r.partition, -1)]
    assert reread == []
    assert not [e for c in consumers for e in c.errors() if e.get("fatal")]
    assert not [e for c in consumers for e in c.events("lost") if e["t"] > killed_at]
    ledger.assert_no_double_ownership()
