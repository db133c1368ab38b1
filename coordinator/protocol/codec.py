"""kio glue: decode request bodies and encode response bodies for (api_key, api_version)."""
from __future__ import annotations

import io
from typing import Any

from kio.serial import entity_reader, entity_writer

from .apis import request_class, response_class, response_header_version
from .checked import _STRUCTS as _steps
from .checked import Malformed, struct_step
from .fast_codec import FAST_ENCODERS
from .framing import decode_response_header, request_body_offset, response_frame
from .retention import readers as _wide_retention_readers
from .unknown_tags import strip_unknown_tags


class BodyError(Exception):
    """A message body does not parse with its schema."""


# OffsetCommit v2-v4 take any int64 retention, as Kafka does (retention.py).
_readers: dict[type, Any] = dict(_wide_retention_readers())
_writers: dict[type, Any] = {}


def reader_for(cls: type) -> Any:
    reader = _readers.get(cls)
    if reader is None:
        reader = _readers[cls] = entity_reader(cls)
    return reader


def writer_for(cls: type) -> Any:
    writer = _writers.get(cls)
    if writer is None:
        writer = _writers[cls] = entity_writer(cls)
    return writer


def encode_body(message: Any) -> bytes:
    """The wire bytes of a kio message (request or response body, without header)."""
    fast = FAST_ENCODERS.get(message.__class__)
    if fast is not None:
        return fast(message)
    buf = io.BytesIO()
    writer_for(type(message))(buf, message)
    return buf.getvalue()


# Steady heartbeats: a member sends the same body (group, member id, epoch) every interval
# until its epoch moves, and they are most of kcoord's traffic. Decoding is a pure function
# of the body bytes and kio messages are immutable, so the last bodies seen are remembered:
# a repeat costs one dict look-up instead of the bounded walk and kio's reader. Bounded
# (cleared when full), so a client sending endless distinct bodies costs only misses; and
# only small ones are kept (a keep-alive is well under a kilobyte), so what the memos hold
# is bounded in bytes too, not by max_decoded_request_bytes times the entries.
MEMO_MAX_ENTRIES = 16_384
MEMO_MAX_BYTES = 1024
_MEMOS: dict[type, dict[bytes, Any]] = {}


# The same for a whole request of those classes, header included: what follows the
# correlation id (the client id, the header's tags, the body) -> (client id, body).
_REQUEST_MEMOS: dict[type, dict[bytes, tuple[str | None, Any]]] = {}


def memoize_decoding(*classes: type) -> None:
    for cls in classes:
        _MEMOS.setdefault(cls, {})
        _REQUEST_MEMOS.setdefault(cls, {})


def decode_request(cls: type, frame: bytes, header_version: int) -> tuple[str | None, Any]:
    """(client id, body) of a framed request of ``cls`` (size prefix included) whose key,
    version and correlation id were read. Raises HeaderError or BodyError. A memoized class
    remembers the whole parse, a pure function of the bytes after the correlation id: a
    steady heartbeat costs one look-up, not the client id's decoding and the body's."""
    memo = _REQUEST_MEMOS.get(cls)
    if memo is None or len(frame) > MEMO_MAX_BYTES:
        client_id, offset = request_body_offset(frame, header_version)
        return client_id, decode_body(cls, frame, offset)
    key = frame[12:]
    parsed = memo.get(key)
    if parsed is None:
        client_id, offset = request_body_offset(frame, header_version)
        parsed = client_id, _decode(cls, frame, offset, True)    # kept here, not in the body memo too
        if len(memo) >= MEMO_MAX_ENTRIES:
            memo.clear()
        memo[key] = parsed
    return parsed


def decode_body(cls: type, data: bytes, offset: int, *, exact: bool = True) -> Any:
    """Decode ``cls`` at ``offset``; with ``exact`` the body must end where the data ends.

    The bytes are walked by `checked` first: kio's native reader trusts the lengths it
    reads and would allocate whatever a hostile length claims. Tagged fields the schema
    does not know are skipped, as Kafka's readers skip them (unknown_tags.py).
    """
    memo = _MEMOS.get(cls) if exact and len(data) - offset <= MEMO_MAX_BYTES else None
    if memo is not None:
        body = data[offset:]
        value = memo.get(body)
        if value is not None:
            return value
        value = _decode(cls, data, offset, exact)
        if len(memo) >= MEMO_MAX_ENTRIES:
            memo.clear()
        memo[body] = value
        return value
    return _decode(cls, data, offset, exact)


def _decode(cls: Any, data: bytes, offset: int, exact: bool) -> Any:
    try:
        (_steps.get(cls) or struct_step(cls))(data, offset, len(data))
    except Malformed as e:
        raise BodyError(f"{cls.__name__} v{cls.__version__}: {e}") from None
    try:
        value, used = reader_for(cls)(data, offset)
    except Exception as e:  # kio raises BufferUnderflow, ValueError, UnicodeDecodeError, ...
        value, used = _without_unknown_tags(cls, data, offset, e)
    if exact and offset + used != len(data):
        raise BodyError(f"{cls.__name__} v{cls.__version__}: {len(data) - offset - used} bytes left after the body")
    return value


def _without_unknown_tags(cls: Any, data: bytes, offset: int, error: Exception) -> tuple[Any, int]:
    """Read the body again without the tagged fields its schema does not know (kio's
    reader refuses them, Kafka's skip them: unknown_tags.py); ``error`` is kio's when there
    are none. Returns (value, bytes the body takes in ``data``)."""
    failure = f"{cls.__name__} v{cls.__version__} does not parse: {type(error).__name__}: {error}"
    if not cls.__flexible__:
        raise BodyError(failure) from None
    try:
        stripped = strip_unknown_tags(cls, data, offset)
    except Malformed as e:
        raise BodyError(f"{cls.__name__} v{cls.__version__}: {e}") from None
    if stripped is None:
        raise BodyError(failure) from None
    body, end = stripped
    try:
        value, used = reader_for(cls)(body, 0)
    except Exception as e:
        raise BodyError(f"{cls.__name__} v{cls.__version__} does not parse: {type(e).__name__}: {e}") from None
    if used != len(body):
        raise BodyError(f"{cls.__name__} v{cls.__version__}: {len(body) - used} bytes left after the body")
    return value, end - offset


def decode_response_frame(api_key: int, api_version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation id, kio response) of a framed response to (api_key, api_version)."""
    header, offset = decode_response_header(frame, response_header_version(api_key, api_version))
    return header.correlation_id, decode_body(response_class(api_key, api_version), frame, offset)


def encode_response_frame(api_key: int, api_version: int, correlation_id: int, response: Any) -> bytes:
    """A framed response; ``response`` is a kio message or an already-encoded body."""
    body = response if isinstance(response, (bytes, bytearray)) else encode_body(response)
    return response_frame(correlation_id, bytes(body), response_header_version(api_key, api_version))


memoize_decoding(request_class(68, 0), request_class(68, 1))   # ConsumerGroupHeartbeat v0/v1
