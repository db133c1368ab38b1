"""The membership shell (coordinator/cluster/membership.py) across a static replacement
(KIP-345): the newcomer holds what it is handed, refreshes a map that names its old
address, and a replaced process stops answering at once. Driven by a scripted link that
answers as Kafka's classic group coordinator does (GroupMetadataManager: a static member
that joins a stable group with a known instance id takes the old member's place and gets
its stored assignment, without a rebalance)."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from kio.schema.errors import ErrorCode

from coordinator.cluster.membership import ClusterMembership, MembershipFenced
from coordinator.cluster.protocol import Assignment, Endpoint, decode_metadata, encode_assignment

SESSION_MS = 3_000
OLD = Endpoint("127.0.0.1", 9000)
NEW = Endpoint("127.0.0.1", 9100)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class ScriptedLink:
    """Answers each request with the next scripted answer for its API; records what was
    sent, and whether the member was serving when it sent it."""

    def __init__(self, membership_ref: list, script: dict[str, list]) -> None:
        self.ref = membership_ref
        self.script = script
        self.sent: list[tuple[str, object, bool]] = []

    async def request(self, request, timeout=None):
        api = type(request).__name__.removesuffix("Request")
        self.sent.append((api, request, self.ref[0].serving()))
        answers = self.script.get(api)
        if not answers:
            await asyncio.sleep(3600)        # nothing more scripted: hang until cancelled
        return answers.pop(0)

    def close(self) -> None:
        pass


def join(member="new", generation=5, leader="old-leader", error=ErrorCode.none):
    return SimpleNamespace(error_code=error, member_id=member, generation_id=generation, leader=leader, members=())


def sync(assignment: Assignment, error=ErrorCode.none):
    return SimpleNamespace(error_code=error, assignment=encode_assignment(assignment))


def heartbeat(error=ErrorCode.none):
    return SimpleNamespace(error_code=error)


def mapping(generation: int, shards, endpoint: Endpoint) -> Assignment:
    return Assignment(generation, frozenset(shards), {s: "kc-0" for s in shards}, {"kc-0": endpoint},
                      {"kc-0": 1 << 30})


async def _run(script: dict[str, list], until, clock: Clock | None = None):
    changes: list[tuple[int, frozenset[int], frozenset[int]]] = []
    ref: list = []
    link = ScriptedLink(ref, script)

    async def open_link(addresses):
        return link

    m = ClusterMembership(group_id="kcoord.t", instance_id="kc-0", endpoint=NEW, n_shards=4, open_link=open_link,
                          bootstrap=[("127.0.0.1", 1)], session_ms=SESSION_MS, heartbeat_ms=5, lease_margin_ms=1_000,
                          static=True, clock=clock or Clock(),
                          on_change=lambda a, added, revoked: changes.append((a.generation, added, revoked)))
    ref.append(m)
    return m, link, changes, await drive(m, link, until)


async def drive(m: ClusterMembership, link: ScriptedLink, until):
    """Run `m` over `link` (its coordinator already found) until `until(m, link)` or it
    ends, bounded; what its `run()` ended with."""
    m._link = link
    task = asyncio.create_task(m.run())
    try:
        for _ in range(400):
            if until(m, link) or task.done():
                break
            await asyncio.sleep(0.005)
    finally:
        if not task.done():
            task.cancel()
        outcome = (await asyncio.gather(task, return_exceptions=True))[0]
    return outcome


def test_a_newcomer_holds_what_a_static_replacement_hands_it_and_refreshes_its_address():
    clock = Clock()
    script = {"JoinGroup": [join(), join(generation=6, leader="new")],
              "SyncGroup": [sync(mapping(5, {0, 1}, OLD)), sync(mapping(6, {0, 1}, NEW))]}
    m, link, changes, _ = asyncio.run(_run(script, lambda m, link: m.stable.is_set(), clock))
    # The shards came with the old process's assignment: served only once its lease has
    # certainly run out, a session after the JoinGroup answer that replaced it.
    assert changes[0] == (5, frozenset({0, 1}), frozenset())
    assert m.ownership.hold_until == {0: 100.0 + SESSION_MS / 1000, 1: 100.0 + SESSION_MS / 1000}
    # The map named the old address: it rejoined at once, with metadata Kafka has not stored
    # (its shards and node id now), which makes Kafka rebalance; the next map names it right.
    joins = [req for api, req, _ in link.sent if api == "JoinGroup"]
    assert len(joins) == 2
    first, second = (decode_metadata(j.protocols[0].metadata) for j in joins)
    assert (first.fresh, first.owned, first.node_id) == (True, frozenset(), -1)
    assert (second.endpoint, second.owned, second.node_id) == (NEW, frozenset({0, 1}), 1 << 30)
    assert m.ownership.assignment is not None and m.ownership.assignment.endpoints["kc-0"] == NEW


def test_a_member_that_is_no_longer_fresh_holds_only_the_shards_the_leader_marks():
    """balancer.py marks shards nobody claimed while a member was fresh: they wait a
    session from their arrival; the others are served at once."""
    clock = Clock()
    script = {"JoinGroup": [join(generation=7, leader="new"), join(generation=8, leader="new")],
              "SyncGroup": [sync(mapping(7, {0}, NEW)),
                            sync(Assignment(8, frozenset({0, 2, 3}), {0: "kc-0", 2: "kc-0", 3: "kc-0"}, {"kc-0": NEW},
                                            {"kc-0": 1 << 30}, hold=frozenset({3})))],
              "Heartbeat": [heartbeat(ErrorCode.rebalance_in_progress)]}

    def until(m, link):
        if m.generation == 7 and clock.now < 110:
            clock.now = 110.0      # the first session is over before the next generation
        return m.generation == 8 and m.stable.is_set()

    m, _, changes, _ = asyncio.run(_run(script, until, clock))
    assert changes[-1] == (8, frozenset({2, 3}), frozenset())
    assert m.ownership.hold_until == {3: 110.0 + SESSION_MS / 1000}


@pytest.mark.parametrize("error", [ErrorCode.fenced_instance_id, ErrorCode.unknown_member_id,
                                   ErrorCode.illegal_generation])
def test_a_replaced_member_stops_answering_before_it_rejoins_or_exits(error):
    """FENCED_INSTANCE_ID (another process took the instance id), UNKNOWN_MEMBER_ID, or a
    generation it is not part of: the lease is dropped and the shards unloaded at once,
    although the lease had time left."""
    script = {"JoinGroup": [join(generation=5, leader="new")], "SyncGroup": [sync(mapping(5, {0, 1}, NEW))],
              "Heartbeat": [heartbeat(), heartbeat(error)]}
    m, link, changes, outcome = asyncio.run(_run(
        script, lambda m, link: len([a for a, _, _ in link.sent if a == "JoinGroup"]) == 2))
    assert changes[-1] == (5, frozenset(), frozenset({0, 1}))
    assert not m.serving() and m.ownership.owned == frozenset()
    if error == ErrorCode.fenced_instance_id:
        assert isinstance(outcome, MembershipFenced)
    else:
        # It rejoins (as a static member: by instance id), and did not serve meanwhile.
        rejoins = [serving for api, _, serving in link.sent if api == "JoinGroup"][1:]
        assert rejoins and rejoins[0] is False


def test_a_fenced_write_stops_every_answer_until_the_group_says_the_member_is_still_one():
    """Its shard was taken by another process, maybe one that took its instance id: the
    lease is dropped and the member rejoins at once; the JoinGroup answer renews it."""
    script = {"JoinGroup": [join(generation=5, leader="new"), join(generation=6, leader="new")],
              "SyncGroup": [sync(mapping(5, {0, 1}, NEW)), sync(mapping(6, {1}, NEW))]}
    state: dict = {}

    def until(m, link):
        if m.generation == 5 and m.stable.is_set() and "lost" not in state:
            state["lost"] = m.serving()
            m.shard_lost(0)
            state["after"] = m.serving()
        return m.generation == 6 and m.stable.is_set()

    m, link, _, _ = asyncio.run(_run(script, until))
    assert (state["lost"], state["after"]) == (True, False)
    joins = [(req, serving) for api, req, serving in link.sent if api == "JoinGroup"]
    assert len(joins) == 2 and joins[1][1] is False        # answered nothing until the rejoin
    assert decode_metadata(joins[1][0].protocols[0].metadata).owned == frozenset({1})
    assert m.serving()
