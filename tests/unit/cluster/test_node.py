"""ClusterNode (coordinator/cluster/node.py): what every instance answers for shard owners,
upstream broker fronts and coordinator nodes, from one assignment, and the lease."""
from __future__ import annotations

from coordinator.cluster.balancer import NODE_ID_BASE
from coordinator.cluster.node import ClusterNode, endpoint_of
from coordinator.cluster.protocol import Assignment, Endpoint, ListenerPorts
from coordinator.gateway.listeners import ListenerInfo


class FakeService:
    def __init__(self) -> None:
        self.available: set[int] = set()
        self.taken: list[frozenset[int]] = []
        self.released: list[frozenset[int]] = []

    def partition_available(self, p: int) -> bool:
        return p in self.available

    def take(self, shards) -> None:
        self.taken.append(frozenset(shards))
        self.available |= set(shards)

    def release(self, shards, reason: str) -> None:
        self.released.append(frozenset(shards))
        self.available -= set(shards)


def _endpoint(host: str, port: int) -> Endpoint:
    return Endpoint(host, port, {"PLAINTEXT": ListenerPorts(host, port, {1: port + 1, 2: port + 2}),
                                 "EXTERNAL": ListenerPorts(f"ext-{host}", port + 50, {1: port + 51, 2: port + 52})})


def _assignment(shards, generation=3) -> Assignment:
    return Assignment(generation, frozenset(shards), owners={0: "a", 1: "b", 2: "c", 3: "a"},
                      endpoints={"a": _endpoint("ha", 9000), "b": _endpoint("hb", 9100), "c": _endpoint("hc", 9200)},
                      node_ids={"a": NODE_ID_BASE, "b": NODE_ID_BASE + 1, "c": NODE_ID_BASE + 2})


def _node(serving=True):
    service = FakeService()
    state = {"serving": serving}
    node = ClusterNode("a", service, lambda: state["serving"])
    return node, service, state


def test_on_change_releases_then_takes_and_counts_moves():
    node, service, _ = _node()
    node.on_change(_assignment({0, 3}), frozenset({0, 3}), frozenset())
    node.on_change(_assignment({0, 5}), frozenset({5}), frozenset({3}))
    assert service.taken == [frozenset({0, 3}), frozenset({5})]
    assert service.released == [frozenset({3})]
    assert node.moves == 4 and node.owns(5) and not node.owns(3)


def test_locate_names_the_owner_on_the_listener_asked():
    node, service, _ = _node()
    node.on_change(_assignment({0, 3}), frozenset({0, 3}), frozenset())
    remote = node.locate(1, "PLAINTEXT")
    assert (remote.node_id, remote.host, remote.port) == (NODE_ID_BASE + 1, "hb", 9100)
    external = node.locate(2, "EXTERNAL")
    assert (external.node_id, external.host, external.port) == (NODE_ID_BASE + 2, "ext-hc", 9250)
    local = node.locate(0, "PLAINTEXT")
    assert (local.node_id, local.port) == (NODE_ID_BASE, 9000)


def test_locate_answers_none_while_moving_loading_failed_or_without_lease():
    node, service, state = _node()
    assert node.locate(0, "PLAINTEXT") is None              # no assignment yet
    node.on_change(_assignment({0, 3}), frozenset({0, 3}), frozenset())
    assert node.locate(7, "PLAINTEXT") is None              # shard 7 has no owner: moving
    service.available.discard(3)
    assert node.locate(3, "PLAINTEXT") is None              # ours, but not available (failed)
    state["serving"] = False
    assert node.locate(1, "PLAINTEXT") is None              # the lease ran out: name nobody
    assert node.locate(0, "UNKNOWN") is None                # a listener the owner does not have


