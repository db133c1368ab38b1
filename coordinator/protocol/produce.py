"""Produce requests read by hand, without decoding record batches (the hottest forwarded path).

Rules:
- ``produce_acks`` reads only transactional_id and acks: a Produce with acks=0 gets no
  response at all from the broker, so the gateway must not wait for one.
- ``scan_produce`` (per request) and ``walk_produce`` (only when the state topic is
  named) walk the whole body: every topic (name, or topic id from v13), every partition
  index, each partition's records skipped by their length. Every
  length and count is checked against the bytes left in the frame before it is used,
  so nothing is allocated from a length the client chose (Kafka's rule: "Tried to
  allocate a collection of size N, but there are only M bytes remaining").
- Malformed input raises ``BodyError`` naming the field and where; the caller closes the
  connection (Kafka never answers a request it cannot parse).
- ``without_topics`` splices topic entries out of the body bytes, so the rest of a
  request can be forwarded byte for byte.
"""
from __future__ import annotations

import struct
import uuid
from typing import NamedTuple

from .codec import BodyError
from .framing import HeaderError, read_uvarint, write_uvarint

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
FIRST_FLEXIBLE = 9          # ProduceRequest.json "flexibleVersions": "9+"
FIRST_TOPIC_ID = 13         # KIP-516: v13 names topics by id only


def produce_acks(frame: bytes, body_offset: int, flexible: bool) -> tuple[str | None, int]:
    """(transactional_id, acks) of a framed Produce request (v3+; flexible from v9)."""
    pos = body_offset
    end = len(frame)
    if flexible:
        length, pos = read_uvarint(frame, pos)
        length -= 1                      # compact nullable string: 0 = null
    else:
        if end - pos < 2:
            raise HeaderError("Produce body truncated before transactional_id")
        (length,) = _INT16.unpack_from(frame, pos)
        pos += 2
    if length < -1:
        raise HeaderError(f"Produce transactional_id length {length}")
    transactional_id = None
    if length >= 0:
        if pos + length > end:
            raise HeaderError("Produce transactional_id runs past the end of the frame")
        transactional_id = frame[pos:pos + length].decode(errors="replace")
        pos += length
    if end - pos < 2:
        raise HeaderError("Produce body truncated before acks")
    (acks,) = _INT16.unpack_from(frame, pos)
    return transactional_id, acks


class ProduceTopic(NamedTuple):   # a tuple: built per topic on the hot path
    key: str | uuid.UUID            # name (v3-v12) or topic id (v13+)
    start: int                      # byte range of the whole TopicProduceData entry
    end: int
    partitions: tuple[int, ...]     # partition indexes, in request order


class ProduceLayout(NamedTuple):
    acks: int
    count_at: int                   # where the topic_data count starts
    first_topic: int                # where the first topic entry starts
    topics: tuple[ProduceTopic, ...]
    tail: int                       # where the body's own tagged fields start (or the end)


def _short(frame: bytes, pos: int, size: int, what: str) -> BodyError:
    return BodyError(f"ProduceRequest {what}: length {size} runs past the frame "
                     f"({len(frame) - pos} bytes left at offset {pos})")


def _uvarint(frame: bytes, pos: int, what: str, *where: int) -> tuple[int, int]:
    """An unsigned varint; the common one-byte case without a call into framing.
    ``what % where`` names the field, built only when raising."""
    if pos < len(frame):
        byte = frame[pos]
        if byte < 0x80:
            return byte, pos + 1
    try:
        return read_uvarint(frame, pos)
    except HeaderError as e:
        raise BodyError(f"ProduceRequest {what % where}: {e}") from None


def _skip_tags(frame: bytes, pos: int, end: int, what: str, *where: int) -> int:
    if pos < end and frame[pos] == 0:   # the usual case: no tagged fields
        return pos + 1
    name = what % where
    count, pos = _uvarint(frame, pos, f"{name} tagged field count")
    # Each tagged field is at least 2 bytes (tag, size): a count larger than what is
    # left is a lie, refused before looping on it.
    if 2 * count > end - pos:
        raise _short(frame, pos, 2 * count, f"{name} {count} tagged fields")
    for _ in range(count):
        _, pos = _uvarint(frame, pos, f"{name} tag")
        size, pos = _uvarint(frame, pos, f"{name} tagged field size")
        if size > end - pos:
            raise _short(frame, pos, size, f"{name} tagged field")
        pos += size
    return pos


