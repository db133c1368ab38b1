"""`kcoord offsets show`: a record that stops a shard from loading, shown instead of aborting."""
from __future__ import annotations

import json

from records import OffsetCommitKey, encode_key

from .logs import LogBuilder, commit
from .test_ops_cli import main

BAD_KEY = encode_key(OffsetCommitKey("bad-group", "orders", 0))
BAD_VALUE = b"\x00\x63" + b"\x00" * 12     # OffsetCommitValue claiming version 99


def write_log(tmp_path):
    part = tmp_path / "__kcoord_offsets-1"
    part.mkdir()
    log = LogBuilder().write(commit("g", "orders", 0, 5)).write(raw=[(BAD_KEY, BAD_VALUE)]) \
        .write(commit("g", "orders", 1, 6))
    (part / "00000000000000000000.log").write_bytes(log.bytes())
    return tmp_path


def test_show_prints_the_raw_bytes_and_the_decode_error_of_a_bad_record(tmp_path, capsys):
    d = write_log(tmp_path)
    assert main(["offsets", "show", str(d), "--partition", "1", "--offset", "1"]) == 0
    out = capsys.readouterr().out
    assert "partition 1 offset 1" in out and "OFFSET_COMMIT value version 99" in out
    assert f"key hex ({len(BAD_KEY)} B): {BAD_KEY.hex()}" in out
    assert f"value hex (14 B): {BAD_VALUE.hex()}" in out
    assert "ERROR: unknown value version 99" in out
    assert "--config state.load.skip.corrupt.offsets=1:1" in out
    assert "offset 2" not in out            # --offset alone shows one record


def test_show_json_covers_good_and_bad_records(tmp_path, capsys):
    d = write_log(tmp_path)
    assert main(["offsets", "show", str(d), "--partition", "1", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["offset"] for r in rows] == [0, 1, 2]
    good, bad = rows[0], rows[1]
    assert good["key"] == {"group": "g", "topic": "orders", "partition": 0} and good["value"]["offset"] == 5
    assert "error" not in good and good["value_hex"]
    assert bad["version"] == 99 and bad["value_hex"] == BAD_VALUE.hex() and "unknown value version 99" in bad["error"]
    assert bad["skip_with"] == "state.load.skip.corrupt.offsets=1:1"


def test_show_with_nothing_selected_exits_1(tmp_path, capsys):
    d = write_log(tmp_path)
    assert main(["offsets", "show", str(d), "--partition", "1", "--offset", "9"]) == 1
    assert "no record in partition 1 at or after offset 9" in capsys.readouterr().err


def test_dump_keeps_a_bad_record_with_its_error(tmp_path, capsys):
    """dump does not abort on the record either (it keeps the raw bytes and the error)."""
    d = write_log(tmp_path)
    out = tmp_path / "d.jsonl"
    assert main(["offsets", "dump", str(d), "-o", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["offset"] for r in rows] == [0, 1, 2]
    assert "unknown value version 99" in rows[1]["error"]
