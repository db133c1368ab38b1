"""The leader's shard assignment (coordinator/cluster/balancer.py), run over simulated
generations: members report what they own, the leader balances, members apply it."""
from __future__ import annotations

import random

import pytest

from coordinator.cluster.balancer import DUPLICATE_INSTANCE, NODE_ID_BASE, NOT_ALONE, balance, node_ids
from coordinator.cluster.protocol import Endpoint, MemberMetadata


def meta(instance: str, owned=(), generation: int = -1, node_id: int = -1) -> MemberMetadata:
    return MemberMetadata(instance, Endpoint("127.0.0.1", 9000 + sum(map(ord, instance)) % 1000),
                          owned=frozenset(owned), generation=generation, node_id=node_id)


class Cluster:
    """Instances that apply each assignment and report it back at the next join."""

    def __init__(self, n_shards: int) -> None:
        self.n_shards = n_shards
        self.generation = 0
        self.owned: dict[str, frozenset[int]] = {}
        self.node: dict[str, int] = {}
        self.history: list[dict[int, str]] = []

    def rebalance(self, instances: list[str]):
        self.generation += 1
        members = {f"m-{i}": meta(i, self.owned.get(i, ()), self.generation - 1, self.node.get(i, -1))
                   for i in instances}
        result = balance(self.generation, self.n_shards, members)
        self.owned = {i: result.assignments[f"m-{i}"].shards for i in instances}
        self.node = dict(result.assignments[f"m-{instances[0]}"].node_ids) if instances else {}
        owners: dict[int, str] = {}
        for i, shards in self.owned.items():
            for s in shards:
                assert s not in owners, f"shard {s} assigned to {owners[s]} and {i} in one generation"
                owners[s] = i
        self.history.append(owners)
        return result

    def settle(self, instances: list[str], limit: int = 5) -> int:
        """Rebalance until no follow-up is asked for; returns the number of generations."""
        for n in range(1, limit + 1):
            if not self.rebalance(instances).follow_up:
                return n
        raise AssertionError(f"no stable assignment after {limit} generations")


def test_first_assignment_is_balanced_and_complete():
    c = Cluster(50)
    assert c.settle(["a", "b", "c"]) == 1
    sizes = sorted(len(s) for s in c.owned.values())
    assert sizes == [16, 17, 17]
    assert set().union(*c.owned.values()) == set(range(50))


def test_a_joiner_takes_a_share_moving_only_what_it_gets_and_in_two_steps():
    c = Cluster(12)
    c.settle(["a", "b"])
    before = dict(c.owned)
    first = c.rebalance(["a", "b", "c"])
    # Cooperative: the revoked shards go to nobody in this generation.
    assert first.follow_up and first.moved == 4
    assert c.owned["c"] == frozenset()
    assert c.settle(["a", "b", "c"]) == 1
    assert sorted(len(s) for s in c.owned.values()) == [4, 4, 4]
    moved = sum(len(before[i] - c.owned[i]) for i in ("a", "b"))
    assert moved == 4          # only c's share moved; a and b kept the rest
    assert all(c.owned[i] <= before[i] for i in ("a", "b"))


def test_a_leaver_s_shards_go_to_the_others_at_once():
    c = Cluster(9)
    c.settle(["a", "b", "c"])
    kept = {i: c.owned[i] for i in ("a", "b")}
    result = c.rebalance(["a", "b"])
    assert not result.follow_up
    assert set().union(*c.owned.values()) == set(range(9))
    assert all(kept[i] <= c.owned[i] for i in ("a", "b"))


def test_a_stale_claim_loses_to_the_newer_generation():
    members = {"m1": meta("a", {0, 1}, generation=5), "m2": meta("b", {1, 2}, generation=7)}
    result = balance(8, 4, members)
    assert 1 in result.assignments["m2"].shards and 1 not in result.assignments["m1"].shards
    assert result.assignments["m1"].owners[1] == "b"


