"""Address rewriting of forwarded responses that name brokers.

Clients must only ever see gateway addresses: every broker host/port in a Metadata,
DescribeCluster or FindCoordinator (TRANSACTION) response is replaced with the gateway
listener fronting that broker. Node ids are kept as upstream's.

The state topic is kcoord's internal topic, as ``__consumer_offsets`` is Kafka's: Metadata
(v1+) and DescribeTopicPartitions responses mark it ``is_internal`` (Kafka's
MetadataCache sets it for internal topics), so clients and tools treat it as such (a
consumer with exclude.internal.topics skips it in pattern subscriptions).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from .apis import DESCRIBE_CLUSTER, DESCRIBE_TOPIC_PARTITIONS, FIND_COORDINATOR, METADATA
from .codec import decode_response_frame, encode_response_frame

# (node id, upstream host, upstream port) -> gateway (host, port)
AddressOf = Callable[[int, str, int], tuple[str, int]]
# Nodes the gateway adds to Metadata and DescribeCluster: several kcoord processes list
# their synthetic coordinator nodes -> [(node id, host, port)].
ExtraNodes = Callable[[], list[tuple[int, str, int]]]

REWRITTEN_APIS = frozenset({METADATA, DESCRIBE_CLUSTER, FIND_COORDINATOR, DESCRIBE_TOPIC_PARTITIONS})


def _moved(node: Any, node_id: int, address_of: AddressOf) -> Any:
    host, port = address_of(node_id, node.host, node.port)
    return dataclasses.replace(node, host=host, port=port)


def _internal(topics: Any, state_topic: str | None) -> Any:
    """``topics`` with the state topic marked internal (the same tuple if nothing changes)."""
    if state_topic is None or not any(t.name == state_topic and not t.is_internal for t in topics):
        return topics
    return tuple(dataclasses.replace(t, is_internal=True) if t.name == state_topic else t for t in topics)


def _with_extra(brokers: tuple, extra: ExtraNodes | None, id_field: str) -> tuple:
    """``brokers`` plus the extra nodes not already listed (same entry type, no rack)."""
    nodes = extra() if extra is not None else ()
    if not nodes or not brokers:
        return brokers
    listed = {getattr(b, id_field) for b in brokers}
    added = tuple(dataclasses.replace(brokers[0], **{id_field: node_id}, host=host, port=port, rack=None)
                  for node_id, host, port in nodes if node_id not in listed)
    return brokers + added


def rewrite_metadata(response: Any, address_of: AddressOf, state_topic: str | None = None,
                     extra: ExtraNodes | None = None) -> Any:
    brokers = _with_extra(tuple(_moved(b, b.node_id, address_of) for b in response.brokers), extra, "node_id")
    if state_topic is not None and response.topics and hasattr(response.topics[0], "is_internal"):   # v1+
        return dataclasses.replace(response, brokers=brokers, topics=_internal(response.topics, state_topic))
    return dataclasses.replace(response, brokers=brokers)


def rewrite_describe_topic_partitions(response: Any, address_of: AddressOf, state_topic: str | None = None,
                                      extra: ExtraNodes | None = None) -> Any:
    """No broker addresses here (node ids only); only the internal flag."""
    topics = _internal(response.topics, state_topic)
    return response if topics is response.topics else dataclasses.replace(response, topics=topics)


def rewrite_describe_cluster(response: Any, address_of: AddressOf, state_topic: str | None = None,
                             extra: ExtraNodes | None = None) -> Any:
    brokers = _with_extra(tuple(_moved(b, b.broker_id, address_of) for b in response.brokers), extra, "broker_id")
    return dataclasses.replace(response, brokers=brokers)


def rewrite_find_coordinator(response: Any, address_of: AddressOf, state_topic: str | None = None,
                             extra: ExtraNodes | None = None) -> Any:
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
    DESCRIBE_TOPIC_PARTITIONS: rewrite_describe_topic_partitions,
}


def rewrite_response_frame(api_key: int, api_version: int, frame: bytes, address_of: AddressOf,
                           state_topic: str | None = None, extra: ExtraNodes | None = None) -> bytes:
    """Decode a framed upstream response, rewrite its broker addresses (and mark
    ``state_topic`` internal), re-encode it."""
    correlation_id, response = decode_response_frame(api_key, api_version, frame)
    rewritten = _REWRITERS[api_key](response, address_of, state_topic, extra)
    return encode_response_frame(api_key, api_version, correlation_id, rewritten)
