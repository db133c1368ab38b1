"""FindCoordinator through the gateway: GROUP keys answered locally, TRANSACTION keys rewritten."""
from __future__ import annotations

import pytest

from coordinator.protocol.apis import FIND_COORDINATOR
from gateway_helpers import STATE_PARTITIONS, LoopThread, PartitionOnlyService, RunningGateway, start_gateway
from support.raw_client import call, request
from support.tansu import TansuBroker
from support.wait import wait_until


def _address(gateway: RunningGateway) -> tuple[str, int]:
    return ("127.0.0.1", gateway.port)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_group_coordinator_is_a_gateway_listener(gateway: RunningGateway, gw_tansu: TansuBroker, version: int) -> None:
    fields = {"key": "my-group"} if version == 0 else {"key": "my-group", "key_type": 0}
    response = call(_address(gateway), FIND_COORDINATOR, version, _request(version, **fields))
    assert response.error_code == 0
    nodes = gateway.loop.call(gateway.gateway.node_addresses)
    assert (response.host, response.port) == nodes[response.node_id]
    assert response.port != gw_tansu.port
    # The coordinator is the leader of the group's state partition, as Kafka picks it.
    partition = PartitionOnlyService().partition_for("my-group")
    assert response.node_id == gateway.gateway.cluster.state_partition_leader(partition)


def test_batched_group_keys(gateway: RunningGateway) -> None:
    keys = tuple(f"group-{i}" for i in range(10))
    response = call(_address(gateway), FIND_COORDINATOR, 4, _request(4, key_type=0, coordinator_keys=keys))
    assert [c.key for c in response.coordinators] == list(keys)
    assert all(c.error_code == 0 and c.port in gateway.broker_ports() for c in response.coordinators)


def test_share_key_type_is_refused(gateway: RunningGateway) -> None:
    response = call(_address(gateway), FIND_COORDINATOR, 6, _request(6, key_type=2, coordinator_keys=("sg",)))
    assert [(c.error_code, c.node_id) for c in response.coordinators] == [(42, -1)]


@pytest.mark.parametrize("version", [1, 4])
def test_transaction_coordinator_is_forwarded_and_rewritten(gateway: RunningGateway, gw_tansu: TansuBroker,
                                                            version: int) -> None:
    fields = {"key": "txn-x", "key_type": 1} if version < 4 else {"key_type": 1, "coordinator_keys": ("txn-x",)}

    def find():
        response = call(_address(gateway), FIND_COORDINATOR, version, _request(version, **fields))
        return response if version < 4 else response.coordinators[0]

    # The first transactional FindCoordinator a broker sees creates __transaction_state, and
    # Kafka answers COORDINATOR_NOT_AVAILABLE (retriable; clients retry) until it is loaded:
    # under pytest-xdist this test may be the broker's first.
    answers = []
    wait_until(lambda: answers.append(find()) or answers[-1].error_code == 0, 60,
               message="FindCoordinator(transaction) answered without error")
    answer = answers[-1]
    assert answer.port in gateway.broker_ports() and answer.port != gw_tansu.port


def test_unknown_state_partition_leader_is_coordinator_not_available(gw_loop: LoopThread,
                                                                     gw_tansu: TansuBroker) -> None:
    """A state topic that does not exist: no leader, so COORDINATOR_NOT_AVAILABLE."""
    running = start_gateway(gw_loop, gw_tansu.bootstrap, state_topic="__kcoord_missing_state_topic")
    try:
        v3 = call(_address(running), FIND_COORDINATOR, 3, _request(3, key="g", key_type=0))
        assert (v3.error_code, v3.node_id, v3.host, v3.port) == (15, -1, "", -1)
        v4 = call(_address(running), FIND_COORDINATOR, 4, _request(4, key_type=0, coordinator_keys=("g",)))
        assert [(c.error_code, c.node_id) for c in v4.coordinators] == [(15, -1)]
    finally:
        running.close()


def _request(version: int, **fields):  # type: ignore[no-untyped-def]
    return request(FIND_COORDINATOR, version, **fields)


def test_state_topic_has_the_expected_partitions(gateway: RunningGateway) -> None:
    image = gateway.gateway.cluster.image.topics_by_name[gateway.gateway.state_topic]
    assert image.num_partitions == STATE_PARTITIONS
    assert all(gateway.gateway.cluster.state_partition_leader(p) is not None for p in range(STATE_PARTITIONS))