def test_a_duplicate_instance_id_gets_an_error_and_nothing():
    result = balance(1, 4, {"m1": meta("a"), "m2": meta("a"), "m3": meta("b")})
    assert result.assignments["m2"].error == DUPLICATE_INSTANCE and not result.assignments["m2"].shards
    assert result.assignments["m1"].shards | result.assignments["m3"].shards == set(range(4))


def test_the_shards_a_refused_duplicate_claimed_are_held_wherever_they_go():
    """Dynamic members (Tansu): the live process that served kc-0 may be the member refused
    as the duplicate; it answers until its SyncGroup answer arrives, so its claims wait a
    session wherever they go. The newcomer's own claims (none) hold nothing."""
    members = {"m1": meta("kc-0"), "m2": meta("kc-0", owned={0, 1, 2}, generation=4), "m3": meta("kc-1", {3}, 4)}
    result = balance(5, 4, members)
    assert result.assignments["m2"].error == DUPLICATE_INSTANCE
    held = {s for m in ("m1", "m3") for s in result.assignments[m].hold}
    given = {s for m in ("m1", "m3") for s in result.assignments[m].shards}
    assert held == {0, 1, 2} & given and 3 not in held
    alone = balance(6, 4, {"m1": meta("kc-0", owned={0, 1}, generation=5), "m3": meta("kc-1", {2, 3}, 5)})
    assert not any(a.hold for a in alone.assignments.values())


def test_node_ids_are_stable_and_pods_keep_their_ordinal():
    ids = node_ids({"x": meta("kcoord-2"), "y": meta("other"), "z": meta("kcoord-0")})
    assert ids["kcoord-2"] == NODE_ID_BASE + 2 and ids["kcoord-0"] == NODE_ID_BASE
    assert ids["other"] == NODE_ID_BASE + 1              # the lowest free ordinal
    again = node_ids({"y": meta("other", node_id=ids["other"]), "w": meta("kcoord-1")})
    assert again["other"] == NODE_ID_BASE + 1 and again["kcoord-1"] != again["other"]
    assert len(set(again.values())) == 2


@pytest.mark.parametrize("seed", range(20))
def test_random_churn_never_double_assigns_and_converges(seed):
    rng = random.Random(seed)
    c = Cluster(rng.randint(1, 64))
    pool = [f"k{i}" for i in range(8)]
    alive = sorted(rng.sample(pool, rng.randint(1, 4)))
    for _ in range(15):
        if rng.random() < 0.5 and len(alive) > 1:
            alive.remove(rng.choice(alive))
        else:
            alive = sorted(set(alive) | {rng.choice(pool)})
        c.rebalance(alive)        # asserts no shard has two owners
    c.settle(alive)
    sizes = [len(c.owned[i]) for i in alive]
    assert max(sizes) - min(sizes) <= 1
    assert set().union(*c.owned.values()) == set(range(c.n_shards))


def solo(instance: str, since_ms: int, candidate: bool = False) -> MemberMetadata:
    return MemberMetadata(instance, Endpoint("10.0.0.9", 9092), solo_since_ms=since_ms, solo_candidate=candidate)


def test_a_candidate_yields_to_a_serving_plain_serve_even_one_that_started_its_watch_later():
    """A plain serve checks the group before it serves (a candidate): one already serving
    stays, whoever joined or started first, so the two never serve together."""
    result = balance(3, 12, {"m-a": solo("solo-a", 2_000), "m-b": solo("solo-b", 1_000, candidate=True)})
    assert result.assignments["m-a"].error == 0
    assert result.assignments["m-b"].error == NOT_ALONE
    assert set(result.assignments["m-b"].endpoints) == {"solo-a"}
    # Two candidates (started together): only the earlier may serve.
    result = balance(4, 12, {"m-a": solo("solo-a", 2_000, True), "m-b": solo("solo-b", 1_000, True)})
    assert (result.assignments["m-b"].error, result.assignments["m-a"].error) == (0, NOT_ALONE)


