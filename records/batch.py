"""Record batches of the state topic: thin helpers over `aiokafka.record`.

aiokafka reads and writes magic-v2 batches with every codec (gzip always;
snappy/lz4/zstd when `cramjam` is installed). This module only adds what a
coordinator needs on top: a base offset and producer state on build, control
batches (transaction markers), a walk over a buffer that reports truncation
and CRC errors with their byte position, and the control-record marker.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum

from aiokafka.errors import CorruptRecordException, UnsupportedCodecError
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from aiokafka.record.legacy_records import LegacyRecordBatch
from aiokafka.record.util import calc_crc32c

try:  # the snappy/lz4/zstd codecs aiokafka uses raise their own error type
    from cramjam import DecompressionError as _CodecError
except ImportError:  # pragma: no cover - cramjam is a dependency
    class _CodecError(Exception):  # type: ignore[no-redef]
        pass

# What reading a corrupt batch's records may raise: aiokafka's own errors, a codec's
# (gzip: OSError/EOFError/zlib.error; cramjam: DecompressionError), the low-level
# errors of a record whose varints or lengths overrun the batch, and SystemError, which
# aiokafka's Cython legacy reader raises for a negative key/value length other than -1
# ("Negative size passed to PyBytes_FromStringAndSize"; found by fuzz/atheris_records.py).
_RECORD_READ_ERRORS = (CorruptRecordException, UnsupportedCodecError, ValueError, IndexError,
                       struct.error, OSError, EOFError, zlib.error, _CodecError, SystemError)

# Magic v2 batch header (Kafka's DefaultRecordBatch): the offsets we patch.
_LOG_OVERHEAD = 12          # baseOffset int64 + length int32
_V2_HEADER = 61
_LEADER_EPOCH_AT = 12
_MAGIC_AT = 16
_CRC_AT = 17
_ATTRIBUTES_AT = 21
_CONTROL_FLAG = 0x20
_LEGACY_MIN = 12 + 14       # log overhead + smallest v0 message
_I64, _I32 = struct.Struct(">q"), struct.Struct(">i")
_U32, _I16 = struct.Struct(">I"), struct.Struct(">h")
_CONTROL_KEY = struct.Struct(">hh")      # version, type
_END_TXN_MARKER = struct.Struct(">hi")   # version, coordinatorEpoch

COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD = range(5)


class ControlMarker(IntEnum):
    """Kafka's ControlRecordType for transaction markers."""
    ABORT = 0
    COMMIT = 1


class CorruptBatchError(ValueError):
    """A batch that cannot be read; `position` is its first byte in the buffer."""

    def __init__(self, position: int, reason: str) -> None:
        super().__init__(f"corrupt record batch at byte {position}: {reason}")
        self.position, self.reason = position, reason


@dataclass(slots=True)
class RecordBatch:
    position: int              # byte offset of the batch in the buffer
    size: int                  # bytes, log overhead included
    magic: int
    base_offset: int
    last_offset: int
    partition_leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    is_control_batch: bool
    compression: int
    records: list              # aiokafka records: .offset .timestamp .key .value .headers
    control_type: int | None = None   # ControlMarker value for control batches

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1


