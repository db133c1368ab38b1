"""The Avro schema of a dump entry, derived from the `records/` dataclasses.

The shipped file `ops/avsc/offsets_log_entry.avsc` is what users hand to other
Avro tools; `entry_schema()` builds the same schema from the dataclasses, and a unit
test keeps the two equal, so the file cannot drift from the codec.

Keys and values are unions of one named record per record type, written with
fastavro's tuple notation `(full name, dict)` because several types share a shape
(LegacyOffsetCommitKey and OffsetCommitKey, for one).
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

from ops.recordjson import RECORD_CLASSES, fields_of

NAMESPACE = "kcoord.offsets"
SCHEMA_FILE = Path(__file__).parent / "avsc" / "offsets_log_entry.avsc"

_ENVELOPE_DOC = ("One record of a __consumer_offsets-format log, or one transaction marker "
                 "(type CONTROL). Unknown and undecodable records carry key_bytes/value_bytes.")


class _Builder:
    def __init__(self) -> None:
        self.defined: set[str] = set()

    def kind(self, kind: tuple):
        k = kind[0]
        if k == "int":
            return "long"
        if k == "str":
            return "string"
        if k == "bytes":
            return "bytes"
        if k == "uuid":
            return "string"
        if k == "ms":
            return "long"
        if k == "opt":
            return ["null", self.kind(kind[1])]
        if k == "tuple":
            return {"type": "array", "items": self.kind(kind[1])}
        if k == "tags":
            return {"type": "array", "items": self.named("TaggedField", [
                {"name": "tag", "type": "long"}, {"name": "data", "type": "bytes"}])}
        return self.struct(kind[1])

    def named(self, name: str, fields: list):
        if name in self.defined:
            return f"{NAMESPACE}.{name}"
        self.defined.add(name)
        return {"type": "record", "name": name, "namespace": NAMESPACE, "fields": fields}

    def struct(self, cls: type):
        name = avro_name(cls)
        if name in self.defined:
            return f"{NAMESPACE}.{name}"
        self.defined.add(name)
        fields = []
        for fname, kind in fields_of(cls):
            t = self.kind(kind)
            field = {"name": fname, "type": t}
            if isinstance(t, list) and t[0] == "null":
                field["default"] = None
            fields.append(field)
        return {"type": "record", "name": name, "namespace": NAMESPACE, "fields": fields}


@functools.cache
def entry_schema() -> dict:
    b = _Builder()
    keys = ["null"] + [b.struct(k) for k, _ in RECORD_CLASSES.values()]
    values = ["null"] + [b.struct(v) for _, v in RECORD_CLASSES.values()]
    opt = lambda t: {"type": ["null", t], "default": None}  # noqa: E731
    return {
        "type": "record", "name": "OffsetsLogEntry", "namespace": NAMESPACE, "doc": _ENVELOPE_DOC,
        "fields": [
            {"name": "partition", "type": "int"},
            {"name": "offset", "type": "long"},
            {"name": "timestamp", "type": "long"},
            {"name": "producer_id", "type": "long"},
            {"name": "producer_epoch", "type": "int"},
            {"name": "transactional", "type": "boolean"},
            {"name": "type", "type": "string"},
            {"name": "type_id", "type": "int"},
            {"name": "version", **opt("int")},
            {"name": "control", **opt("string")},
            {"name": "key", "type": keys, "default": None},
            {"name": "value", "type": values, "default": None},
            {"name": "key_bytes", **opt("bytes")},
            {"name": "value_bytes", **opt("bytes")},
            {"name": "error", **opt("string")},
        ],
    }


def schema_text() -> str:
    return json.dumps(entry_schema(), indent=2) + "\n"


def shipped_schema() -> dict:
    return json.loads(SCHEMA_FILE.read_text())


@functools.cache
def parsed_schema():
    import fastavro
    return fastavro.parse_schema(shipped_schema())


def avro_name(cls: type) -> str:
    """The Avro name of a records class: its own, except for the nested structs generated from
    Kafka's jar, which take their record's module as a prefix (two records have a `TaskIds`)."""
    module = cls.__module__
    if module.startswith("records.generated."):
        record = module.split(".")[2]
        return "".join(p.capitalize() for p in record.split("_")) + cls.__name__
    return cls.__name__


def full_name(cls: type) -> str:
    return f"{NAMESPACE}.{avro_name(cls)}"


if __name__ == "__main__":  # regenerate the shipped file: python -m ops.avro
    SCHEMA_FILE.parent.mkdir(exist_ok=True)
    SCHEMA_FILE.write_text(schema_text())
    print(f"wrote {SCHEMA_FILE}")
