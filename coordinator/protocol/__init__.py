"""Kafka wire protocol, sans IO: framing, headers, the API table, kio glue, built answers.

Modules:
    framing           frame splitting, request/response headers (struct, hot path)
    apis              API keys, kio schemas per version, flexibility, what may be forwarded
    codec             kio encode/decode of bodies and framed responses
    api_versions      the advertised versions, features, ApiVersions answers
    find_coordinator  FindCoordinator answers for GROUP keys
    rewrite           broker address rewriting of Metadata/DescribeCluster/FindCoordinator
    produce           transactional_id + acks at the start of a Produce body
    service           ClientInfo and the GroupService protocol the gateway calls
"""
from .service import ClientInfo, GroupService

__all__ = ["ClientInfo", "GroupService"]
