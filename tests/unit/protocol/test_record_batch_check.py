"""One partition's Produce records checked before forwarding (protocol/record_batch_check.py).

Batches come from a real producer's encoder (aiokafka's DefaultRecordBatchBuilder, through
records/batch.py), then one field is corrupted at a time. A field from `attributes` on is
covered by the CRC, so the CRC is recomputed after such a change unless the test is about
the CRC: each test sees the one rule it names. Every refusal is asserted by its exact Kafka
code and by the field its message names.
"""
from __future__ import annotations

import struct

import pytest
from crc32c import crc32c

from coordinator.protocol.record_batch_check import (
    CORRUPT_MESSAGE,
    INVALID_RECORD,
    MAX_EXPANSION,
    MESSAGE_TOO_LARGE,
    UNSUPPORTED_COMPRESSION_TYPE,
    check_partition_records,
)
from records.batch import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    ControlMarker,
    build_batch,
    build_control_batch,
)
from support.allocation import allocation_peak

MAX = 1_048_588            # Kafka's default max.message.bytes
CODECS = [COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD]

# DefaultRecordBatch's header: field -> (byte offset, struct format)
FIELDS = {
    "base_offset": (0, ">q"), "length": (8, ">i"), "magic": (16, ">b"), "crc": (17, ">I"),
    "attributes": (21, ">h"), "last_offset_delta": (23, ">i"), "producer_id": (43, ">q"),
    "base_sequence": (53, ">i"), "records_count": (57, ">i"),
}


def batch(n: int = 16, value_size: int = 1000, codec: int = COMPRESSION_NONE, **kw: object) -> bytes:
    return build_batch([(b"key-%d" % i, b"v" * value_size) for i in range(n)], timestamp_ms=1_700_000_000_000,
                       compression=codec, **kw)  # type: ignore[arg-type]


def patched(data: bytes, crc: bool = True, **fields: int) -> bytes:
    """`data` with header fields set; the CRC recomputed (it covers attributes..end)."""
    out = bytearray(data)
    for name, value in fields.items():
        at, fmt = FIELDS[name]
        struct.pack_into(fmt, out, at, value)
    if crc:
        struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def check(data: bytes | None, *, max_message_bytes: int = MAX, verify_crc: bool = True,
          walk_records: bool = False, api_version: int | None = None) -> tuple[int, str] | None:
    return check_partition_records(data, max_message_bytes=max_message_bytes, verify_crc=verify_crc,
                                   walk_records=walk_records, api_version=api_version)


def refused(data: bytes | None, code: int, *names: str, **kw: object) -> str:
    result = check(data, **kw)  # type: ignore[arg-type]
    assert result is not None, "accepted"
    assert result[0] == code, result
    for name in names:
        assert name in result[1], result
    return result[1]


# --- what a producer sends passes -------------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("walk", [False, True])
def test_a_producers_batch_passes(codec: int, walk: bool) -> None:
    data = batch(codec=codec)
    assert check(data, walk_records=walk) is None
    assert check(memoryview(data), walk_records=walk) is None
    assert check(bytearray(data), walk_records=walk) is None


@pytest.mark.parametrize("codec", CODECS)
def test_idempotent_and_transactional_batches_pass(codec: int) -> None:
    data = batch(codec=codec, producer_id=7, producer_epoch=0, base_sequence=42, transactional=True)
    assert check(data, walk_records=True) is None


@pytest.mark.parametrize("codec", CODECS)
def test_many_tiny_records_pass_under_the_compressed_bound(codec: int) -> None:
    # 20,000 empty records: the most records per byte a real encoder produces.
    data = build_batch([(None, None)] * 20_000, timestamp_ms=1, compression=codec)
    assert check(data, max_message_bytes=2**31 - 1, walk_records=True) is None


def test_a_memoryview_slice_of_a_larger_request_is_read_in_place() -> None:
    data = batch()
    frame = b"\xff" * 40 + data + b"\xee" * 40
    assert check(memoryview(frame)[40:40 + len(data)]) is None


# --- finding the batch (ByteBufferLogInputStream, ProduceRequest.validateRecords) -------------

@pytest.mark.parametrize("data", [None, b"", b"\x00" * 11, b"\x00" * 8 + struct.pack(">i", 61) + b"\x00" * 4])
def test_no_batch_is_invalid_record(data: bytes | None) -> None:
    refused(data, INVALID_RECORD, "no record batch", "61")


