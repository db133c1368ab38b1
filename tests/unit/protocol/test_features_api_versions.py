"""ApiVersions lists what kcoord serves: forwarded APIs within the upstream's range, v5
(KIP-1242) only once its ClusterId/NodeId check is made, and that check as Kafka makes it."""
from __future__ import annotations

from kio.schema.index import api_key_map

from coordinator.protocol import apis
from coordinator.protocol.api_versions import (
    API_VERSIONS_SERVED_MAX,
    Features,
    advertised_versions,
    api_versions_body,
    rebootstrap_body,
    rebootstrap_required,
)
from coordinator.protocol.codec import decode_body
from coordinator.protocol.messages import schema

V5 = schema("api_versions", 5, "request").ApiVersionsRequest


def test_every_forwarded_range_lies_within_the_upstreams() -> None:
    """For each API kcoord forwards, the advertised range is the intersection with the
    upstream's: an upstream with narrow, odd ranges for every key kio knows."""
    upstream = {key: (1, 2) for key in api_key_map}
    service = {apis.HEARTBEAT: (0, 4)}
    advertised = advertised_versions(upstream, service)
    for key, (low, high) in advertised.items():
        if key in (apis.API_VERSIONS, apis.FIND_COORDINATOR) or key in service:
            continue      # answered by kcoord itself
        assert upstream[key][0] <= low <= high <= upstream[key][1], apis.api_name(key)
    assert advertised[apis.FIND_COORDINATOR] == (1, 2)    # TRANSACTION keys are forwarded
    assert advertised[apis.HEARTBEAT] == (0, 4)
    # An API the upstream lacks is not forwarded, so not listed.
    assert apis.CREATE_TOPICS not in advertised_versions({apis.PRODUCE: (0, 11)}, service)


def test_api_versions_is_listed_up_to_what_kcoord_checks() -> None:
    assert advertised_versions({}, {})[apis.API_VERSIONS] == (0, API_VERSIONS_SERVED_MAX)


def _v5(cluster_id: str | None, node_id: int = -1):  # type: ignore[no-untyped-def]
    return V5(client_software_name="apache-kafka-java", client_software_version="4.4.0",
              cluster_id=cluster_id, node_id=node_id)


def test_rebootstrap_when_the_client_meant_another_cluster_or_node() -> None:
    assert not rebootstrap_required(5, _v5(None), "c1", 1)              # bootstrap: the client knows nothing yet
    assert not rebootstrap_required(5, _v5("c1", 1), "c1", 1)
    assert rebootstrap_required(5, _v5("c2", 1), "c1", 1)
    assert rebootstrap_required(5, _v5("c1", 2), "c1", 1)
    assert not rebootstrap_required(5, _v5("c1", 1), "c1", None)        # a listener that is no node: the cluster only
    assert rebootstrap_required(5, _v5("c2", 1), "c1", None)
    assert not rebootstrap_required(4, _v5("c2", 2), "c1", 1)           # before v5 there is nothing to check


def test_v5_bodies() -> None:
    cls = schema("api_versions", 5, "response").ApiVersionsResponse
    assert rebootstrap_body(5) == bytes.fromhex("0081" "01" "00000000" "00")  # Kafka's error answer, byte for byte
    assert decode_body(cls, rebootstrap_body(5), 0).error_code == 129
    features = Features({"group.version": (0, 1)}, {"group.version": (1, 1)}, 77)
    response = decode_body(cls, api_versions_body(5, {18: (0, 5)}, features), 0)
    assert [(f.name, f.min_version) for f in response.supported_features] == [("group.version", 0)]
    assert response.finalized_features_epoch == 77
