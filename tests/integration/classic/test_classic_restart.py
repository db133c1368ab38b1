"""kill -9 the gateway while a classic group is STABLE and restart it on the same port.

Kafka's coordinator failover is the model: the new coordinator loads the group from its
last GroupMetadata record (STABLE, same generation, same members and assignments) and
re-arms every member's session timer, so members that reach it within their session keep
their assignment: no rebalance, no re-read of committed records, no double ownership.
Three different clients share the group (all with the "range" assignor)."""
from __future__ import annotations

import time

from confluent_kafka import ConsumerGroupState
from confluent_kafka.admin import AdminClient
from aiokafka.coordinator.assignors.range import RangePartitionAssignor

from support.admin import committed_offsets, create_topic
from support.aiokafka_driver import AiokafkaConsumer
from support.produce import BackgroundProducer, produce_records
from support.rdkafka import RdkafkaConsumer
from support.wait import wait_until

from classic_scenario import PARTITIONS, end_offsets, fatal_errors, wait_all_consumed, wait_balanced


def describe(bootstrap: str, group: str):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    d = admin.describe_consumer_groups([group])[group].result(timeout=10)
    return d.state, sorted(m.member_id for m in d.members)


def acked_commits(members, before_ns: int) -> dict[int, int]:
    """Highest offset per partition whose commit a client saw acknowledged before ``before_ns``."""
    out: dict[int, int] = {}
    for m in members:
        for ev in m.events("committed"):
            if ev["t"] < before_ns:
                for _, p, off in ev["offsets"]:
                    out[p] = max(out.get(p, -1), off)
    return out


def test_kill_dash_nine_while_stable(kcoord, tansu, names, ledger, drivers, java_classes):
    from support.java import JavaConsumer

    topic, group = names.topic(), names.group()
    create_topic(tansu.bootstrap, topic, PARTITIONS)
    produced = produce_records(tansu.bootstrap, topic, 120)
    # Produce straight to the upstream so the stream does not depend on the gateway.
    producer = BackgroundProducer(tansu.bootstrap, topic, interval=0.01).start()
    members = [
        drivers.add(RdkafkaConsumer(kcoord.bootstrap, topic, group, member="rdkafka", ledger=ledger,
                                    group_protocol="classic", assignment_strategy="range",
                                    # kcoord, not Tansu, coordinates here, so the short session
                                    # the harness uses against Tansu's ghost members is not
                                    # needed; a restart on a loaded machine took up to 10 s.
                                    session_timeout_ms=15_000)).start(),
        drivers.add(JavaConsumer(kcoord.bootstrap, topic, group, member="java", ledger=ledger,
                                 assignor="range")).start(),
        drivers.add(AiokafkaConsumer(kcoord.bootstrap, topic, group, member="aiokafka", ledger=ledger,
                                     partition_assignment_strategy=(RangePartitionAssignor,))).start(),
    ]
    wait_balanced(members, topic, "three clients")
    wait_until(lambda: all(m.events("committed") for m in members), 20, message="every member committed")
    state_before = describe(kcoord.bootstrap, group)
    assert state_before[0] == ConsumerGroupState.STABLE and len(state_before[1]) == 3
    owned_before = {m.member: m.assignment() for m in members}

    killed_at = time.monotonic_ns()
    assert kcoord.kill() == -9
    acked = acked_commits(members, killed_at)
    kcoord.restart()
    restarted_at = time.monotonic_ns()

    # The group came back as it was, and nobody had to rejoin.
    assert describe(kcoord.bootstrap, group) == state_before
    produced += produce_records(tansu.bootstrap, topic, 60)
    wait_until(lambda: all(any(r.t_ns > restarted_at for r in m.consumed()) for m in members), 20,
               message="every member consumes after the restart")
    produced += producer.stop()
    wait_all_consumed(members, produced)
    assert describe(kcoord.bootstrap, group) == state_before
    changes = [(m.member, e["event"]) for m in members for e in m.events()
               if e["event"] in ("assigned", "revoked", "lost") and e["t"] > killed_at]
    assert changes == [], f"the restart caused a rebalance: {changes}"
    assert {m.member: m.assignment() for m in members} == owned_before

    # Nothing whose commit was acknowledged before the crash is read again.
    reread = [r for m in members for r in m.consumed() if r.t_ns > killed_at and r.offset < acked.get(r.partition, -1)]
    assert reread == []
    assert fatal_errors(members) == []
    for m in members:
        m.close()
    ledger.assert_no_double_ownership()
    assert ledger.records_outside_ownership([r for m in members for r in m.consumed()]) == []
    assert committed_offsets(kcoord.bootstrap, group, topic, PARTITIONS) == end_offsets(produced)
