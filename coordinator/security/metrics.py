"""Prometheus metrics of kcoord's authorization.

`kcoord_authorization_denied_total{api,resource_type}`: actions the authorizer refused, by the
API that asked (Kafka's request name) and the resource type (GROUP, TOPIC, CLUSTER,
TRANSACTIONAL_ID). Probes that only fill a field (AuthorizedOperations, ListGroups' Cluster
DESCRIBE) are not counted, as Kafka does not log them as denials. Children are cached: a
denial costs one dict lookup and an increment.
"""
from __future__ import annotations

from prometheus_client import Counter

AUTHORIZATION_DENIED = Counter("kcoord_authorization_denied_total", "Authorization denials by API and resource type",
                               ["api", "resource_type"])

_children: dict[tuple[str, str], object] = {}


def count_denied(api: str, resource_type: str, n: int = 1) -> None:
    child = _children.get((api, resource_type))
    if child is None:
        child = _children[(api, resource_type)] = AUTHORIZATION_DENIED.labels(api=api, resource_type=resource_type)
    child.inc(n)   # type: ignore[attr-defined]
