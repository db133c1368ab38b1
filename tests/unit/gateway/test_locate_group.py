"""FindCoordinator(GROUP) through Gateway.locate_group: the leader's listener, or
COORDINATOR_NOT_AVAILABLE while the group's shard cannot serve (partition_available)."""
from __future__ import annotations

import uuid
from typing import Any

from coordinator.gateway import Gateway
from coordinator.gateway.cluster import Broker
from coordinator.gateway.listeners import ListenerInfo
from coordinator.group.image import MetadataImage, TopicImage
from coordinator.protocol.apis import FIND_COORDINATOR, request_class
from coordinator.protocol.find_coordinator import group_coordinator_response

STATE_ID = uuid.uuid4()


class FakeCluster:
    brokers = {1: Broker(1, "10.0.0.1", 9092, None)}
    image = MetadataImage.of([TopicImage(STATE_ID, "state", 2)])
    state_topic_id = STATE_ID                  # what ClusterView's property gives

    def state_partition_leader(self, partition: int) -> int | None:
        return 1


class Service:
    api_versions: dict[int, tuple[int, int]] = {}

    def __init__(self, available: set[int] | None) -> None:
        if available is not None:
            self.partition_available = lambda p: p in available   # the service's hook, when it has one

    def partition_for(self, group_id: str) -> int:
        return int(group_id[-1])

    async def handle(self, *args: Any) -> Any:
        raise AssertionError("not called")


def gateway_with(service: Service) -> Gateway:
    gateway = Gateway(service, "127.0.0.1:1", "127.0.0.1:29000", "state",  # type: ignore[arg-type]
                      cluster=FakeCluster())  # type: ignore[arg-type]
    gateway._listeners["broker-1"] = ListenerInfo("broker-1", "127.0.0.1", 29001, 1, (("10.0.0.1", 9092),))
    gateway._node_listener[1] = "broker-1"
    return gateway


def test_unavailable_shard_answers_coordinator_not_available() -> None:
    gateway = gateway_with(Service(available={0}))
    request = request_class(FIND_COORDINATOR, 4)(key_type=0, coordinator_keys=("g0", "g1"))
    response = group_coordinator_response(4, request, gateway.locate_group)
    assert [(c.key, int(c.error_code), c.node_id, c.port) for c in response.coordinators] == [
        ("g0", 0, 1, 29001), ("g1", 15, -1, -1)]


def test_a_service_without_the_hook_is_always_available() -> None:
    gateway = gateway_with(Service(available=None))
    node = gateway.locate_group("g1")
    assert node is not None and (node.node_id, node.port) == (1, 29001)


def test_state_topic_id_comes_from_the_cluster_view() -> None:
    assert gateway_with(Service(None)).state_topic_id() == STATE_ID
