"""One partition's records in a client's Produce v3+, checked before they are forwarded.

Rules of this module (Kafka's order and codes: ``ProduceRequest.validateRecords`` over
``ByteBufferLogInputStream``, then ``UnifiedLog.analyzeAndValidateRecords``, then
``LogValidator.validateBatch``; the header layout is ``DefaultRecordBatch``'s):
- Finding the batch, as Kafka's log input stream does. A length field under 14 bytes, or a
  magic outside 0..2, is CORRUPT_MESSAGE (2). No complete batch (null or empty records,
  fewer than 17 bytes, or a length running past the bytes present) is INVALID_RECORD (87),
  Kafka's "must have at least one record batch per partition". Magic 0 or 1 is
  INVALID_RECORD: Produce v3+ carries magic v2 only. With the request's ``api_version``,
  zstd before Produce v7 is UNSUPPORTED_COMPRESSION_TYPE (76). Bytes after the batch are
  INVALID_RECORD ("exactly one record batch per partition"), or CORRUPT_MESSAGE where they
  start a batch with a bad length or magic, as in Kafka.
- Then the batch, as the log checks it: base offset ≠ 0 is INVALID_RECORD; a batch
  (length + 12) over ``max.message.bytes`` is MESSAGE_TOO_LARGE (10); a batch shorter than
  its 61-byte header, or (``verify_crc``) a CRC-32C over attributes..end that differs from
  the stored one, is CORRUPT_MESSAGE.
- Deliberate differences, each measured on Kafka 4.3.1 with raw Produce v9: trailing bytes
  that are no whole batch Kafka trims and appends the rest; kcoord refuses them (it
  forwards bytes as they are, and an upstream may not trim). Kafka answers
  UNKNOWN_SERVER_ERROR (-1) to a length of 2**31-1 (an int overflow), to a length of 14 or
  15 (it reads the last offset delta past the batch) and to a codec id 5..7 (an
  IllegalArgumentException); kcoord answers INVALID_RECORD, CORRUPT_MESSAGE and
  INVALID_RECORD (a producer must not retry an unknown codec; CORRUPT_MESSAGE is retriable).
- Then the header's counts, as ``LogValidator.validateBatch`` checks a client's batch:
  ``last_offset_delta`` + 1 ≤ 0, ``records_count`` ≤ 0, a count that differs from the
  offset range, a control batch, or a producer id without a base sequence: INVALID_RECORD.
- ``records_count`` is what an upstream sizes allocations from, so it is held against the
  bytes present (Kafka finds the same batches INVALID_RECORD when it walks the records). A
  record takes at least 7 bytes (its length varint and six one-byte fields), so an
  uncompressed batch holds at most payload // 7 records. A compressed batch is never
  decompressed (a zip bomb stays a zip bomb): its payload can at most expand by its
  codec's worst ratio (``MAX_EXPANSION``), and that bounds its records the same way.
- ``walk_records`` also walks an uncompressed batch's record length varints (no
  allocation, at most payload // 7 steps): the records must be exactly ``records_count``
  and end exactly at the batch's end. It costs pure-Python time per record (see
  docs/measurements/benchmarks.md), so it is off unless asked for; Kafka walks every record itself.
- Messages name the batch field, its value and the bound. The caller adds the topic and
  partition. Cost: O(1) per batch, plus the CRC (native, ``crc32c``), plus the walk.
"""
from __future__ import annotations

import struct

from crc32c import crc32c

INVALID_RECORD = 87
CORRUPT_MESSAGE = 2
MESSAGE_TOO_LARGE = 10
UNSUPPORTED_COMPRESSION_TYPE = 76
FIRST_ZSTD_VERSION = 7            # KIP-110: Produce v7 brought zstd
ZSTD = 4

LOG_OVERHEAD = 12                 # base_offset int64 + length int32
HEADER_SIZE_UP_TO_MAGIC = 17      # Kafka's ByteBufferLogInputStream reads this much first
RECORD_OVERHEAD_V0 = 14           # the smallest length Kafka's log input stream accepts
RECORD_BATCH_OVERHEAD = 61        # the v2 header, log overhead included
MIN_RECORD_SIZE = 7               # length varint + attributes, timestamp/offset deltas,
                                  # key/value lengths and header count of 1 byte each
MIN_RECORD_BODY = MIN_RECORD_SIZE - 1
MAGIC_V2 = 2

_MAGIC_AT = 16
_CRC_AT = 17
_ATTRIBUTES_AT = 21
_CODEC_MASK = 0x07
_CONTROL_FLAG = 0x20

