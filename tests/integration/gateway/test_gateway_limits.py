"""Gateway limits against a real gateway over Tansu, with raw sockets: a client that never
reads its answers, max.connections.per.ip, connections.max.idle.ms on a half-sent frame,
max.connection.creation.rate. Each test runs its own gateway with small limits."""
from __future__ import annotations

import logging
import socket
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from confluent_kafka.admin import AdminClient, NewTopic

from coordinator.config import CoordinatorConfig
from coordinator.gateway import produce_check
from coordinator.protocol import apis
from coordinator import metrics
from gateway_helpers import STATE_TOPIC, LoopThread, RunningGateway, start_gateway
from support.raw_client import assert_closed, call, encode_request, read_frame, request, request_types
from support.tansu import TansuBroker
from support.wait import wait_until

VERSIONS = request(apis.API_VERSIONS, 3, client_software_name="limits", client_software_version="1")
METADATA = request(apis.METADATA, 12, topics=(), allow_auto_topic_creation=False,
                   include_topic_authorized_operations=False)


@pytest.fixture
def limited(gw_loop: LoopThread, gw_tansu: TansuBroker, request: pytest.FixtureRequest) -> Iterator[RunningGateway]:
    """A gateway with the settings of the test's ``limits`` marker-free parameter."""
    running = start_gateway(gw_loop, gw_tansu.bootstrap, config=CoordinatorConfig(**request.param))
    yield running
    running.close()


def _served(gateway: RunningGateway, timeout: float = 5.0) -> None:
    """A fresh client gets ApiVersions (local) and Metadata (forwarded) within ``timeout``."""
    started = time.monotonic()
    address = ("127.0.0.1", gateway.port)
    with socket.create_connection(address, timeout=timeout) as sock:
        assert call(sock, apis.API_VERSIONS, 3, VERSIONS).error_code == 0
        assert call(sock, apis.METADATA, 12, METADATA, correlation_id=2).brokers
    assert time.monotonic() - started < timeout


def _metric(counter: Any) -> float:
    return counter._value.get()