@pytest.mark.parametrize("length", [-1, 0, 13, -2**31])
def test_a_length_under_the_log_minimum_is_corrupt(length: int) -> None:
    refused(patched(batch(), crc=False, length=length), CORRUPT_MESSAGE, "length", str(length), "14")
    # Kafka reads the length before it has the magic byte: 12 bytes are enough.
    refused(patched(batch(), crc=False, length=length)[:12], CORRUPT_MESSAGE, "length")


@pytest.mark.parametrize("magic", [3, 127, -1, -128])
def test_an_unknown_magic_is_corrupt(magic: int) -> None:
    refused(patched(batch(), crc=False, magic=magic), CORRUPT_MESSAGE, "magic", str(magic))


def test_a_length_past_the_bytes_present_is_no_batch() -> None:
    data = batch()
    refused(data[:-1], INVALID_RECORD, "length", str(len(data) - 12), str(len(data) - 13))
    refused(patched(data, crc=False, length=2**31 - 1), INVALID_RECORD, "length", str(2**31 - 1))


@pytest.mark.parametrize("magic", [0, 1])
def test_magic_0_and_1_are_invalid_record(magic: int) -> None:
    refused(patched(batch(), crc=False, magic=magic), INVALID_RECORD, "magic", str(magic), "v2")


@pytest.mark.parametrize("version", [3, 6])
def test_zstd_before_produce_v7_is_unsupported(version: int) -> None:
    data = batch(codec=COMPRESSION_ZSTD)
    refused(data, UNSUPPORTED_COMPRESSION_TYPE, "attributes", "zstd", f"v{version}", api_version=version)
    assert check(data, api_version=7) is None
    assert check(data) is None                       # no version given: the rule is not applied
    assert check(batch(codec=COMPRESSION_LZ4), api_version=version) is None


def test_the_zstd_rule_comes_after_magic_and_before_a_second_batch() -> None:
    data = batch(codec=COMPRESSION_ZSTD)
    refused(patched(data, crc=False, magic=1), INVALID_RECORD, "magic", api_version=5)
    refused(data + batch(1), UNSUPPORTED_COMPRESSION_TYPE, "zstd", api_version=5)


def test_a_second_batch_is_invalid_record() -> None:
    data = batch()
    refused(data + batch(2), INVALID_RECORD, "after the record batch", "exactly one record batch")


@pytest.mark.parametrize("tail", [b"\x00", b"\x00" * 11, b"\x00" * 8 + struct.pack(">i", 100) + b"\x00" * 10])
def test_trailing_bytes_that_are_no_batch_are_refused(tail: bytes) -> None:
    # Kafka trims these and appends the rest; kcoord forwards bytes as they are, so it refuses.
    refused(batch() + tail, INVALID_RECORD, f"{len(tail)} bytes after the record batch")


def test_trailing_bytes_with_a_bad_length_or_magic_are_corrupt() -> None:
    data = batch()
    refused(data + b"\x00" * 8 + struct.pack(">i", 3), CORRUPT_MESSAGE, "second record batch", "length", "3")
    second = patched(batch(1), crc=False, magic=9)
    refused(data + second, CORRUPT_MESSAGE, "second record batch", "magic", "9")


# --- the batch, as the log checks it (UnifiedLog.analyzeAndValidateRecords) --------------------

@pytest.mark.parametrize("base_offset", [1, -1, 2**63 - 1])
def test_a_base_offset_other_than_0_is_invalid_record(base_offset: int) -> None:
    refused(patched(batch(), crc=False, base_offset=base_offset), INVALID_RECORD, "base_offset", str(base_offset))


def test_a_batch_over_max_message_bytes_is_too_large() -> None:
    data = batch()
    assert check(data, max_message_bytes=len(data)) is None
    refused(data, MESSAGE_TOO_LARGE, "max.message.bytes", str(len(data) - 1), str(len(data)),
            max_message_bytes=len(data) - 1)


@pytest.mark.parametrize("length", [14, 30, 48])
def test_a_batch_shorter_than_the_v2_header_is_corrupt(length: int) -> None:
    data = patched(batch(), crc=False, length=length)[:12 + length]
    refused(data, CORRUPT_MESSAGE, "length", str(length), "49")
    refused(data, CORRUPT_MESSAGE, "length", verify_crc=False)


