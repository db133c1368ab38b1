"""Broker address rewriting: clients must only see gateway addresses."""
from __future__ import annotations

import sys
import uuid
from datetime import timedelta

from kio.schema.errors import ErrorCode

from coordinator.protocol.apis import DESCRIBE_CLUSTER, FIND_COORDINATOR, METADATA, response_class
from coordinator.protocol.codec import decode_response_frame, encode_response_frame
from coordinator.protocol.rewrite import (
    rewrite_describe_cluster, rewrite_find_coordinator, rewrite_metadata, rewrite_response_frame,
)

UPSTREAM = {1: ("10.0.0.1", 9092), 2: ("10.0.0.2", 9092)}
GATEWAY = {1: ("gw", 29101), 2: ("gw", 29102)}
ZERO = timedelta(0)
seen: list[tuple[int, str, int]] = []


def address_of(node_id: int, host: str, port: int) -> tuple[str, int]:
    seen.append((node_id, host, port))
    return GATEWAY[node_id]


def _module(api_key: int, version: int):  # type: ignore[no-untyped-def]
    return sys.modules[response_class(api_key, version).__module__]


def metadata_response(version: int = 12):  # type: ignore[no-untyped-def]
    m = _module(METADATA, version)
    brokers = tuple(m.MetadataResponseBroker(node_id=n, host=h, port=p, rack="r%d" % n) for n, (h, p) in UPSTREAM.items())
    part = m.MetadataResponsePartition(error_code=ErrorCode.none, partition_index=0, leader_id=2, leader_epoch=0,
                                       replica_nodes=(1, 2), isr_nodes=(1, 2), offline_replicas=())
    topic = m.MetadataResponseTopic(error_code=ErrorCode.none, name="t", topic_id=uuid.uuid4(), is_internal=False,
                                    partitions=(part,), topic_authorized_operations=-2147483648)
    return m.MetadataResponse(throttle_time=ZERO, brokers=brokers, cluster_id="c", controller_id=1, topics=(topic,))


def test_metadata_brokers_are_rewritten_and_node_ids_kept() -> None:
    seen.clear()
    original = metadata_response()
    rewritten = rewrite_metadata(original, address_of)
    assert [(b.node_id, b.host, b.port, b.rack) for b in rewritten.brokers] == [
        (1, "gw", 29101, "r1"), (2, "gw", 29102, "r2")]
    assert rewritten.topics == original.topics and rewritten.controller_id == 1
    assert seen == [(1, "10.0.0.1", 9092), (2, "10.0.0.2", 9092)]


def test_metadata_frame_rewrite_leaves_no_upstream_address() -> None:
    for version in (1, 9, 12):   # non-flexible and flexible (response header v1)
        frame = encode_response_frame(METADATA, version, 77, metadata_response(version) if version == 12
                                      else _old_metadata(version))
        out = rewrite_response_frame(METADATA, version, frame, address_of)
        assert b"10.0.0.1" not in out and b"10.0.0.2" not in out
        correlation_id, decoded = decode_response_frame(METADATA, version, out)
        assert correlation_id == 77 and {(b.host, b.port) for b in decoded.brokers} == {("gw", 29101), ("gw", 29102)}


def _old_metadata(version: int):  # type: ignore[no-untyped-def]
    m = _module(METADATA, version)
    cls = response_class(METADATA, version)
    brokers = tuple(m.MetadataResponseBroker(node_id=n, host=h, port=p, rack=None) for n, (h, p) in UPSTREAM.items())
    fields = {"brokers": brokers, "controller_id": 1, "topics": ()}
    if "throttle_time" in cls.__dataclass_fields__:
        fields["throttle_time"] = ZERO
    if "cluster_id" in cls.__dataclass_fields__:
        fields["cluster_id"] = "c"
    if "cluster_authorized_operations" in cls.__dataclass_fields__:
        fields["cluster_authorized_operations"] = -2147483648
    return cls(**fields)


def test_describe_cluster_brokers_are_rewritten() -> None:
    m = _module(DESCRIBE_CLUSTER, 1)
    response = m.DescribeClusterResponse(
        throttle_time=ZERO, error_code=ErrorCode.none, error_message=None, endpoint_type=1, cluster_id="c",
        controller_id=2, brokers=tuple(m.DescribeClusterBroker(broker_id=n, host=h, port=p, rack=None)
                                       for n, (h, p) in UPSTREAM.items()),
        cluster_authorized_operations=0)
    rewritten = rewrite_describe_cluster(response, address_of)
    assert [(b.broker_id, b.host, b.port) for b in rewritten.brokers] == [(1, "gw", 29101), (2, "gw", 29102)]
    frame = encode_response_frame(DESCRIBE_CLUSTER, 1, 3, response)
    assert b"10.0.0" not in rewrite_response_frame(DESCRIBE_CLUSTER, 1, frame, address_of)


