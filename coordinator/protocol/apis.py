"""The API table: Kafka API keys, what kio knows about each, and which the gateway may forward.

Flexibility ("is this version encoded with compact strings and tagged fields?") is read
from kio's generated schema classes (``__flexible__``), never from a hand-written table.
Kafka declares flexible versions as an open range "N+" in every message JSON, so one
number per API (the first flexible version) answers the question for any version, even
one kio does not know (an ApiVersions request from a newer client, KIP-511).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.static.constants import EntityType

from .api_keys import (  # noqa: F401 (the keys are read as apis.<NAME> across the code)
    ADD_OFFSETS_TO_TXN,
    ALTER_CONFIGS,
    ALTER_PARTITION_REASSIGNMENTS,
    API_VERSIONS,
    CONSUMER_GROUP_DESCRIBE,
    CONSUMER_GROUP_HEARTBEAT,
    CONTROLLED_SHUTDOWN,
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_GROUPS,
    DELETE_RECORDS,
    DELETE_TOPICS,
    DESCRIBE_CLUSTER,
    DESCRIBE_GROUPS,
    DESCRIBE_QUORUM,
    DESCRIBE_TOPIC_PARTITIONS,
    FETCH,
    FIND_COORDINATOR,
    HEARTBEAT,
    INCREMENTAL_ALTER_CONFIGS,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    LIST_OFFSETS,
    METADATA,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    PRODUCE,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    STREAMS_GROUP_DESCRIBE,
    STREAMS_GROUP_HEARTBEAT,
    SYNC_GROUP,
    TXN_OFFSET_COMMIT,
)
from .api_table import CORE_APIS
from .messages import schema as message_module
from .messages.index import GENERATED

STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE = 93
# APIs kio does not know at all: every version is generated (coordinator/protocol/messages,
# docs/design/messages.md).
GENERATED_APIS: dict[int, str] = {
    STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE: "streams_group_topology_description_update"}

# APIs whose state lives in the group coordinator: never forwarded, because upstream's
# coordinator must not see a group we own, even when the service does not serve that API (then
# it is simply not advertised, and a request for it closes the connection like any API the
# listener does not enable). Derived from the API rows (`ApiSpec.owned`: AddOffsetsToTxn is
# forwarded when not served), plus the group APIs served by an extension's rows (the streams
# group APIs, coordinator/service/streams_apis.py) and kcoord's private block (private_apis.py).
UNSERVED_GROUP_APIS = frozenset({STREAMS_GROUP_HEARTBEAT, STREAMS_GROUP_DESCRIBE,
                                 STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE})
PRIVATE_BLOCK = range(32700, 32768)
GROUP_APIS = frozenset(s.api_key for s in CORE_APIS if s.owned) | UNSERVED_GROUP_APIS | frozenset(PRIVATE_BLOCK)

# APIs never advertised nor forwarded, whatever upstream supports.
NOT_THROUGH_GATEWAY: dict[int, str] = {
    # The gateway listens PLAINTEXT only: no SASL, and delegation tokens can only be
    # used on an authenticated (SASL) connection anyway.
    17: "SASL (gateway is PLAINTEXT only)", 36: "SASL (gateway is PLAINTEXT only)",
    38: "delegation token (needs SASL)", 39: "delegation token (needs SASL)",
    40: "delegation token (needs SASL)", 41: "delegation token (needs SASL)",
    # Broker-to-broker and controller-only APIs: no client sends these to a broker.
    4: "inter-broker", 5: "inter-broker", 6: "inter-broker", 7: "inter-broker",
    27: "inter-broker (WriteTxnMarkers)", 52: "KRaft", 53: "KRaft", 54: "KRaft",
    56: "controller", 58: "inter-broker (Envelope)", 59: "KRaft", 62: "controller",
    63: "controller", 67: "controller", 70: "controller", 73: "controller",
    80: "KRaft controller", 81: "KRaft controller", 82: "KRaft controller",
    # Share groups (KIP-932) are not served by kcoord, and their state APIs are internal.
    76: "share group", 77: "share group", 78: "share group", 79: "share group",
    83: "share state (internal)", 84: "share state (internal)", 85: "share state (internal)",
    86: "share state (internal)", 87: "share state (internal)",
    90: "share group", 91: "share group", 92: "share group",
}

# Highest version forwarded, for APIs whose newer responses carry upstream broker
# addresses that the gateway does not rewrite (clients must only ever see gateway
# addresses, or they would bypass it):
FORWARD_VERSION_CAPS: dict[int, int] = {
    # Produce v10+ and Fetch v16+ responses may carry NodeEndpoints (KIP-951, leader
    # discovery on NOT_LEADER_OR_FOLLOWER) holding upstream host/port.
    PRODUCE: 9,
    FETCH: 15,
    # DescribeQuorum v2+ responses list the controllers' listeners (KIP-853).
    DESCRIBE_QUORUM: 1,
}
# Forwarded APIs whose responses carry broker addresses: rewritten, not capped.
# (Metadata brokers, DescribeCluster brokers, FindCoordinator node.)  DescribeConfigs of
# a BROKER resource can still show upstream listeners inside config *values*; clients do
# not connect from those, so they are left as they are.


def _private(api_key: int) -> ApiSchemas | None:
    """kcoord's private APIs (private_apis.py): kio-shaped classes of our own, all v0 and
    flexible from v0."""
    if api_key < 32700:
        return None
    from .private_apis import private_classes  # kept off kio's import path
    classes = private_classes(api_key)
    if classes is None:
        return None
    request, response = classes
    return ApiSchemas(api_key, 0, 0, 0, {0: request}, {0: response})


def kio_version_range(api_key: int) -> tuple[int, int] | None:
    """Versions kio has schemas for (Kafka 4.x dropped the oldest ones, KIP-896), or
    kcoord's private APIs have."""
    name = _known_name(api_key)
    if name is None:
        private = _private(api_key)
        return None if private is None else (private.min_version, private.max_version)
    versions = schema_name_map.get(name) or [min(v for n, v, _ in GENERATED if n == name)]
    high = max(versions)
    # The versions kio lacks, generated from Kafka's own definitions (docs/design/messages.md).
    while (name, high + 1, "request") in GENERATED and (name, high + 1, "response") in GENERATED:
        high += 1
    return min(versions), high


