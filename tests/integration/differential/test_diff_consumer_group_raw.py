"""KIP-848 consumer groups, scripted with raw ConsumerGroupHeartbeat v1 requests and
client-chosen member ids (KIP-1082), run on Kafka 4.3 and on kcoord in front of it: every
response (errors, epochs, assignments, heartbeat intervals) and ConsumerGroupDescribe must be
the same on both, field by field (support.differential). Where two members share partitions
the assignor is free in its choice, so those steps compare balance and stickiness instead.
"""
from __future__ import annotations

import time
from datetime import timedelta

from support.differential import (
    CG_HEARTBEAT,
    RawMember,
    Trajectory,
    Transcript,
    assert_same,
    create_known_topic,
    describe_consumer_group,
    heartbeat_view,
    member_ids,
    prepare_group,
    set_kafka_group_config,
    wait_assignment_interval,
    wait_for_coordinator,
)

PARTITIONS = 6


def run_both(sides, scenario, *args):
    kafka, kcoord = (scenario(Transcript(side), *args) for side in sides)
    assert_same(kafka, kcoord)
    return kafka, kcoord


def join_and_leave(t: Transcript, group: str, topic: str, ids: list[str]) -> Transcript:
    prepare_group(t.side, group)
    a = RawMember(t.side, group, ids[0], topics=(topic,))
    t.add("join", heartbeat_view(a.heartbeat()))
    assigned = a.heartbeat_until(lambda r: a.owned_count() == PARTITIONS, message="6 partitions")
    t.add("assigned", heartbeat_view(assigned))
    t.add("stable", heartbeat_view(a.heartbeat()))
    t.add("describe", describe_consumer_group(t.side, group))
    t.add("leave", heartbeat_view(a.leave()))
    after = t.add("describe after leave", describe_consumer_group(t.side, group))
    # When the last member leaves, the target assignment is written at the group epoch
    # (KAFKA-20442), so the assignment epoch follows the group epoch. Kafka 4.4 does this;
    # 4.3.1 kept the previous epoch (docs/design/differential.md).
    t.add("assignment epoch after last leave", after["assignment_epoch"] == after["group_epoch"])
    return t


def test_join_and_leave(sides, names, topic):
    group, ids = names.group(), member_ids(1)
    kafka, kcoord = (join_and_leave(Transcript(side), group, topic, ids) for side in sides)
    assert kafka["describe"]["group_state"] == "Stable" and kafka["leave"]["member_epoch"] == -1
    assert kafka["assignment epoch after last leave"] is True
    assert_same(kafka, kcoord)


def reconcile(t: Transcript, group: str, topic: str, ids: list[str]) -> Transcript:
    """A owns everything; B joins; A revokes half (same epoch), then gets the new epoch; B gets
    its half once A released it. Compared: each member's trajectory and the describe output
    up to the partition choice (balance, and A keeping only partitions it had: stickiness)."""
    prepare_group(t.side, group)
    a, b = (RawMember(t.side, group, i, topics=(topic,)) for i in ids)
    a.heartbeat_until(lambda r: a.owned_count() == PARTITIONS, message="6 partitions")
    before = {p for ps in a.owned.values() for p in ps}
    wait_assignment_interval(time.monotonic())
    ta = Trajectory(a)
    first = b.heartbeat()
    t.add("B joins", {**heartbeat_view(first), "assignment": None})
    tb = Trajectory(b)

    def both_settled(_: object) -> bool:
        ta.note()
        b.heartbeat()
        tb.note()
        return a.owned_count() == b.owned_count() == PARTITIONS // 2 and a.epoch == b.epoch
    a.heartbeat_until(both_settled, message="A and B with 3 partitions each at one epoch")
    t.add("A trajectory", ta.states)
    t.add("B trajectory", tb.states)
    mine = {p for ps in a.owned.values() for p in ps}
    theirs = {p for ps in b.owned.values() for p in ps}
    t.add("disjoint and complete", (mine & theirs, mine | theirs) == (set(), set(range(PARTITIONS))))
    t.add("A sticky", mine <= before)
    described = describe_consumer_group(t.side, group)
    for m in described["members"]:
        m["assignment"] = {k: len(v) for k, v in m["assignment"].items()}
        m["target_assignment"] = {k: len(v) for k, v in m["target_assignment"].items()}
    t.add("describe", described)
    return t