def test_find_coordinator_transaction_answers_are_rewritten() -> None:
    m = _module(FIND_COORDINATOR, 4)
    response = m.FindCoordinatorResponse(throttle_time=ZERO, coordinators=(
        m.Coordinator(key="txn-a", node_id=2, host="10.0.0.2", port=9092, error_code=ErrorCode.none, error_message=None),
        m.Coordinator(key="txn-b", node_id=-1, host="", port=-1, error_code=ErrorCode.coordinator_not_available,
                      error_message=None)))
    rewritten = rewrite_find_coordinator(response, address_of)
    assert [(c.node_id, c.host, c.port) for c in rewritten.coordinators] == [(2, "gw", 29102), (-1, "", -1)]
    old = _module(FIND_COORDINATOR, 1).FindCoordinatorResponse(
        throttle_time=ZERO, error_code=ErrorCode.none, error_message=None, node_id=1, host="10.0.0.1", port=9092)
    assert (rewrite_find_coordinator(old, address_of).host, rewrite_find_coordinator(old, address_of).port) == ("gw", 29101)


# --- the state topic is marked internal (as Kafka marks __consumer_offsets) ---------------

def test_metadata_marks_the_state_topic_internal_and_nothing_else() -> None:
    m = _module(METADATA, 12)
    part = m.MetadataResponsePartition(error_code=ErrorCode.none, partition_index=0, leader_id=1, leader_epoch=0,
                                       replica_nodes=(1,), isr_nodes=(1,), offline_replicas=())
    topics = tuple(m.MetadataResponseTopic(error_code=ErrorCode.none, name=name, topic_id=uuid.uuid4(),
                                           is_internal=False, partitions=(part,),
                                           topic_authorized_operations=-2147483648)
                   for name in ("orders", "__kcoord_offsets"))
    response = m.MetadataResponse(throttle_time=ZERO, brokers=(), cluster_id="c", controller_id=1, topics=topics)
    frame = encode_response_frame(METADATA, 12, 9, response)
    _, out = decode_response_frame(METADATA, 12, rewrite_response_frame(METADATA, 12, frame, address_of,
                                                                         "__kcoord_offsets"))
    assert [(t.name, t.is_internal) for t in out.topics] == [("orders", False), ("__kcoord_offsets", True)]
    # Without a state topic named, topics pass unchanged.
    _, plain = decode_response_frame(METADATA, 12, rewrite_response_frame(METADATA, 12, frame, address_of))
    assert [t.is_internal for t in plain.topics] == [False, False]
    # v0 has no is_internal field: nothing to mark, and nothing breaks.
    m0 = _module(METADATA, 0)
    old = m0.MetadataResponse(brokers=(), topics=(m0.MetadataResponseTopic(
        error_code=ErrorCode.none, name="__kcoord_offsets", partitions=()),))
    assert rewrite_metadata(old, address_of, "__kcoord_offsets").topics == old.topics


def test_describe_topic_partitions_marks_the_state_topic_internal() -> None:
    from coordinator.protocol.rewrite import DESCRIBE_TOPIC_PARTITIONS
    m = _module(DESCRIBE_TOPIC_PARTITIONS, 0)
    topic = m.DescribeTopicPartitionsResponseTopic(error_code=ErrorCode.none, name="__kcoord_offsets",
                                                   topic_id=uuid.uuid4(), is_internal=False, partitions=(),
                                                   topic_authorized_operations=-2147483648)
    response = m.DescribeTopicPartitionsResponse(throttle_time=ZERO, topics=(topic,), next_cursor=None)
    frame = encode_response_frame(DESCRIBE_TOPIC_PARTITIONS, 0, 4, response)
    out = rewrite_response_frame(DESCRIBE_TOPIC_PARTITIONS, 0, frame, address_of, "__kcoord_offsets")
    assert decode_response_frame(DESCRIBE_TOPIC_PARTITIONS, 0, out)[1].topics[0].is_internal is True
