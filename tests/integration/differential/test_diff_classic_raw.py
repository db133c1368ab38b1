"""Classic groups scripted with raw JoinGroup v9 / SyncGroup v5 / Heartbeat v4 / LeaveGroup v5
on Kafka 4.3 and on kcoord in front of it, compared field by field: MEMBER_ID_REQUIRED on the
first join (KIP-394), generations, leader, protocol, assignments handed out by SyncGroup, the
errors of stale generations and unknown members, a second member's join (the first rejoins
after REBALANCE_IN_PROGRESS), LeaveGroup, DescribeGroups and ListGroups at every stage, and
OffsetCommit with a generation. Server-generated member ids are compared by alias.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from classic_raw import ClassicMember, described, wait_rebalance

from support.differential import Transcript, assert_same, commit, list_groups, prepare_group


def classic_lifecycle(t: Transcript, group: str, topic: str) -> Transcript:
    prepare_group(t.side, group)
    one, two = ClassicMember(t, group, topic), ClassicMember(t, group, topic)
    t.add("join without member id", one.join())
    t.add("join", one.join())
    t.add("sync", one.sync({one.member_id: b"one-gen-1"}))
    t.add("heartbeat", one.heartbeat())
    t.add("heartbeat, stale generation", one.heartbeat(generation=one.generation - 1))
    t.add("heartbeat, unknown member", one.heartbeat(member_id="nobody"))
    t.add("describe stable", described(t, group))
    t.add("list", list_groups(t.side, {group}))
    t.add("list classic Stable", list_groups(t.side, {group}, states=("Stable",), types=("classic",)))
    t.add("commit at the generation", commit(t.side, group, topic, {0: 5}, member_id=one.member_id,
                                             epoch=one.generation))
    t.add("commit at a stale generation", commit(t.side, group, topic, {0: 6}, member_id=one.member_id,
                                                 epoch=one.generation + 1))

    # A second member: its join waits for the first to rejoin, which learns of it by heartbeat.
    t.add("second: join without member id", two.join())
    with ThreadPoolExecutor(2) as pool:
        joining = pool.submit(two.join)
        t.add("first: heartbeat during rebalance", wait_rebalance(one))
        t.add("first: rejoin", one.join())
        t.add("second: join", joining.result(timeout=20))
        following = pool.submit(two.sync)
        t.add("leader sync", one.sync({one.member_id: b"one-gen-2", two.member_id: b"two-gen-2"}))
        t.add("follower sync", following.result(timeout=20))
    t.add("describe two members", described(t, group))
    t.add("second leaves", two.leave())
    t.add("first: heartbeat after a leave", wait_rebalance(one))
    t.add("first: rejoin alone", one.join())
    t.add("first: sync alone", one.sync({one.member_id: b"one-gen-3"}))
    t.add("first leaves", one.leave())
    t.add("describe empty", described(t, group))
    t.add("list empty", list_groups(t.side, {group}))
    return t


def test_classic_group_lifecycle(sides, names, topic):
    group = names.group()
    kafka, kcoord = (classic_lifecycle(Transcript(side), group, topic) for side in sides)
    assert_same(kafka, kcoord)
    assert kafka["join without member id"]["error_code"] == "member_id_required"
    assert kafka["second: join"]["generation_id"] == 2 and kafka["follower sync"]["assignment"] == b"two-gen-2".hex()


def static_members(t: Transcript, group: str, topic: str) -> Transcript:
    """KIP-345: a static member joins at once (no MEMBER_ID_REQUIRED round) and again with its
    id; its instance comes back under a new member id (it replaces the old one and is told to
    skip the assignment, KIP-814), then rejoins; the replaced id is fenced; leaves by instance
    id; an unknown instance cannot leave."""
    prepare_group(t.side, group)
    first = ClassicMember(t, group, topic, instance_id="static-1")
    t.add("static: join", first.join())
    t.add("static: join again with its id", first.join())
    t.add("static: sync", first.sync({first.member_id: b"static-gen-1"}))
    again = ClassicMember(t, group, topic, instance_id="static-1")
    t.add("same instance: join without member id", again.join())
    t.add("same instance: join with the new id", again.join())
    t.add("replaced member id: heartbeat", first.heartbeat())
    t.add("replaced member id: sync", first.sync())
    t.add("new member id: sync", again.sync())
    t.add("new member id: heartbeat", again.heartbeat())
    t.add("describe", described(t, group))
    ghost = ClassicMember(t, group, topic, instance_id="static-unknown")
    ghost.member_id = "ghost"
    t.add("unknown instance leaves", ghost.leave())
    t.add("replaced member id leaves", first.leave())
    t.add("static member leaves", again.leave())
    t.add("describe after leave", described(t, group))
    return t


def test_classic_static_members(sides, names, topic):
    group = names.group()
    kafka, kcoord = (static_members(Transcript(side), group, topic) for side in sides)
    assert_same(kafka, kcoord)
    assert kafka["static: sync"]["assignment"] == b"static-gen-1".hex()
    assert kafka["same instance: join without member id"]["skip_assignment"] is True
    assert kafka["replaced member id: heartbeat"]["error_code"] == "fenced_instance_id"
