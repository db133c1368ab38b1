"""Bad input on raw sockets: Kafka's answer (an error response or a clean close), never a crash.

After each case the test checks that the connection was closed (or got the error
response), that the gateway logged one line naming what was wrong, and that a fresh
client still gets served (locally and through upstream).
"""
from __future__ import annotations

import logging
import socket
import struct
import time
from datetime import timedelta
from typing import Any

import pytest

from kio.schema.errors import ErrorCode

from coordinator.config import CoordinatorConfig
from coordinator.protocol import apis
from coordinator.protocol.apis import response_class
from coordinator import metrics
from coordinator.protocol.framing import RequestHeader
from gateway_helpers import LoopThread, RunningGateway, start_gateway
from support.raw_client import assert_closed, call, decode_response, encode_request, read_frame, request


def _connect(gateway: RunningGateway) -> socket.socket:
    return socket.create_connection(("127.0.0.1", gateway.port), timeout=10)


def assert_still_serving(gateway: RunningGateway) -> None:
    """A fresh client gets ApiVersions (local) and Metadata (forwarded, rewritten)."""
    address = ("127.0.0.1", gateway.port)
    versions = call(address, apis.API_VERSIONS, 3,
                    request(apis.API_VERSIONS, 3, client_software_name="t", client_software_version="1"))
    assert versions.error_code == 0
    metadata = call(address, apis.METADATA, 12, request(apis.METADATA, 12, topics=(), allow_auto_topic_creation=False,
                                                        include_topic_authorized_operations=False))
    assert {b.port for b in metadata.brokers} == gateway.broker_ports()


def _raw(api_key: int, version: int, correlation_id: int, body: bytes, header_version: int = 1) -> bytes:
    payload = RequestHeader(api_key, version, correlation_id, "bad").encode(header_version) + body
    return struct.pack(">i", len(payload)) + payload


# case -> (bytes sent, what the log line must say)
BAD_FRAMES = {
    "size above socket.request.max.bytes": (struct.pack(">i", 104_857_601), "frame size 104857601 is above"),
    "negative size": (struct.pack(">i", -5) + b"xxxxx", "frame size -5 is negative"),
    "truncated header": (struct.pack(">i", 3) + b"\x00\x03\x00", "request header truncated"),
    "client id runs past a forwarded frame": (struct.pack(">i", 10) + struct.pack(">hhih", 1, 12, 9, 200),
                                              "client id of 200 bytes runs past"),
    "client id runs past a rewritten frame": (struct.pack(">i", 10) + struct.pack(">hhih", 3, 12, 9, 200),
                                              "client id of 200 bytes runs past"),
    "unknown api key": (_raw(999, 0, 9, b""), "unknown API key 999"),
    "removed inter-broker api (LeaderAndIsr)": (_raw(4, 5, 9, b""), "unknown API key 4"),
    "unsupported Metadata version": (_raw(apis.METADATA, 99, 9, b"", header_version=2),
                                     "unsupported version 99 of metadata (supported 0-12)"),
    # Produce v10+ is forwarded since issue 16 (KIP-951 endpoints rewritten), up to the
    # upstream's own maximum: a version above every served one is refused by name.
    "Produce above every forwarded version": (_raw(apis.PRODUCE, 99, 9, b"\x00", header_version=2),
                                              "unsupported version 99 of produce (supported 3-"),
    "Produce v10 body that does not parse": (_raw(apis.PRODUCE, 10, 9, b"\x00", header_version=2),
                                             "ProduceRequest v10: field acks: needs 2 bytes"),
    "SASL is not served": (_raw(apis.SASL_HANDSHAKE, 1, 9, b"\x00\x05PLAIN"), "PLAINTEXT only"),
    "group API the service does not serve": (_raw(apis.OFFSET_COMMIT, 8, 9, b"\x00", header_version=2),
                                             "not served by the group service"),
    "garbage FindCoordinator body": (_raw(apis.FIND_COORDINATOR, 2, 9, b"\x7f\xffgarbage"), "does not parse"),
    "FindCoordinator body with trailing bytes": (_raw(apis.FIND_COORDINATOR, 2, 9, b"\x00\x01g\x00trailing"),
                                                 "bytes left after the body"),
    "garbage ApiVersions v3 body": (_raw(apis.API_VERSIONS, 3, 9, b"\xff\xff\xff", header_version=2),
                                    "does not parse"),
    # Forwarded bodies are walked too: kcoord never passes upstream what Kafka would refuse.
    "forwarded Metadata body with a length bomb": (
        _raw(apis.METADATA, 12, 9, b"\xff\xff\xff\xff\x0f\x00\x00\x00", header_version=2),
        "body does not parse: metadata v12: field topics: tried to allocate a collection of size 4294967294"),
    "truncated forwarded ListOffsets body": (_raw(apis.LIST_OFFSETS, 5, 9, b"\xff\xff\xff\xff\x00"),
                                             "body does not parse: list_offsets v5"),
}