def test_shards_nobody_claims_are_held_while_a_member_is_fresh():
    """A fresh member (a process within a session of its first JoinGroup) may have replaced
    a live process by static membership, whose claims this join cannot show: every shard
    nobody claims is handed out with a hold. Claimed shards keep serving."""
    fresh = MemberMetadata("kc-1", Endpoint("h1", 9100), fresh=True)
    members = {"m-0": meta("kc-0", range(6), 4), "m-1": fresh}
    result = balance(5, 12, members)
    a0, a1 = result.assignments["m-0"], result.assignments["m-1"]
    assert a0.shards == frozenset(range(6)) and a0.hold == frozenset()
    assert a1.shards == frozenset(range(6, 12)) and a1.hold == a1.shards
    # Without a fresh member, unclaimed shards were released or their owner's session
    # expired (which outlasts its lease): no hold.
    result = balance(5, 12, {"m-0": meta("kc-0", range(6), 4), "m-1": meta("kc-1")})
    assert all(a.hold == frozenset() for a in result.assignments.values())
    # A fresh member counts even when it lost its instance id to another member.
    members = {"m-0": meta("kc-0", range(6), 4), "m-9": MemberMetadata("kc-0", Endpoint("h9", 9), fresh=True)}
    result = balance(6, 12, members)
    assert result.assignments["m-0"].hold == frozenset(range(6, 12))


def test_of_two_plain_serves_the_later_one_is_told_it_is_not_alone_and_nobody_gets_shards():
    result = balance(3, 12, {"m-a": solo("solo-a", 2_000), "m-b": solo("solo-b", 1_000)})
    first, later = result.assignments["m-b"], result.assignments["m-a"]
    assert (first.error, first.shards, dict(first.endpoints)) == (0, frozenset(), {})
    assert later.error == NOT_ALONE and later.shards == frozenset()
    assert dict(later.endpoints) == {"solo-b": Endpoint("10.0.0.9", 9092)}   # names the one it yields to
    assert not result.follow_up        # watchers alone start no rebalance


def test_a_plain_serve_beside_a_cluster_yields_and_the_cluster_keeps_its_shards():
    members = {"m-0": meta("kc-0", range(6), 4), "m-1": meta("kc-1", range(6, 12), 4), "m-s": solo("solo-x", 1)}
    result = balance(5, 12, members)
    assert result.assignments["m-s"].error == NOT_ALONE
    assert set(result.assignments["m-s"].endpoints) == {"kc-0", "kc-1"}
    # The watcher moves nothing and is in no cluster member's map.
    assert result.assignments["m-0"].shards == frozenset(range(6))
    assert result.assignments["m-1"].shards == frozenset(range(6, 12))
    assert set(result.assignments["m-0"].endpoints) == {"kc-0", "kc-1"}
    assert (result.moved, result.follow_up) == (0, False)


def test_with_a_previous_map_only_what_a_fresh_member_s_instance_id_held_is_held():
    """A shard the previous map gave to an instance that left (a SIGTERM during a rolling
    restart) moves without a hold, although another member is fresh; one the map gave to
    the fresh member's own instance id (the process it may have replaced) is held."""
    previous = {s: ("kc-0" if s < 4 else "kc-1" if s < 8 else "kc-2") for s in range(12)}
    members = {"m-0": meta("kc-0", range(4), 4), "m-2": MemberMetadata("kc-2", Endpoint("h2", 9200), fresh=True)}
    result = balance(5, 12, members, previous)
    held = result.assignments["m-0"].hold | result.assignments["m-2"].hold
    assert held == frozenset(range(8, 12))          # kc-2's; kc-1's (left) are served at once
    assert (result.assignments["m-0"].shards | result.assignments["m-2"].shards) >= frozenset(range(4, 12))