def test_a_bad_crc_is_corrupt_only_when_crcs_are_checked() -> None:
    data = bytearray(batch())
    data[-1] ^= 0x01
    message = refused(bytes(data), CORRUPT_MESSAGE, "crc")
    stored = struct.unpack_from(">I", data, 17)[0]
    assert f"{stored:#010x}" in message and f"{crc32c(bytes(data[21:])):#010x}" in message
    assert check(bytes(data), verify_crc=False) is None


def test_the_crc_covers_the_attributes() -> None:
    refused(patched(batch(), crc=False, attributes=0x10), CORRUPT_MESSAGE, "crc")


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_an_unknown_compression_codec_is_invalid_record(codec: int) -> None:
    refused(patched(batch(), attributes=codec), INVALID_RECORD, "attributes", f"codec {codec}")


# --- the header's counts (LogValidator.validateBatch) and the bytes that back them --------------

@pytest.mark.parametrize("delta", [-1, -2**31])
def test_an_empty_offset_range_is_invalid_record(delta: int) -> None:
    refused(patched(batch(), last_offset_delta=delta), INVALID_RECORD, "last_offset_delta", str(delta))


@pytest.mark.parametrize("count", [0, -1, -2**31])
def test_a_count_that_is_not_positive_is_invalid_record(count: int) -> None:
    refused(patched(batch(), records_count=count), INVALID_RECORD, "records_count", str(count))


@pytest.mark.parametrize(("count", "delta"), [(15, 15), (17, 15), (16, 0)])
def test_a_count_that_differs_from_the_offset_range_is_invalid_record(count: int, delta: int) -> None:
    refused(patched(batch(), records_count=count, last_offset_delta=delta), INVALID_RECORD,
            "records_count", str(count), "last_offset_delta", str(delta))


@pytest.mark.parametrize("attributes", [0x30, 0x20])
def test_a_control_batch_from_a_client_is_invalid_record(attributes: int) -> None:
    # Kafka answers a transactional one (0x30) in a Produce without a transactional id with
    # TRANSACTIONAL_ID_AUTHORIZATION_FAILED for the whole request, before any batch is read.
    data = build_control_batch(ControlMarker.COMMIT, timestamp_ms=1, producer_id=5, producer_epoch=0)
    refused(patched(data, attributes=attributes), INVALID_RECORD, "attributes", "control")


def test_a_producer_id_without_a_base_sequence_is_invalid_record() -> None:
    data = batch(producer_id=9, producer_epoch=0, base_sequence=-1)
    refused(data, INVALID_RECORD, "base_sequence", "-1", "producer_id", "9")


