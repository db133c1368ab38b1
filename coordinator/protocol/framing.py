"""Kafka framing and request/response headers, encoded by hand with struct (hot path).

A frame is a 4-byte big-endian size followed by that many bytes. Requests start with
``api_key int16, api_version int16, correlation_id int32``, then (header v1+) a nullable
client id, which keeps the classic int16-length encoding even in header v2 (Kafka's
RequestHeader.json marks ClientId "flexibleVersions": "none"), then (v2) tagged fields.
Responses start with the correlation id, then (header v1) tagged fields.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from .checked import Malformed
from .checked import read_uvarint as _read_uvarint

# Kafka's socket.request.max.bytes default.
DEFAULT_MAX_FRAME_SIZE = 104_857_600

SIZE = struct.Struct(">i")
REQUEST_PREFIX = struct.Struct(">hhi")        # api_key, api_version, correlation_id
FRAMED_REQUEST_PREFIX = struct.Struct(">ihhi")
_INT16 = struct.Struct(">h")
_RESPONSE_V0 = struct.Struct(">ii")           # size, correlation_id
_RESPONSE_V1 = struct.Struct(">iiB")          # size, correlation_id, empty tagged fields


class FrameError(Exception):
    """The byte stream cannot be framed: the connection must be closed."""


class HeaderError(Exception):
    """A request or response header does not parse."""


def split_frames(buf: bytes | bytearray, max_frame_size: int,
                 max_frames: int = 2**31 - 1) -> tuple[list[bytes], int, FrameError | None]:
    """Cut the complete frames (size prefix included) off the start of ``buf``.

    Returns the frames, the number of bytes they take, and the framing error that stopped
    the cut, if any (a negative size, or one above ``max_frame_size``: Kafka closes the
    connection for both; frames before the bad one are still returned). At most
    ``max_frames`` are cut: the rest of ``buf`` is neither copied nor looked at (a client
    connection cuts only as many as its in-flight bound has room for, so frames waiting in
    its buffer are cut once, not once per answer).
    """
    frames: list[bytes] = []
    pos = 0
    end = len(buf)
    unpack = SIZE.unpack_from
    while end - pos >= 4 and len(frames) < max_frames:
        (size,) = unpack(buf, pos)
        if size < 0 or size > max_frame_size:
            what = "negative" if size < 0 else f"above the maximum {max_frame_size}"
            return frames, pos, FrameError(f"frame size {size} is {what}")
        stop = pos + 4 + size
        if stop > end:
            break
        frames.append(bytes(buf[pos:stop]))
        pos = stop
    return frames, pos, None


def read_uvarint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Unsigned varint at ``pos``: (value, position after it); the one bounded reader of
    checked.py, its error as a HeaderError."""
    try:
        return _read_uvarint(buf, pos, len(buf))  # type: ignore[arg-type]
    except Malformed as e:
        raise HeaderError(e.what) from None


_SMALL_UVARINTS = [bytes((i,)) for i in range(0x80)]


