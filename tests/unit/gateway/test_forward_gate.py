"""The gateway's forward gate (coordinator/authz.py): asked before a request goes upstream,
never for what kcoord answers itself; a refusal closes the connection and is counted."""
from __future__ import annotations

import asyncio

from prometheus_client import REGISTRY

from coordinator.gateway.routes import build_routes
from coordinator.protocol import apis
from support.raw_client import encode_request, request

from .test_connection_flow import connect, heartbeat, make_gateway, until


class DenyMetadata:
    def __init__(self) -> None:
        self.asked: list[tuple[str, str, int, int]] = []

    def allow_forward(self, client_host: str, listener: str, api_key: int, api_version: int) -> bool:
        self.asked.append((client_host, listener, api_key, api_version))
        return api_key != apis.METADATA


def metadata(correlation_id: int) -> bytes:
    return encode_request(apis.METADATA, 12, correlation_id, request(
        apis.METADATA, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False))


def denied_count() -> float:
    return REGISTRY.get_sample_value("kcoord_gateway_forward_denied_total", {"api": "metadata"}) or 0.0


def test_a_refused_forward_closes_the_connection_and_served_apis_never_ask():
    async def main():
        gate = DenyMetadata()
        gateway = make_gateway()
        gateway.forward_gate = gate
        gateway.api_versions = {**gateway.api_versions, apis.METADATA: (0, 12)}
        gateway.routes = build_routes(gateway.api_versions, {apis.HEARTBEAT})
        connection, transport = connect(gateway)
        connection.data_received(heartbeat(1))
        await until(lambda: transport.correlation_ids() == [1], "the heartbeat answered")
        assert gate.asked == [], "a group API served here must not ask the forward gate"
        before = denied_count()
        connection.data_received(metadata(2))
        assert transport.aborted, "a refused forward closes the connection"
        assert gate.asked == [("10.1.1.1", "bootstrap", apis.METADATA, 12)]
        assert denied_count() == before + 1
    asyncio.run(main())