def walk_produce(frame: bytes, body_offset: int, version: int) -> ProduceLayout:
    """Topic and partition layout of a framed Produce request at ``version`` (3-13).

    Hot path: error messages (naming the field) are built only when raising.
    """
    flexible = version >= FIRST_FLEXIBLE
    by_id = version >= FIRST_TOPIC_ID
    end = len(frame)
    pos = body_offset
    # transactional_id (nullable string), acks, timeout
    if flexible:
        length, pos = _uvarint(frame, pos, "transactional_id length")
        length -= 1
    else:
        if end - pos < 2:
            raise _short(frame, pos, 2, "transactional_id length")
        (length,) = _INT16.unpack_from(frame, pos)
        pos += 2
    if length < -1:
        raise BodyError(f"ProduceRequest transactional_id: length {length}")
    if length > end - pos:
        raise _short(frame, pos, length, "transactional_id")
    if length > 0:
        pos += length
    if end - pos < 6:
        raise _short(frame, pos, 6, "acks and timeout")
    (acks,) = _INT16.unpack_from(frame, pos)
    pos += 6
    count_at = pos
    if flexible:
        count, pos = _uvarint(frame, pos, "topic_data count")
        count -= 1
    else:
        if end - pos < 4:
            raise _short(frame, pos, 4, "topic_data count")
        (count,) = _INT32.unpack_from(frame, pos)
        pos += 4
    if count < 0:
        raise BodyError(f"ProduceRequest topic_data: count {count} (the array is not nullable)")
    # A topic entry takes at least 2 bytes; a count above what is left is refused first.
    if 2 * count > end - pos:
        raise _short(frame, pos, 2 * count, f"topic_data of {count} entries")
    first_topic = pos
    topics = []
    unpack32 = _INT32.unpack_from
    for t in range(count):
        start = pos
        if by_id:
            if end - pos < 16:
                raise _short(frame, pos, 16, f"topic_data[{t}].topic_id")
            key: str | uuid.UUID = uuid.UUID(bytes=bytes(frame[pos:pos + 16]))
            pos += 16
        else:
            if flexible:
                length, pos = _uvarint(frame, pos, "topic_data[%d].name length", t)
                length -= 1
            else:
                if end - pos < 2:
                    raise _short(frame, pos, 2, f"topic_data[{t}].name length")
                (length,) = _INT16.unpack_from(frame, pos)
                pos += 2
            if length < 0:
                raise BodyError(f"ProduceRequest topic_data[{t}].name: null (the field is not nullable)")
            if length > end - pos:
                raise _short(frame, pos, length, f"topic_data[{t}].name")
            try:
                key = frame[pos:pos + length].decode()
            except UnicodeDecodeError as e:
                raise BodyError(f"ProduceRequest topic_data[{t}].name is not UTF-8: {e}") from None
            pos += length
        if flexible:
            parts, pos = _uvarint(frame, pos, "topic_data[%d].partition_data count", t)
            parts -= 1
        else:
            if end - pos < 4:
                raise _short(frame, pos, 4, f"topic_data[{t}].partition_data count")
            (parts,) = unpack32(frame, pos)
            pos += 4
        if parts < 0:
            raise BodyError(f"ProduceRequest topic_data[{t}].partition_data: count {parts} (not nullable)")
        if 5 * parts > end - pos:
            raise _short(frame, pos, 5 * parts, f"topic_data[{t}].partition_data of {parts} entries")
        indexes = []
        for p in range(parts):
            if end - pos < 4:
                raise _short(frame, pos, 4, f"topic_data[{t}].partition_data[{p}].index")
            (index,) = unpack32(frame, pos)
            indexes.append(index)
            pos += 4
            if flexible:
                size, pos = _uvarint(frame, pos, "topic_data[%d].partition_data[%d].records length", t, p)
                size -= 1
            else:
                if end - pos < 4:
                    raise _short(frame, pos, 4, f"topic_data[{t}].partition_data[{p}].records length")
                (size,) = unpack32(frame, pos)
                pos += 4
            if size < -1:
                raise BodyError(f"ProduceRequest topic_data[{t}].partition_data[{p}].records: length {size}")
            if size > end - pos:
                raise _short(frame, pos, size, f"topic_data[{t}].partition_data[{p}].records")
            if size > 0:
                pos += size
            if flexible:
                pos = _skip_tags(frame, pos, end, "topic_data[%d].partition_data[%d]", t, p)
        if flexible:
            pos = _skip_tags(frame, pos, end, "topic_data[%d]", t)
        topics.append(ProduceTopic(key, start, pos, tuple(indexes)))
    tail = pos
    if flexible:
        pos = _skip_tags(frame, pos, end, "body")
    if pos != end:
        raise BodyError(f"ProduceRequest v{version}: {end - pos} bytes left after the body")
    return ProduceLayout(acks, count_at, first_topic, tuple(topics), tail)


_PARTITION_V3 = struct.Struct(">ii")    # index, records length (v3-v8)


