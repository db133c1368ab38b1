"""What ApiVersions advertises, the features it carries, and its error answers."""
from __future__ import annotations

import struct

import pytest

from coordinator.protocol import apis
from coordinator.protocol.api_versions import (
    Features, advertised_versions, api_versions_body, api_versions_response, invalid_request_body,
    merge_features, parse_upstream_api_versions, unsupported_version_body, valid_client_software,
)
from coordinator.protocol.apis import response_class
from coordinator.protocol.codec import decode_body

# Tansu 0.6's advertised ranges (environment.md 3.2), plus APIs a real Kafka would add.
TANSU = {0: (0, 11), 1: (0, 17), 2: (0, 9), 3: (0, 12), 8: (0, 9), 9: (0, 9), 10: (0, 6), 11: (0, 9),
         12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 5), 16: (0, 5), 17: (0, 1), 18: (0, 4), 19: (0, 7),
         20: (0, 6), 21: (0, 2), 22: (0, 5), 24: (0, 5), 25: (0, 4), 26: (0, 4), 28: (0, 4), 29: (0, 3),
         30: (0, 3), 32: (0, 4), 36: (0, 2), 42: (0, 2), 44: (0, 1), 46: (0, 0), 50: (0, 0), 51: (0, 0),
         60: (0, 1), 69: (0, 0), 71: (0, 0), 75: (0, 0)}
SERVICE = {apis.HEARTBEAT: (0, 4), apis.JOIN_GROUP: (0, 9), apis.CONSUMER_GROUP_HEARTBEAT: (0, 1)}


def test_forwarded_apis_are_upstream_intersect_kio_intersect_caps() -> None:
    adv = advertised_versions(TANSU, SERVICE)
    assert adv[apis.PRODUCE] == (3, 9)         # kio from 3, KIP-951 cap at 9
    assert adv[apis.FETCH] == (4, 15)
    assert adv[apis.METADATA] == (0, 12)
    assert adv[apis.CREATE_TOPICS] == (2, 7)
    assert adv[apis.DESCRIBE_CLUSTER] == (0, 1)


def test_group_apis_are_exactly_the_service_versions() -> None:
    adv = advertised_versions(TANSU, SERVICE)
    assert adv[apis.HEARTBEAT] == (0, 4)
    assert adv[apis.JOIN_GROUP] == (0, 9)
    assert adv[apis.CONSUMER_GROUP_HEARTBEAT] == (0, 1)   # upstream lacks it: served here anyway
    # Upstream serves these, but the service does not: neither advertised nor forwarded.
    for api_key in (apis.OFFSET_COMMIT, apis.SYNC_GROUP, apis.LIST_GROUPS, apis.TXN_OFFSET_COMMIT,
                    apis.CONSUMER_GROUP_DESCRIBE, apis.DELETE_GROUPS):
        assert api_key not in adv


def test_sasl_and_internal_apis_are_not_advertised() -> None:
    adv = advertised_versions({**TANSU, 27: (0, 1), 52: (0, 2), 76: (1, 1)}, SERVICE)
    for api_key in (apis.SASL_HANDSHAKE, apis.SASL_AUTHENTICATE, 27, 52, 76):
        assert api_key not in adv


def test_local_apis_always_advertised() -> None:
    adv = advertised_versions({apis.PRODUCE: (0, 11)}, {})
    assert adv[apis.API_VERSIONS] == (0, 5)
    assert adv[apis.FIND_COORDINATOR] == (0, 6)
    adv = advertised_versions({apis.FIND_COORDINATOR: (0, 3)}, {})
    assert adv[apis.FIND_COORDINATOR] == (0, 3)


def test_features_add_group_version() -> None:
    upstream = Features({"metadata.version": (7, 27), "group.version": (0, 0)}, {"metadata.version": (27, 27)}, 12)
    merged = merge_features(upstream)
    assert merged.supported == {"metadata.version": (7, 27), "group.version": (0, 1)}
    assert merged.finalized == {"metadata.version": (27, 27), "group.version": (1, 1)}
    assert merged.finalized_epoch == 12
    assert merge_features(Features()).finalized_epoch == 0   # Tansu reports -1


def _decoded(version: int, body: bytes):  # type: ignore[no-untyped-def]
    return decode_body(response_class(apis.API_VERSIONS, version), body, 0)


def test_api_versions_v4_lists_features_and_every_api() -> None:
    adv = advertised_versions(TANSU, SERVICE)
    features = merge_features(Features({"transaction.version": (0, 2)}, {}, -1))
    response = _decoded(4, api_versions_body(4, adv, features))
    assert response.error_code == 0
    assert {k.api_key: (k.min_version, k.max_version) for k in response.api_keys} == adv
    assert [(f.name, f.min_version, f.max_version) for f in response.supported_features] == [
        ("group.version", 0, 1), ("transaction.version", 0, 2)]
    assert [(f.name, f.min_version_level, f.max_version_level) for f in response.finalized_features] == [
        ("group.version", 1, 1)]
    assert response.finalized_features_epoch == 0


def test_api_versions_v3_omits_supported_features_with_min_zero() -> None:
    features = merge_features(Features({"metadata.version": (7, 27)}, {}, 3))
    response = _decoded(3, api_versions_body(3, {18: (0, 4)}, features))
    assert [f.name for f in response.supported_features] == ["metadata.version"]   # KAFKA-17492
    assert [f.name for f in response.finalized_features] == ["group.version"]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_old_api_versions_have_no_features(version: int) -> None:
    response = _decoded(version, api_versions_body(version, {18: (0, 4)}, merge_features(Features())))
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(18, 0, 4)]


def test_unsupported_version_body_is_v0_listing_our_range() -> None:
    body = unsupported_version_body((0, 4))
    assert body == struct.pack(">hihhh", 35, 1, 18, 0, 4)
    response = _decoded(0, body)
    assert response.error_code == 35 and response.api_keys[0].max_version == 4


def test_invalid_client_software() -> None:
    assert valid_client_software("confluent-kafka-python", "2.16.1-rdkafka-2.16.0")
    assert valid_client_software("a", "1")
    assert not valid_client_software("", "1")
    assert not valid_client_software("bad name", "1")
    assert not valid_client_software("name", "1.0-")
    assert _decoded(3, invalid_request_body(3)).error_code == 42


def test_parse_upstream_api_versions_reads_ranges_and_features() -> None:
    response = api_versions_response(3, {0: (0, 11), 18: (0, 4)},
                                     Features({"metadata.version": (1, 20)}, {"metadata.version": (20, 20)}, 5))
    versions, features = parse_upstream_api_versions(response)
    assert versions == {0: (0, 11), 18: (0, 4)}
    assert features == Features({"metadata.version": (1, 20)}, {"metadata.version": (20, 20)}, 5)