def write_uvarint(value: int) -> bytes:
    if value < 0x80:   # lengths and counts on the heartbeat path are nearly always small
        return _SMALL_UVARINTS[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_tagged_fields(buf: bytes, pos: int, end: int) -> tuple[tuple[tuple[int, bytes], ...], int]:
    """The header's tagged fields as (tag, bytes), bounded as `skip_tagged_fields` is: a count
    above half the bytes left, or a tag or size that runs past ``end``, is malformed."""
    count, pos = read_uvarint(buf, pos)
    if count * 2 > end - pos:
        raise HeaderError(f"{count} tagged fields declared, but there are only {end - pos} bytes remaining")
    fields = []
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        if pos > end or pos + size > end:
            raise HeaderError(f"tagged field {tag} of {size} bytes runs past the end")
        fields.append((tag, bytes(buf[pos:pos + size])))
        pos += size
    return tuple(fields), pos


def encode_tagged_fields(fields: tuple[tuple[int, bytes], ...]) -> bytes:
    parts = [write_uvarint(len(fields))]
    for tag, data in sorted(fields):
        parts += [write_uvarint(tag), write_uvarint(len(data)), data]
    return b"".join(parts)


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None
    tagged_fields: tuple[tuple[int, bytes], ...] = ()

    def encode(self, header_version: int) -> bytes:
        """Header bytes (no frame size) in header v0, v1 or v2."""
        head = REQUEST_PREFIX.pack(self.api_key, self.api_version, self.correlation_id)
        if header_version == 0:
            return head
        if self.client_id is None:
            client = _INT16.pack(-1)
        else:
            raw = self.client_id.encode()
            client = _INT16.pack(len(raw)) + raw
        if header_version == 1:
            return head + client
        return head + client + encode_tagged_fields(self.tagged_fields)


def decode_request_header(frame: bytes, header_version: int, offset: int = 4) -> tuple[RequestHeader, int]:
    """Parse the header of a framed request; returns it and the offset of the body.

    ``offset`` is where the header starts (4: just after the size prefix).
    """
    end = len(frame)
    if end - offset < 8:
        raise HeaderError(f"header truncated: {end - offset} bytes, need at least 8")
    api_key, api_version, correlation_id = REQUEST_PREFIX.unpack_from(frame, offset)
    pos = offset + 8
    client_id = None
    tagged: tuple[tuple[int, bytes], ...] = ()
    if header_version >= 1:
        client_id, pos = read_client_id(frame, pos)
    if header_version >= 2:
        tagged, pos = read_tagged_fields(frame, pos, end)
    return RequestHeader(api_key, api_version, correlation_id, client_id, tagged), pos


def _client_id_end(frame: bytes, pos: int) -> tuple[int, int]:
    """(length, position after) of the nullable int16-length client id at ``pos`` (-1: null)."""
    if len(frame) - pos < 2:
        raise HeaderError("header truncated before the client id")
    (length,) = _INT16.unpack_from(frame, pos)
    pos += 2
    if length < 0:
        if length != -1:
            raise HeaderError(f"client id length {length}")
        return -1, pos
    if pos + length > len(frame):
        raise HeaderError(f"client id of {length} bytes runs past the end of the frame")
    return length, pos + length


def read_client_id(frame: bytes, pos: int) -> tuple[str | None, int]:
    """The nullable int16-length client id at ``pos``, and the position after it.

    Decoded leniently, as Kafka does (RequestHeaderData reads it with
    ``new String(bytes, UTF_8)``, which replaces malformed bytes): a client id that is
    not UTF-8 is not a reason to close the connection.
    """
    # Inlined (not _client_id_end): every request served here passes through it.
    if len(frame) - pos < 2:
        raise HeaderError("header truncated before the client id")
    (length,) = _INT16.unpack_from(frame, pos)
    pos += 2
    if length < 0:
        if length != -1:
            raise HeaderError(f"client id length {length}")
        return None, pos
    end = pos + length
    if end > len(frame):
        raise HeaderError(f"client id of {length} bytes runs past the end of the frame")
    return frame[pos:end].decode("utf-8", "replace"), end


def skip_tagged_fields(buf: bytes, pos: int, end: int) -> int:
    """The position after the tagged fields at ``pos``, allocating nothing.

    Each field takes at least two bytes (tag and size varints), so a count above half the
    bytes left is malformed before any field is read (Kafka: "Tried to allocate a
    collection of size N, but there are only M bytes remaining"): a header cannot make the
    gateway loop over a million fields that are not there. Fields and sizes of one byte
    each (tags and sizes below 128, the usual case) are skipped inline.
    """
    count, pos = read_uvarint(buf, pos)
    if count * 2 > end - pos:
        raise HeaderError(f"{count} tagged fields declared, but there are only {end - pos} bytes remaining")
    for _ in range(count):
        if pos + 2 <= end and buf[pos] < 0x80 and buf[pos + 1] < 0x80:
            pos += 2 + buf[pos + 1]
        else:
            _, pos = read_uvarint(buf, pos)
            size, pos = read_uvarint(buf, pos)
            pos += size
        if pos > end:
            raise HeaderError("a tagged field runs past the end of the header")
    return pos


def request_body_offset(frame: bytes, header_version: int) -> tuple[str | None, int]:
    """Fast path: (client id, body offset) of a framed request whose prefix is known valid.

    Header tagged fields are skipped, not read: Kafka defines none in RequestHeader, and
    the gateway has no use for unknown ones (a forwarded frame keeps them byte for byte).
    """
    if header_version == 0:
        return None, 12
    # read_client_id inlined for a present client id (its length's high byte below 0x80:
    # not negative), read from the frame's two bytes without a struct call: every request
    # served here (the durable commit's among them) passes through this; a null or refused
    # length, and a short frame, go through read_client_id and its errors.
    size = len(frame)
    if size >= 14 and (high := frame[12]) < 0x80:
        pos = 14 + ((high << 8) | frame[13])
        if pos > size:
            raise HeaderError(f"client id of {pos - 14} bytes runs past the end of the frame")
        client_id: str | None = frame[14:pos].decode("utf-8", "replace")
    else:
        client_id, pos = read_client_id(frame, 12)
    if header_version == 2:
        if pos < size and frame[pos] == 0:   # the usual case: no tagged fields
            return client_id, pos + 1
        pos = skip_tagged_fields(frame, pos, size)
    return client_id, pos


def body_offset(frame: bytes, header_version: int, header_limit: int = 2**31 - 1) -> int:
    """The body offset of a framed request whose prefix is known valid, without decoding
    the client id (forwarded requests: the gateway never looks at it).

    Header tagged fields must end within ``header_limit`` bytes of the frame: a Produce
    may be far larger than what kcoord walks (max_decoded_request_bytes), and skipping
    fields is linear in their count, so its header must not make up for the walk skipped.
    """
    if header_version == 0:
        return 12
    _, pos = _client_id_end(frame, 12)
    if header_version == 2:
        if pos < len(frame) and frame[pos] == 0:
            return pos + 1
        end = len(frame)
        if end <= header_limit:
            return skip_tagged_fields(frame, pos, end)
        try:
            return skip_tagged_fields(frame, pos, header_limit)
        except HeaderError:
            raise HeaderError(f"request header tagged fields run past byte {header_limit} "
                              f"(max_decoded_request_bytes)") from None
    return pos


def response_frame(correlation_id: int, body: bytes, header_version: int) -> bytes:
    """A complete framed response: size, response header v0/v1 (no tags), body."""
    if header_version == 0:
        return _RESPONSE_V0.pack(len(body) + 4, correlation_id) + body
    return _RESPONSE_V1.pack(len(body) + 5, correlation_id, 0) + body


@dataclass(frozen=True, slots=True)
class ResponseHeader:
    correlation_id: int
    tagged_fields: tuple[tuple[int, bytes], ...] = ()

    def encode(self, header_version: int) -> bytes:
        head = SIZE.pack(self.correlation_id)
        return head if header_version == 0 else head + encode_tagged_fields(self.tagged_fields)


def decode_response_header(frame: bytes, header_version: int, offset: int = 4) -> tuple[ResponseHeader, int]:
    """Parse the header of a framed response; returns it and the offset of the body."""
    if len(frame) - offset < 4:
        raise HeaderError("response header truncated")
    (correlation_id,) = SIZE.unpack_from(frame, offset)
    pos = offset + 4
    tagged: tuple[tuple[int, bytes], ...] = ()
    if header_version >= 1:
        tagged, pos = read_tagged_fields(frame, pos, len(frame))
    return ResponseHeader(correlation_id, tagged), pos


def frame(payload: bytes) -> bytes:
    return SIZE.pack(len(payload)) + payload