@pytest.mark.parametrize("case", list(BAD_FRAMES))
def test_bad_frame_closes_connection_and_gateway_keeps_serving(
        case: str, serving: RunningGateway, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="kcoord.gateway")
    data, what = BAD_FRAMES[case]
    with _connect(serving) as sock:
        local_port = sock.getsockname()[1]
        sock.sendall(data)
        assert_closed(sock)
    lines = [r.getMessage() for r in caplog.records if r.name == "kcoord.gateway"]
    assert len(lines) == 1 and f"closing connection from 127.0.0.1:{local_port} on bootstrap" in lines[0], lines
    assert what in lines[0], lines[0]
    assert_still_serving(serving)


def test_garbage_body_of_a_group_api(serving: RunningGateway, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="kcoord.gateway")
    with _connect(serving) as sock:
        sock.sendall(_raw(apis.HEARTBEAT, 4, 41, b"\x05ab", header_version=2))
        assert_closed(sock)
    line = next(r.getMessage() for r in caplog.records if "closing connection" in r.getMessage())
    assert "heartbeat(12) v4" in line and "correlation_id=41" in line and "does not parse" in line
    assert_still_serving(serving)


def test_service_failure_closes_only_that_connection(serving: RunningGateway) -> None:
    with _connect(serving) as sock:
        heartbeat = request(apis.HEARTBEAT, 4, group_id="explode", generation_id=1, member_id="m",
                            group_instance_id=None)
        sock.sendall(encode_request(apis.HEARTBEAT, 4, 1, heartbeat))
        assert_closed(sock)
    assert_still_serving(serving)


def test_api_versions_v99_gets_unsupported_version_in_v0_format(serving: RunningGateway) -> None:
    with _connect(serving) as sock:
        # A newer client: header v2 and a body we cannot know; Kafka answers, does not close.
        sock.sendall(_raw(apis.API_VERSIONS, 99, 5, b"\x03new\x021\x00\x00", header_version=2))
        frame = read_frame(sock)
        assert frame is not None
        correlation_id, response = decode_response(apis.API_VERSIONS, 0, frame)
        assert correlation_id == 5 and response.error_code == 35
        assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(18, 0, 5)]
        # The client retries at v3 on the same connection.
        retry = call(sock, apis.API_VERSIONS, 3, request(apis.API_VERSIONS, 3, client_software_name="new",
                                                          client_software_version="1"), correlation_id=6)
        assert retry.error_code == 0 and any(k.api_key == apis.HEARTBEAT for k in retry.api_keys)


def test_api_versions_with_illegal_software_name_is_invalid_request(serving: RunningGateway) -> None:
    with _connect(serving) as sock:
        response = call(sock, apis.API_VERSIONS, 3, request(apis.API_VERSIONS, 3, client_software_name="bad name!",
                                                            client_software_version="1"))
        assert response.error_code == 42
        assert call(sock, apis.API_VERSIONS, 0, request(apis.API_VERSIONS, 0), correlation_id=2).error_code == 0


def test_requests_before_a_bad_one_are_answered_then_closed(serving: RunningGateway) -> None:
    good = [encode_request(apis.API_VERSIONS, 2, i, request(apis.API_VERSIONS, 2)) for i in (1, 2)]
    metadata = encode_request(apis.METADATA, 1, 3, request(apis.METADATA, 1, topics=()))
    with _connect(serving) as sock:
        sock.sendall(good[0] + metadata + good[1] + _raw(999, 0, 4, b"") + good[0])
        answered = []
        while (frame := read_frame(sock)) is not None:
            answered.append(struct.unpack_from(">i", frame, 4)[0])
        assert answered == [1, 3, 2]


