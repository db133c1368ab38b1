"""records.batch: build/iterate magic-v2 batches over aiokafka.record."""

from __future__ import annotations

import struct

import pytest
from aiokafka import codec as aiokafka_codec
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder

from records import (
    CoordinatorRecord, GroupMetadataKey, OffsetCommitKey, OffsetCommitValue, decode_record,
    encode_record,
)
from records.batch import (
    COMPRESSION_GZIP, COMPRESSION_LZ4, COMPRESSION_NONE, COMPRESSION_SNAPPY, COMPRESSION_ZSTD,
    ControlMarker, CorruptBatchError, build_batch, build_control_batch, iter_batches,
)

RECORDS = [(b"k0", b"v0"), (b"k1", None), (None, b"v2")]


def test_build_then_iterate():
    data = build_batch(RECORDS, base_offset=100, timestamp_ms=1_700_000_000_000,
                       producer_id=42, producer_epoch=3, base_sequence=7,
                       partition_leader_epoch=5)
    (batch,) = list(iter_batches(data))
    assert (batch.position, batch.size, batch.magic) == (0, len(data), 2)
    assert (batch.base_offset, batch.last_offset, batch.next_offset) == (100, 102, 103)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (42, 3, 7)
    assert batch.partition_leader_epoch == 5
    assert not batch.is_transactional and not batch.is_control_batch
    assert batch.control_type is None
    assert [(r.offset, r.timestamp, r.key, r.value) for r in batch.records] == [
        (100, 1_700_000_000_000, b"k0", b"v0"),
        (101, 1_700_000_000_000, b"k1", None),
        (102, 1_700_000_000_000, None, b"v2")]


def test_transactional_flag_and_several_batches():
    first = build_batch(RECORDS[:1], base_offset=0, timestamp_ms=1)
    second = build_batch(RECORDS[1:], base_offset=1, timestamp_ms=2, producer_id=9,
                         producer_epoch=0, transactional=True)
    batches = list(iter_batches(first + second))
    assert [b.position for b in batches] == [0, len(first)]
    assert [b.is_transactional for b in batches] == [False, True]
    assert [r.offset for b in batches for r in b.records] == [0, 1, 2]


def test_coordinator_records_survive_a_batch():
    records = [CoordinatorRecord(OffsetCommitKey("g", "t", p), OffsetCommitValue(offset=p))
               for p in range(5)] + [CoordinatorRecord(GroupMetadataKey("g"), None)]
    data = build_batch([encode_record(r) for r in records], base_offset=10, timestamp_ms=5)
    decoded = [decode_record(r.key, r.value, topic="__consumer_offsets", partition=0,
                             offset=r.offset)
               for batch in iter_batches(data) for r in batch.records]
    assert decoded == records


CODECS = {"gzip": (COMPRESSION_GZIP, aiokafka_codec.has_gzip),
          "snappy": (COMPRESSION_SNAPPY, aiokafka_codec.has_snappy),
          "lz4": (COMPRESSION_LZ4, aiokafka_codec.has_lz4),
          "zstd": (COMPRESSION_ZSTD, aiokafka_codec.has_zstd)}


@pytest.mark.parametrize("name", sorted(CODECS))
def test_compression_codecs(name):
    compression, available = CODECS[name]
    if not available():
        pytest.skip(f"aiokafka has no {name} support here (needs the cramjam package)")
    records = [(b"key-%d" % i, b"value " * 50) for i in range(20)]
    data = build_batch(records, base_offset=3, timestamp_ms=9, compression=compression)
    assert len(data) < sum(len(k) + len(v) for k, v in records)
    (batch,) = list(iter_batches(data))
    assert batch.compression == compression
    assert [(r.key, r.value) for r in batch.records] == records
    assert batch.records[-1].offset == 22