# The most bytes one compressed byte can turn into, per codec id (a bound, not a typical
# ratio): deflate 1032:1; snappy's best element is a 3-byte copy of 64 bytes; an LZ4
# sequence adds 255 bytes of match length per extension byte; a zstd RLE block turns 4
# bytes into 128 KiB. Each is rounded up so no batch a codec can produce is refused.
MAX_EXPANSION = {0: 1, 1: 1100, 2: 32, 3: 256, 4: 65536}
_CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

_HEADER = struct.Struct(">Ihiqqqhii")      # crc .. records_count, from byte 17
_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

Refusal = tuple[int, str]


def check_partition_records(records: bytes | bytearray | memoryview | None, *,
                            max_message_bytes: int, verify_crc: bool,
                            walk_records: bool = False, api_version: int | None = None) -> Refusal | None:
    """records: the bytes (bytes or memoryview) of one partition's `records` field of a Produce
    request (None/empty allowed). Returns (Kafka error code, message naming what was wrong and
    where) or None. ``api_version``, the Produce request's version, enables the one rule that
    depends on it (zstd before v7)."""
    buf = memoryview(records) if records is not None else memoryview(b"")
    found = _find_batch(buf, api_version)
    if isinstance(found, tuple):
        return found
    return _check_batch(buf, found, max_message_bytes, verify_crc, walk_records)


def _find_batch(buf: memoryview, api_version: int | None) -> int | Refusal:
    """The first batch's size, as Kafka's log input stream finds it, then no bytes after it."""
    n = len(buf)
    if n < HEADER_SIZE_UP_TO_MAGIC:
        if n >= LOG_OVERHEAD and (length := _I32.unpack_from(buf, 8)[0]) < RECORD_OVERHEAD_V0:
            return _short_length(length)
        return INVALID_RECORD, (f"no record batch: the partition's records hold {n} bytes, "
                                f"a batch takes at least {RECORD_BATCH_OVERHEAD}")
    length = _I32.unpack_from(buf, 8)[0]
    magic = _I8.unpack_from(buf, _MAGIC_AT)[0]
    if length < RECORD_OVERHEAD_V0:
        return _short_length(length)
    if not 0 <= magic <= MAGIC_V2:
        return CORRUPT_MESSAGE, f"record batch field magic is {magic}, not 0, 1 or 2"
    size = LOG_OVERHEAD + length
    if size > n:
        return INVALID_RECORD, (f"no complete record batch: its length field says {length} "
                                f"bytes after byte {LOG_OVERHEAD}, only {n - LOG_OVERHEAD} are present")
    if magic != MAGIC_V2:
        return INVALID_RECORD, (f"record batch field magic is {magic}: Produce v3+ carries "
                                f"magic v2 batches only")
    if api_version is not None and api_version < FIRST_ZSTD_VERSION and buf[_ATTRIBUTES_AT + 1] & _CODEC_MASK == ZSTD:
        return UNSUPPORTED_COMPRESSION_TYPE, (f"record batch field attributes is "
                                              f"{_I16.unpack_from(buf, _ATTRIBUTES_AT)[0]:#06x}: zstd "
                                              f"needs Produce v{FIRST_ZSTD_VERSION}+, this is v{api_version}")
    if n > size:
        return _after_batch(buf, size)
    return size


def _short_length(length: int) -> Refusal:
    return CORRUPT_MESSAGE, (f"record batch field length is {length}, below the minimum "
                             f"{RECORD_OVERHEAD_V0}")


def _after_batch(buf: memoryview, size: int) -> Refusal:
    """Bytes after the first batch: a second batch, or a malformed start of one."""
    rest = len(buf) - size
    if rest >= LOG_OVERHEAD:
        length = _I32.unpack_from(buf, size + 8)[0]
        if length < RECORD_OVERHEAD_V0:
            return CORRUPT_MESSAGE, (f"second record batch (at byte {size}) field length is "
                                     f"{length}, below the minimum {RECORD_OVERHEAD_V0}")
        magic = _I8.unpack_from(buf, size + _MAGIC_AT)[0] if rest >= HEADER_SIZE_UP_TO_MAGIC else 0
        if not 0 <= magic <= MAGIC_V2:
            return CORRUPT_MESSAGE, (f"second record batch (at byte {size}) field magic is "
                                     f"{magic}, not 0, 1 or 2")
    return INVALID_RECORD, (f"{rest} bytes after the record batch of {size} bytes: Produce v3+ "
                            f"carries exactly one record batch per partition")


