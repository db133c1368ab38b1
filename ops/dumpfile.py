"""Dump files: every record of an offsets log as JSON lines (orjson) or Avro (fastavro).

An entry carries partition, offset, timestamp, producer id/epoch, whether it was
transactional, the record type name and id, the value version, and the decoded key
and value (null value = tombstone). Transaction markers are entries of type CONTROL
with `control` COMMIT or ABORT. Records of unknown types (KIP-915) are type `unknown`
with their raw `key_bytes`/`value_bytes`; records that do not decode keep their raw
bytes plus the `error`, so a dump never hides what the log holds.

Dump files are also a log source: reading one yields the same batches (re-encoded
with `records/`, which round-trips byte for byte) as the log it was taken from.
"""
from __future__ import annotations

import base64
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from ops.avro import full_name, parsed_schema
from ops.logsource import LogBatch, Problems, Progress
from ops.recordjson import RECORD_CLASSES, DumpFormatError, from_dict, to_dict, type_name
from records import (
    RecordDecodeError,
    UnknownRecord,
    UnknownRecordVersionError,
    decode_record,
    encode_key,
    encode_value,
)
from records.batch import ControlMarker, RecordBatch
from records.partitioner_records import is_partitioner_marker, marker_partitioner

CONTROL = "CONTROL"
_CONTROL_KEY = {ControlMarker.COMMIT: b"\x00\x00\x00\x01", ControlMarker.ABORT: b"\x00\x00\x00\x00"}


@dataclass
class DumpStats:
    entries: int = 0
    by_type: Counter = field(default_factory=Counter)          # type name -> records
    tombstones: int = 0
    unknown_types: Counter = field(default_factory=Counter)    # type id -> records
    errors: int = 0

    def as_dict(self) -> dict:
        return {"entries": self.entries, "by_type": dict(sorted(self.by_type.items())),
                "tombstones": self.tombstones,
                "unknown_types": {str(k): v for k, v in sorted(self.unknown_types.items())},
                "errors": self.errors}


# ---------------------------------------------------------------- batch -> entries
def entries_of(lb: LogBatch, stats: DumpStats, raw_bytes: bool = False) -> Iterator[dict]:
    """Dump entries of one batch. `raw_bytes` keeps bytes as bytes (Avro) instead of base64."""
    b = lb.batch
    common = {"partition": lb.partition, "producer_id": b.producer_id,
              "producer_epoch": b.producer_epoch, "transactional": b.is_transactional}
    if b.is_control_batch:
        r = b.records[0]
        stats.entries += 1
        stats.by_type[CONTROL] += 1
        yield {**common, "offset": r.offset, "timestamp": r.timestamp, "type": CONTROL, "type_id": -1,
               "control": ControlMarker(b.control_type).name if b.control_type in (0, 1)
               else str(b.control_type), "version": None, "key": None, "value": None}
        return
    for r in b.records:
        stats.entries += 1
        entry = {**common, "offset": r.offset, "timestamp": r.timestamp}
        try:
            rec = decode_record(r.key, r.value, partition=lb.partition, offset=r.offset)
        except (RecordDecodeError, UnknownRecordVersionError) as e:
            stats.errors += 1
            rtype = int.from_bytes(r.key[:2], "big", signed=True) if r.key and len(r.key) >= 2 else -1
            stats.by_type[type_name(rtype)] += 1
            entry.update(type=type_name(rtype), type_id=rtype, error=str(e),
                         key_bytes=_raw(r.key, raw_bytes), value_bytes=_raw(r.value, raw_bytes))
            yield entry
            continue
        if isinstance(rec, UnknownRecord):
            # The partitioner marker is the log's (records/partitioner_records.py): named, its raw
            # bytes kept as for any type the codec leaves unknown.
            marker = is_partitioner_marker(rec.key)
            name = type_name(rec.record_type) if marker else "unknown"
            stats.by_type[name] += 1
            if not marker:
                stats.unknown_types[rec.record_type] += 1
            if rec.value is None:
                stats.tombstones += 1
            entry.update(type=name, type_id=rec.record_type, version=None, key=None,
                         value={"partitioner": marker_partitioner(rec.key, rec.value)} if marker else None,
                         key_bytes=_raw(rec.key, raw_bytes), value_bytes=_raw(rec.value, raw_bytes))
            yield entry
            continue
        rtype = rec.key.record_type
        name = type_name(rtype)
        stats.by_type[name] += 1
        if rec.value is None:
            stats.tombstones += 1
        entry.update(type=name, type_id=int(rtype),
                     version=None if rec.value is None else rec.value_version,
                     key=_struct(rec.key, raw_bytes), value=None if rec.value is None
                     else _struct(rec.value, raw_bytes))
        yield entry


def _raw(b: bytes | None, raw_bytes: bool):
    if b is None:
        return None
    b = bytes(b)
    return b if raw_bytes else base64.b64encode(b).decode("ascii")


def _struct(obj, raw_bytes: bool):
    d = to_dict(obj, raw_bytes)
    return (full_name(type(obj)), d) if raw_bytes else d


