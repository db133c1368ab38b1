"""`kcoord offsets ...` end to end on files (no broker)."""
from __future__ import annotations

import json

import orjson
import pytest

from coordinator.cli import build_parser


def main(argv: list[str]) -> int:
    """`kcoord ARGV` without the process-wide set-up of coordinator.cli.main (uvloop, logging)."""
    args = build_parser().parse_args(argv)
    return args.func(args)


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("log")
    assert main(["offsets", "generate", "--out", str(out), "--records", "4000", "--groups", "16",
                 "--partitions", "3", "--seed", "5"]) == 0
    return out


def test_generate_writes_a_segment_per_partition(log_dir):
    assert sorted(p.parent.name for p in log_dir.rglob("*.log")) == [
        "__consumer_offsets-0", "__consumer_offsets-1", "__consumer_offsets-2"]


def test_dump_then_replay_the_dump(log_dir, tmp_path, capsys):
    dump = tmp_path / "d.avro"
    assert main(["offsets", "dump", str(log_dir), "--format", "avro", "-o", str(dump)]) == 0
    stats = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert stats["entries"] > 4000 and stats["unknown_types"]
    assert main(["offsets", "replay", str(dump), "--json"]) == 0
    from_dump = json.loads(capsys.readouterr().out)
    assert main(["offsets", "replay", str(log_dir), "--json"]) == 0
    from_log = json.loads(capsys.readouterr().out)
    assert from_dump["groups"] == from_log["groups"] and from_log["groups"]


def test_replay_text_and_html(log_dir, tmp_path, capsys):
    html = tmp_path / "r.html"
    assert main(["offsets", "replay", str(log_dir), "--html", str(html), "--group",
                 "billing-classic-0"]) in (0,)
    out = capsys.readouterr().out
    assert out.startswith("GROUP") and "CURRENT-OFFSET" in out
    assert html.read_text().count("<svg") == 4


def test_corrupt_input_exits_2_naming_file_and_byte(log_dir, tmp_path, capsys):
    seg = next(log_dir.rglob("*.log"))
    bad = tmp_path / "__consumer_offsets-0" / "00000000000000000000.log"
    bad.parent.mkdir()
    data = bytearray(seg.read_bytes())
    data[200] ^= 0x55
    bad.write_bytes(bytes(data))
    assert main(["offsets", "replay", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad} at byte " in err and "--skip-corrupt" in err
    assert main(["offsets", "replay", str(bad), "--skip-corrupt", "--json"]) == 0
    captured = capsys.readouterr()
    model = json.loads(captured.out)
    assert model["summary"]["problems"][0]["source"] == str(bad)
    assert "warning:" in captured.err


def test_downgrade_check_writes_tombstones_for_review(log_dir, tmp_path, capsys):
    tombs = tmp_path / "t.jsonl"
    assert main(["offsets", "downgrade-check", str(log_dir), "--write-tombstones", str(tombs)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("KIP-915 downgrade check: state would be lost")
    assert "(not applied; use --apply)" in out
    entries = [orjson.loads(line) for line in tombs.read_bytes().splitlines()]
    assert entries and all(e["value"] is None and e["value_bytes"] is None
                           if e["type"] == "unknown" else e["value"] is None for e in entries)


def test_apply_needs_an_explicit_target(log_dir, tmp_path, capsys):
    assert main(["offsets", "downgrade-check", str(log_dir), "--apply"]) == 2
    assert "--apply needs" in capsys.readouterr().err


def test_fail_on_loss(log_dir, capsys):
    assert main(["offsets", "downgrade-check", str(log_dir), "--json", "--fail-on-loss"]) == 3
    assert json.loads(capsys.readouterr().out)["groups_losing_state"]


def test_dump_per_partition_writes_one_file_per_partition(log_dir, tmp_path, capsys):
    out = tmp_path / "dumps"
    assert main(["offsets", "dump", str(log_dir), "--per-partition", "-o", str(out)]) == 0
    files = sorted(out.iterdir())
    assert [f.name for f in files] == ["partition-0.jsonl", "partition-1.jsonl", "partition-2.jsonl"]
    for n, f in enumerate(files):
        assert {orjson.loads(line)["partition"] for line in f.read_bytes().splitlines()} == {n}
    assert main(["offsets", "dump", str(log_dir), "--per-partition"]) == 2