def _check_batch(buf: memoryview, size: int, max_message_bytes: int, verify_crc: bool,
                 walk_records: bool) -> Refusal | None:
    base_offset = _I64.unpack_from(buf)[0]
    if base_offset != 0:
        return INVALID_RECORD, f"record batch field base_offset is {base_offset}, not 0"
    if size > max_message_bytes:
        return MESSAGE_TOO_LARGE, (f"record batch of {size} bytes (field length "
                                   f"{size - LOG_OVERHEAD}) exceeds max.message.bytes "
                                   f"{max_message_bytes}")
    if size < RECORD_BATCH_OVERHEAD:
        return CORRUPT_MESSAGE, (f"record batch field length is {size - LOG_OVERHEAD}, below the "
                                 f"v2 header's {RECORD_BATCH_OVERHEAD - LOG_OVERHEAD}")
    (crc, attributes, last_offset_delta, _, _, producer_id, _, base_sequence,
     records_count) = _HEADER.unpack_from(buf, _CRC_AT)
    if verify_crc:
        computed = crc32c(buf[_ATTRIBUTES_AT:size])
        if computed != crc:
            return CORRUPT_MESSAGE, (f"record batch field crc is {crc:#010x}, the CRC-32C of "
                                     f"its bytes {_ATTRIBUTES_AT}..{size} is {computed:#010x}")
    codec = attributes & _CODEC_MASK
    if codec not in MAX_EXPANSION:
        return INVALID_RECORD, (f"record batch field attributes is {attributes:#06x}: "
                                f"compression codec {codec} is not one of 0..4")
    refusal = _check_counts(size, attributes, codec, last_offset_delta, records_count,
                            producer_id, base_sequence)
    if refusal is None and walk_records and codec == 0:
        return _walk_records(buf, size, records_count)
    return refusal


def _check_counts(size: int, attributes: int, codec: int, last_offset_delta: int,
                  records_count: int, producer_id: int, base_sequence: int) -> Refusal | None:
    if last_offset_delta + 1 <= 0:
        return INVALID_RECORD, (f"record batch field last_offset_delta is {last_offset_delta}: "
                                f"the offset range [0, {last_offset_delta}] is empty")
    if records_count <= 0:
        return INVALID_RECORD, f"record batch field records_count is {records_count}, not positive"
    if records_count != last_offset_delta + 1:
        return INVALID_RECORD, (f"record batch field records_count is {records_count}, but "
                                f"last_offset_delta {last_offset_delta} spans "
                                f"{last_offset_delta + 1} offsets")
    if attributes & _CONTROL_FLAG:
        return INVALID_RECORD, (f"record batch field attributes is {attributes:#06x}: clients "
                                f"are not allowed to write control batches")
    if producer_id >= 0 and base_sequence < 0:
        return INVALID_RECORD, (f"record batch field base_sequence is {base_sequence} with "
                                f"producer_id {producer_id}")
    payload = size - RECORD_BATCH_OVERHEAD
    most = payload * MAX_EXPANSION[codec] // MIN_RECORD_SIZE
    if records_count > most:
        if codec == 0:
            what = f"{payload} bytes of uncompressed records"
        else:
            what = (f"{payload} bytes compressed with {_CODEC_NAMES[codec]} (at most "
                    f"{MAX_EXPANSION[codec]}x when decompressed)")
        return INVALID_RECORD, (f"record batch field records_count is {records_count}, more "
                                f"than the {most} records that {what} can hold (a record "
                                f"takes at least {MIN_RECORD_SIZE} bytes)")
    return None


def _walk_records(buf: memoryview, size: int, records_count: int) -> Refusal | None:
    """Each record's length varint (zigzag, at most 5 bytes), then a skip over its body.
    Every step moves at least 7 bytes, so this ends within payload // 7 steps."""
    pos = RECORD_BATCH_OVERHEAD
    for index in range(records_count):
        start = pos
        raw = shift = 0
        while True:
            if pos >= size:
                return INVALID_RECORD, (f"record batch field records_count is {records_count}, "
                                        f"but its bytes end at {size}, within or before record "
                                        f"{index} (from byte {start})")
            byte = buf[pos]
            pos += 1
            raw |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
            shift += 7
            if shift > 28:
                return INVALID_RECORD, f"record {index} (byte {start}): its length varint is longer than 5 bytes"
        length = (raw >> 1) ^ -(raw & 1)
        if not MIN_RECORD_BODY <= length <= size - pos:
            return INVALID_RECORD, (f"record {index} (byte {start}): its length is {length}, "
                                    f"outside {MIN_RECORD_BODY}..{size - pos} (the bytes left)")
        pos += length
    if pos != size:
        return INVALID_RECORD, (f"record batch field records_count is {records_count}, but "
                                f"{size - pos} bytes of records follow record {records_count - 1}")
    return None
