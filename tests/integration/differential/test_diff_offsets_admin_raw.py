"""Offsets and group administration, scripted with raw requests on Kafka 4.3 and on kcoord
in front of it, compared field by field: KIP-1251 commit validation (OffsetCommit v9 with a
consumer-group member's epoch: current, newer, older; kept and moved partitions after a
rebalance), OffsetFetch v9 with member epochs, ListGroups v5 filters, DescribeGroups v6 of a
consumer group, OffsetDelete and DeleteGroups on a group with members and once it is empty;
OffsetCommit v10 / OffsetFetch v10, which name topics by id.
"""
from __future__ import annotations

import time
import uuid

from support.differential import (
    OFFSET_COMMIT,
    OFFSET_FETCH,
    RawMember,
    Transcript,
    assert_same,
    commit,
    delete_groups,
    describe_consumer_group,
    describe_groups,
    fetch,
    list_groups,
    member_ids,
    offset_delete,
    plain,
    prepare_group,
    wait_assignment_interval,
)

PARTITIONS = 6


def partitions_of(member: RawMember) -> set[int]:
    return {p for ps in member.owned.values() for p in ps}


def offsets_and_admin(t: Transcript, group: str, topic: str, ids: list[str]) -> Transcript:
    side = t.side
    prepare_group(side, group)
    a, b = (RawMember(side, group, i, topics=(topic,)) for i in ids)
    a.heartbeat_until(lambda r: a.owned_count() == PARTITIONS, message="6 partitions")
    first = a.epoch
    t.add("commit at the member epoch", commit(side, group, topic, {0: 10, 1: 11}, member_id=a.member_id, epoch=first))
    t.add("commit at a newer epoch", commit(side, group, topic, {2: 12}, member_id=a.member_id, epoch=first + 1))
    t.add("commit at an older epoch", commit(side, group, topic, {2: 12}, member_id=a.member_id, epoch=first - 1))
    t.add("commit from an unknown member", commit(side, group, topic, {2: 12}, member_id=ids[1], epoch=first))
    t.add("admin commit while members", commit(side, group, topic, {2: 12}))
    t.add("fetch as the member", fetch(side, group, topic, member_id=a.member_id, epoch=first))
    t.add("fetch at a stale epoch", fetch(side, group, topic, member_id=a.member_id, epoch=first - 1))
    t.add("fetch without member", fetch(side, group, None))

    # B joins; after the rebalance A keeps three partitions (assigned at `first`), B has three.
    wait_assignment_interval(time.monotonic())
    b.heartbeat()

    def settled(_: object) -> bool:
        b.heartbeat()
        return a.owned_count() == b.owned_count() == 3 and a.epoch == b.epoch
    a.heartbeat_until(settled, message="3 partitions each")
    kept, moved = sorted(partitions_of(a)), sorted(partitions_of(b))
    t.add("A commits a kept partition at its previous epoch (KIP-1251)",
          list(commit(side, group, topic, {kept[0]: 20}, member_id=a.member_id, epoch=first).values()))
    t.add("A commits a moved partition at its previous epoch",
          list(commit(side, group, topic, {moved[0]: 20}, member_id=a.member_id, epoch=first).values()))
    t.add("B commits at the previous epoch",
          list(commit(side, group, topic, {moved[0]: 21}, member_id=b.member_id, epoch=first).values()))
    t.add("B commits at its epoch",
          list(commit(side, group, topic, {moved[0]: 22}, member_id=b.member_id, epoch=b.epoch).values()))

    t.add("list", list_groups(side, {group}))
    t.add("list consumer type, Stable", list_groups(side, {group}, states=("Stable",), types=("consumer",)))
    t.add("list classic type", list_groups(side, {group}, types=("classic",)))
    t.add("describe groups of a consumer group", describe_groups(side, group))
    t.add("offset delete while subscribed", offset_delete(side, group, topic, range(2)))
    t.add("delete while members", delete_groups(side, group))
    a.leave()
    b.leave()
    t.add("offset delete when empty", offset_delete(side, group, topic, range(2)))
    t.add("fetch after offset delete", fetch(side, group, topic))
    t.add("list empty", list_groups(side, {group}))
    t.add("delete when empty", delete_groups(side, group))
    t.add("describe deleted", describe_consumer_group(side, group))
    t.add("describe groups deleted", describe_groups(side, group))
    t.add("delete twice", delete_groups(side, group))
    return t