# --------------------------------------------------------------------- writers
class DumpWriter:
    def __init__(self, out: IO[bytes], fmt: str) -> None:
        if fmt not in ("jsonl", "avro"):
            raise ValueError(f"unknown dump format {fmt!r} (jsonl or avro)")
        self.out, self.fmt = out, fmt
        self.stats = DumpStats()
        self._avro = None
        if fmt == "avro":
            from fastavro.write import Writer
            self._avro = Writer(out, parsed_schema(), codec="deflate")

    def write_batch(self, lb: LogBatch) -> None:
        if self._avro is None:
            write = self.out.write
            for entry in entries_of(lb, self.stats):
                write(orjson.dumps(entry))
                write(b"\n")
        else:
            write = self._avro.write
            for entry in entries_of(lb, self.stats, raw_bytes=True):
                write(entry)

    def close(self) -> None:
        if self._avro is not None:
            self._avro.flush()
        self.out.flush()


def open_output(path: str | None) -> IO[bytes]:
    if path in (None, "-"):
        return sys.stdout.buffer
    return open(path, "wb")


# --------------------------------------------------------------------- reader
@dataclass(slots=True)
class DumpRecord:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


def _entry_batch(entry: dict, position: int, size: int) -> tuple[int, RecordBatch]:
    """(partition, one-record batch) for a dump entry."""
    try:
        partition, offset, ts = int(entry["partition"]), int(entry["offset"]), int(entry["timestamp"])
        pid, pepoch = int(entry.get("producer_id", -1)), int(entry.get("producer_epoch", -1))
        txn = bool(entry.get("transactional", False))
        rtype = entry["type"]
    except (KeyError, TypeError, ValueError) as e:
        raise DumpFormatError(f"entry lacks a valid {e}") from None
    control_type = None
    if rtype == CONTROL:
        try:
            control_type = ControlMarker[entry["control"]]
        except KeyError:
            raise DumpFormatError(f"control entry with control={entry.get('control')!r}") from None
        rec = DumpRecord(offset, ts, _CONTROL_KEY[control_type], b"\x00\x00\x00\x00\x00\x00")
    else:
        rec = DumpRecord(offset, ts, *_record_bytes(entry))
    batch = RecordBatch(position, size, 2, offset, offset, -1, pid, pepoch, -1, txn,
                        control_type is not None, 0, [rec], control_type)
    return partition, batch


def _bytes_field(entry: dict, name: str) -> bytes | None:
    v = entry.get(name)
    if v is None or isinstance(v, bytes):
        return v
    try:
        return base64.b64decode(v, validate=True)
    except ValueError as e:
        raise DumpFormatError(f"{name} is not base64: {e}") from None


def _record_bytes(entry: dict) -> tuple[bytes | None, bytes | None]:
    if entry.get("key_bytes") is not None:
        return _bytes_field(entry, "key_bytes"), _bytes_field(entry, "value_bytes")
    type_id = entry.get("type_id")
    classes = RECORD_CLASSES.get(type_id)
    if classes is None:
        raise DumpFormatError(f"type_id {type_id!r} is not a known record type and the entry has "
                              "no key_bytes")
    key, value = entry.get("key"), entry.get("value")
    if isinstance(key, tuple):      # Avro union: (full name, dict)
        key = key[1]
    if isinstance(value, tuple):
        value = value[1]
    key_obj = from_dict(classes[0], key, "key")
    if value is None:
        return encode_key(key_obj), None
    version = entry.get("version")
    value_obj = from_dict(classes[1], value, "value")
    return encode_key(key_obj), encode_value(value_obj, version)


def _jsonl_entries(path: Path, problems: Problems,
                   progress: Progress | None) -> Iterator[tuple[int, int, Any]]:
    position = 0
    with open(path, "rb") as f:
        for lineno, line in enumerate(f, 1):
            size = len(line)
            if progress is not None:
                progress.update(size)
            if line.strip():
                try:
                    yield position, size, orjson.loads(line)
                except orjson.JSONDecodeError as e:
                    problems.report(str(path), position, f"line {lineno} is not JSON: {e}",
                                    skipped="line")
            position += size


def _avro_entries(path: Path, problems: Problems,
                  progress: Progress | None) -> Iterator[tuple[int, int, Any]]:
    import fastavro
    with open(path, "rb") as f:
        try:
            reader = fastavro.reader(f, return_record_name=True)
            last = 0
            for entry in reader:
                pos = f.tell()
                if progress is not None and pos != last:
                    progress.update(pos - last)
                    last = pos
                yield pos, 0, entry
        except (ValueError, EOFError, OSError, StopIteration) as e:
            # An Avro container cannot be resynchronised past a damaged block.
            problems.report(str(path), f.tell(), f"unreadable Avro data: {e}", skipped="rest of file")


def read_dump(path: Path, problems: Problems,
              progress: Progress | None = None) -> Iterator[LogBatch]:
    source = str(path)
    entries = _avro_entries if path.suffix == ".avro" else _jsonl_entries
    for position, size, entry in entries(path, problems, progress):
        try:
            if not isinstance(entry, dict):
                raise DumpFormatError("entry is not an object")
            partition, batch = _entry_batch(entry, position, size)
        except (DumpFormatError, ValueError) as e:
            problems.report(source, position, f"bad dump entry: {e}",
                            offset=entry.get("offset") if isinstance(entry, dict) else None,
                            skipped="entry")
            continue
        yield LogBatch(source, partition, batch)


__all__ = ["DumpWriter", "DumpStats", "DumpRecord", "entries_of", "read_dump", "open_output",
           "CONTROL"]
