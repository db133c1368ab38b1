"""Framing and request/response headers v0/v1/v2, checked against kio's own encoders."""
from __future__ import annotations

import io
import struct

import pytest
from kio.schema.request_header.v1.header import RequestHeader as KioRequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as KioRequestHeaderV2
from kio.schema.response_header.v1.header import ResponseHeader as KioResponseHeaderV1
from kio.serial import entity_reader, entity_writer

from coordinator.protocol.framing import (
    FrameError, HeaderError, RequestHeader, ResponseHeader, decode_request_header, decode_response_header,
    frame, read_uvarint, request_body_offset, response_frame, split_frames, write_uvarint,
)


def _kio_bytes(cls, value) -> bytes:
    buf = io.BytesIO()
    entity_writer(cls)(buf, value)
    return buf.getvalue()


@pytest.mark.parametrize("header_version", [0, 1, 2])
@pytest.mark.parametrize("client_id", [None, "", "rdkafka", "ünïcode-id"])
def test_request_header_round_trip(header_version: int, client_id: str | None) -> None:
    header = RequestHeader(api_key=12, api_version=4, correlation_id=-7, client_id=client_id)
    framed = frame(header.encode(header_version) + b"BODY")
    decoded, body_offset = decode_request_header(framed, header_version)
    expected_client = None if header_version == 0 else client_id
    assert decoded == RequestHeader(12, 4, -7, expected_client)
    assert framed[body_offset:] == b"BODY"


def test_request_header_v2_tagged_fields_round_trip() -> None:
    header = RequestHeader(18, 3, 1, "c", tagged_fields=((0, b"\x01\x02"), (5, b"")))
    framed = frame(header.encode(2) + b"\x00")
    decoded, offset = decode_request_header(framed, 2)
    assert decoded == header
    assert request_body_offset(framed, 2) == ("c", offset)
    assert framed[offset:] == b"\x00"


@pytest.mark.parametrize("version,kio_cls", [(1, KioRequestHeaderV1), (2, KioRequestHeaderV2)])
def test_request_header_matches_kio(version: int, kio_cls: type) -> None:
    ours = RequestHeader(3, 12, 99, "client-x").encode(version)
    theirs = _kio_bytes(kio_cls, kio_cls(request_api_key=3, request_api_version=12, correlation_id=99,
                                         client_id="client-x"))
    assert ours == theirs
    # v2 keeps the int16-length client id (not compact), then an empty tag section.
    if version == 2:
        assert ours.endswith(b"\x00\x08client-x\x00")


def test_response_frames_v0_and_v1() -> None:
    v0 = response_frame(42, b"xy", 0)
    assert v0 == struct.pack(">ii", 6, 42) + b"xy"
    v1 = response_frame(42, b"xy", 1)
    assert v1 == struct.pack(">iiB", 7, 42, 0) + b"xy"
    header, offset = decode_response_header(v1, 1)
    assert header == ResponseHeader(42) and v1[offset:] == b"xy"
    kio_header, used = entity_reader(KioResponseHeaderV1)(v1, 4)
    assert kio_header.correlation_id == 42 and used == 5


def test_response_header_tagged_round_trip() -> None:
    header = ResponseHeader(5, ((1, b"abc"),))
    framed = frame(header.encode(1) + b"Z")
    decoded, offset = decode_response_header(framed, 1)
    assert decoded == header and framed[offset:] == b"Z"


@pytest.mark.parametrize("bad,reason", [
    (struct.pack(">hhi", 3, 1, 1), "truncated before the client id"),
    (struct.pack(">hhih", 3, 1, 1, 10) + b"abc", "runs past the end"),
    (struct.pack(">hhih", 3, 1, 1, -5), "client id length -5"),
    (b"\x00\x03\x00", "truncated"),
])
def test_bad_request_headers_raise(bad: bytes, reason: str) -> None:
    with pytest.raises(HeaderError, match=reason):
        decode_request_header(frame(bad), 1)


def test_truncated_tagged_fields_raise() -> None:
    bad = RequestHeader(3, 12, 1, "c").encode(1) + b"\x01\x00\x05ab"   # one tag of 5 bytes, 2 present
    with pytest.raises(HeaderError):
        decode_request_header(frame(bad), 2)


def test_split_frames_keeps_partial_tail() -> None:
    a, b = frame(b"one"), frame(b"second")
    frames, used, error = split_frames(a + b + b[:5], 1000)
    assert frames == [a, b] and used == len(a) + len(b) and error is None
    frames, used, error = split_frames(b"\x00\x00", 1000)
    assert frames == [] and used == 0 and error is None


@pytest.mark.parametrize("size,match", [(-1, "negative"), (1001, "above the maximum 1000")])
def test_split_frames_rejects_bad_sizes_after_good_frames(size: int, match: str) -> None:
    good = frame(b"ok")
    frames, used, error = split_frames(good + struct.pack(">i", size) + b"xx", 1000)
    assert frames == [good] and used == len(good)
    assert isinstance(error, FrameError) and match in str(error)


def test_frame_of_exactly_the_maximum_is_accepted() -> None:
    payload = b"x" * 1000
    frames, _, error = split_frames(frame(payload), 1000)
    assert error is None and frames == [frame(payload)]


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 16383, 16384, 2**31 - 1])
def test_uvarint_round_trip(value: int) -> None:
    data = write_uvarint(value) + b"!"
    assert read_uvarint(data, 0) == (value, len(data) - 1)
