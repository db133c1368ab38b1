"""Online conversion between a classic and a consumer group, scripted with raw requests on
Kafka 4.3 and on kcoord in front of it and compared field by field: a classic member (JoinGroup
with the consumer protocol) owns every partition; a KIP-848 member joins (upgrade: the group
becomes a consumer group holding a classic member); the classic member is told to rejoin and
gets its share through SyncGroup (an assignment the coordinator encodes itself); the KIP-848
member leaves (downgrade: a classic group again, rebalancing). Partition choices are compared
by count, the rest (errors, generations, epochs, states, member types, protocols) exactly.
"""
from __future__ import annotations

import struct

from classic_raw import ClassicMember, described, wait_rebalance

from support.differential import (
    RawMember,
    Transcript,
    assert_same,
    describe_consumer_group,
    describe_groups,
    heartbeat_view,
    list_groups,
    member_ids,
    prepare_group,
)

PARTITIONS = 6


def assignment_bytes(topic: str, partitions: range) -> bytes:
    """ConsumerProtocolAssignment v0: version, [topic, [partition]], null user data."""
    name = topic.encode()
    return (struct.pack(">hih", 0, 1, len(name)) + name + struct.pack(">i", len(partitions))
            + b"".join(struct.pack(">i", p) for p in partitions) + struct.pack(">i", -1))


def decode_assignment(hexed: str) -> dict:
    """{"version": v, topic: sorted partitions} of a ConsumerProtocolAssignment (v0-v3 share a layout)."""
    data, at = bytes.fromhex(hexed), 0

    def take(fmt: str):
        nonlocal at
        values = struct.unpack_from(fmt, data, at)
        at += struct.calcsize(fmt)
        return values[0]
    out: dict = {"version": take(">h")}
    for _ in range(take(">i")):
        name = data[at + 2: at + 2 + take(">h")].decode()
        at += len(name)
        out[name] = sorted(take(">i") for _ in range(take(">i")))
    return out


def counted(t: Transcript, view: dict) -> dict:
    """A ConsumerGroupDescribe view with assignments as partition counts (the assignor's choice)
    and the classic member's server-generated id aliased."""
    for m in view["members"]:
        m["member_id"] = m["member_id"] if m["member_type"] == 1 else t.alias(m["member_id"])
        for key in ("assignment", "target_assignment"):
            m[key] = {k: len(v) for k, v in m[key].items()}
    return view


def convert_and_back(t: Transcript, group: str, topic: str, ids: list[str]) -> Transcript:
    prepare_group(t.side, group)
    classic = ClassicMember(t, group, topic)
    classic.join()
    t.add("classic: join", classic.join())
    t.add("classic: sync", classic.sync({classic.member_id: assignment_bytes(topic, range(PARTITIONS))}))
    t.add("list classic", list_groups(t.side, {group}))

    kip848 = RawMember(t.side, group, ids[0], topics=(topic,))
    first = kip848.heartbeat()
    t.add("consumer member joins: upgrade", {**heartbeat_view(first), "assignment": kip848.owned_count()})
    t.add("list after upgrade", list_groups(t.side, {group}))
    t.add("describe after upgrade", counted(t, describe_consumer_group(t.side, group)))
    t.add("classic: heartbeat", wait_rebalance(classic))
    t.add("classic: rejoin", classic.join())
    synced = classic.sync()
    mine = decode_assignment(synced.pop("assignment"))
    t.add("classic: sync in the consumer group", {**synced, "assignment": {k: v if k == "version" else len(v)
                                                                           for k, v in mine.items()}})
    kip848.heartbeat_until(lambda r: kip848.owned_count() == PARTITIONS // 2, message="its 3 partitions")
    theirs = {p for ps in kip848.owned.values() for p in ps}
    t.add("split", (set(mine[topic]) & theirs, len(set(mine[topic]) | theirs)) == (set(), PARTITIONS))
    t.add("classic: heartbeat when reconciled", classic.heartbeat())
    t.add("describe reconciled", counted(t, describe_consumer_group(t.side, group)))

    t.add("consumer member leaves: downgrade", heartbeat_view(kip848.leave()))
    t.add("list after downgrade", list_groups(t.side, {group}))
    after = t.add("describe groups after downgrade", described(t, group))
    for m in after["members"]:     # the partitions the assignor chose at the upgrade: compared by count
        m["member_assignment"] = {k: v if k == "version" else len(v)
                                  for k, v in decode_assignment(m["member_assignment"]).items()}
    t.add("classic: heartbeat after downgrade", wait_rebalance(classic))
    t.add("classic: rejoin alone", classic.join())
    t.add("classic: sync alone", classic.sync({classic.member_id: assignment_bytes(topic, range(PARTITIONS))}))
    t.add("classic leaves", classic.leave())
    t.add("describe groups at the end", describe_groups(t.side, group))
    return t


def test_upgrade_and_downgrade_by_raw_requests(sides, names, topic):
    group, ids = names.group(), member_ids(1)
    kafka, kcoord = (convert_and_back(Transcript(side), group, topic, ids) for side in sides)
    assert_same(kafka, kcoord)
    assert [g["group_type"] for g in (kafka["list classic"][0], kafka["list after upgrade"][0],
                                      kafka["list after downgrade"][0])] == ["classic", "consumer", "classic"]
    assert kafka["split"] is True
