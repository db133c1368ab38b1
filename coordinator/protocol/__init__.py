"""Kafka wire protocol, sans IO: framing, headers, the API table, kio glue, built answers.

Modules:
    framing           frame splitting, request/response headers (struct, hot path)
    apis              API keys, kio schemas per version, flexibility, what may be forwarded
    api_table         one row per served API (`ApiSpec`): versions, checks, error response, handler
    error_responses   each served API's answer carrying only an error
    kio_build         version-generic construction of kio messages
    codec             kio encode/decode of bodies and framed responses
    checked           the bounded walk of a body before kio's reader sees it
    unknown_tags      a body again without the tagged fields its schema does not know
    api_versions      the advertised versions, features, ApiVersions answers
    find_coordinator  FindCoordinator answers for GROUP keys
    rewrite           broker address rewriting of Metadata/DescribeCluster/FindCoordinator
    produce           transactional_id + acks at the start of a Produce body
    service           ClientInfo and the GroupService protocol the gateway calls
    bootstrap         the upstream bootstrap list, host:port,...
"""
from .service import ClientInfo, GroupService

__all__ = ["ClientInfo", "GroupService"]
