"""The membership's parts on their own: the shards held (ownership.py), the leader's balance
(leader.py) and the heartbeat timer (heartbeat.py); no link, times passed in."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from coordinator.cluster.heartbeat import Heartbeat
from coordinator.cluster.leader import lead
from coordinator.cluster.ownership import ShardOwnership
from coordinator.cluster.protocol import (Assignment, Endpoint, MemberMetadata, decode_assignment, decode_metadata,
                                          encode_metadata)
from coordinator.cluster.upstream import MembershipFenced, NotAlone

SESSION_MS = 3_000
HERE = Endpoint("h", 1)


def mapping(generation: int, shards, *, endpoint: Endpoint = HERE, hold=frozenset(), error: int = 0) -> Assignment:
    return Assignment(generation, frozenset(shards), {s: "a" for s in shards}, {"a": endpoint}, {"a": 7},
                      error, frozenset(hold))


def test_an_assignment_reports_what_moved_and_ages_the_claim_only_when_something_did():
    o = ShardOwnership("a", HERE, SESSION_MS)
    o.joined(0.0)
    assert o.apply(mapping(5, {0, 1}), 10_000.0) == ({0, 1}, frozenset())
    assert (o.owned, o.owned_since, o.node_id) == ({0, 1}, 5, 7)
    assert o.apply(mapping(6, {0, 1}), 10_000.0) == (frozenset(), frozenset())
    assert o.owned_since == 5, "nothing moved: the claim keeps its generation"
    assert o.apply(mapping(7, {1, 2}), 10_000.0) == ({2}, {0})
    assert o.owned_since == 7


def test_shards_added_while_fresh_or_marked_are_held_a_session():
    o = ShardOwnership("a", HERE, SESSION_MS)
    o.joined(1_000.0)                       # fresh until 4,000 ms
    o.apply(mapping(5, {0}), 2_000.0)
    assert o.hold_until == {0: 4.0}
    o.apply(mapping(6, {0, 1}, hold={1}), 5_000.0)   # no longer fresh; 1 is marked
    assert o.hold_until == {1: 8.0}, "an expired hold is dropped, a marked shard is held"
    assert not o.fresh(5_000.0) and o.fresh(3_999.0)


def test_a_refused_instance_id_or_a_watchers_verdict_raises():
    with pytest.raises(MembershipFenced, match="another member uses it"):
        ShardOwnership("a", HERE, SESSION_MS).apply(mapping(5, set(), error=1), 0.0)
    with pytest.raises(NotAlone):
        ShardOwnership("a", HERE, SESSION_MS, solo_since_ms=1).apply(mapping(5, set(), error=2), 0.0)


def test_a_map_naming_another_endpoint_asks_one_rejoin_per_generation():
    o = ShardOwnership("a", HERE, SESSION_MS)
    stale = mapping(5, {0}, endpoint=Endpoint("old", 9))
    assert o.names_another_endpoint(stale)
    assert not o.names_another_endpoint(stale), "the same generation asks once"
    assert not o.names_another_endpoint(mapping(6, {0}))


def test_dropping_the_membership_forgets_shards_holds_and_map():
    o = ShardOwnership("a", HERE, SESSION_MS)
    o.apply(mapping(5, {0, 1}, hold={0}), 0.0)
    assert o.give_up(1) and not o.give_up(3)
    assert o.drop() == {0}
    assert (o.owned, o.owned_since, o.assignment, o.hold_until) == (frozenset(), -1, None, {})


def test_metadata_claims_the_owned_shards_and_previous_owners_need_the_generation_before():
    o = ShardOwnership("a", HERE, SESSION_MS, rack="r1")
    o.apply(mapping(5, {2}), 0.0)
    sent = decode_metadata(o.metadata(solo_candidate=False, static=True, now_ms=0.0))
    assert (sent.owned, sent.generation, sent.rack, sent.node_id) == ({2}, 5, "r1", 7)
    assert o.previous_owners(6) == {2: "a"} and o.previous_owners(7) is None


def test_the_leader_gives_every_member_an_assignment_even_an_unreadable_one():
    members = [SimpleNamespace(member_id="m1", metadata=encode_metadata(MemberMetadata("a", HERE))),
               SimpleNamespace(member_id="m2", metadata=b"\x00garbage")]
    out = lead("a", 3, 4, members, None)
    assert [x.member_id for x in out] == ["m1", "m2"]
    assert decode_assignment(out[0].assignment).shards == {0, 1, 2, 3}
    assert decode_assignment(out[1].assignment).shards == frozenset()


def test_the_heartbeat_interval_and_a_requested_rejoin():
    async def main():
        hb = Heartbeat(heartbeat_ms=60_000, session_ms=600)
        assert hb.interval_ms(static=False) == 100 and hb.interval_ms(static=True) == 60_000
        hb.request_rejoin()
        assert await asyncio.wait_for(hb.next(static=True), 5) is True, "a rejoin cuts the interval short"
        assert not hb.rejoin_requested
        assert await Heartbeat(heartbeat_ms=1, session_ms=600).next(static=True) is False
    asyncio.run(main())