def _rss_mib() -> float:
    """This process's resident set (the gateway runs in it, on the loop thread)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


@pytest.mark.parametrize("limited", [dict(connections_max_idle_ms=4000, max_inflight_requests_per_connection=200,
                                          max_buffered_response_bytes_per_connection=4 << 20)], indirect=True)
def test_a_client_that_never_reads_is_bounded_then_closed_while_others_are_served(
        limited: RunningGateway, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kcoord.gateway")
    closed_idle = _metric(metrics.GATEWAY_CONNECTIONS_CLOSED.labels(reason="idle"))
    # 40-byte requests whose answers are ~15 times larger: without backpressure kcoord would
    # read all 200,000 and buffer ~120 MB of answers for this one client.
    frame = encode_request(apis.API_VERSIONS, 3, 1, VERSIONS)
    total = 200_000
    rss_before = _rss_mib()
    hog = socket.create_connection(("127.0.0.1", limited.port), timeout=10)
    hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    hog.settimeout(0.5)
    sent = 0
    chunk = frame * 1000
    try:
        while sent < total:
            try:
                hog.sendall(chunk)        # blocks once kcoord stops reading and the kernel fills
            except socket.timeout:
                break
            sent += 1000
        assert sent < total, "kcoord kept reading a client that never reads its answers"
        hog_port = hog.getsockname()[1]   # not another client's (a stray one may reuse the port)
        connection = limited.loop.call(lambda: next(c for c in limited.gateway.connections if c.peer[1] == hog_port))

        def held() -> tuple[int, int, int]:
            transport = connection.transport
            buffered = transport.get_write_buffer_size() if transport is not None else 0
            return len(connection._queue), connection.held + buffered, connection._paused

        queued, buffered, paused = limited.loop.call(held)
        assert queued <= 200 and buffered <= 4 << 20, (queued, buffered)
        # The process as a whole: answers for 200,000 requests would be ~120 MB.
        assert _rss_mib() - rss_before < 40, (rss_before, _rss_mib())
        _served(limited)   # everyone else is served meanwhile
        # connections.max.idle.ms: the hog drains nothing, so it is closed (sweep included).
        wait_until(lambda: limited.loop.call(lambda: connection not in limited.gateway.connections), 10, 0.05,
                   "the non-reading client closed by the idle sweep")
        assert _metric(metrics.GATEWAY_CONNECTIONS_CLOSED.labels(reason="idle")) == closed_idle + 1
        line = next(r.getMessage() for r in caplog.records if "idle for connections.max.idle.ms" in r.getMessage())
        assert "its answers are not being read" in line, line
        _served(limited)
    finally:
        hog.close()


@pytest.mark.parametrize("limited", [dict(max_connections_per_ip=2)], indirect=True)
def test_connections_over_max_connections_per_ip_are_closed(limited: RunningGateway) -> None:
    rejected = _metric(metrics.GATEWAY_CONNECTIONS_REJECTED.labels(reason="max_connections_per_ip"))
    address = ("127.0.0.1", limited.port)
    first, second = (socket.create_connection(address, timeout=10) for _ in range(2))
    try:
        for sock in (first, second):
            assert call(sock, apis.API_VERSIONS, 3, VERSIONS).error_code == 0
        with socket.create_connection(address, timeout=10) as third:
            assert_closed(third)
        assert _metric(metrics.GATEWAY_CONNECTIONS_REJECTED.labels(reason="max_connections_per_ip")) == rejected + 1
        first.close()
        # The slot comes back once kcoord has seen the close.
        wait_until(lambda: limited.loop.call(lambda: limited.gateway.limits.per_ip.get("127.0.0.1")) == 1, 10,
                   0.02, "the closed connection released")
        _served(limited)
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize("limited", [dict(connections_max_idle_ms=400)], indirect=True)
def test_a_half_sent_frame_followed_by_silence_is_closed_after_the_idle_time(
        limited: RunningGateway, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kcoord.gateway")
    with socket.create_connection(("127.0.0.1", limited.port), timeout=10) as sock:
        started = time.monotonic()
        sock.sendall(encode_request(apis.API_VERSIONS, 3, 1, VERSIONS)[:9])
        assert_closed(sock, timeout=10)
        elapsed = time.monotonic() - started
    assert 0.4 <= elapsed < 5, elapsed
    line = next(r.getMessage() for r in caplog.records if "idle for connections.max.idle.ms=400" in r.getMessage())
    assert "half-sent frame of 9 bytes" in line, line
    # A client that keeps talking is not idle, however long it stays.
    with socket.create_connection(("127.0.0.1", limited.port), timeout=10) as sock:
        deadline = time.monotonic() + 1.2
        correlation_id = 0
        while time.monotonic() < deadline:
            correlation_id += 1
            assert call(sock, apis.API_VERSIONS, 3, VERSIONS, correlation_id=correlation_id).error_code == 0
            time.sleep(0.1)   # a client's pace between requests, not a wait for a condition


@pytest.mark.parametrize("limited", [dict(max_connection_creation_rate=5)], indirect=True)
def test_connections_over_the_creation_rate_are_closed(limited: RunningGateway) -> None:
    rejected = _metric(metrics.GATEWAY_CONNECTIONS_REJECTED.labels(reason="max_connection_creation_rate"))
    started = time.monotonic()
    served = refused = 0
    for i in range(15):
        with socket.create_connection(("127.0.0.1", limited.port), timeout=10) as sock:
            sock.sendall(encode_request(apis.API_VERSIONS, 3, i, VERSIONS))
            try:
                frame = read_frame(sock)
            except ConnectionResetError:
                frame = None
            if frame is None:
                refused += 1
            else:
                served += 1
    elapsed = time.monotonic() - started
    # A bucket of 5, refilled at 5/s: at most 5 + 5 * elapsed (+1 for rounding) get through.
    assert 5 <= served <= 6 + 5 * elapsed, (served, elapsed)
    assert refused == 15 - served and refused >= 1
    assert _metric(metrics.GATEWAY_CONNECTIONS_REJECTED.labels(
        reason="max_connection_creation_rate")) == rejected + refused


@pytest.mark.parametrize("limited", [dict(max_decoded_request_bytes=2048)], indirect=True)
def test_max_decoded_request_bytes_closes_big_decoded_requests_and_lets_big_produce_through(
        limited: RunningGateway, gw_tansu: TansuBroker, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A request kcoord walks or decodes is bounded well below socket.request.max.bytes (the
    walk runs on the event loop); a Produce is not: above the bound it is read within
    produce_check.MAX_NAMED_PARTITIONS topics, partitions and tagged fields, then walked; it is
    never decoded, so one naming the state topic closes the connection."""
    caplog.set_level(logging.WARNING, logger="kcoord.gateway")
    frames = _metric(metrics.GATEWAY_BAD_REQUESTS.labels(reason="frame"))
    big_metadata = request(apis.METADATA, 12, topics=tuple(
        request_types(apis.METADATA, 12).MetadataRequestTopic(topic_id=None, name=f"topic-{i:05d}")
        for i in range(300)), allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    with socket.create_connection(("127.0.0.1", limited.port), timeout=10) as sock:
        sock.sendall(encode_request(apis.METADATA, 12, 3, big_metadata))
        assert_closed(sock)
    assert _metric(metrics.GATEWAY_BAD_REQUESTS.labels(reason="frame")) == frames + 1
    line = next(r.getMessage() for r in caplog.records if "max_decoded_request_bytes=2048" in r.getMessage())
    assert "metadata(3) v12" in line and "correlation_id=3" in line, line
    _served(limited)

    topic = f"big-produce-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": gw_tansu.bootstrap})   # kept alive until the result
    admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=30)[topic].result(30)
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 16)
    builder.append(0, timestamp=int(time.time() * 1000), key=None, value=b"v" * 4096, headers=[])
    records = bytes(builder.build())
    cls = type(request(apis.PRODUCE, 9, transactional_id=None, acks=-1, timeout=timedelta(0), topic_data=()))
    m = sys.modules[cls.__module__]

    def produce(name: str) -> Any:
        return cls(transactional_id=None, acks=-1, timeout=timedelta(seconds=10), topic_data=(
            m.TopicProduceData(name=name, partition_data=(m.PartitionProduceData(index=0, records=records),)),))

    response = call(("127.0.0.1", limited.port), apis.PRODUCE, 9, produce(topic))
    (partition,) = response.responses[0].partition_responses
    assert partition.error_code == 0 and partition.base_offset >= 0
    with socket.create_connection(("127.0.0.1", limited.port), timeout=10) as sock:
        sock.sendall(encode_request(apis.PRODUCE, 9, 4, produce(STATE_TOPIC)))
        assert_closed(sock)
    monkeypatch.setattr(produce_check, "MAX_NAMED_PARTITIONS", 4)      # read at each request
    many = cls(transactional_id=None, acks=-1, timeout=timedelta(seconds=10), topic_data=(m.TopicProduceData(
        name=topic, partition_data=tuple(m.PartitionProduceData(index=i, records=records) for i in range(4))),))
    bodies = _metric(metrics.GATEWAY_BAD_REQUESTS.labels(reason="body"))
    with socket.create_connection(("127.0.0.1", limited.port), timeout=10) as sock:
        sock.sendall(encode_request(apis.PRODUCE, 9, 5, many))
        assert_closed(sock)
    assert _metric(metrics.GATEWAY_BAD_REQUESTS.labels(reason="body")) == bodies + 1
    assert any("more than 4 topics, partitions and tagged fields" in r.getMessage() for r in caplog.records)
    _served(limited)