def test_second_member_reconciles(sides, names, topic):
    kafka, _ = run_both(sides, reconcile, names.group(), topic, member_ids(2))
    assert kafka["A trajectory"][0] == (2, 6) and kafka["A trajectory"][-1] == (3, 3), kafka
    assert kafka["disjoint and complete"] and kafka["A sticky"]


def fencing(t: Transcript, group: str, topic: str, ids: list[str]) -> Transcript:
    prepare_group(t.side, group)
    a = RawMember(t.side, group, ids[0], topics=(topic,))
    a.heartbeat_until(lambda r: a.owned_count() == PARTITIONS, message="6 partitions")
    t.add("epoch", a.epoch)
    t.add("higher epoch", heartbeat_view(a.heartbeat(epoch=a.epoch + 1)))
    t.add("older epoch, other partitions", heartbeat_view(a.heartbeat(epoch=a.epoch - 1, owned={})))
    t.add("older epoch, same partitions", heartbeat_view(a.heartbeat(epoch=a.epoch - 1)))
    stranger = RawMember(t.side, group, ids[1], topics=(topic,))
    t.add("unknown member", heartbeat_view(stranger.heartbeat(epoch=5)))
    t.add("unknown member leaves", heartbeat_view(stranger.leave()))
    nobody = RawMember(t.side, group + "-none", ids[1], topics=(topic,))
    t.add("unknown group", heartbeat_view(nobody.heartbeat(epoch=3)))
    t.add("empty member id", heartbeat_view(RawMember(t.side, group, "", topics=(topic,)).heartbeat()))
    t.add("no subscription at join", heartbeat_view(RawMember(t.side, group, ids[2]).heartbeat()))
    t.add("still a member", heartbeat_view(a.heartbeat()))
    t.add("rejoin at epoch 0", heartbeat_view(a.heartbeat(epoch=0)))
    t.add("describe", describe_consumer_group(t.side, group))
    return t


def test_fencing(sides, names, topic):
    kafka, _ = run_both(sides, fencing, names.group(), topic, member_ids(3))
    assert kafka["higher epoch"]["error_code"] == "fenced_member_epoch"
    assert kafka["unknown member"]["error_code"] == "unknown_member_id"


def static_member(t: Transcript, group: str, topic: str, ids: list[str]) -> Transcript:
    prepare_group(t.side, group)
    a = RawMember(t.side, group, ids[0], topics=(topic,), instance_id="instance-1")
    a.heartbeat_until(lambda r: a.owned_count() == PARTITIONS, message="6 partitions")
    t.add("joined", heartbeat_view(a.heartbeat()))
    twin = RawMember(t.side, group, ids[1], topics=(topic,), instance_id="instance-1")
    t.add("same instance while held", heartbeat_view(twin.heartbeat()))
    t.add("leave with -2", heartbeat_view(a.leave(epoch=-2)))
    t.add("describe while away", describe_consumer_group(t.side, group))
    t.add("old id after -2", heartbeat_view(a.heartbeat()))
    t.add("rejoin under a new id", heartbeat_view(twin.heartbeat()))
    t.add("describe after rejoin", describe_consumer_group(t.side, group))
    t.add("leave for good", heartbeat_view(twin.leave()))
    described = t.add("describe after leave", describe_consumer_group(t.side, group))
    described.pop("assignment_epoch")     # KAFKA-20442, see test_join_and_leave
    return t


