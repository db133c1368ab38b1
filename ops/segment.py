"""Kafka log segment files (`<partition dir>/<base offset>.log`): batches of magic v2
(and v0/v1 message sets of very old logs), any codec, every CRC checked.

The file is memory-mapped, so a 1 GiB segment is not read into memory. A batch that
fails (CRC, truncation, undecodable records) is reported with its byte position;
with `skip_corrupt` the reader looks for the next position where a whole batch with
a valid CRC and a base offset past the last good one starts, and continues there.
"""
from __future__ import annotations

import mmap
import struct
from collections.abc import Iterator
from pathlib import Path

from aiokafka.record.default_records import DefaultRecordBatch

from ops.logsource import LogBatch, OffsetsLogError, Problems, Progress
from records.batch import CorruptBatchError, iter_batches

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_LOG_OVERHEAD = 12
_MAGIC_AT = 16
_V2_MIN_LENGTH = 61 - _LOG_OVERHEAD


def _is_batch_at(buf, q: int, n: int, min_base_offset: int) -> bool:
    """A whole magic-v2 batch with a valid CRC starts at q (used to resynchronise)."""
    if q + 61 > n or buf[q + _MAGIC_AT] != 2:
        return False
    length = _I32.unpack_from(buf, q + 8)[0]
    if length < _V2_MIN_LENGTH or q + _LOG_OVERHEAD + length > n:
        return False
    if _I64.unpack_from(buf, q)[0] < min_base_offset:
        return False
    try:
        return DefaultRecordBatch(bytes(buf[q:q + _LOG_OVERHEAD + length])).validate_crc()
    except Exception:
        return False


def next_good_batch(buf, start: int, n: int, min_base_offset: int) -> int | None:
    """The first position >= start where a valid batch begins, or None."""
    q = start
    while True:
        magic_at = buf.find(b"\x02", q + _MAGIC_AT, n)
        if magic_at < 0:
            return None
        q = magic_at - _MAGIC_AT
        if _is_batch_at(buf, q, n, min_base_offset):
            return q
        q += 1


def _zero_tail(buf, pos: int, n: int) -> bool:
    """Preallocated segments (log.preallocate) end in zeros: no data, not damage."""
    step = 1 << 16
    for i in range(pos, n, step):
        end = min(n, i + step)
        if buf[i:end].count(0) != end - i:
            return False
    return True


def iter_buffer(buf, n: int, source: str, partition: int, problems: Problems,
                progress: Progress | None = None) -> Iterator[LogBatch]:
    """Batches of a whole log buffer (a segment file or a copy of one)."""
    pos = 0
    next_offset = -1
    view = memoryview(buf)
    while pos < n:
        try:
            for batch in iter_batches(view[pos:n]):
                batch.position += pos
                if batch.base_offset < next_offset:
                    problems.report(source, batch.position,
                                    f"batch base offset {batch.base_offset} goes back before "
                                    f"offset {next_offset}", offset=batch.base_offset)
                next_offset = batch.next_offset
                if progress is not None:
                    progress.update(batch.size)
                yield LogBatch(source, partition, batch)
            return
        except CorruptBatchError as e:
            at = pos + e.position
            if _zero_tail(buf, at, n):
                if progress is not None:
                    progress.update(n - at)
                return
            problems.report(source, at, e.reason)   # raises unless skipping
            resume = next_good_batch(buf, at + 1, n, next_offset)
            end = n if resume is None else resume
            problems.items[-1].skipped = f"{end - at} bytes"
            if progress is not None:
                progress.update(end - at)
            if resume is None:
                return
            pos = resume


def read_segment(path: Path, partition: int, problems: Problems,
                 progress: Progress | None = None) -> Iterator[LogBatch]:
    source = str(path)
    try:
        f = open(path, "rb")
    except OSError as e:
        raise OffsetsLogError(source, None, f"cannot open: {e.strerror}") from None
    with f:
        n = path.stat().st_size
        if n == 0:
            return
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            yield from iter_buffer(buf, n, source, partition, problems, progress)
        finally:
            try:
                buf.close()
            except BufferError:  # a batch view still alive; the map closes when it is freed
                pass
