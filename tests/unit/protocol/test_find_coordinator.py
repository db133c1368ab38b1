"""FindCoordinator answers for GROUP keys, v0 through v6."""
from __future__ import annotations

import pytest

from coordinator.protocol.apis import FIND_COORDINATOR, request_class, response_class
from coordinator.protocol.codec import decode_body, encode_body
from coordinator.protocol.find_coordinator import Node, group_coordinator_response

GATEWAY_NODE = Node(111, "127.0.0.1", 29101)


def locate(group_id: str) -> Node | None:
    return None if group_id.startswith("lost") else GATEWAY_NODE


def _round_trip(version: int, response):  # type: ignore[no-untyped-def]
    return decode_body(response_class(FIND_COORDINATOR, version), encode_body(response), 0)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_single_key_versions(version: int) -> None:
    fields = {"key": "g1"} if version == 0 else {"key": "g1", "key_type": 0}
    response = _round_trip(version, group_coordinator_response(version, request_class(FIND_COORDINATOR, version)(**fields), locate))
    assert (response.error_code, response.node_id, response.host, response.port) == (0, 111, "127.0.0.1", 29101)
    if version >= 1:
        assert response.error_message == "NONE"   # Kafka's Errors.NONE.message()


def test_unknown_leader_is_coordinator_not_available() -> None:
    request = request_class(FIND_COORDINATOR, 3)(key="lost-group", key_type=0)
    response = _round_trip(3, group_coordinator_response(3, request, locate))
    assert (response.error_code, response.node_id, response.host, response.port) == (15, -1, "", -1)
    assert response.error_message == "The coordinator is not available."


@pytest.mark.parametrize("version", [4, 5, 6])
def test_batched_keys(version: int) -> None:
    request = request_class(FIND_COORDINATOR, version)(key_type=0, coordinator_keys=("a", "lost-b", "c"))
    response = _round_trip(version, group_coordinator_response(version, request, locate))
    assert [(c.key, c.error_code, c.node_id, c.port) for c in response.coordinators] == [
        ("a", 0, 111, 29101), ("lost-b", 15, -1, -1), ("c", 0, 111, 29101)]


def test_share_key_type_is_an_error() -> None:
    request = request_class(FIND_COORDINATOR, 6)(key_type=2, coordinator_keys=("sg",))
    response = _round_trip(6, group_coordinator_response(6, request, locate))
    (coordinator,) = response.coordinators
    assert coordinator.error_code == 42 and coordinator.node_id == -1
    assert "share" in (coordinator.error_message or "")
    old = group_coordinator_response(3, request_class(FIND_COORDINATOR, 3)(key="sg", key_type=2), locate)
    assert old.error_code == 42
