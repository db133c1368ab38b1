"""`kcoord offsets show`: the records at chosen offsets, raw bytes and all.

Rules: this is the tool for a record that stops a shard from loading. It
never aborts on a record it cannot decode: it prints the raw key and value in hex, the
decode error, and the `state.load.skip.corrupt.offsets` entry that would skip it. A
record that decodes is shown decoded, with its hex too. Damaged batches are reported and
reading goes on (the command implies --skip-corrupt).
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator

import orjson

from ops.logsource import LogBatch
from ops.recordjson import to_dict, type_name
from records import RecordDecodeError, UnknownRecord, UnknownRecordVersionError, decode_record
from records.batch import ControlMarker
from records.partitioner_records import is_partitioner_marker, marker_partitioner


def select(batches: Iterable[LogBatch], partition: int | None, offset: int | None,
           count: int | None) -> Iterator[tuple[LogBatch, object]]:
    """(batch, record) for the records of `partition` from `offset` on, at most `count`."""
    shown = 0
    for lb in batches:
        if partition is not None and lb.partition != partition:
            continue
        for r in lb.batch.records:
            if offset is not None and r.offset < offset:
                continue
            if count is not None and shown >= count:
                return
            shown += 1
            yield lb, r
        if count is not None and shown >= count:
            return


def describe(lb: LogBatch, r, topic: str | None = None) -> dict:
    """One record as a JSON-able dict: where it is, its raw bytes in hex, and either the
    decoded key/value or the error that stops it from loading."""
    b = lb.batch
    key = None if r.key is None else bytes(r.key)
    value = None if r.value is None else bytes(r.value)
    out: dict = {"partition": lb.partition, "offset": r.offset, "timestamp": r.timestamp,
                 "producer_id": b.producer_id, "transactional": b.is_transactional,
                 "key_hex": None if key is None else key.hex(),
                 "value_hex": None if value is None else value.hex()}
    if b.is_control_batch:
        out["type"] = "CONTROL"
        out["control"] = (ControlMarker(b.control_type).name if b.control_type in (0, 1)
                          else str(b.control_type))
        return out
    rtype = int.from_bytes(key[:2], "big", signed=True) if key and len(key) >= 2 else -1
    out["type"] = type_name(rtype)
    out["type_id"] = rtype
    out["version"] = int.from_bytes(value[:2], "big", signed=True) if value and len(value) >= 2 else None
    try:
        rec = decode_record(key, value, topic=topic, partition=lb.partition, offset=r.offset)
    except (RecordDecodeError, UnknownRecordVersionError) as e:
        out["error"] = str(e)
        out["skip_with"] = f"state.load.skip.corrupt.offsets={lb.partition}:{r.offset}"
        return out
    if isinstance(rec, UnknownRecord):
        if is_partitioner_marker(rec.key):   # the topic's group placement (records/partitioner_records.py)
            out["key"] = None
            out["value"] = {"partitioner": marker_partitioner(rec.key, rec.value)}
            return out
        out["type"] = "unknown"
        out["note"] = "unknown record type: skipped on load, as Kafka does (KIP-915)"
        return out
    out["key"] = to_dict(rec.key)
    out["value"] = None if rec.value is None else to_dict(rec.value)
    return out


def render_text(d: dict) -> str:
    head = (f"partition {d['partition']} offset {d['offset']} timestamp {d['timestamp']} "
            f"producer {d['producer_id']}{' transactional' if d['transactional'] else ''}  {d['type']}")
    if d.get("version") is not None:
        head += f" value version {d['version']}"
    lines = [head]
    if d["type"] == "CONTROL":
        lines.append(f"  control: {d['control']}")
    for part in ("key", "value"):
        raw = d[f"{part}_hex"]
        lines.append(f"  {part} hex ({'null' if raw is None else f'{len(raw) // 2} B'}): "
                     f"{'' if raw is None else raw}")
    if "error" in d:
        lines.append(f"  ERROR: {d['error']}")
        lines.append(f"  kcoord serve skips it only with --config {d['skip_with']}")
    elif "note" in d:
        lines.append(f"  {d['note']}")
    elif d["type"] != "CONTROL":
        lines.append(f"  key:   {orjson.dumps(d['key']).decode()}")
        lines.append(f"  value: {'null (tombstone)' if d['value'] is None else orjson.dumps(d['value']).decode()}")
    return "\n".join(lines) + "\n"