def scan_produce(frame: bytes, body_offset: int, version: int, name: bytes,
                 topic_id: bytes | None) -> tuple[int, bool]:
    """(acks, whether any topic is ``name`` / ``topic_id``) of a framed Produce, with the
    same bounds as ``walk_produce`` but nothing built: the per-request check. Names are
    compared as bytes (a name of another length is never sliced)."""
    flexible = version >= FIRST_FLEXIBLE
    by_id = version >= FIRST_TOPIC_ID
    end = len(frame)
    pos = body_offset
    if flexible:
        length, pos = _uvarint(frame, pos, "transactional_id length")
        length -= 1
    else:
        if end - pos < 2:
            raise _short(frame, pos, 2, "transactional_id length")
        (length,) = _INT16.unpack_from(frame, pos)
        pos += 2
    if length < -1:
        raise BodyError(f"ProduceRequest transactional_id: length {length}")
    if length > end - pos:
        raise _short(frame, pos, length, "transactional_id")
    if length > 0:
        pos += length
    if end - pos < 6:
        raise _short(frame, pos, 6, "acks and timeout")
    (acks,) = _INT16.unpack_from(frame, pos)
    pos += 6
    if flexible:
        count, pos = _uvarint(frame, pos, "topic_data count")
        count -= 1
    else:
        if end - pos < 4:
            raise _short(frame, pos, 4, "topic_data count")
        (count,) = _INT32.unpack_from(frame, pos)
        pos += 4
    if count < 0:
        raise BodyError(f"ProduceRequest topic_data: count {count} (the array is not nullable)")
    if 2 * count > end - pos:
        raise _short(frame, pos, 2 * count, f"topic_data of {count} entries")
    hit = False
    name_length = len(name)
    unpack32 = _INT32.unpack_from
    for t in range(count):
        if by_id:
            if end - pos < 16:
                raise _short(frame, pos, 16, f"topic_data[{t}].topic_id")
            if topic_id is not None and frame[pos:pos + 16] == topic_id:
                hit = True
            pos += 16
        else:
            if flexible:
                length, pos = _uvarint(frame, pos, "topic_data[%d].name length", t)
                length -= 1
            else:
                if end - pos < 2:
                    raise _short(frame, pos, 2, f"topic_data[{t}].name length")
                (length,) = _INT16.unpack_from(frame, pos)
                pos += 2
            if length < 0:
                raise BodyError(f"ProduceRequest topic_data[{t}].name: null (the field is not nullable)")
            if length > end - pos:
                raise _short(frame, pos, length, f"topic_data[{t}].name")
            if length == name_length and frame[pos:pos + length] == name:
                hit = True
            pos += length
        if flexible:
            parts, pos = _uvarint(frame, pos, "topic_data[%d].partition_data count", t)
            parts -= 1
        else:
            if end - pos < 4:
                raise _short(frame, pos, 4, f"topic_data[{t}].partition_data count")
            (parts,) = unpack32(frame, pos)
            pos += 4
        if parts < 0:
            raise BodyError(f"ProduceRequest topic_data[{t}].partition_data: count {parts} (not nullable)")
        if 5 * parts > end - pos:
            raise _short(frame, pos, 5 * parts, f"topic_data[{t}].partition_data of {parts} entries")
        for p in range(parts):
            if flexible:
                if end - pos < 5:
                    raise _short(frame, pos, 5, f"topic_data[{t}].partition_data[{p}] index and records length")
                # records length: a varint of 1 or 2 bytes (up to 16 KiB) read inline.
                q = pos + 4
                b = frame[q]
                if b < 0x80:
                    size, pos = b - 1, q + 1
                elif q + 1 < end and frame[q + 1] < 0x80:
                    size, pos = ((b & 0x7F) | (frame[q + 1] << 7)) - 1, q + 2
                else:
                    size, pos = _uvarint(frame, q, "topic_data[%d].partition_data[%d].records length", t, p)
                    size -= 1
            else:
                if end - pos < 8:
                    raise _short(frame, pos, 8, f"topic_data[{t}].partition_data[{p}] index and records length")
                _, size = _PARTITION_V3.unpack_from(frame, pos)
                pos += 8
            if size < -1:
                raise BodyError(f"ProduceRequest topic_data[{t}].partition_data[{p}].records: length {size}")
            if size > end - pos:
                raise _short(frame, pos, size, f"topic_data[{t}].partition_data[{p}].records")
            if size > 0:
                pos += size
            if flexible:
                if pos < end and frame[pos] == 0:
                    pos += 1
                else:
                    pos = _skip_tags(frame, pos, end, "topic_data[%d].partition_data[%d]", t, p)
        if flexible:
            if pos < end and frame[pos] == 0:
                pos += 1
            else:
                pos = _skip_tags(frame, pos, end, "topic_data[%d]", t)
    if flexible:
        pos = _skip_tags(frame, pos, end, "body")
    if pos != end:
        raise BodyError(f"ProduceRequest v{version}: {end - pos} bytes left after the body")
    return acks, hit


def without_topics(frame: bytes, layout: ProduceLayout, drop: set[int], flexible: bool) -> bytes:
    """The framed request with the topic entries at indexes ``drop`` removed (header kept)."""
    kept = [frame[t.start:t.end] for i, t in enumerate(layout.topics) if i not in drop]
    count = write_uvarint(len(kept) + 1) if flexible else _INT32.pack(len(kept))
    payload = b"".join([frame[4:layout.count_at], count, *kept, frame[layout.tail:]])
    return _INT32.pack(len(payload)) + payload
