"""Group administration of classic groups through the gateway: DescribeGroups (confluent
AdminClient and kafka-python), ListGroups with state and type filters (KIP-518, KIP-848),
DeleteGroups only once the group is empty (NON_EMPTY_GROUP before), and a "simple" group
created by an admin offset commit (no members, empty protocol type)."""
from __future__ import annotations

import pytest
from confluent_kafka import (
    ConsumerGroupState, ConsumerGroupTopicPartitions, ConsumerGroupType, KafkaException, TopicPartition,
)
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient

from support.admin import create_topic
from support.produce import produce_records
from support.rdkafka import RdkafkaConsumer
from support.wait import wait_until

from classic_scenario import wait_all_consumed, wait_balanced

PARTITIONS = 4


def listed(admin: AdminClient, **filters) -> dict:
    result = admin.list_consumer_groups(**filters).result(timeout=10)
    assert result.errors == []
    return {g.group_id: g for g in result.valid}


def describe(admin: AdminClient, group: str):
    return admin.describe_consumer_groups([group])[group].result(timeout=10)


def delete_error(admin: AdminClient, group: str) -> str | None:
    try:
        admin.delete_consumer_groups([group])[group].result(timeout=10)
    except KafkaException as exc:
        return exc.args[0].name()
    return None


@pytest.fixture
def kafka_admin(kcoord):
    client = KafkaAdminClient(bootstrap_servers=kcoord.bootstrap)
    yield client
    client.close()


def test_describe_list_delete_a_classic_group(kcoord, names, drivers, kafka_admin):
    bootstrap = kcoord.bootstrap
    topic, group = names.topic(), names.group()
    create_topic(bootstrap, topic, PARTITIONS)
    produced = produce_records(bootstrap, topic, 40)
    members = [drivers.add(RdkafkaConsumer(bootstrap, topic, group, member=f"m{i}", group_protocol="classic",
                                           assignment_strategy="range",
                                           extra_config={"client.id": f"client-m{i}"})).start() for i in (1, 2)]
    wait_balanced(members, topic, "two members", PARTITIONS)
    wait_all_consumed(members, produced)
    admin = AdminClient({"bootstrap.servers": bootstrap})

    # DescribeGroups: a classic group running the consumer protocol type with "range".
    d = describe(admin, group)
    assert (d.type, d.state, d.partition_assignor, d.is_simple_consumer_group) == \
        (ConsumerGroupType.CLASSIC, ConsumerGroupState.STABLE, "range", False)
    assert sorted(m.client_id for m in d.members) == ["client-m1", "client-m2"]
    assert all(m.host and m.member_id.startswith(m.client_id + "-") for m in d.members)
    assert sorted(tp.partition for m in d.members for tp in m.assignment.topic_partitions) == list(range(PARTITIONS))
    by_member = {m.member_id: {tp.partition for tp in m.assignment.topic_partitions} for m in d.members}
    assert {frozenset(p for _, p in c.assignment()) for c in members} == {frozenset(v) for v in by_member.values()}

    # kafka-python's DescribeGroups (v5/v6, authorized operations asked for): metadata and
    # assignment are the raw consumer-protocol bytes, which it decodes itself.
    kp = kafka_admin.describe_groups([group])[group]
    assert (kp["error"], kp["group_state"], kp["protocol_type"], kp["protocol_data"]) == \
        (None, "Stable", "consumer", "range")
    assert {m["member_id"] for m in kp["members"]} == set(by_member)
    for m in kp["members"]:
        assert m["member_metadata"]["topics"] == [topic]
        assigned = {p for a in m["member_assignment"]["assigned_partitions"] if a["topic"] == topic
                    for p in a["partitions"]}
        assert assigned == by_member[m["member_id"]]

    # ListGroups filters (v4 states, v5 types).
    assert listed(admin)[group].state == ConsumerGroupState.STABLE
    assert group in listed(admin, states={ConsumerGroupState.STABLE})
    assert group not in listed(admin, states={ConsumerGroupState.EMPTY})
    assert listed(admin, types={ConsumerGroupType.CLASSIC})[group].type == ConsumerGroupType.CLASSIC
    assert group not in listed(admin, types={ConsumerGroupType.CONSUMER})
    assert group in {g["group_id"] for g in kafka_admin.list_groups(types_filter=["classic"])}

    # DeleteGroups refuses a group with members.
    assert delete_error(admin, group) == "NON_EMPTY_GROUP"
    assert describe(admin, group).state == ConsumerGroupState.STABLE

    for m in members:
        m.close()
    wait_until(lambda: describe(admin, group).state == ConsumerGroupState.EMPTY, 15, message="group empty")
    empty = describe(admin, group)
    assert empty.members == [] and empty.type == ConsumerGroupType.CLASSIC
    assert group in listed(admin, states={ConsumerGroupState.EMPTY})

    assert delete_error(admin, group) is None
    assert group not in listed(admin)
    assert delete_error(admin, group) == "GROUP_ID_NOT_FOUND"
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, p) for p in range(PARTITIONS)])])[group].result(timeout=10)
    assert {tp.offset for tp in offsets.topic_partitions} == {-1001}, "offsets survived the group's deletion"


def test_simple_group_from_an_admin_commit(kcoord, names):
    """An offset commit with no member identity to a missing group creates a "simple"
    classic group (Kafka: generation < 0 → `getOrMaybeCreateClassicGroup`): empty,
    protocol type "", listed and deletable like any empty group."""
    bootstrap = kcoord.bootstrap
    topic, group = names.topic(), names.group()
    create_topic(bootstrap, topic, PARTITIONS)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    commit = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 1, 7)])
    admin.alter_consumer_group_offsets([commit])[group].result(timeout=10)

    simple = listed(admin)[group]
    assert (simple.state, simple.type, simple.is_simple_consumer_group) == \
        (ConsumerGroupState.EMPTY, ConsumerGroupType.CLASSIC, True)
    d = describe(admin, group)
    assert (d.state, d.members, d.is_simple_consumer_group) == (ConsumerGroupState.EMPTY, [], True)
    assert delete_error(admin, group) is None
    assert group not in listed(admin)