def _known_name(api_key: int) -> str | None:
    """The message name of an API kio knows, or whose messages are all generated."""
    name = api_key_map.get(api_key)
    return name if name is not None else GENERATED_APIS.get(api_key)


def _load(api_key: int, version: int, kind: str) -> Any:
    """The message class of ``api_key`` v``version``: kio's, or the generated one."""
    name = _known_name(api_key)
    if (name, version, kind) not in GENERATED:
        return load_request_schema(api_key, version) if kind == "request" else load_response_schema(api_key, version)
    wanted = EntityType.request if kind == "request" else EntityType.response
    module = message_module(name, version, kind)
    return next(c for c in vars(module).values() if isinstance(c, type) and getattr(c, "__type__", None) is wanted)


def api_name(api_key: int) -> str:
    name = _known_name(api_key)
    if name is None and api_key >= 32700:
        from .private_apis import private_name
        name = private_name(api_key)
    return name if name is not None else f"api_key_{api_key}"


@dataclass(frozen=True, slots=True)
class ApiSchemas:
    """kio's request/response classes for every version of one API."""

    api_key: int
    min_version: int
    max_version: int
    first_flexible: int | None          # None: no flexible version
    requests: dict[int, type]
    responses: dict[int, type]

    def flexible(self, version: int) -> bool:
        return self.first_flexible is not None and version >= self.first_flexible


@functools.cache
def api_schemas(api_key: int) -> ApiSchemas | None:
    """Loads (once) the kio classes of ``api_key``; None for an API kio does not know."""
    private = _private(api_key)
    if private is not None:
        return private
    versions = kio_version_range(api_key)
    if versions is None:
        return None
    low, high = versions
    requests = {v: _load(api_key, v, "request") for v in range(low, high + 1)}
    responses = {v: _load(api_key, v, "response") for v in range(low, high + 1)}
    flexible = [v for v, cls in requests.items() if cls.__flexible__]
    first = min(flexible) if flexible else None
    if first is not None and flexible != list(range(first, high + 1)):
        raise AssertionError(f"{api_name(api_key)}: flexible versions {flexible} are not an open range")
    return ApiSchemas(api_key, low, high, first, requests, responses)


def is_flexible(api_key: int, api_version: int) -> bool:
    schemas = api_schemas(api_key)
    return schemas is not None and schemas.flexible(api_version)


def request_header_version(api_key: int, api_version: int) -> int:
    """Request header v0 (no client id; only ControlledShutdown v0), v1, or v2 (flexible)."""
    if api_key == CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    return 2 if is_flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """Response header v1 (tagged fields) for flexible versions, except ApiVersions.

    ApiVersions always answers with header v0 so that a client can read the response
    before it knows which versions the broker supports (KIP-511).
    """
    if api_key == API_VERSIONS:
        return 0
    return 1 if is_flexible(api_key, api_version) else 0


def request_class(api_key: int, api_version: int) -> type:
    schemas = api_schemas(api_key)
    if schemas is None or api_version not in schemas.requests:
        raise KeyError(f"kio has no request schema for {api_name(api_key)} v{api_version}")
    return schemas.requests[api_version]


def response_class(api_key: int, api_version: int) -> type:
    schemas = api_schemas(api_key)
    if schemas is None or api_version not in schemas.responses:
        raise KeyError(f"kio has no response schema for {api_name(api_key)} v{api_version}")
    return schemas.responses[api_version]


def intersect(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int] | None:
    low, high = max(a[0], b[0]), min(a[1], b[1])
    return (low, high) if low <= high else None


def forwardable_range(api_key: int, upstream: tuple[int, int]) -> tuple[int, int] | None:
    """Versions of a forwarded API to advertise: upstream's ∩ kio's ∩ the address caps."""
    if api_key in NOT_THROUGH_GATEWAY or api_key in GROUP_APIS:
        return None
    known = kio_version_range(api_key)
    if known is None:
        return None
    both = intersect(upstream, known)
    if both is None:
        return None
    cap = FORWARD_VERSION_CAPS.get(api_key)
    return intersect(both, (both[0], cap)) if cap is not None else both
