"""The private keys through the gateway's tables (issue 17 X1, X4): advertised and routed
only when the service registers them, never forwarded upstream, key 68 untouched.

Needs the apis.py lookup of the private registry (`apis._private`, the lead's patch
/tmp/helperF/apis.py.patch of issue 17); skipped, saying so, until it is in."""
from __future__ import annotations

import pytest

from coordinator.gateway.routes import GROUP, build_routes, route_key
from coordinator.protocol import apis
from coordinator.protocol import private_messages as pm
from coordinator.protocol.api_versions import advertised_versions
from coordinator.protocol.private_apis import CLIENT_ASSIGNOR_APIS, CONNECT_GROUP_HEARTBEAT

pytestmark = pytest.mark.skipif(not hasattr(apis, "_private"),
                                reason="apis.py does not consult the private API registry yet (issue 17 patch)")

UPSTREAM = {0: (0, 9), 3: (0, 12), 10: (0, 6), 18: (0, 4), 68: (0, 1)}
SERVICE = {68: (0, 1), 69: (0, 1), 11: (0, 9)}
PRIVATE = {k: (0, 0) for k in CLIENT_ASSIGNOR_APIS}


def test_advertised_only_when_the_service_serves_them():
    on = advertised_versions(UPSTREAM, {**SERVICE, **PRIVATE})
    off = advertised_versions(UPSTREAM, SERVICE)
    assert {k: on[k] for k in PRIVATE} == PRIVATE
    assert not set(PRIVATE) & set(off)
    assert on[68] == off[68] == (0, 1)                                # key 68 as Kafka's


def test_never_forwarded_even_if_upstream_advertises_them():
    assert apis.forwardable_range(32700, (0, 0)) is None
    assert advertised_versions({**UPSTREAM, 32700: (0, 0)}, SERVICE).get(32700) is None
    assert 32700 in apis.GROUP_APIS and CONNECT_GROUP_HEARTBEAT in apis.GROUP_APIS


def test_routed_as_group_apis_with_their_own_classes_and_bounds_check():
    advertised = advertised_versions(UPSTREAM, {**SERVICE, **PRIVATE})
    routes = build_routes(advertised, set(SERVICE) | set(PRIVATE))
    for key, cls in pm.REQUESTS.items():
        r = routes[route_key(key, 0)]
        assert (r.kind, r.request_class, r.flexible, r.request_header_version, r.response_header_version) == \
            (GROUP, cls, True, 2, 1)
        assert r.body_check is not None
        assert route_key(key, 1) not in routes
    assert apis.api_name(32701) == "ConsumerGroupPrepareAssignment"
    assert apis.api_name(CONNECT_GROUP_HEARTBEAT) == "ConnectGroupHeartbeat"             # seed 001 (issue 18)
    assert apis.api_name(32707) == "api_key_32707"                                     # unallocated
    off = build_routes(advertised_versions(UPSTREAM, SERVICE), set(SERVICE))
    assert not any(route_key(k, 0) in off for k in PRIVATE)             # X4: not routed: the connection closes
