"""Flexible-version detection (from kio's schemas) and header versions."""
from __future__ import annotations

import pytest

from coordinator.protocol import apis
from coordinator.protocol.apis import (
    forwardable_range, is_flexible, request_header_version, response_header_version,
)


# First flexible version of each API, from Kafka's message JSON files ("flexibleVersions").
@pytest.mark.parametrize("api_key,first_flexible", [
    (apis.PRODUCE, 9), (apis.FETCH, 12), (apis.METADATA, 9), (apis.OFFSET_COMMIT, 8),
    (apis.FIND_COORDINATOR, 3), (apis.JOIN_GROUP, 6), (apis.HEARTBEAT, 4), (apis.SYNC_GROUP, 4),
    (apis.API_VERSIONS, 3), (apis.CREATE_TOPICS, 5), (apis.DESCRIBE_CLUSTER, 0),
    (apis.CONSUMER_GROUP_HEARTBEAT, 0),
])
def test_flexible_versions_come_from_kio(api_key: int, first_flexible: int) -> None:
    schemas = apis.api_schemas(api_key)
    assert schemas is not None and schemas.first_flexible == first_flexible
    assert not is_flexible(api_key, first_flexible - 1)
    assert is_flexible(api_key, first_flexible)
    assert is_flexible(api_key, schemas.max_version + 10)   # "N+" is open-ended


def test_request_header_versions() -> None:
    assert request_header_version(apis.CONTROLLED_SHUTDOWN, 0) == 0
    assert request_header_version(apis.HEARTBEAT, 3) == 1
    assert request_header_version(apis.HEARTBEAT, 4) == 2
    # An ApiVersions version newer than anything known is still parsed with header v2.
    assert request_header_version(apis.API_VERSIONS, 99) == 2
    assert request_header_version(apis.API_VERSIONS, 2) == 1
    # An API kio does not know has no flexible versions to speak of.
    assert request_header_version(9999, 5) == 1


def test_response_header_versions() -> None:
    assert response_header_version(apis.API_VERSIONS, 4) == 0   # always v0 (KIP-511)
    assert response_header_version(apis.HEARTBEAT, 4) == 1
    assert response_header_version(apis.HEARTBEAT, 3) == 0


def test_version_caps_keep_upstream_addresses_out() -> None:
    # KIP-951 NodeEndpoints: Produce v10+, Fetch v16+.
    assert forwardable_range(apis.PRODUCE, (0, 11)) == (3, 9)
    assert forwardable_range(apis.FETCH, (0, 17)) == (4, 15)
    assert forwardable_range(apis.DESCRIBE_QUORUM, (0, 2)) == (0, 1)
    # Uncapped APIs are upstream ∩ kio.
    assert forwardable_range(apis.METADATA, (0, 12)) == (0, 12)
    assert forwardable_range(apis.LIST_OFFSETS, (0, 9)) == (1, 9)


def test_caps_cover_every_forwardable_response_with_node_endpoints() -> None:
    """Any kio response with a NodeEndpoints/host field must be capped, rewritten or not forwarded."""
    from coordinator.protocol.rewrite import REWRITTEN_APIS
    from kio.schema.index import api_key_map
    for api_key in api_key_map:
        schemas = apis.api_schemas(api_key)
        assert schemas is not None
        upstream = (schemas.min_version, schemas.max_version)
        allowed = forwardable_range(api_key, upstream)
        if allowed is None or api_key in REWRITTEN_APIS:
            continue
        for version in range(allowed[0], allowed[1] + 1):
            names = _field_names(schemas.responses[version])
            leaking = names & {"node_endpoints", "nodes", "host", "port"}
            if api_key in (29, 31):   # Describe/DeleteAcls: "host" is the ACL's client host pattern
                leaking -= {"host"}
            assert not leaking, f"{apis.api_name(api_key)} v{version} response carries {leaking}"


def _field_names(cls: type, seen: set[type] | None = None) -> set[str]:
    import dataclasses
    import typing
    seen = seen if seen is not None else set()
    if cls in seen or not dataclasses.is_dataclass(cls):
        return set()
    seen.add(cls)
    names = set()
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        names.add(f.name)
        for arg in _walk(hints.get(f.name)):
            names |= _field_names(arg, seen)
    return names


def _walk(tp):  # type: ignore[no-untyped-def]
    import typing
    if tp is None:
        return
    yield tp
    for arg in typing.get_args(tp):
        yield from _walk(arg)


def test_excluded_apis_are_never_forwardable() -> None:
    for api_key in (apis.SASL_HANDSHAKE, apis.SASL_AUTHENTICATE, 27, 52, 58, 62, 63, 67, 76, 78):
        assert forwardable_range(api_key, (0, 20)) is None
    for api_key in apis.GROUP_APIS:
        assert forwardable_range(api_key, (0, 20)) is None