def test_every_instance_fronts_a_broker_at_the_same_address():
    answers = set()
    for me in ("a", "b", "c"):
        node = ClusterNode(me, FakeService(), lambda: True)
        node.on_change(_assignment(set()), frozenset(), frozenset())
        answers.add((node.front(1, "PLAINTEXT"), node.front(2, "PLAINTEXT"), node.front(2, "EXTERNAL")))
    assert answers == {(("hb", 9101), ("hc", 9202), ("ext-hc", 9252))}   # broker N -> instance N % 3 by node id
    node = ClusterNode("a", FakeService(), lambda: True)
    assert node.front(1, "PLAINTEXT") is None                 # no map yet: the caller's own port
    node.on_change(_assignment(set()), frozenset(), frozenset())
    assert node.front(7, "PLAINTEXT") is None                 # a broker the fronting instance has no port for


def test_coordinator_nodes_list_every_instance_by_node_id():
    node, _, _ = _node()
    node.on_change(_assignment({0}), frozenset({0}), frozenset())
    assert node.coordinator_nodes("PLAINTEXT") == [(NODE_ID_BASE, "ha", 9000), (NODE_ID_BASE + 1, "hb", 9100),
                                                   (NODE_ID_BASE + 2, "hc", 9200)]
    status = node.status()
    assert status["shards"] == [0] and status["node_id"] == NODE_ID_BASE and set(status["instances"]) == {"a", "b", "c"}


def test_endpoint_of_collects_every_listener_and_its_broker_ports():
    infos = [ListenerInfo("bootstrap", "h", 9000, None, (), "PLAINTEXT"),
             ListenerInfo("broker-1", "h", 9001, 1, (), "PLAINTEXT"),
             ListenerInfo("EXTERNAL/bootstrap", "x", 9050, None, (), "EXTERNAL", "SSL"),
             ListenerInfo("EXTERNAL/broker-1", "x", 9051, 1, (), "EXTERNAL", "SSL")]
    e = endpoint_of(infos)
    assert (e.host, e.port) == ("h", 9000)
    assert e.listeners["EXTERNAL"] == ListenerPorts("x", 9050, {1: 9051})
    assert e.listeners["PLAINTEXT"].brokers == {1: 9001}


def test_a_fenced_shard_is_no_longer_claimed_and_the_member_rejoins():
    import asyncio

    from coordinator.cluster.membership import ClusterMembership

    async def main():
        m = ClusterMembership(group_id="kcoord.t", instance_id="a", endpoint=Endpoint("h", 1), n_shards=4,
                              open_link=None, bootstrap=[], on_change=lambda *a: None)  # type: ignore[arg-type]
        m.ownership.owned = frozenset({1, 2})
        m.shard_lost(3)                     # not ours: nothing to do
        assert m.ownership.owned == {1, 2} and not m.heartbeat.rejoin_requested
        m.shard_lost(2)
        assert m.ownership.owned == {1} and m.heartbeat.rejoin_requested
        assert b'"owned":[1]' in m._metadata()     # what the leader sees at the rejoin
    asyncio.run(main())


def test_a_held_shard_is_assigned_but_loaded_only_when_its_hold_is_over():
    node, service, _ = _node()
    node.on_change(_assignment({0, 3}), frozenset({0, 3}), frozenset(), held=frozenset({3}))
    assert service.taken == [frozenset({0})]
    assert node.owns(3) and node.locate(3, "PLAINTEXT") is None     # COORDINATOR_NOT_AVAILABLE meanwhile
    assert node.status()["held"] == [3]
    assert node.serve_held(frozenset({3})) == frozenset({3})
    assert service.taken[-1] == frozenset({3}) and node.locate(3, "PLAINTEXT") is not None
    # A held shard revoked before its hold ends is never loaded here.
    node.on_change(_assignment({0, 5}), frozenset({5}), frozenset({3}), held=frozenset({5}))
    node.on_change(_assignment({0}), frozenset(), frozenset({5}))
    assert node.serve_held(frozenset({5})) == frozenset()
    assert frozenset({5}) not in service.taken
