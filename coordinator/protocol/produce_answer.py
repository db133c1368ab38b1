"""A fixed-layout check for the state topic's Produce answer (ProduceResponse v9, the version
coordinator/runtime/lean_writer.py sends; fenced_links.VERSIONS), used by the upstream link
(coordinator/upstream/client.py) in place of the generic path's bounded walk.

codec.decode_body walks a body with `checked` (~1.35 µs for the lean writer's 53-byte answer)
before kio's native reader (~0.47 µs) may read it, because kio's reader allocates whatever a
length claims. This module checks only the common shape of an acks=all answer, at fixed
offsets: v9 is flexible, so every array and string is compact (an unsigned varint of
length + 1), and only one-byte varints are taken; every partition has no record errors, a
null error message and no tagged fields; every topic and the body have no tagged fields; and
the body ends exactly where the frame ends. Every count is checked against the bytes left
(each element's fixed size times the count) before anything after it is read, so the bytes
kio then reads are the bytes checked here and no count was left unchecked.

Anything else (a tagged field, a record error, an error message, a multi-byte varint, a short
or long body) returns None, and so does kio refusing a value (an unknown error code, a name
that is not UTF-8, a timestamp it does not take): the caller then takes the generic path, so
an unusual answer gets exactly today's value or error. An accepted answer is kio's reader's
value for the same bytes, as on the generic path (tests/unit/protocol/test_produce_answer.py
compares them, on kio's encodings and on mutations of them, and checks that the walk accepts
every body this check accepts).
"""
from __future__ import annotations

from typing import Any

from kio.schema.produce.v9.response import ProduceResponse

from .codec import reader_for

# index int32, error_code int16, base_offset int64, log_append_time_ms int64,
# log_start_offset int64; then no record errors (a compact array of 0), a null error message
# and no tagged fields.
_PARTITION_FIXED = 4 + 2 + 8 + 8 + 8
_PARTITION_TAIL = b"\x01\x00\x00"
_PARTITION = _PARTITION_FIXED + len(_PARTITION_TAIL)
_TOPIC_MIN = 1 + 1 + 1          # the name's length, the partitions' count, no tagged fields
_BODY_TAIL = 4 + 1              # throttle_time_ms int32, no tagged fields
_READ = reader_for(ProduceResponse)


def common_shape(data: bytes, offset: int) -> bool:
    """Whether the ProduceResponse v9 body at ``offset`` to the end of ``data`` is of the
    common shape, every length and count in bounds."""
    end = len(data)
    if offset >= end:
        return False
    count = data[offset] - 1
    pos = offset + 1
    # A null array (0) or a multi-byte varint (0x80 and up): not ours.
    if count < 0 or count >= 0x7F or count * _TOPIC_MIN + _BODY_TAIL > end - pos:
        return False
    for _ in range(count):
        size = data[pos] - 1          # in bounds: _TOPIC_MIN bytes are left per topic
        pos += 1
        # The name, its partitions' count, the topic's tagged fields, the body's tail.
        if size < 0 or size >= 0x7F or size + 2 + _BODY_TAIL > end - pos:
            return False
        pos += size
        partitions = data[pos] - 1
        pos += 1
        if partitions < 0 or partitions >= 0x7F or partitions * _PARTITION + 1 + _BODY_TAIL > end - pos:
            return False
        for _ in range(partitions):
            pos += _PARTITION_FIXED
            if data[pos:pos + 3] != _PARTITION_TAIL:
                return False
            pos += 3
        if data[pos] != 0:            # the topic's tagged fields
            return False
        pos += 1
    return end - pos == _BODY_TAIL and data[end - 1] == 0


def read_produce_v9(data: bytes, offset: int) -> Any:
    """The ProduceResponse v9 body at ``offset`` to the end of ``data`` as kio reads it, or
    None when it is not of the common shape or kio refuses it (the caller then decodes it the
    generic way)."""
    if not common_shape(data, offset):
        return None
    try:
        value, used = _READ(data, offset)
    except Exception:   # noqa: BLE001 - kio's refusals (ValueError, ...): the generic path judges them
        return None
    return value if offset + used == len(data) else None
