"""Address rewriting of forwarded responses that name brokers.

Clients must only ever see gateway addresses: every broker host/port in a Metadata,
DescribeCluster or FindCoordinator (TRANSACTION) response is replaced with the gateway
listener fronting that broker. Node ids are kept as upstream's.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from .apis import DESCRIBE_CLUSTER, FIND_COORDINATOR, METADATA
from .codec import decode_response_frame, encode_response_frame

# (node id, upstream host, upstream port) -> gateway (host, port)
AddressOf = Callable[[int, str, int], tuple[str, int]]

REWRITTEN_APIS = frozenset({METADATA, DESCRIBE_CLUSTER, FIND_COORDINATOR})


def _moved(node: Any, node_id: int, address_of: AddressOf) -> Any:
    host, port = address_of(node_id, node.host, node.port)
    return dataclasses.replace(node, host=host, port=port)


def rewrite_metadata(response: Any, address_of: AddressOf) -> Any:
    brokers = tuple(_moved(b, b.node_id, address_of) for b in response.brokers)
    return dataclasses.replace(response, brokers=brokers)


def rewrite_describe_cluster(response: Any, address_of: AddressOf) -> Any:
    brokers = tuple(_moved(b, b.broker_id, address_of) for b in response.brokers)
    return dataclasses.replace(response, brokers=brokers)


def rewrite_find_coordinator(response: Any, address_of: AddressOf) -> Any:
    """Node.noNode (-1, "", -1) in an error answer stays as it is."""
    if hasattr(response, "coordinators"):   # v4+
        return dataclasses.replace(response, coordinators=tuple(
            c if c.node_id < 0 else _moved(c, c.node_id, address_of) for c in response.coordinators))
    if response.node_id < 0:
        return response
    return _moved(response, response.node_id, address_of)


_REWRITERS = {
    METADATA: rewrite_metadata,
    DESCRIBE_CLUSTER: rewrite_describe_cluster,
    FIND_COORDINATOR: rewrite_find_coordinator,
}


def rewrite_response_frame(api_key: int, api_version: int, frame: bytes, address_of: AddressOf) -> bytes:
    """Decode a framed upstream response, rewrite its broker addresses, re-encode it."""
    correlation_id, response = decode_response_frame(api_key, api_version, frame)
    rewritten = _REWRITERS[api_key](response, address_of)
    return encode_response_frame(api_key, api_version, correlation_id, rewritten)
