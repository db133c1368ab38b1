"""The dispatch table and the cluster snapshot/image (pure parts of the gateway)."""
from __future__ import annotations

import sys
import uuid
from datetime import timedelta

from kio.schema.errors import ErrorCode

from coordinator.gateway.cluster import ClusterSnapshot, ClusterView, snapshot_from_metadata
from coordinator.gateway.listeners import initial_broker_ports, parse_address, parse_addresses
from coordinator.gateway.routes import (
    API_VERSIONS_LOCAL, FIND_COORDINATOR_LOCAL, FORWARD, FORWARD_PRODUCE, FORWARD_REFRESH, FORWARD_REWRITE,
    GROUP, GUARD, build_routes, route_key,
)
from coordinator.protocol import apis
from coordinator.protocol.api_versions import advertised_versions
from coordinator.protocol.apis import METADATA, response_class


def test_route_kinds() -> None:
    adv = advertised_versions({0: (0, 11), 1: (0, 17), 3: (0, 12), 12: (0, 4), 19: (0, 7), 60: (0, 1), 32: (0, 4)},
                              {apis.HEARTBEAT: (0, 4)})
    routes = build_routes(adv, {apis.HEARTBEAT})
    kind = {k: routes[route_key(k, adv[k][1])].kind for k in adv}
    # DescribeConfigs (32) is decoded for its GROUP resources, which kcoord serves (gateway/group_configs.py).
    assert kind == {0: FORWARD_PRODUCE, 1: FORWARD, 3: FORWARD_REWRITE, 10: FIND_COORDINATOR_LOCAL,
                    12: GROUP, 18: API_VERSIONS_LOCAL, 19: FORWARD_REFRESH, 32: GUARD, 60: FORWARD_REWRITE}
    heartbeat = routes[route_key(12, 4)]
    assert heartbeat.flexible and heartbeat.request_header_version == 2 and heartbeat.response_header_version == 1
    assert heartbeat.request_class is not None and heartbeat.request_class.__version__ == 4
    assert routes[route_key(18, 4)].response_header_version == 0
    # Versions outside the advertised ranges have no route: the connection is closed.
    assert route_key(0, 10) not in routes and route_key(1, 16) not in routes and route_key(0, 2) not in routes
    assert route_key(12, -1) not in routes


def test_listener_ports_and_addresses() -> None:
    assert initial_broker_ports(29100, [3, 1, 2]) == {1: 29101, 2: 29102, 3: 29103}
    assert initial_broker_ports(0, [5]) == {5: 0}
    assert parse_address("127.0.0.1:9092") == ("127.0.0.1", 9092)
    assert parse_address("[::1]:9092") == ("::1", 9092)
    assert parse_addresses("a:1,b:2") == (("a", 1), ("b", 2))


def _metadata(brokers, topics):  # type: ignore[no-untyped-def]
    m = sys.modules[response_class(METADATA, 12).__module__]
    return m.MetadataResponse(
        throttle_time=timedelta(0), cluster_id="c", controller_id=1,
        brokers=tuple(m.MetadataResponseBroker(node_id=n, host="h", port=9000 + n, rack=r) for n, r in brokers),
        topics=tuple(m.MetadataResponseTopic(
            error_code=ErrorCode(err), name=name, topic_id=tid, is_internal=False,
            partitions=tuple(m.MetadataResponsePartition(
                error_code=ErrorCode.none, partition_index=i, leader_id=leader, leader_epoch=0,
                replica_nodes=replicas, isr_nodes=replicas, offline_replicas=()) for i, leader, replicas in parts))
            for name, tid, err, parts in topics))


def test_snapshot_racks_leaders_and_errors() -> None:
    tid = uuid.uuid4()
    snap = snapshot_from_metadata(_metadata(
        [(1, "rack-b"), (2, "rack-a"), (3, None)],
        [("t", tid, 0, [(1, 2, (1, 2, 3)), (0, -1, (3,))]), ("broken", uuid.uuid4(), 3, [])]))
    assert set(snap.brokers) == {1, 2, 3}
    image = snap.topics["t"]
    assert (image.topic_id, image.num_partitions) == (tid, 2)
    assert image.partition_racks == ((), ("rack-a", "rack-b"))    # by partition index; racks sorted
    assert snap.leaders["t"] == {1: 2}                             # partition 0 has no leader
    assert "broken" not in snap.topics


def test_image_version_bumps_only_on_change_and_subscribers_hear_it() -> None:
    view = ClusterView([("127.0.0.1", 1)], "__state")
    heard = []
    view.subscribe(heard.append)
    tid = uuid.uuid4()
    snap = snapshot_from_metadata(_metadata([(1, None)], [("t", tid, 0, [(0, 1, (1,))])]))
    view._apply(snap)
    view._apply(ClusterSnapshot(dict(snap.brokers), dict(snap.topics), dict(snap.leaders)))
    assert [i.version for i in heard] == [1] and view.image.version == 1
    assert view.image.topics_by_id[tid].name == "t"
    view._apply(snapshot_from_metadata(_metadata([(1, None)], [])))
    assert [i.version for i in heard] == [1, 2] and not view.image.topics_by_name
    assert view.state_partition_leader(0) is None
