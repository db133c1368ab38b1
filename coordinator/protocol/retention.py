"""OffsetCommit v2-v4's retention_time_ms: any int64 a client sends is read, as Kafka reads it.

Rules:
- kio's native reader reads the field as a `timedelta` through int64 microseconds, so it
  refuses ("timedelta milliseconds overflow") any value beyond +-(2^63-1) // 1000 ms
  (about +-292,000 years); an int64 reaches 9.2e18 ms. Kafka
  takes any long there (-1 = the broker's offsets.retention.minutes; otherwise the offset's
  expire timestamp is the commit timestamp plus the retention, in Java's wrapping long
  arithmetic: OffsetMetadataManager.expireTimestampMs), so a value beyond timedelta's
  range is a valid request that Kafka answers and kcoord must not refuse or close on.
- Such a value is handed on as `JavaLongMs`, an int of milliseconds in the request's
  ``retention_time`` (the core converts durations with ``to_ms``, which takes either)
  whose addition wraps at 64 bits, so the core's ``now_ms + retention_ms`` is Kafka's
  expire timestamp to the bit (a wrapped, negative one expires at the next expiration
  pass, in Kafka and in kcoord) and fits the record's int64 field.
  Every value kio can read keeps kio's path untouched, so valid traffic pays one int64
  read.
- The request bytes are walked by `checked` before this reader runs, so the lengths in
  front of the field are within the frame.
"""
from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from typing import Any

from kio.serial import entity_reader

from .apis import OFFSET_COMMIT, request_class

RETENTION_VERSIONS = (2, 3, 4)      # the versions that carry retention_time_ms
# What kio's native reader turns into a timedelta (measured: one more either way overflows).
TIMEDELTA_MS = (-((2**63 - 1) // 1000), (2**63 - 1) // 1000)
_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")

Reader = Callable[[bytes, int], tuple[Any, int]]


class JavaLongMs(int):
    """Milliseconds as a Java long: a sum wraps into int64 as Kafka's does."""

    def __add__(self, other: object) -> int:
        if not isinstance(other, int):
            return NotImplemented
        return (int(self) + other + 2**63) % 2**64 - 2**63

    __radd__ = __add__


def retention_offset(data: bytes, offset: int) -> int:
    """Where retention_time_ms starts in an OffsetCommit v2-v4 body at ``offset``: after
    group_id (int16-length string), generation_id (int32) and member_id (int16-length
    string); these versions are not flexible, so the layout is fixed."""
    (group_len,) = _I16.unpack_from(data, offset)
    at = offset + 2 + max(group_len, 0) + 4
    (member_len,) = _I16.unpack_from(data, at)
    return at + 2 + max(member_len, 0)


def wide_retention(kio_reader: Reader) -> Reader:
    """``kio_reader`` for an OffsetCommit v2-v4 body, taking any int64 retention."""
    low, high = TIMEDELTA_MS

    def read(data: bytes, offset: int) -> tuple[Any, int]:
        at = retention_offset(data, offset)
        (ms,) = _I64.unpack_from(data, at)
        if low <= ms <= high:
            return kio_reader(data, offset)
        # Rare (only a hostile or broken client sends it): read a copy with 0 in the field.
        patched = b"".join((bytes(data[:at]), bytes(8), bytes(data[at + 8:])))
        value, used = kio_reader(patched, offset)
        return dataclasses.replace(value, retention_time=JavaLongMs(ms)), used
    return read


def readers() -> dict[type, Reader]:
    """The readers codec.py uses for OffsetCommit v2-v4 instead of kio's own."""
    return {cls: wide_retention(entity_reader(cls))
            for cls in (request_class(OFFSET_COMMIT, v) for v in RETENTION_VERSIONS)}
