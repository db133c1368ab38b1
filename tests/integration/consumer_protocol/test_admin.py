"""Admin clients against KIP-848 groups served by the gateway: the confluent-kafka
AdminClient lists and describes consumer groups (type, state, members, assignments) and
lists, alters and deletes their offsets; kafka-python deletes single partitions' offsets
(OffsetDelete), which confluent-kafka's Python AdminClient does not expose."""
from __future__ import annotations

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, ConsumerGroupType, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka.structs import TopicPartition as KTopicPartition

from support.admin import create_topic
from support.produce import produce_records
from support.rdkafka import RdkafkaConsumer
from support.wait import wait_until

PARTITIONS = 4


def offsets(admin: AdminClient, group: str, topic: str) -> dict[int, int]:
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(PARTITIONS)])
    res = admin.list_consumer_group_offsets([req])[group].result(timeout=10)
    return {tp.partition: tp.offset for tp in res.topic_partitions}


def alter_errors(admin: AdminClient, request: ConsumerGroupTopicPartitions) -> list:
    """Per-partition outcome of an offsets alteration (the future reports them per partition)."""
    try:
        result = admin.alter_consumer_group_offsets([request])[request.group_id].result(timeout=10)
    except Exception as e:  # librdkafka raises when every partition failed with one error
        return [e.args[0].name() if e.args and hasattr(e.args[0], "name") else str(e)]
    return [tp.error.name() if tp.error else None for tp in result.topic_partitions]


def test_admin_client_on_consumer_groups(kcoord, names, drivers):
    bootstrap = kcoord.bootstrap
    topic, group = names.topic(), names.group()
    create_topic(bootstrap, topic, PARTITIONS)
    produced = produce_records(bootstrap, topic, 40)
    end = {p: 1 + max((r.offset for r in produced if r.partition == p), default=-1) for p in range(PARTITIONS)}
    members = [drivers.add(RdkafkaConsumer(bootstrap, topic, group, member=f"m{i}",
                                           group_protocol="consumer")).start() for i in (1, 2)]
    wait_until(lambda: sum(len(m.assignment()) for m in members) == PARTITIONS
               and all(m.assignment() for m in members), 30, message="assignment")
    wait_until(lambda: sum(len(m.consumed()) for m in members) == 40, 30, message="consumption")
    admin = AdminClient({"bootstrap.servers": bootstrap})

    # List: the group is a consumer-type group, and filters on type and state work.
    listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(timeout=10)
    mine = [g for g in listed.valid if g.group_id == group]
    assert len(mine) == 1 and mine[0].type == ConsumerGroupType.CONSUMER and mine[0].state == ConsumerGroupState.STABLE
    classic = admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(timeout=10)
    assert group not in {g.group_id for g in classic.valid}

    # Describe: ConsumerGroupDescribe gives type, state, members and their assignments.
    d = admin.describe_consumer_groups([group])[group].result(timeout=10)
    assert d.type == ConsumerGroupType.CONSUMER and d.state == ConsumerGroupState.STABLE
    assert len(d.members) == 2
    described = sorted(tp.partition for m in d.members for tp in m.assignment.topic_partitions)
    assert described == list(range(PARTITIONS))
    assert {m.client_id for m in d.members} and all(m.host for m in d.members)

    # Offsets: what the consumers committed: the end of every partition.
    wait_until(lambda: offsets(admin, group, topic) == {p: e if e else -1001 for p, e in end.items()}, 20,
               message=lambda: f"committed {offsets(admin, group, topic)}")

    # A non-empty consumer group refuses admin commits (Kafka: UNKNOWN_MEMBER_ID).
    alter = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 3)])
    assert alter_errors(admin, alter) == ["UNKNOWN_MEMBER_ID"]

    for m in members:
        m.close()
    wait_until(lambda: admin.describe_consumer_groups([group])[group].result(timeout=10).state
               == ConsumerGroupState.EMPTY, 20, message="group empty after members left")

    assert alter_errors(admin, alter) == [None]
    assert offsets(admin, group, topic)[0] == 3

    # OffsetDelete for one partition (kafka-python), then DeleteGroups drops the rest.
    kp = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        result = kp.delete_group_offsets(group, [KTopicPartition(topic, 1)])
        assert all(not isinstance(err, Exception) and (err is None or getattr(err, "errno", 0) == 0)
                   for err in result.values()), result
    finally:
        kp.close()
    assert offsets(admin, group, topic) == {0: 3, 1: -1001, 2: end[2] or -1001, 3: end[3] or -1001}

    admin.delete_consumer_groups([group])[group].result(timeout=10)
    listed = admin.list_consumer_groups().result(timeout=10)
    assert group not in {g.group_id for g in listed.valid}
    assert offsets(admin, group, topic) == {p: -1001 for p in range(PARTITIONS)}