def test_crc_corruption_is_detected_with_the_batch_position():
    first = build_batch(RECORDS, timestamp_ms=1)
    second = build_batch([(b"key", b"value")], base_offset=3, timestamp_ms=1)
    corrupt = bytearray(first + second)
    corrupt[-2] ^= 0xFF  # inside the second batch's last record value
    with pytest.raises(CorruptBatchError) as err:
        list(iter_batches(bytes(corrupt)))
    assert err.value.position == len(first)
    assert "CRC" in str(err.value) and f"byte {len(first)}" in str(err.value)
    # Without the check, the flipped byte comes through.
    batches = list(iter_batches(bytes(corrupt), check_crc=False))
    assert batches[1].records[0].value != b"value"


def test_truncated_buffer_is_detected():
    first = build_batch(RECORDS, timestamp_ms=1)
    second = build_batch([(b"key", b"value")], base_offset=3, timestamp_ms=1)
    buffer = first + second
    for cut in (len(buffer) - 1, len(first) + 20, len(first) + 5):
        with pytest.raises(CorruptBatchError, match="truncated") as err:
            list(iter_batches(buffer[:cut]))
        assert err.value.position == len(first)
        tolerated = list(iter_batches(buffer[:cut], allow_partial_tail=True))
        assert [b.base_offset for b in tolerated] == [0]
    assert list(iter_batches(b"")) == []


def test_bad_batch_length_is_detected():
    data = bytearray(build_batch(RECORDS, timestamp_ms=1))
    struct.pack_into(">i", data, 8, 10)  # below the 49-byte minimum of a v2 batch
    with pytest.raises(CorruptBatchError, match="below the minimum") as err:
        list(iter_batches(bytes(data)))
    assert err.value.position == 0


def test_undecodable_records_are_reported():
    data = bytearray(build_batch([(b"k", b"v")], timestamp_ms=1))
    struct.pack_into(">i", data, 57, 2)  # record count 2, but only one record inside
    with pytest.raises(CorruptBatchError, match="cannot read its records"):
        list(iter_batches(bytes(data), check_crc=False))


@pytest.mark.parametrize("marker", [ControlMarker.COMMIT, ControlMarker.ABORT])
def test_control_batch_marker(marker):
    data = build_control_batch(marker, base_offset=77, timestamp_ms=5, producer_id=1234,
                               producer_epoch=2, coordinator_epoch=9)
    (batch,) = list(iter_batches(data))
    assert batch.is_control_batch and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_offset) == (1234, 2, 77)
    assert batch.control_type == marker
    assert batch.records[0].key == struct.pack(">hh", 0, int(marker))
    assert batch.records[0].value == struct.pack(">hi", 0, 9)  # EndTransactionMarker


def test_control_batch_without_a_valid_key_is_corrupt():
    data = bytearray(build_batch([(b"\x00", b"")], timestamp_ms=1, producer_id=1,
                                 producer_epoch=0, transactional=True))
    from aiokafka.record.util import calc_crc32c
    struct.pack_into(">h", data, 21, struct.unpack_from(">h", data, 21)[0] | 0x20)
    struct.pack_into(">I", data, 17, calc_crc32c(bytes(data[21:])))
    with pytest.raises(CorruptBatchError, match="control record key"):
        list(iter_batches(bytes(data)))


def test_legacy_message_sets_are_readable():
    builder = LegacyRecordBatchBuilder(1, 0, 1 << 20)
    builder.append(0, 1000, b"k", b"v")
    builder.append(1, 1001, b"k2", None)
    batches = list(iter_batches(bytes(builder.build())))
    assert [(b.magic, b.base_offset) for b in batches] == [(1, 0), (1, 1)]
    assert [(r.key, r.value) for b in batches for r in b.records] == [(b"k", b"v"), (b"k2", None)]


def test_empty_batch_is_refused():
    with pytest.raises(ValueError):
        build_batch([], timestamp_ms=1)


def test_compression_none_constant():
    (batch,) = list(iter_batches(build_batch(RECORDS, timestamp_ms=1,
                                             compression=COMPRESSION_NONE)))
    assert batch.compression == COMPRESSION_NONE