def test_static_member_leaves_with_minus_two_and_rejoins(sides, names, topic):
    kafka, _ = run_both(sides, static_member, names.group(), topic, member_ids(2))
    assert kafka["same instance while held"]["error_code"] == "unreleased_instance_id"
    assert kafka["rejoin under a new id"]["error_code"] == "none"


def regex(t: Transcript, group: str, prefix: str, ids: list[str]) -> Transcript:
    prepare_group(t.side, group)
    a = RawMember(t.side, group, ids[0], regex=f"{prefix}-.*")
    t.add("join", {**heartbeat_view(a.heartbeat()), "assignment": None})
    a.heartbeat_until(lambda r: a.owned_count() == 2 + 3, message="both matching topics")
    t.add("assigned", heartbeat_view(a.heartbeat()))
    t.add("describe", describe_consumer_group(t.side, group))
    bad = RawMember(t.side, group, ids[1], regex="(unclosed")
    t.add("invalid regex", heartbeat_view(bad.heartbeat()))
    return t


def test_regex_subscription(sides, names):
    prefix = names.topic("rx")
    for suffix, partitions in (("a", 2), ("b", 3)):
        create_known_topic(sides, f"{prefix}-{suffix}", partitions)
    create_known_topic(sides, f"{prefix}x-c", 1)      # no match: the regex must match fully
    kafka, _ = run_both(sides, regex, names.group(), prefix, member_ids(2))
    assert kafka["invalid regex"]["error_code"] == "invalid_regular_expression"


def group_config(t: Transcript, group: str, topic: str, ids: list[str]) -> Transcript:
    """A per-group setting (KIP-848 GroupConfig) sent through each side's own address: kcoord
    serves it itself (docs/user/group-configs.md)."""
    wait_for_coordinator(t.side, group)
    set_kafka_group_config(t.side, group, {"consumer.heartbeat.interval.ms": "2000"})
    a = RawMember(t.side, group, ids[0], topics=(topic,))
    t.add("join", heartbeat_view(a.heartbeat()))
    a.leave()
    return t


def test_per_group_heartbeat_interval(sides, names, topic):
    group, ids = names.group(), member_ids(1)
    kafka, kcoord = (group_config(Transcript(side), group, topic, ids) for side in sides)
    assert kafka["join"]["heartbeat_interval"] == 2000
    assert_same(kafka, kcoord)


def version_zero(t: Transcript, group: str, topic: str) -> Transcript:
    """ConsumerGroupHeartbeat v0: the coordinator generates the member id (before KIP-1082)."""
    prepare_group(t.side, group)
    types = t.side.types(CG_HEARTBEAT, 0)

    def heartbeat(member_id: str, epoch: int, owned=()) -> dict:
        response = t.side.call(CG_HEARTBEAT, 0, group_id=group, member_id=member_id, member_epoch=epoch,
                               instance_id=None, rack_id=None, rebalance_timeout=timedelta(seconds=30),
                               subscribed_topic_names=(topic,), server_assignor=None, topic_partitions=tuple(
                                   types.TopicPartitions(topic_id=k, partitions=v) for k, v in owned))
        view = heartbeat_view(response)
        view["member_id"] = t.alias(view["member_id"] or "")
        return response, view

    joined, view = heartbeat("", 0)
    t.add("join with an empty member id", view)
    owned = [(tp.topic_id, tp.partitions) for tp in joined.assignment.topic_partitions] if joined.assignment else []
    t.add("heartbeat", heartbeat(joined.member_id, joined.member_epoch, owned)[1])
    t.add("leave", heartbeat(joined.member_id, -1)[1])
    return t


def test_version_zero_server_generated_member_id(sides, names, topic):
    group = names.group()
    kafka, kcoord = (version_zero(Transcript(side), group, topic) for side in sides)
    assert_same(kafka, kcoord)
    assert kafka["join with an empty member id"]["member_id"] == "member-1"
    assert kafka["join with an empty member id"]["error_code"] == "none"
