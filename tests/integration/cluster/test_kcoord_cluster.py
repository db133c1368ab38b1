"""Three `kcoord serve --instance-id` processes in front of Apache Kafka 4.3 form one cluster
(issue 14): the shards spread over them, every instance names the same coordinator and the
same addresses, real clients follow a group to its owner, and killing a process moves its
shards to the others with every acknowledged commit kept.

Tansu 0.6 cannot carry the membership group (test_cluster_membership.skip_on_tansu), so
these run on Kafka only."""
from __future__ import annotations

import time
from collections import Counter

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from coordinator.cluster.balancer import NODE_ID_BASE
from support import raw_client
from support.admin import create_topic
from support.kcoord import FAST, KcoordProcess
from support.ownership import OwnershipLedger
from support.produce import BackgroundProducer, produce_records
from support.rdkafka import RdkafkaConsumer
from support.wait import wait_until

pytestmark = pytest.mark.integration

SHARDS = 12
PARTITIONS = 6
# A 3 s membership session (the fixture lowers group.min.session.timeout.ms to 1 s).
CLUSTER = (*FAST, "cluster.session.timeout.ms=3000", "cluster.heartbeat.interval.ms=300",
           "cluster.lease.margin.ms=1000", "cluster.rebalance.timeout.ms=10000")
FIND_COORDINATOR, METADATA = 10, 3


def find(process: KcoordProcess, group: str) -> tuple[int, int, str, int]:
    """(error code, node id, host, port) of FindCoordinator v3 asked of `process`."""
    r = raw_client.call_with(process.bootstrap, FIND_COORDINATOR, 3, key=group, key_type=0)
    return int(r.error_code), int(r.node_id), r.host, int(r.port)


def coordinators(processes, groups) -> dict[str, tuple[int, str, int]] | None:
    """Each group's coordinator if every process names the same one, else None."""
    out = {}
    for g in groups:
        answers = {find(p, g) for p in processes}
        if len(answers) != 1:
            return None
        code, node, host, port = answers.pop()
        if code != 0:
            return None
        out[g] = (node, host, port)
    return out


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(PARTITIONS)])
    result = admin.list_consumer_group_offsets([req])[group].result(timeout=20)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


@pytest.fixture
def trio(kafka43, names):
    topic = names.topic()
    procs = [KcoordProcess(kafka43.bootstrap, f"__kc_{topic}", state_partitions=SHARDS, config=CLUSTER,
                           extra_args=("--instance-id", f"kc-{i}")) for i in range(3)]
    try:
        for p in procs:
            p.start(timeout=60)
        groups = [f"g-{i}" for i in range(40)]
        # Settled: every process names the same coordinator for every group, and the groups
        # spread over all three instances.
        wait_until(lambda: (c := coordinators(procs, groups)) is not None
                   and len({node for node, _, _ in c.values()}) == 3, 60, message="the cluster settles")
        yield procs
    finally:
        for p in procs:
            if p.process is not None and p.process.poll() is None:
                p.stop()


def test_three_processes_share_the_shards_and_agree_on_addresses(trio):
    groups = [f"g-{i}" for i in range(40)]
    coords = coordinators(trio, groups)
    assert coords is not None
    nodes = {node: (host, port) for node, host, port in coords.values()}
    # Synthetic node ids, one per instance, each at that instance's bootstrap port.
    assert all(node >= NODE_ID_BASE for node in nodes), nodes
    assert sorted(port for _, port in nodes.values()) == sorted(p.port for p in trio)
    # Metadata from every instance lists the same brokers at the same addresses, the three
    # coordinator nodes among them; the upstream broker is fronted by one instance.
    views = []
    for p in trio:
        md = raw_client.call_with(p.bootstrap, METADATA, 12, topics=None, allow_auto_topic_creation=False,
                                  include_topic_authorized_operations=False)
        views.append(sorted((int(b.node_id), b.host, int(b.port)) for b in md.brokers))
    assert views[0] == views[1] == views[2], views
    listed = {node: (host, port) for node, host, port in views[0]}
    for node, address in nodes.items():
        assert listed.get(node) == address, (node, listed)
    upstream_nodes = [n for n in listed if n < NODE_ID_BASE]
    assert upstream_nodes, listed
    own_ports = {port for p in trio for port in range(p.port, p.port + 2)}
    assert all(listed[n][1] in own_ports for n in upstream_nodes), (listed, own_ports)


def test_kill_dash_nine_moves_the_groups_and_keeps_every_commit(trio, kafka43, names, drivers):
    topic = names.topic()
    create_topic(kafka43.bootstrap, topic, PARTITIONS)
    produce_records(kafka43.bootstrap, topic, 120)
    producer = BackgroundProducer(kafka43.bootstrap, topic, interval=0.005).start()
    # One consumer-protocol group and one classic group, through different instances.
    group_a, group_b = names.group(), names.group()
    ledgers = {group_a: OwnershipLedger(), group_b: OwnershipLedger()}   # a partition per group
    consumers = [drivers.add(RdkafkaConsumer(trio[i % 3].bootstrap, topic, group, member=f"{group}-c{i}",
                                             ledger=ledgers[group], group_protocol=protocol)).start()
                 for i, (group, protocol) in enumerate([(group_a, "consumer"), (group_a, "consumer"),
                                                        (group_b, "classic"), (group_b, "classic")])]
    by_group = {group_a: consumers[:2], group_b: consumers[2:]}
    for members in by_group.values():
        wait_until(lambda m=members: sum(len(c.assignment()) for c in m) == PARTITIONS, 60,
                   message="each group is assigned every partition")
    wait_until(lambda: all(len(c.consumed()) > 20 for c in consumers), 60, message="consumption")

    # Kill the instance coordinating group A.
    _, node_a, _, port_a = find(trio[0], group_a)
    victim = next(p for p in trio if p.port == port_a)
    survivors = [p for p in trio if p is not victim]
    killed_at = time.monotonic_ns()
    assert victim.kill() == -9
    acked: dict[str, dict[int, int]] = {}
    for group, members in by_group.items():
        acked[group] = {}
        for c in members:
            for ev in c.events("committed"):
                if ev["t"] < killed_at:
                    for _, part, off in ev["offsets"]:
                        acked[group][part] = max(acked[group].get(part, -1), off)
    assert acked[group_a], "no commit of group A was acknowledged before the kill"

    # Served again by a survivor, named the same by both.
    wait_until(lambda: (c := coordinators(survivors, [group_a, group_b])) is not None
               and c[group_a][0] != node_a, 60, message="group A's shard moved to a survivor")
    for group in (group_a, group_b):
        after = committed(survivors[0].bootstrap, group, topic)
        assert all(after[p] >= off for p, off in acked[group].items()), (group, acked[group], after)

    produced = produce_records(kafka43.bootstrap, topic, 60) + producer.stop()
    for group, members in by_group.items():
        wait_until(lambda m=members: {(r.partition, r.offset) for r in produced}
                   <= {(r.partition, r.offset) for c in m for r in c.consumed()}, 90,
                   message=f"group {group} consumes everything produced around the kill")
    for ledger in ledgers.values():
        ledger.assert_no_double_ownership()
    assert not [e for c in consumers for e in c.errors() if e.get("fatal")]
    # KIP-848 members saw no rebalance: the failover was shorter than their session timeout.
    assert not [e for c in by_group[group_a] for e in c.events("lost") if e["t"] > killed_at]
    counts = Counter(find(p, g)[1] for p in survivors for g in (f"g-{i}" for i in range(40)))
    assert len(counts) == 2, counts   # the survivors now coordinate everything
