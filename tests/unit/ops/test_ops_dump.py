"""Dump files: JSON lines and Avro, unknown types, the shipped schema, reading dumps back."""
from __future__ import annotations

import base64
import io

import fastavro
import orjson
import pytest

from ops import avro
from ops.describe import replay_model
from ops.dumpfile import DumpWriter, read_dump
from ops.generator import GeneratorSpec
from ops.logsource import OffsetsLogError, Problems
from ops.materialise import OffsetsReplay

from .logs import LogBuilder, commit, generated_batches

FUTURE_KEY = (42).to_bytes(2, "big") + b"\x00\x03app"


def _dump(batches, fmt: str) -> tuple[bytes, DumpWriter]:
    out = io.BytesIO()
    writer = DumpWriter(out, fmt)
    for lb in batches:
        writer.write_batch(lb)
    writer.close()
    return out.getvalue(), writer


def test_shipped_avro_schema_matches_the_codec():
    assert avro.shipped_schema() == avro.entry_schema()
    fastavro.parse_schema(avro.shipped_schema())


def test_unknown_types_appear_as_unknown_with_raw_bytes_and_are_counted():
    log = LogBuilder().write(commit("g", "t", 0, 5), raw=[(FUTURE_KEY, b"\x00\x00\x07"),
                                                         (FUTURE_KEY, None)])
    data, writer = _dump(log.log_batches(), "jsonl")
    entries = [orjson.loads(line) for line in data.splitlines()]
    assert [e["type"] for e in entries] == ["OFFSET_COMMIT", "unknown", "unknown"]
    unknown = entries[1]
    assert unknown["type_id"] == 42 and base64.b64decode(unknown["key_bytes"]) == FUTURE_KEY
    assert base64.b64decode(unknown["value_bytes"]) == b"\x00\x00\x07"
    assert entries[2]["value_bytes"] is None
    assert writer.stats.unknown_types == {42: 2} and writer.stats.by_type["unknown"] == 2
    first = entries[0]
    assert first["key"] == {"group": "g", "topic": "t", "partition": 0}
    assert first["value"]["offset"] == 5 and first["version"] == 4
    assert {"partition", "offset", "timestamp", "producer_id"} <= first.keys()


def test_transaction_markers_are_entries():
    log = LogBuilder().write(commit("g", "t", 0, 5), producer_id=9).marker(9, committed=False)
    data, _ = _dump(log.log_batches(), "jsonl")
    entries = [orjson.loads(line) for line in data.splitlines()]
    assert entries[0]["producer_id"] == 9 and entries[0]["transactional"] is True
    assert entries[1]["type"] == "CONTROL" and entries[1]["control"] == "ABORT"


@pytest.mark.parametrize("fmt", ["jsonl", "avro"])
def test_a_dump_replays_exactly_like_its_log(tmp_path, fmt):
    batches = generated_batches(GeneratorSpec(records=5000, groups=16, seed=21, partitions=3))
    data, writer = _dump(batches, fmt)
    path = tmp_path / f"dump.{fmt}"
    path.write_bytes(data)
    if fmt == "avro":
        entries = list(fastavro.reader(io.BytesIO(data)))
        assert len(entries) == writer.stats.entries
    want = replay_model(OffsetsReplay().feed_all(batches))
    got = replay_model(OffsetsReplay().feed_all(read_dump(path, Problems())))
    assert got["groups"] == want["groups"]
    assert got["summary"]["records"] == want["summary"]["records"]
    assert got["summary"]["unknown_types"] == want["summary"]["unknown_types"]


def test_a_bad_dump_line_names_file_and_byte(tmp_path):
    log = LogBuilder().write(commit("g", "t", 0, 5)).write(commit("g", "t", 0, 6))
    data, _ = _dump(log.log_batches(), "jsonl")
    first, second = data.splitlines(keepends=True)
    path = tmp_path / "d.jsonl"
    path.write_bytes(first + b"{not json\n" + second)
    with pytest.raises(OffsetsLogError, match=f"d.jsonl at byte {len(first)}: line 2 is not JSON"):
        list(read_dump(path, Problems()))
    problems = Problems(skip=True, echo=False)
    assert len(list(read_dump(path, problems))) == 2 and problems.items[0].skipped == "line"


def test_a_dump_entry_with_a_wrong_field_is_rejected(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(orjson.dumps({"partition": 0, "offset": 0, "timestamp": 0, "type": "OFFSET_COMMIT",
                                   "type_id": 1, "version": 4, "key": {"group": "g", "topic": "t",
                                                                       "partition": "zero"},
                                   "value": None}) + b"\n")
    with pytest.raises(OffsetsLogError, match="key.partition is not an integer"):
        list(read_dump(path, Problems()))
