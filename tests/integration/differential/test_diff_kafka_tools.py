"""Kafka's own kafka-consumer-groups (kafka-tools 4.3.1) pointed at Kafka 4.3 and at kcoord in
front of it, on the same two groups built by the same raw requests: a consumer group with one
KIP-848 member (a client-chosen member id) and committed offsets, and a classic group that
only has offsets (committed by an admin). --list, --describe (offsets, --members, --state),
--reset-offsets --execute and --delete must print the same tables; only the coordinator's
address differs, and is normalised.
"""
from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from support.differential import (
    Coordinator,
    RawMember,
    assert_same,
    commit,
    member_ids,
    prepare_group,
)
from support.kafka_tools import consumer_groups, parse_tables
from support.produce import produce_records

pytestmark = pytest.mark.java
PARTITIONS = 6


def tool(side: Coordinator, *args: str) -> tuple[list[dict[str, str]], str]:
    """The tool's tables (rows sorted) and its notes (stderr without JVM noise)."""
    result = consumer_groups(side.address, *args).check()
    rows = sorted(parse_tables(result.stdout), key=lambda r: sorted(r.items()))
    for row in rows:
        if "COORDINATOR" in row:       # "(ID)" column: host:port (node id)
            row["COORDINATOR"] = "<coordinator>"
    notes = [line for line in result.stderr.splitlines() if "group" in line.lower() and "WARN" not in line]
    return rows, re.sub(r"\s+", " ", " ".join(notes)).strip()


def tool_session(side: Coordinator, topic: str, live: str, idle: str, member_id: str) -> dict:
    prepare_group(side, live)
    prepare_group(side, idle)
    member = RawMember(side, live, member_id, topics=(topic,))
    member.heartbeat_until(lambda r: member.owned_count() == PARTITIONS, message="6 partitions")
    assert set(commit(side, live, topic, {p: p for p in range(PARTITIONS)}, member_id=member_id,
                      epoch=member.epoch).values()) == {"none"}
    assert set(commit(side, idle, topic, dict.fromkeys(range(PARTITIONS), 1)).values()) == {"none"}
    out = {}
    listed = consumer_groups(side.address, "--list").check().stdout.split()
    out["list"] = sorted(g for g in listed if g in (live, idle))
    both = ("--group", live, "--group", idle)
    out["describe"] = tool(side, "--describe", *both)
    out["describe members"] = tool(side, "--describe", "--members", *both)
    out["describe state"] = tool(side, "--describe", "--state", *both)
    out["reset to earliest"] = tool(side, "--reset-offsets", "--group", idle, "--topic", topic, "--to-earliest",
                                    "--execute")
    out["delete"] = consumer_groups(side.address, "--delete", "--group", idle).check().stdout.strip()
    out["list after delete"] = sorted(g for g in consumer_groups(side.address, "--list").check().stdout.split()
                                      if g in (live, idle))
    member.leave()
    return out


@pytest.mark.timeout(180)
def test_kafka_consumer_groups_tool_sees_the_same(sides, names, topic, java_classes):
    produce_records(sides[0].address, topic, 30)
    live, idle, [member_id] = names.group("live"), names.group("idle"), member_ids(1)
    with ThreadPoolExecutor(2) as pool:     # the two sides are independent: their JVMs overlap
        kafka, kcoord = pool.map(lambda side: tool_session(side, topic, live, idle, member_id), sides)
    assert kafka["list"] == sorted([live, idle]) and kafka["list after delete"] == [live], kafka
    assert len(kafka["describe"][0]) == 2 * PARTITIONS, kafka["describe"]
    assert_same(kafka, kcoord)
