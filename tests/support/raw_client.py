"""One Kafka request/response over a plain socket, encoded with kcoord's protocol layer
(kio messages), for the checks no client library can express: exact versions, the exact
error code a coordinator answers, malformed frames, what a client receives byte for byte."""
from __future__ import annotations

import importlib
import io
import socket
import struct
from datetime import timedelta
from typing import Any

from coordinator.protocol.apis import (
    CREATE_TOPICS,
    METADATA,
    request_class,
    request_header_version,
    response_class,
    response_header_version,
)
from coordinator.protocol.codec import decode_body, encode_body
from coordinator.protocol.framing import RequestHeader, decode_response_header


def request(api_key: int, version: int, **fields: Any) -> Any:
    return request_class(api_key, version)(**fields)


def request_types(api_key: int, version: int):
    """The module holding the request class and its nested entity classes."""
    return importlib.import_module(request_class(api_key, version).__module__)


def encode_request(api_key: int, version: int, correlation_id: int, body: Any, client_id: str = "raw-test") -> bytes:
    payload = RequestHeader(api_key, version, correlation_id, client_id).encode(
        request_header_version(api_key, version))
    payload += body if isinstance(body, bytes) else encode_body(body)
    return struct.pack(">i", len(payload)) + payload


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


def call(address: str | tuple[str, int] | socket.socket, api_key: int, version: int, body: Any,
         correlation_id: int = 1, client_id: str = "raw-test") -> Any:
    """One round trip on a raw socket (a new connection for an address, "host:port" or a
    tuple); the response must carry the request's correlation id."""
    if isinstance(address, str):
        host, _, port = address.rpartition(":")
        address = (host, int(port))
    sock = address if isinstance(address, socket.socket) else socket.create_connection(address, timeout=15)
    try:
        sock.sendall(encode_request(api_key, version, correlation_id, body, client_id))
        frame = read_frame(sock)
        assert frame is not None, f"connection closed instead of answering api {api_key} v{version}"
        got_id, response = decode_response(api_key, version, frame)
        assert got_id == correlation_id, f"correlation id {got_id}, sent {correlation_id}"
        return response
    finally:
        if not isinstance(address, socket.socket):
            sock.close()


def call_with(address: str | tuple[str, int], api_key: int, version: int, **fields: Any) -> Any:
    """``call`` with the request built from keyword fields."""
    return call(address, api_key, version, request(api_key, version, **fields))


def assert_closed(sock: socket.socket, timeout: float = 10.0) -> None:
    """The peer closed the connection (EOF or reset) within ``timeout``; no response came."""
    sock.settimeout(timeout)
    try:
        data = sock.recv(65536)
    except ConnectionResetError:
        return
    assert data == b"", f"expected the connection to be closed, got {len(data)} bytes"


def create_topics_request(topics: list[tuple[str, int, int]], validate_only: bool = False,
                          timeout_s: float = 30) -> Any:
    """A CreateTopics v7 body for (name, num_partitions, replication_factor) entries, with
    no assignments or configs: the shape the admin-limit checks and probes send raw."""
    m = request_types(CREATE_TOPICS, 7)
    return m.CreateTopicsRequest(timeout=timedelta(seconds=timeout_s), validate_only=validate_only, topics=tuple(
        m.CreatableTopic(name=name, num_partitions=n, replication_factor=rf, assignments=(), configs=())
        for name, n, rf in topics))


def partition_count(bootstrap: str, topic: str) -> int:
    """The topic's partition count in a Metadata v12 answer (0: not listed, or an error)."""
    m = request_types(METADATA, 12)
    response = call(bootstrap, METADATA, 12, m.MetadataRequest(
        topics=(m.MetadataRequestTopic(name=topic, topic_id=None),), allow_auto_topic_creation=False,
        include_topic_authorized_operations=False))
    (answer,) = response.topics
    return len(answer.partitions) if answer.error_code == 0 else 0
