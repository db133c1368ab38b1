"""CreateTopics ``validate_only`` in front of an upstream that does not honour it: kcoord
answers the validation itself, as Kafka answers it, and forwards nothing.

Rules:
- Which upstream: Tansu 0.6 creates what it is asked to validate (tansu-storage's
  ``DynoStore::create_topic`` takes ``_validate_only`` and never reads it; measured: a
  validate-only CreateTopics of 7,000 partitions created the topic, fuzz/README.md). kcoord
  tells it apart by its API keys (upstream_facts.is_kafka); an upstream whose keys are not
  known yet is treated as such a one: a validation must never create.
- What reaches here is what kcoord would forward: the state topic, Kafka's limits and
  rules and the safeguards have answered their topics already, with the answer a real
  request gets (state_guard.py, admin_policy.py). Each topic left gets the answer of
  Kafka's controller for a validate-only request (ReplicationControlManager.createTopics,
  which runs every check and writes no record):
  - one kcoord's metadata view knows: TOPIC_ALREADY_EXISTS, "Topic 'X' already exists."
    (the view may lag the upstream by one refresh, as every rule here);
  - a config given a null value: INVALID_CONFIG, "Null value not supported for topic
    configs: a,b" (computeConfigChanges);
  - else NONE, with a fresh topic id (v7+), and from v5 ``topic_config_error_code`` NONE,
    ``num_partitions`` (the assignments' number; -1: the upstream's num.partitions, as
    ClusterFacts has it), ``replication_factor`` (the assignments' replica count; -1: 1,
    Kafka's ``default.replication.factor`` default and what Tansu creates) and
    ``configs``: the ones the request sets (a name given twice: the last value), sorted
    by name, as DYNAMIC_TOPIC_CONFIG. Kafka lists every effective topic config; kcoord
    knows only those the request sets.
- The answer takes the path of an upstream answer: a split request's refusals are merged
  into it (forward.MergingPending), and it keeps its place in the connection's order.
"""
from __future__ import annotations

import sys
import uuid
from collections.abc import Collection
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from ..protocol.apis import CREATE_TOPICS, response_class
from ..protocol.codec import BodyError, decode_body, encode_response_frame
from ..protocol.framing import HeaderError, body_offset
from .admin_limits import ClusterFacts, _make, requested_partitions, shown
from .upstream_facts import cluster_facts, is_kafka

TOPIC_CONFIG_SOURCE = 1         # Kafka's ConfigSource.TOPIC_CONFIG (DYNAMIC_TOPIC_CONFIG on the wire)
DEFAULT_REPLICATION_FACTOR = 1  # Kafka's default.replication.factor; Tansu 0.6 creates 1 for -1


def honours_validate_only(upstream_api_keys: Collection[int]) -> bool:
    """Whether the upstream can be trusted with a validate-only CreateTopics (Apache Kafka)."""
    return is_kafka(upstream_api_keys)


def answer(request: Any, version: int, facts: ClusterFacts) -> Any:
    """The CreateTopics response Kafka's controller gives ``request`` (validate_only) for
    every topic in it."""
    m = sys.modules[response_class(CREATE_TOPICS, version).__module__]
    return response_class(CREATE_TOPICS, version)(
        throttle_time=timedelta(0), topics=tuple(_result(m, topic, facts) for topic in request.topics))


def _result(m: Any, topic: Any, facts: ClusterFacts) -> Any:
    name = topic.name
    if facts.partitions(name) is not None:
        return _error(m, name, ErrorCode.topic_already_exists, f"Topic '{shown(name)}' already exists.")
    nulls = [c.name for c in topic.configs if c.value is None]
    if nulls:
        return _error(m, name, ErrorCode.invalid_config,
                      f"Null value not supported for topic configs: {shown(','.join(nulls))}")
    if not hasattr(m, "CreatableTopicConfigs"):      # before v5: name, code and message only
        return _make(m.CreatableTopicResult, name=name, error_code=ErrorCode.none, error_message=None)
    configs = {c.name: c.value for c in topic.configs}
    rf = len(topic.assignments[0].broker_ids) if topic.assignments else (
        DEFAULT_REPLICATION_FACTOR if topic.replication_factor == -1 else topic.replication_factor)
    return _make(m.CreatableTopicResult, name=name, topic_id=uuid.uuid4(), error_code=ErrorCode.none,
                 error_message=None, topic_config_error_code=ErrorCode.none,
                 num_partitions=requested_partitions(topic, facts.default_partitions), replication_factor=rf,
                 configs=tuple(m.CreatableTopicConfigs(name=k, value=configs[k], read_only=False,
                                                       config_source=TOPIC_CONFIG_SOURCE, is_sensitive=False)
                               for k in sorted(configs)))


def _error(m: Any, name: str, code: ErrorCode, message: str) -> Any:
    # Kafka's error entry: name, code and message; the rest at the schema's defaults.
    return _make(m.CreatableTopicResult, name=name, topic_id=uuid.UUID(int=0), error_code=code,
                 error_message=message, topic_config_error_code=ErrorCode.none, num_partitions=-1,
                 replication_factor=-1, configs=None)


def answered_here(frame: bytes, pending: Any, gateway: Any) -> bytes | None:
    """The response frame for a forwarded CreateTopics with validate_only set, when the
    upstream does not honour it (None: forward it). ``pending`` is its Pending (or
    MergingPending: its refusals are merged in)."""
    route = pending.route
    cluster = getattr(gateway, "cluster", None)
    if cluster is None or honours_validate_only(cluster.upstream_api_versions):
        return None
    try:
        request = decode_body(route.request_class, frame, body_offset(frame, route.request_header_version))
    except (BodyError, HeaderError):
        return None      # cannot happen: the guard decoded this frame already
    if not getattr(request, "validate_only", False):
        return None
    response = encode_response_frame(CREATE_TOPICS, route.api_version, pending.correlation_id,
                                     answer(request, route.api_version, cluster_facts(gateway)))
    merge = getattr(pending, "merge", None)
    return response if merge is None else merge(response)