@pytest.mark.parametrize("count", [2**31 - 1, 1_000_000, 2_320])
def test_an_uncompressed_count_the_bytes_cannot_hold_is_invalid_record(count: int) -> None:
    data = batch()                                   # 16 records, 16,240 bytes of records
    payload = len(data) - 61
    message = refused(patched(data, records_count=count, last_offset_delta=count - 1), INVALID_RECORD,
                      "records_count", str(count), f"{payload} bytes", str(payload // 7))
    assert "uncompressed" in message


def test_the_uncompressed_bound_is_exact_at_seven_bytes_a_record() -> None:
    data = batch()
    most = (len(data) - 61) // 7
    assert check(patched(data, records_count=most, last_offset_delta=most - 1)) is None
    refused(patched(data, records_count=most + 1, last_offset_delta=most), INVALID_RECORD, "records_count")


@pytest.mark.parametrize(("codec", "name"), [(COMPRESSION_GZIP, "gzip"), (COMPRESSION_SNAPPY, "snappy"),
                                             (COMPRESSION_LZ4, "lz4"), (COMPRESSION_ZSTD, "zstd")])
def test_a_compressed_count_past_the_codecs_expansion_is_invalid_record(codec: int, name: str) -> None:
    data = batch(2, 10, codec=codec)
    count = 2**31 - 1
    refused(patched(data, records_count=count, last_offset_delta=count - 1), INVALID_RECORD,
            "records_count", str(count), name, "decompressed")


@pytest.mark.parametrize("codec", [COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD])
def test_the_codec_bounds_hold_for_the_most_compressible_input(codec: int) -> None:
    # Zeros compress best (gzip ~1028x, snappy ~21x, lz4 ~239x, zstd ~30,000x); the bound a
    # count is held to must stay above what the producer's codec reaches.
    from aiokafka.codec import gzip_encode, lz4_encode, snappy_encode, zstd_encode
    encode = {COMPRESSION_GZIP: gzip_encode, COMPRESSION_SNAPPY: snappy_encode,
              COMPRESSION_LZ4: lz4_encode, COMPRESSION_ZSTD: zstd_encode}[codec]
    zeros = bytes(4 << 20)
    assert len(zeros) / len(encode(zeros)) < MAX_EXPANSION[codec]


# --- the optional walk over an uncompressed batch's record lengths ------------------------------

def test_the_walk_finds_fewer_records_than_the_count() -> None:
    data = patched(batch(), records_count=17, last_offset_delta=16)
    assert check(data) is None                       # within the byte bound: only the walk sees it
    refused(data, INVALID_RECORD, "records_count", "17", "record 16", walk_records=True)


def test_the_walk_finds_more_records_than_the_count() -> None:
    data = patched(batch(), records_count=15, last_offset_delta=14)
    assert check(data) is None
    refused(data, INVALID_RECORD, "records_count", "15", "follow record 14", walk_records=True)


def _record_starts(data: bytes) -> list[int]:
    starts, pos = [], 61
    while pos < len(data):
        starts.append(pos)
        raw = shift = 0
        while True:
            byte = data[pos]
            pos += 1
            raw |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        pos += (raw >> 1) ^ -(raw & 1)
    return starts


@pytest.mark.parametrize("length", [-1, 0, 5, 100_000])
def test_the_walk_refuses_a_record_length_outside_the_batch(length: int) -> None:
    data = bytearray(batch(4, 40))
    at = _record_starts(bytes(data))[2]
    assert data[at] < 0x80                         # a one-byte varint: 53 bytes as zigzag
    raw = (length << 1) ^ (length >> 63)
    varint = bytearray()
    while True:
        varint.append((raw & 0x7F) | (0x80 if raw > 0x7F else 0))
        raw >>= 7
        if not varint[-1] & 0x80:
            break
    data[at:at + 1] = varint
    data[8:12] = struct.pack(">i", len(data) - 12)
    fixed = patched(bytes(data))
    refused(fixed, INVALID_RECORD, "record 2", f"length is {length}", walk_records=True)


def test_the_walk_refuses_a_varint_longer_than_5_bytes() -> None:
    data = bytearray(batch(4, 100))
    at = _record_starts(bytes(data))[1]
    data[at:at + 1] = b"\xff" * 6 + b"\x01"
    data[8:12] = struct.pack(">i", len(data) - 12)
    refused(patched(bytes(data)), INVALID_RECORD, "record 1", "varint", walk_records=True)


def test_the_walk_skips_compressed_batches() -> None:
    data = batch(codec=COMPRESSION_GZIP)
    most = 16
    assert check(patched(data, records_count=most + 1, last_offset_delta=most), walk_records=True) is None


# --- Kafka's order: the first rule that fails answers ----------------------------------------

def test_order_base_offset_before_size_and_crc() -> None:
    data = patched(batch(), crc=False, base_offset=5, attributes=0x20)
    refused(data, INVALID_RECORD, "base_offset", max_message_bytes=100)


def test_order_size_before_crc() -> None:
    data = patched(batch(), crc=False, attributes=0x20)
    refused(data, MESSAGE_TOO_LARGE, "max.message.bytes", max_message_bytes=100)


def test_order_crc_before_counts_and_control() -> None:
    data = patched(batch(), crc=False, attributes=0x20, records_count=0)
    refused(data, CORRUPT_MESSAGE, "crc")
    refused(data, INVALID_RECORD, "records_count", verify_crc=False)


def test_order_magic_before_trailing_bytes_and_base_offset() -> None:
    data = patched(batch(), crc=False, magic=1, base_offset=3)
    refused(data + b"\x00" * 5, INVALID_RECORD, "magic")


# --- what the check itself costs in memory ------------------------------------------------------

@pytest.mark.parametrize("fields", [{"records_count": 2**31 - 1, "last_offset_delta": 2**31 - 2},
                                    {"length": 2**31 - 1}, {"records_count": 2_000, "last_offset_delta": 1_999}])
def test_the_check_allocates_nothing_in_proportion_to_the_header(fields: dict[str, int]) -> None:
    data = patched(batch(), **fields)
    result, peak = allocation_peak(lambda: check(data, walk_records=True), 16_384)
    assert result is not None and result[0] == INVALID_RECORD
    assert peak < 16_384, f"{peak} bytes allocated for a {len(data)}-byte batch"
