"""The connection reads a request's api key and version as one unsigned int, the route's key."""
from __future__ import annotations

import itertools

from coordinator.gateway.connection import _ROUTE_AND_ID
from coordinator.gateway.routes import route_key
from coordinator.protocol.framing import FRAMED_REQUEST_PREFIX, REQUEST_PREFIX


def test_the_prefix_read_as_one_int_finds_the_route_route_key_finds() -> None:
    """Every api key and version, negative ones included, finds what route_key's key finds
    in a table of routes (non-negative keys and versions, as build_routes makes), and the
    correlation id read with it is the request's."""
    routes = {route_key(k, v): (k, v) for k in range(0, 100) for v in range(0, 20)}
    keys = [-0x8000, -2, -1, 0, 1, 12, 18, 99, 100, 0x7FFF]
    versions = [-0x8000, -2, -1, 0, 1, 9, 19, 20, 0x7FFF]
    for api_key, api_version in itertools.product(keys, versions):
        frame = FRAMED_REQUEST_PREFIX.pack(8, api_key, api_version, -7)
        key, correlation_id = _ROUTE_AND_ID.unpack_from(frame, 4)
        assert correlation_id == -7
        assert routes.get(key) == routes.get(route_key(api_key, api_version))
        assert REQUEST_PREFIX.unpack_from(frame, 4) == (api_key, api_version, -7)
    assert routes.get(_ROUTE_AND_ID.unpack_from(FRAMED_REQUEST_PREFIX.pack(8, 8, 9, 1), 4)[0]) == (8, 9)