def build_batch(records: Sequence[tuple[bytes | None, bytes | None]], *, base_offset: int = 0,
                timestamp_ms: int, compression: int = COMPRESSION_NONE, producer_id: int = -1,
                producer_epoch: int = -1, base_sequence: int = -1, transactional: bool = False,
                partition_leader_epoch: int = -1) -> bytes:
    """One magic-v2 batch holding `records` (key, value) at consecutive offsets."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    builder = DefaultRecordBatchBuilder(2, compression, int(transactional), producer_id,
                                        producer_epoch, base_sequence, 2**31 - 1)
    for delta, (key, value) in enumerate(records):
        if builder.append(delta, timestamp_ms, key, value, []) is None:
            raise ValueError("record batch is full")  # cannot happen with an int32 max size
    out = builder.build()
    # aiokafka builds what a producer sends (base offset 0, leader epoch -1: the lean
    # writer's batch as it is, a batch per write); neither field is covered by the CRC, so
    # others are set afterwards.
    if base_offset != 0 or partition_leader_epoch != -1:
        _I64.pack_into(out, 0, base_offset)
        _I32.pack_into(out, _LEADER_EPOCH_AT, partition_leader_epoch)
    return bytes(out)


def build_control_batch(marker: ControlMarker | int, *, base_offset: int = 0, timestamp_ms: int,
                        producer_id: int, producer_epoch: int, coordinator_epoch: int = 0,
                        partition_leader_epoch: int = -1) -> bytes:
    """A transaction marker batch, as the broker writes for WriteTxnMarkers.

    aiokafka never builds control batches (only brokers do), so this builds a
    transactional batch holding the control record, then sets the control
    attribute and recomputes the CRC (which covers attributes onwards).
    """
    key = _CONTROL_KEY.pack(0, int(marker))
    value = _END_TXN_MARKER.pack(0, coordinator_epoch)
    out = bytearray(build_batch([(key, value)], base_offset=base_offset,
                                timestamp_ms=timestamp_ms, producer_id=producer_id,
                                producer_epoch=producer_epoch, transactional=True,
                                partition_leader_epoch=partition_leader_epoch))
    attributes = _I16.unpack_from(out, _ATTRIBUTES_AT)[0] | _CONTROL_FLAG
    _I16.pack_into(out, _ATTRIBUTES_AT, attributes)
    _U32.pack_into(out, _CRC_AT, calc_crc32c(bytes(out[_ATTRIBUTES_AT:])))
    return bytes(out)


def iter_batches(buffer: bytes | bytearray | memoryview, *, check_crc: bool = True,
                 allow_partial_tail: bool = False) -> Iterator[RecordBatch]:
    """Walk the batches of a log buffer (e.g. a fetch response's records).

    Raises CorruptBatchError for a truncated batch, a bad length, a CRC
    mismatch or undecodable records. `allow_partial_tail=True` stops quietly
    at a truncated last batch instead, as a fetch response may end mid-batch.
    """
    view = memoryview(buffer)
    n = len(view)
    pos = 0
    while pos < n:
        if n - pos < _LOG_OVERHEAD + 5:
            if allow_partial_tail:
                return
            raise CorruptBatchError(pos, f"truncated batch header: {n - pos} bytes left")
        length = _I32.unpack_from(view, pos + 8)[0]
        magic = view[pos + _MAGIC_AT]
        minimum = _V2_HEADER if magic >= 2 else _LEGACY_MIN
        if length < minimum - _LOG_OVERHEAD:
            raise CorruptBatchError(pos, f"batch length {length} is below the minimum "
                                         f"{minimum - _LOG_OVERHEAD} for magic {magic}")
        end = pos + _LOG_OVERHEAD + length
        if end > n:
            if allow_partial_tail:
                return
            raise CorruptBatchError(pos, f"truncated batch: it declares {end - pos} bytes but "
                                         f"only {n - pos} remain")
        if magic > 2:
            raise CorruptBatchError(pos, f"unknown magic {magic}")
        data = bytes(view[pos:end])
        yield _read_batch(data, pos, magic, check_crc) if magic == 2 else \
            _read_legacy(data, pos, magic, check_crc)
        pos = end


def _read_batch(data: bytes, pos: int, magic: int, check_crc: bool) -> RecordBatch:
    try:
        batch = DefaultRecordBatch(data)
    except _RECORD_READ_ERRORS as e:
        raise CorruptBatchError(pos, f"cannot read its header: {type(e).__name__}: {e}") from e
    if check_crc and not batch.validate_crc():
        computed = calc_crc32c(data[_ATTRIBUTES_AT:])
        raise CorruptBatchError(pos, f"CRC mismatch: stored {batch.crc:#010x}, "
                                     f"computed {computed:#010x}")
    try:
        records = list(batch)
    except _RECORD_READ_ERRORS as e:
        raise CorruptBatchError(pos, f"cannot read its records: {type(e).__name__}: {e}") from e
    control_type = None
    if batch.is_control_batch:
        if len(records) != 1 or records[0].key is None or len(records[0].key) < 4:
            raise CorruptBatchError(pos, "control batch without a valid control record key")
        control_type = _CONTROL_KEY.unpack_from(records[0].key)[1]
    return RecordBatch(pos, len(data), magic, batch.base_offset,
                       batch.base_offset + batch.last_offset_delta,
                       _I32.unpack_from(data, _LEADER_EPOCH_AT)[0], batch.producer_id,
                       batch.producer_epoch, batch.base_sequence, batch.is_transactional,
                       batch.is_control_batch, batch.compression_type, records, control_type)


def _read_legacy(data: bytes, pos: int, magic: int, check_crc: bool) -> RecordBatch:
    """Magic 0/1 message sets: read-only, for logs older than Kafka 0.11."""
    try:
        # aiokafka reads (and bounds-checks) the first message in the constructor.
        batch = LegacyRecordBatch(data, magic)
        if check_crc and not batch.validate_crc():
            raise CorruptBatchError(pos, "CRC mismatch in a legacy message")
        records = list(batch)
    except _RECORD_READ_ERRORS as e:
        raise CorruptBatchError(pos, f"cannot read its records: {type(e).__name__}: {e}") from e
    if not records:
        raise CorruptBatchError(pos, "legacy message set without records")
    compression = data[_LOG_OVERHEAD + 5] & 0x07  # attributes byte after crc(4)+magic(1)
    return RecordBatch(pos, len(data), magic, records[0].offset, records[-1].offset, -1, -1, -1,
                       -1, False, False, compression, records)
