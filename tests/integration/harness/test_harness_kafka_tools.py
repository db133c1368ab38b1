"""Kafka's own kafka-consumer-groups (kafka-tools 4.3.1, ConsumerGroupCommand) pointed at a
kcoord gateway in front of Tansu: it lists a KIP-848 group and a classic group, and describes
their members, committed offsets and lag as the group's own clients left them. The base for
differential runs of the same tool against Apache Kafka."""
from __future__ import annotations

import pytest

from support.admin import committed_offsets, create_topic
from support.kafka_tools import consumer_groups, parse_tables
from support.produce import produce_records
from support.rdkafka import RdkafkaConsumer

pytestmark = pytest.mark.java
PARTITIONS, RECORDS = 3, 30


def by_partition(rows: list[dict[str, str]], group: str, topic: str) -> dict[int, dict[str, str]]:
    return {int(r["PARTITION"]): r for r in rows if r["GROUP"] == group and r["TOPIC"] == topic}


def test_consumer_groups_tool_lists_and_describes_groups_through_kcoord(kcoord, names, drivers, java_classes):
    bootstrap = kcoord.bootstrap
    topic = names.topic()
    live, idle = names.group("live"), names.group("idle")
    create_topic(bootstrap, topic, PARTITIONS)
    produce_records(bootstrap, topic, RECORDS)

    # idle: a classic group that consumed everything, committed and left.
    first = drivers.add(RdkafkaConsumer(bootstrap, topic, idle, member="rd-idle", group_protocol="classic",
                                        extra_config={"client.id": "rd-idle"})).start()
    first.wait_for(lambda: len(first.consumed()) >= RECORDS, 30, f"{RECORDS} records in {idle}")
    first.close()
    # live: a KIP-848 group whose one member owns every partition and committed everything.
    member = drivers.add(RdkafkaConsumer(bootstrap, topic, live, member="rd-live", group_protocol="consumer",
                                         extra_config={"client.id": "rd-live"})).start()
    member.wait_for(lambda: len(member.consumed()) >= RECORDS, 30, f"{RECORDS} records in {live}")
    member.wait_for(lambda: committed_offsets(bootstrap, live, topic, PARTITIONS)
                    == committed_offsets(bootstrap, idle, topic, PARTITIONS), 20, "live group's commits")
    ends = committed_offsets(bootstrap, idle, topic, PARTITIONS)
    assert sum(ends.values()) == RECORDS, ends

    listed = consumer_groups(bootstrap, "--list").check()
    assert {live, idle} <= set(listed.stdout.split()), listed.describe()

    described = consumer_groups(bootstrap, "--describe", "--group", live).check()
    rows = by_partition(parse_tables(described.stdout), live, topic)
    assert set(rows) == set(range(PARTITIONS)), described.describe()
    for p, row in rows.items():
        assert (int(row["CURRENT-OFFSET"]), int(row["LOG-END-OFFSET"]), row["LAG"]) == (ends[p], ends[p], "0"), row
        assert row["CLIENT-ID"] == "rd-live" and row["CONSUMER-ID"] != "-", row
    assert len({row["CONSUMER-ID"] for row in rows.values()}) == 1, rows

    state = consumer_groups(bootstrap, "--describe", "--group", live, "--state").check()
    [summary] = [r for r in parse_tables(state.stdout) if r["GROUP"] == live]
    assert (summary["STATE"], summary["#MEMBERS"]) == ("Stable", "1"), state.describe()

    empty = consumer_groups(bootstrap, "--describe", "--group", idle).check()
    assert f"Consumer group '{idle}' has no active members." in empty.stderr, empty.describe()  # the tool's note
    rows = by_partition(parse_tables(empty.stdout), idle, topic)
    assert {p: (int(r["CURRENT-OFFSET"]), r["LAG"], r["CONSUMER-ID"]) for p, r in rows.items()} \
        == {p: (ends[p], "0", "-") for p in range(PARTITIONS)}, empty.describe()

    # --reset-offsets (AlterConsumerGroupOffsets = OffsetCommit from an admin) and --delete (DeleteGroups).
    reset = consumer_groups(bootstrap, "--reset-offsets", "--group", idle, "--topic", topic, "--to-earliest",
                            "--execute").check()
    assert {p: r["NEW-OFFSET"] for p, r in by_partition(parse_tables(reset.stdout), idle, topic).items()} \
        == {p: "0" for p in range(PARTITIONS)}, reset.describe()
    assert committed_offsets(bootstrap, idle, topic, PARTITIONS) == {p: 0 for p in range(PARTITIONS)}
    deleted = consumer_groups(bootstrap, "--delete", "--group", idle).check()
    assert f"Deletion of requested consumer groups ('{idle}') was successful." in deleted.stdout, deleted.describe()
    after = consumer_groups(bootstrap, "--list").check()
    assert idle not in after.stdout.split() and live in after.stdout.split(), after.describe()
