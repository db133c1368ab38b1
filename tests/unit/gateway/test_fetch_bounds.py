"""Fetch max_bytes and DescribeTopicPartitions' partition limit bounded as Kafka bounds them
before they are forwarded (fetch_bounds.py)."""
from __future__ import annotations

import sys
from datetime import timedelta

from coordinator.gateway.fetch_bounds import (
    DESCRIBE_PARTITIONS_LIMIT,
    FETCH_MAX_BYTES,
    describe_partitions_clamp,
    fetch_clamp,
)
from coordinator.gateway.routes import FORWARD, build_routes, route_key
from coordinator.protocol.apis import DESCRIBE_TOPIC_PARTITIONS, FETCH, request_class, request_header_version
from coordinator.protocol.codec import decode_body, encode_body
from coordinator.protocol.framing import RequestHeader, frame, request_body_offset


def fetch(version: int, max_bytes: int):  # type: ignore[no-untyped-def]
    cls = request_class(FETCH, version)
    m = sys.modules[cls.__module__]
    fields = {f: m.ReplicaState(replica_id=-1, replica_epoch=-1) if f == "replica_state" else None
              for f in ("replica_state",) if hasattr(m, "ReplicaState")}
    body = cls(**{k: v for k, v in dict(
        cluster_id=None, replica_id=-1, max_wait=timedelta(milliseconds=500), min_bytes=1, max_bytes=max_bytes,
        isolation_level=0, session_id=0, session_epoch=-1, topics=(), forgotten_topics_data=(), rack_id="",
        **fields).items() if k in cls.__dataclass_fields__})
    head = RequestHeader(FETCH, version, 4, "c").encode(request_header_version(FETCH, version))
    data = frame(head + encode_body(body))
    return data, request_body_offset(data, request_header_version(FETCH, version))[1]


def test_max_bytes_over_kafkas_bound_is_rewritten_and_the_rest_kept() -> None:
    for version in (4, 11, 12, 15, 17):
        clamp = fetch_clamp(version)
        assert clamp is not None
        data, offset = fetch(version, 2**31 - 1)
        out = clamp(data, offset)
        assert len(out) == len(data)
        decoded = decode_body(request_class(FETCH, version), out, offset)
        assert decoded.max_bytes == FETCH_MAX_BYTES, version
        assert decoded.max_wait == timedelta(milliseconds=500) and decoded.min_bytes == 1
        data, offset = fetch(version, 52_428_800)      # librdkafka's and Java's default: untouched
        assert clamp(data, offset) is data


def test_only_forwarded_fetch_routes_carry_the_clamp() -> None:
    routes = build_routes({FETCH: (4, 17), 3: (0, 12)}, set())
    assert routes[route_key(FETCH, 12)].kind == FORWARD and routes[route_key(FETCH, 12)].clamp is not None
    assert routes[route_key(3, 12)].clamp is None


def describe_partitions(limit: int, names: tuple[str, ...], cursor: bool):  # type: ignore[no-untyped-def]
    cls = request_class(DESCRIBE_TOPIC_PARTITIONS, 0)
    m = sys.modules[cls.__module__]
    body = cls(topics=tuple(m.TopicRequest(name=n) for n in names), response_partition_limit=limit,
               cursor=m.Cursor(topic_name="t", partition_index=3) if cursor else None)
    version = request_header_version(DESCRIBE_TOPIC_PARTITIONS, 0)
    data = frame(RequestHeader(DESCRIBE_TOPIC_PARTITIONS, 0, 4, "c").encode(version) + encode_body(body))
    return data, request_body_offset(data, version)[1]


def test_a_partition_limit_over_kafkas_bound_is_rewritten_after_any_topics() -> None:
    # Tansu 0.6 allocates limit x 96 bytes (fuzz/README.md); Kafka answers at most 2,000.
    cls = request_class(DESCRIBE_TOPIC_PARTITIONS, 0)
    for names in ((), ("a",), ("ünï" * 40, "b", "")):
        for cursor in (False, True):
            data, offset = describe_partitions(50_000_000, names, cursor)
            out = describe_partitions_clamp(data, offset)
            assert len(out) == len(data)
            decoded = decode_body(cls, out, offset)
            assert decoded.response_partition_limit == DESCRIBE_PARTITIONS_LIMIT
            assert tuple(t.name for t in decoded.topics) == names
            assert (decoded.cursor is not None) == cursor
            data, offset = describe_partitions(2_000, names, cursor)
            assert describe_partitions_clamp(data, offset) is data
            for low in (0, -1, -2**31):     # Kafka answers at least one partition
                data, offset = describe_partitions(low, names, cursor)
                assert decode_body(cls, describe_partitions_clamp(data, offset), offset).response_partition_limit == 1


def test_the_routes_clamp_describe_topic_partitions() -> None:
    routes = build_routes({DESCRIBE_TOPIC_PARTITIONS: (0, 0)}, set())
    assert routes[route_key(DESCRIBE_TOPIC_PARTITIONS, 0)].clamp is describe_partitions_clamp
