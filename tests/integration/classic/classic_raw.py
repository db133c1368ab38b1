"""One Kafka request/response over a plain socket, encoded with kcoord's protocol layer
(kio messages), for the few checks no client library can express (exact versions, the
exact error code a coordinator answers)."""
from __future__ import annotations

import importlib
import socket
import struct
from typing import Any

from coordinator.protocol.apis import (
    request_class, request_header_version, response_class, response_header_version,
)
from coordinator.protocol.codec import decode_body, encode_body
from coordinator.protocol.framing import RequestHeader, decode_response_header


def request_types(api_key: int, version: int):
    """The module holding the request class and its nested entity classes."""
    return importlib.import_module(request_class(api_key, version).__module__)


def _read(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise AssertionError("connection closed before the response was complete")
        buf += chunk
    return buf


def call(bootstrap: str, api_key: int, version: int, **fields: Any) -> Any:
    host, _, port = bootstrap.rpartition(":")
    body = request_class(api_key, version)(**fields)
    payload = RequestHeader(api_key, version, 11, "classic-test").encode(
        request_header_version(api_key, version)) + encode_body(body)
    with socket.create_connection((host, int(port)), timeout=15) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        head = _read(sock, 4)
        frame = head + _read(sock, struct.unpack(">i", head)[0])
    header, offset = decode_response_header(frame, response_header_version(api_key, version))
    assert header.correlation_id == 11
    return decode_body(response_class(api_key, version), frame, offset)
