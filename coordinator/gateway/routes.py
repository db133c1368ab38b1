"""The dispatch table: for each advertised (api_key, api_version), what the gateway does.

Built once at start so that a request costs one dict lookup; anything not in the table
is an API or version the gateway does not enable, and closes the connection (Kafka's
SocketServer does the same for a request it cannot accept). Admin APIs that can touch
the state topic are ``guarded``: decoded (bounded) and checked before they are forwarded
(state_guard.py); those that refresh the cluster view keep the FORWARD_REFRESH kind.
The APIs served here (GROUP) are the service's rows of the API table
(coordinator/protocol/api_table.py): a route of one carries the row's error response, which
the connection answers when it refuses the request itself (gateway/sasl.py).
"""
from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from ..protocol.api_table import CORE_TABLE, ApiSpec
from ..protocol.apis import (
    API_VERSIONS,
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
    DESCRIBE_CLUSTER,
    DESCRIBE_TOPIC_PARTITIONS,
    FETCH,
    FIND_COORDINATOR,
    LIST_OFFSETS,
    METADATA,
    PRODUCE,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    api_schemas,
    request_header_version,
    response_header_version,
)
from ..protocol.checked import Step, struct_step
from ..protocol.error_responses import ErrorResponse
from .fetch_bounds import describe_partitions_clamp, fetch_clamp
from .leader_endpoints import carries_endpoints
from .state_guard import GUARDED_APIS

FORWARD = 0            # bytes in, bytes out
FORWARD_PRODUCE = 1    # forward; no response expected when acks=0
FORWARD_REWRITE = 2    # forward; rewrite broker addresses in the response
FORWARD_REFRESH = 3    # forward; refresh the cluster view once the response passes
FIND_COORDINATOR_LOCAL = 4   # GROUP keys answered here, TRANSACTION keys forwarded + rewritten
API_VERSIONS_LOCAL = 5
GROUP = 6              # served by the GroupService
GUARD = 7              # decoded and checked against the state topic, then forwarded
SASL = 8               # SaslHandshake, SaslAuthenticate: the connection's SASL state (sasl.py)
FORWARD_LATEST = 9     # ListOffsets: in front of Tansu, LATEST gets the high watermark (tansu_list_offsets.py)

# Kinds whose request body is decoded here (Route.request_class is set; also when guarded).
DECODED_KINDS = frozenset({FIND_COORDINATOR_LOCAL, API_VERSIONS_LOCAL, GROUP, GUARD, SASL})

_SPECIAL_FORWARDS = {
    PRODUCE: FORWARD_PRODUCE,
    METADATA: FORWARD_REWRITE,
    DESCRIBE_CLUSTER: FORWARD_REWRITE,
    DESCRIBE_TOPIC_PARTITIONS: FORWARD_REWRITE,   # marks the state topic internal
    CREATE_TOPICS: FORWARD_REFRESH,
    DELETE_TOPICS: FORWARD_REFRESH,
    CREATE_PARTITIONS: FORWARD_REFRESH,
    LIST_OFFSETS: FORWARD_LATEST,
}


@dataclass(frozen=True, slots=True)
class Route:
    kind: int
    api_key: int
    api_version: int
    request_header_version: int
    response_header_version: int
    flexible: bool
    request_class: type | None     # kio request schema, for requests parsed here
    guarded: bool = False          # checked against the state topic before forwarding
    # The bounded walk of the request body (coordinator/protocol/checked.py): forwarded
    # bodies are walked too, so kcoord never passes bytes upstream that Kafka would refuse
    # to parse (a broker that trusts them can die of them: fuzzing killed Tansu so).
    body_check: Step | None = None
    # Responses may carry KIP-951 NodeEndpoints (Produce v10+, Fetch v16+): their upstream
    # addresses are rewritten on the way back (leader_endpoints.py).
    endpoints: bool = False
    # A forwarded request's numbers bounded as Kafka bounds them (Fetch max_bytes:
    # fetch_bounds.py): (frame, body offset) -> the frame to forward.
    clamp: Callable[[bytes, int], bytes] | None = None
    # GROUP: the API's error response (its row in the API table), for a request refused
    # before the service sees it.
    error_response: ErrorResponse | None = None


def route_key(api_key: int, api_version: int) -> int:
    return (api_key << 16) | (api_version & 0xFFFF)


def _clamp(api_key: int, version: int) -> Callable[[bytes, int], bytes] | None:
    """The bound applied to a forwarded request's numbers (fetch_bounds.py), if any."""
    if api_key == FETCH:
        return fetch_clamp(version)
    if api_key == DESCRIBE_TOPIC_PARTITIONS:
        return describe_partitions_clamp
    return None


def build_routes(advertised: Mapping[int, tuple[int, int]],
                 served_locally: Mapping[int, ApiSpec] | Collection[int]) -> dict[int, Route]:
    """The route of every advertised (api_key, version). ``served_locally``: the service's
    rows of the API table, routed to the service (GROUP); given only their keys, the core
    rows of those keys (coordinator/protocol/api_table.py `CORE_APIS`)."""
    rows: Mapping[int, ApiSpec] = served_locally if isinstance(served_locally, Mapping) else CORE_TABLE
    routes: dict[int, Route] = {}
    for api_key, (low, high) in advertised.items():
        if api_key == API_VERSIONS:
            kind = API_VERSIONS_LOCAL
        elif api_key == FIND_COORDINATOR:
            kind = FIND_COORDINATOR_LOCAL
        elif api_key in served_locally:
            kind = GROUP
        elif api_key == SASL_HANDSHAKE or api_key == SASL_AUTHENTICATE:
            kind = SASL   # advertised only with client SASL on (gateway/sasl.py enable_sasl)
        else:
            kind = _SPECIAL_FORWARDS.get(api_key, FORWARD)
            if api_key in GUARDED_APIS and kind == FORWARD:
                kind = GUARD
        guarded = api_key in GUARDED_APIS
        row = rows.get(api_key) if kind == GROUP else None
        schemas = api_schemas(api_key)
        assert schemas is not None, f"advertised API {api_key} unknown to kio"
        for version in range(low, high + 1):
            routes[route_key(api_key, version)] = Route(
                kind=kind, api_key=api_key, api_version=version,
                request_header_version=request_header_version(api_key, version),
                response_header_version=response_header_version(api_key, version),
                flexible=schemas.flexible(version),
                request_class=schemas.requests[version] if kind in DECODED_KINDS or guarded else None,
                guarded=guarded, body_check=struct_step(schemas.requests[version]),
                endpoints=carries_endpoints(api_key, version),
                clamp=_clamp(api_key, version),
                error_response=row.error_response if row is not None else None)
    return routes