def test_upstream_loss_closes_client_connections_not_the_gateway(gw_loop: LoopThread, tmp_path: Any) -> None:
    from support.tansu import start_tansu
    from gateway_helpers import free_ports
    broker = start_tansu(free_ports(1), log_dir=tmp_path)
    running = start_gateway(gw_loop, broker.bootstrap)
    try:
        sock = _connect(running)
        metadata = request(apis.METADATA, 12, topics=(), allow_auto_topic_creation=False,
                           include_topic_authorized_operations=False)
        assert call(sock, apis.METADATA, 12, metadata).brokers
        broker.kill()
        assert_closed(sock)   # the client reconnects and retries, as after a broker failure
        sock.close()
        # The gateway still answers what it serves itself.
        versions = call(("127.0.0.1", running.port), apis.API_VERSIONS, 2, request(apis.API_VERSIONS, 2))
        assert versions.error_code == 0
        # A forwarded request now fails cleanly (closed), it does not hang or crash anything.
        with _connect(running) as again:
            again.sendall(encode_request(apis.METADATA, 12, 1, metadata))
            assert_closed(again)
    finally:
        running.close()
        if broker.is_running():
            broker.stop()


class ListGroupsService:
    """Serves ListGroups v0-5 as the core does: iterating StatesFilter (a None raises)."""

    api_versions = {apis.LIST_GROUPS: (0, 5)}

    def __init__(self) -> None:
        self.calls = 0

    def partition_for(self, group_id: str) -> int:
        return 0

    async def handle(self, api_key: int, api_version: int, req: Any, client: Any) -> Any:
        self.calls += 1
        states = [s.lower() for s in req.states_filter]   # TypeError on None, as in every shard
        assert states == []
        return response_class(api_key, api_version)(throttle_time=timedelta(0), error_code=ErrorCode.none,
                                                    groups=())


def test_list_groups_v5_with_null_states_filter_closes_before_the_service(
        gw_loop: LoopThread, gw_tansu: Any, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 10: this exact frame reached the core and raised TypeError in all 50 shards."""
    caplog.set_level(logging.WARNING, logger="kcoord.gateway")
    service = ListGroupsService()
    running = start_gateway(gw_loop, gw_tansu.bootstrap, service)
    try:
        # header v2 (api 16, v5, correlation 7, client id "bad", no tags); body: StatesFilter
        # null (compact array length 0), TypesFilter empty (1), no tags.
        with _connect(running) as sock:
            sock.sendall(_raw(apis.LIST_GROUPS, 5, 7, b"\x00\x01\x00", header_version=2))
            assert_closed(sock)
        assert service.calls == 0
        line = next(r.getMessage() for r in caplog.records if "closing connection" in r.getMessage())
        assert "list_groups(16) v5" in line and "states_filter" in line and "correlation_id=7" in line, line
        # The same request with an empty filter is served.
        with _connect(running) as sock:
            sock.sendall(_raw(apis.LIST_GROUPS, 5, 8, b"\x01\x01\x00", header_version=2))
            frame = read_frame(sock)
            assert frame is not None and decode_response(apis.LIST_GROUPS, 5, frame)[1].error_code == 0
        assert service.calls == 1
    finally:
        running.close()


def test_bad_frame_lines_are_rate_limited_and_counted(gw_loop: LoopThread, gw_tansu: Any,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="kcoord.gateway")
    running = start_gateway(gw_loop, gw_tansu.bootstrap, config=CoordinatorConfig(bad_request_log_rate_per_second=2))
    counter = metrics.GATEWAY_BAD_REQUESTS.labels(reason="unknown_api")
    before = counter._value.get()
    try:
        started = time.monotonic()
        for i in range(8):
            with _connect(running) as sock:
                sock.sendall(_raw(999, 0, i, b""))
                assert_closed(sock)
        elapsed = time.monotonic() - started
        lines = [r.getMessage() for r in caplog.records if "closing connection" in r.getMessage()]
        # A burst of one second's worth (2), then one more per token that came back: 2 per
        # second of the time the 8 frames took.
        assert 2 <= len(lines) <= min(8, 2 + int(2 * elapsed)), (lines, elapsed)
        assert [line.split("correlation_id=")[1].rstrip("]") for line in lines[:2]] == ["0", "1"], lines
        assert counter._value.get() - before == 8
        time.sleep(0.6)   # the rate is per second of wall time: this is the condition itself
        with _connect(running) as sock:
            sock.sendall(_raw(999, 0, 99, b""))
            assert_closed(sock)
        last = [r.getMessage() for r in caplog.records if "closing connection" in r.getMessage()][-1]
        assert "correlation_id=99" in last and "similar lines suppressed)" in last, last
    finally:
        running.close()
