"""Request frames built once with kio, responses read back, correlation ids patched in place.

A load generator must spend its CPU on sending, not on encoding: every request a
simulated client sends repeatedly (a steady heartbeat) is encoded once into a
``FrameTemplate`` and only its correlation id is rewritten per send (4 bytes at a fixed
offset, Kafka's request header ``api_key int16, api_version int16, correlation_id int32``).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from coordinator.protocol.apis import (
    request_class,
    request_header_version,
    response_class,
    response_header_version,
)
from coordinator.protocol.codec import decode_body, encode_body
from coordinator.protocol.framing import RequestHeader

SIZE = struct.Struct(">i")
CORRELATION = struct.Struct(">i")
CORRELATION_OFFSET = 8          # size(4) api_key(2) api_version(2)
CLIENT_ID = "kcoord-loadgen"

CONSUMER_GROUP_HEARTBEAT = 68
CONSUMER_GROUP_DESCRIBE = 69
JOIN_GROUP = 11
SYNC_GROUP = 14
HEARTBEAT = 12
LEAVE_GROUP = 13


def encode_request(api_key: int, api_version: int, request: Any, correlation_id: int = 0,
                   client_id: str = CLIENT_ID) -> bytes:
    """A complete framed request: size, header (v1/v2 as the API version needs), body."""
    head = RequestHeader(api_key, api_version, correlation_id, client_id).encode(
        request_header_version(api_key, api_version))
    body = encode_body(request)
    return SIZE.pack(len(head) + len(body)) + head + body


def build_request(api_key: int, api_version: int, **fields: Any) -> Any:
    return request_class(api_key, api_version)(**fields)


@dataclass(slots=True)
class FrameTemplate:
    """One encoded request whose correlation id is rewritten per send."""

    frame: bytearray

    @classmethod
    def of(cls, api_key: int, api_version: int, request: Any, client_id: str = CLIENT_ID) -> FrameTemplate:
        return cls(bytearray(encode_request(api_key, api_version, request, 0, client_id)))

    def with_correlation(self, correlation_id: int) -> bytes:
        CORRELATION.pack_into(self.frame, CORRELATION_OFFSET, correlation_id)
        return bytes(self.frame)


def correlation_of(frame: bytes | bytearray | memoryview, offset: int = 0) -> int:
    """Correlation id of a framed response starting at ``offset``."""
    return CORRELATION.unpack_from(frame, offset + 4)[0]


def split_responses(buf: bytearray) -> list[bytes]:
    """Cut complete frames off the front of ``buf`` (in place)."""
    frames = []
    pos, end = 0, len(buf)
    while end - pos >= 4:
        (size,) = SIZE.unpack_from(buf, pos)
        if end - pos - 4 < size:
            break
        frames.append(bytes(buf[pos:pos + 4 + size]))
        pos += 4 + size
    if pos:
        del buf[:pos]
    return frames


def decode_response(api_key: int, api_version: int, frame: bytes) -> Any:
    """The kio response body of a framed response (size prefix included)."""
    flexible_header = response_header_version(api_key, api_version) == 1
    if flexible_header and frame[8] != 0:
        raise ValueError("response header carries tagged fields; not expected from a coordinator")
    offset = 9 if flexible_header else 8
    return decode_body(response_class(api_key, api_version), frame, offset)


def response_error_offset(api_key: int, api_version: int) -> int:
    """Byte offset (in the framed response) of the top-level error code, for APIs whose
    body starts with throttle_time_ms int32 then error_code int16 (Heartbeat v1+,
    ConsumerGroupHeartbeat, JoinGroup v2+, SyncGroup v1+)."""
    header = 4 + 4 + (1 if response_header_version(api_key, api_version) == 1 else 0)
    return header + 4
