"""Pipelining: many requests in flight on one connection come back in request order."""
from __future__ import annotations

import random
import socket
import struct
import time
from datetime import timedelta

from aiokafka.record.default_records import DefaultRecordBatchBuilder
from confluent_kafka import Consumer, TopicPartition

from coordinator.protocol import apis
from gateway_helpers import RunningGateway
from support.admin import create_topic
from support.raw_client import decode_response, encode_request, read_frame, request
from support.names import TestNames

METADATA_REQ = request(apis.METADATA, 12, topics=(), allow_auto_topic_creation=False,
                       include_topic_authorized_operations=False)
VERSIONS_REQ = request(apis.API_VERSIONS, 3, client_software_name="pipeline", client_software_version="1")


def _read_all(sock: socket.socket, count: int) -> list[bytes]:
    frames = []
    for _ in range(count):
        frame = read_frame(sock)
        assert frame is not None, f"connection closed after {len(frames)} of {count} responses"
        frames.append(frame)
    return frames


def test_thousand_interleaved_requests_in_one_write(gateway: RunningGateway) -> None:
    plan = [(apis.API_VERSIONS, 3) if i % 3 else (apis.METADATA, 12) for i in range(1000)]
    data = b"".join(encode_request(k, v, i, VERSIONS_REQ if k == apis.API_VERSIONS else METADATA_REQ)
                    for i, (k, v) in enumerate(plan))
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=30) as sock:
        sock.sendall(data)
        frames = _read_all(sock, len(plan))
    for i, ((api_key, version), frame) in enumerate(zip(plan, frames)):
        correlation_id, response = decode_response(api_key, version, frame)
        assert correlation_id == i
        if api_key == apis.METADATA:
            assert {b.port for b in response.brokers} == gateway.broker_ports()


def test_local_group_answers_keep_their_place_among_forwarded_ones(serving: RunningGateway) -> None:
    """Slow Heartbeats (served here) interleaved with forwarded Metadata and local ApiVersions."""
    rng = random.Random(7)
    plan = []
    for i in range(300):
        choice = rng.choice(["slow", "heartbeat", "metadata", "versions"])
        plan.append(choice)
    frames_out = []
    for i, choice in enumerate(plan):
        if choice in ("slow", "heartbeat"):
            hb = request(apis.HEARTBEAT, 4, group_id=f"{choice}-g", generation_id=1, member_id="m",
                         group_instance_id=None)
            frames_out.append(encode_request(apis.HEARTBEAT, 4, i, hb))
        elif choice == "metadata":
            frames_out.append(encode_request(apis.METADATA, 12, i, METADATA_REQ))
        else:
            frames_out.append(encode_request(apis.API_VERSIONS, 3, i, VERSIONS_REQ))
    with socket.create_connection(("127.0.0.1", serving.port), timeout=30) as sock:
        sock.sendall(b"".join(frames_out))
        frames = _read_all(sock, len(plan))
    for i, (choice, frame) in enumerate(zip(plan, frames)):
        api_key, version = {"metadata": (apis.METADATA, 12), "versions": (apis.API_VERSIONS, 3)}.get(
            choice, (apis.HEARTBEAT, 4))
        correlation_id, response = decode_response(api_key, version, frame)
        assert correlation_id == i
        if api_key == apis.HEARTBEAT:
            assert response.error_code == 27


def test_produce_acks_zero_gets_no_response_and_does_not_stall_later_ones(gateway: RunningGateway,
                                                                          names: TestNames) -> None:
    topic = names.topic()
    # Wait until Metadata shows the partition: on Kafka the broker learns a new partition a few
    # ms after CreateTopics returns, and it closes an acks=0 connection on UNKNOWN_TOPIC_OR_PARTITION.
    create_topic(gateway.bootstrap, topic, 1, timeout=30)
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 16)
    builder.append(0, timestamp=int(time.time() * 1000), key=None, value=b"fire-and-forget", headers=[])
    produce = request(apis.PRODUCE, 9, transactional_id=None, acks=0, timeout=timedelta(seconds=10),
                      topic_data=(_topic_data(topic, bytes(builder.build())),))
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=30) as sock:
        sock.sendall(encode_request(apis.PRODUCE, 9, 1, produce)
                     + encode_request(apis.METADATA, 12, 2, METADATA_REQ)
                     + encode_request(apis.API_VERSIONS, 3, 3, VERSIONS_REQ))
        ids = [struct.unpack_from(">i", f, 4)[0] for f in _read_all(sock, 2)]
        assert ids == [2, 3]
    consumer = Consumer({"bootstrap.servers": gateway.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 20
        message = None
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
        assert message is not None and message.error() is None and message.value() == b"fire-and-forget"
    finally:
        consumer.close()


def _topic_data(topic: str, records: bytes):  # type: ignore[no-untyped-def]
    import sys
    module = sys.modules[type(request(apis.PRODUCE, 9, transactional_id=None, acks=0, timeout=timedelta(0),
                                      topic_data=())).__module__]
    return module.TopicProduceData(name=topic, partition_data=(module.PartitionProduceData(index=0, records=records),))