def test_commit_validation_fetch_and_admin(sides, names, topic):
    group, ids = names.group(), member_ids(2)
    kafka, kcoord = (offsets_and_admin(Transcript(side), group, topic, ids) for side in sides)
    assert_same(kafka, kcoord)
    assert kafka["commit at the member epoch"] == {0: "none", 1: "none"}
    assert kafka["commit at a newer epoch"] == {2: "stale_member_epoch"}


def topic_id_offsets(t: Transcript, group: str, topic: str, ids: list[str]) -> Transcript:
    """OffsetCommit v10 / OffsetFetch v10 address topics by id (KIP-848)."""
    side = t.side
    prepare_group(side, group)
    a = RawMember(side, group, ids[0], topics=(topic,))
    a.heartbeat_until(lambda r: a.owned_count() == PARTITIONS, message="6 partitions")
    [topic_id] = a.owned
    ct, ft = side.types(OFFSET_COMMIT, 10), side.types(OFFSET_FETCH, 10)

    def commit_v10(tid, offsets: dict[int, int]) -> list:
        response = side.call(OFFSET_COMMIT, 10, group_id=group, generation_id_or_member_epoch=a.epoch,
                             member_id=a.member_id, group_instance_id=None, topics=(ct.OffsetCommitRequestTopic(
                                 topic_id=tid, partitions=tuple(ct.OffsetCommitRequestPartition(
                                     partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                                     committed_metadata=None) for p, o in offsets.items())),))
        return [{"topic": names.get(str(x.topic_id), str(x.topic_id)),
                 "partitions": plain(x.partitions)} for x in response.topics]

    def fetch_v10(topics) -> dict:
        [group_answer] = side.call(OFFSET_FETCH, 10, require_stable=True, groups=(ft.OffsetFetchRequestGroup(
            group_id=group, member_id=a.member_id, member_epoch=a.epoch, topics=topics),)).groups
        out = plain(group_answer)
        for x in out["topics"]:
            x["topic_id"] = names.get(x["topic_id"], x["topic_id"])
        return out

    unknown = uuid.uuid4()
    names = {str(topic_id): "<the topic>", str(unknown): "<an unknown topic id>"}
    t.add("commit by topic id", commit_v10(topic_id, {0: 7, 1: 8}))
    t.add("commit to an unknown topic id", commit_v10(unknown, {0: 1}))
    by_id = ft.OffsetFetchRequestTopics
    t.add("fetch by topic id", fetch_v10((by_id(topic_id=topic_id, partition_indexes=(0, 1, 2)),)))
    t.add("fetch all topics", fetch_v10(None))
    t.add("fetch an unknown topic id", fetch_v10((by_id(topic_id=unknown, partition_indexes=(0,)),)))
    t.add("fetch by name (v9)", fetch(side, group, topic))
    a.leave()
    return t


def test_offsets_by_topic_id(sides, names, topic):
    group, ids = names.group(), member_ids(1)
    kafka, kcoord = (topic_id_offsets(Transcript(side), group, topic, ids) for side in sides)
    assert_same(kafka, kcoord)
    assert kafka["commit by topic id"][0]["partitions"] == [{"partition_index": 0, "error_code": "none"},
                                                            {"partition_index": 1, "error_code": "none"}]
    assert kafka["commit to an unknown topic id"][0]["partitions"][0]["error_code"] == "unknown_topic_id"
