"""Helpers for the gateway tests: a real Gateway on its own event loop thread, raw protocol I/O.

The gateway runs on a loop in a background thread so that blocking clients
(confluent-kafka, kafka-python, raw sockets) can be used from plain test functions.
Ports come from 29100-29149 (this suite's share of the loopback range); the benchmark
uses 29150-29199.
"""
from __future__ import annotations

import asyncio
import io
import socket
import struct
import threading
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from support import ports

from coordinator.gateway import Gateway
from coordinator.protocol import apis
from coordinator.protocol.apis import request_class, request_header_version, response_class, response_header_version
from coordinator.protocol.codec import decode_body, encode_body
from coordinator.protocol.framing import RequestHeader, decode_response_header

T = TypeVar("T")
PORTS = range(29100, 29150)
STATE_TOPIC = "__kcoord_gateway_test_state"
STATE_PARTITIONS = 3


def free_ports(count: int = 1) -> int:
    """The first of ``count`` consecutive free ports in this suite's range."""
    return ports.free_block(PORTS, count)


def java_hash(text: str) -> int:
    units = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


class PartitionOnlyService:
    """A GroupService that serves no API: only partition_for, as Kafka computes it."""

    api_versions: dict[int, tuple[int, int]] = {}

    def __init__(self, partitions: int = STATE_PARTITIONS) -> None:
        self.partitions = partitions

    def partition_for(self, group_id: str) -> int:
        h = java_hash(group_id)
        return 0 if h == -(1 << 31) else abs(h) % self.partitions

    async def handle(self, api_key: int, api_version: int, request: Any, client: Any) -> Any:
        raise AssertionError(f"api {api_key} was not advertised and must not reach the service")


class HeartbeatService(PartitionOnlyService):
    """Serves Heartbeat only: REBALANCE_IN_PROGRESS for everyone; group "explode" raises."""

    api_versions = {apis.HEARTBEAT: (0, 4)}

    async def handle(self, api_key: int, api_version: int, req: Any, client: Any) -> Any:
        if req.group_id == "explode":
            raise RuntimeError("service failure injected by the test")
        if req.group_id.startswith("slow"):
            await asyncio.sleep(0.05)   # a handler that answers after later requests are ready
        fields: dict[str, Any] = {"error_code": ErrorCode.rebalance_in_progress}
        if api_version >= 1:
            fields["throttle_time"] = timedelta(0)
        return response_class(api_key, api_version)(**fields)


class LoopThread:
    """An asyncio loop in a daemon thread; ``run(coro)`` waits for its result."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="gateway-loop", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable[[], T], timeout: float = 10.0) -> T:
        async def wrapper() -> T:
            return fn()
        return self.run(wrapper(), timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class RunningGateway:
    def __init__(self, loop: LoopThread, gateway: Gateway) -> None:
        self.loop = loop
        self.gateway = gateway
        self.port = gateway.listen_port
        self.bootstrap = f"127.0.0.1:{self.port}"

    def broker_ports(self) -> set[int]:
        return {port for _, port in self.loop.call(self.gateway.node_addresses).values()}

    def close(self) -> None:
        self.loop.run(self.gateway.close())


def start_gateway(loop: LoopThread, upstream: str, service: Any = None, *, state_topic: str = STATE_TOPIC,
                  **kwargs: Any) -> RunningGateway:
    port = free_ports(4)   # bootstrap, one broker, room for a late one

    async def make() -> Gateway:
        gateway = Gateway(service or PartitionOnlyService(), upstream, f"127.0.0.1:{port}", state_topic, **kwargs)
        await gateway.start()
        return gateway

    return RunningGateway(loop, loop.run(make()))


# --- raw protocol helpers ----------------------------------------------------------------

def encode_request(api_key: int, version: int, correlation_id: int, body: Any, client_id: str = "raw-test") -> bytes:
    payload = RequestHeader(api_key, version, correlation_id, client_id).encode(
        request_header_version(api_key, version))
    payload += body if isinstance(body, bytes) else encode_body(body)
    return struct.pack(">i", len(payload)) + payload


def request(api_key: int, version: int, **fields: Any) -> Any:
    return request_class(api_key, version)(**fields)


def read_frame(sock: socket.socket) -> bytes | None:
    """One framed response, or None if the peer closed the connection."""
    head = _read_exactly(sock, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    body = _read_exactly(sock, size)
    return None if body is None else head + body


def _read_exactly(sock: socket.socket, n: int) -> bytes | None:
    buf = io.BytesIO()
    while buf.tell() < n:
        chunk = sock.recv(n - buf.tell())
        if not chunk:
            return None
        buf.write(chunk)
    return buf.getvalue()


def decode_response(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    header, offset = decode_response_header(frame, response_header_version(api_key, version))
    return header.correlation_id, decode_body(response_class(api_key, version), frame, offset)


def call(address: tuple[str, int] | socket.socket, api_key: int, version: int, body: Any,
         correlation_id: int = 1) -> Any:
    """One request/response round trip on a raw socket (a new one for an address)."""
    sock = address if isinstance(address, socket.socket) else socket.create_connection(address, timeout=10)
    try:
        sock.sendall(encode_request(api_key, version, correlation_id, body))
        frame = read_frame(sock)
        assert frame is not None, f"connection closed instead of answering api {api_key} v{version}"
        got_id, response = decode_response(api_key, version, frame)
        assert got_id == correlation_id
        return response
    finally:
        if not isinstance(address, socket.socket):
            sock.close()


def assert_closed(sock: socket.socket, timeout: float = 10.0) -> None:
    """The peer closed the connection (EOF or reset) within ``timeout``; no response came."""
    sock.settimeout(timeout)
    try:
        data = sock.recv(65536)
    except ConnectionResetError:
        return
    assert data == b"", f"expected the connection to be closed, got {len(data)} bytes"

