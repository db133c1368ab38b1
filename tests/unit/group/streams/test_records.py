"""Records 17 and 19-23: built from the model, encoded as Kafka writes them, decoded and replayed
back to the same state; a garbage value fails the load; the 4.4 tagged fields survive."""
from __future__ import annotations

import struct

import pytest

from coordinator.group.streams import record_types as rt
from coordinator.group.streams import records as rh
from coordinator.group.streams.model import (
    MemberState,
    StreamsGroup,
    StreamsMember,
    Subtopology,
    Tasks,
    TopicInfo,
    Topology,
)
from records import RecordDecodeError, UnknownRecordVersionError

from .driver import Driver, beat, image, join, subtopology, topology

TOP = Topology.of(3, [
    Subtopology("1", repartition_source_topics=(TopicInfo("app-rep", 0, 3, (("cleanup.policy", "delete"),)),),
                state_changelog_topics=(TopicInfo("app-store-changelog"),)),
    Subtopology("0", source_topics=("in-a", "in-b"), repartition_sink_topics=("app-rep",),
                copartition_groups=(((0, 1), (), ()),)),
])
MEMBER = StreamsMember(
    "m1", member_epoch=7, previous_member_epoch=6, state=MemberState.UNREVOKED_TASKS, instance_id="i1",
    rack_id="r1", client_id="c", client_host="/10.0.0.1", rebalance_timeout_ms=30_000, topology_epoch=3,
    process_id="p1", user_endpoint=("host", 8080), client_tags=(("az", "1"), ("zone", "b")),
    assigned=Tasks(frozenset({("0", 1), ("0", 3)}), frozenset({("1", 0)}), frozenset()),
    pending_revocation=Tasks(frozenset({("1", 2)}), frozenset(), frozenset({("0", 0)})),
    active_epochs={("0", 1): 5, ("0", 3): 7})


def _round_trip(records):
    return [rt.decode(*rt.encode(r)) for r in records]


def _replayed(records) -> StreamsGroup:
    d = Driver(image())
    for offset, r in enumerate(_round_trip(records)):
        d.shard.replay(r, offset)
    return d.shard.groups["g"]


def test_written_records_replay_to_the_state_they_were_built_from():
    target = Tasks(frozenset({("0", 1), ("0", 3), ("0", 4)}), frozenset({("1", 0)}), frozenset())
    group = _replayed([
        rh.topology("g", TOP),
        rh.member_metadata("g", MEMBER),
        rh.group_metadata("g", 9, -123, 3, (("num.standby.replicas", "1"),), 4, 2),
        rh.target_member("g", "m1", target),
        rh.target_metadata("g", 8, 555),
        rh.current_assignment("g", MEMBER),
    ])
    assert group.topology == TOP
    assert group.members == {"m1": MEMBER}
    assert group.target == {"m1": target}
    assert (group.group_epoch, group.metadata_hash, group.validated_topology_epoch) == (9, -123, 3)
    assert group.last_assignment_configs == (("num.standby.replicas", "1"),)
    assert (group.stored_description_topology_epoch, group.failed_description_topology_epoch) == (4, 2)
    assert (group.target_assignment_epoch, group.assignment_timestamp_ms) == (8, 555)


def test_tombstones_remove_what_they_name():
    group = _replayed([rh.topology("g", TOP), rh.member_metadata("g", MEMBER), rh.current_assignment("g", MEMBER),
                       rh.target_member("g", "m1", MEMBER.assigned), rh.current_assignment_tombstone("g", "m1"),
                       rh.target_member_tombstone("g", "m1")])
    assert group.members["m1"].member_epoch == -1 and group.members["m1"].assigned.is_empty()
    assert group.target == {}
    d = Driver(image())
    for r in _round_trip([rh.group_metadata("g", 1, 0, -1), rh.member_tombstone("g", "m1"),
                          rh.topology_tombstone("g"), rh.group_tombstone("g")]):
        d.shard.replay(r)
    assert "g" not in d.shard.groups


def test_the_record_bytes_are_kafkas_framing():
    key, value = rt.encode(rh.target_metadata("g", 8, 0))
    assert key == struct.pack(">hh", 20, 1) + b"g"
    assert value == struct.pack(">hi", 0, 8) + b"\x00"   # version 0, epoch, no tagged field (timestamp 0)
    key, value = rt.encode(rh.group_metadata("g", 2, 5, -1))
    assert value == struct.pack(">hiq", 0, 2, 5) + b"\x00"   # tagged fields at their defaults are omitted


def test_a_streams_group_metadata_value_that_does_not_parse_fails_the_load():
    key, _ = rt.encode(rh.group_metadata("g", 2, 5, -1))
    with pytest.raises(RecordDecodeError, match="StreamsGroupMetadataValue"):
        rt.decode(key, b"\x00\x00\xff")
    with pytest.raises(UnknownRecordVersionError):
        rt.decode(key, b"\x00\x01" + b"\x00" * 16)


def test_a_heartbeat_rewriting_the_group_record_keeps_the_description_epochs():
    d = Driver(image(input=2), streams_initial_rebalance_delay_ms=0)
    d.shard.replay(rt.decode(*rt.encode(rh.group_metadata("app", 4, 0, -1, (), 7, 6))))
    answer = d.hb(join("m1", "p1", topology(subtopology("0", sources=["input"]))))
    assert answer.error_code == 0
    written = [rt.decode(k, v).value for k, v in d.log if k[:2] == struct.pack(">h", 17)]
    assert written and all((w.stored_description_topology_epoch, w.failed_description_topology_epoch) == (7, 6)
                           for w in written)
    assert d.reloaded().groups["app"].stored_description_topology_epoch == 7
    d.hb(beat("m1", answer.member_epoch))
