"""The downgrade check and the dump on the partitioner marker (type 1300, kcoord-private,
records/partitioner_records.py): reported as the log's placement, never as a group."""
from __future__ import annotations

from ops.dumpfile import DumpStats, entries_of
from ops.recordjson import type_name
from records.partitioner_records import PARTITIONER_MARKER, marker_record

from .logs import LogBuilder, commit
from .test_ops_downgrade import run_check


def test_a_marked_log_reports_its_placement_and_no_group_for_the_marker():
    log = LogBuilder().write(raw=[marker_record("kafka")]).write(commit("orders", "t", 0, 5))
    report, _, _ = run_check(log.log_batches())
    placement = report["partitioner"]
    assert placement["placement"] == "kafka"
    assert placement["markers"] == [{"partition": 0, "offset": 0, "partitioner": "kafka"}]
    assert "before the marker route half the groups elsewhere" in placement["note"]
    assert [g["group"] for g in report["groups"]] == ["orders"]
    assert report["verdict"] == "no state lost"


def test_a_log_without_a_marker_is_reported_as_the_legacy_placement():
    report, _, _ = run_check(LogBuilder().write(commit("orders", "t", 0, 5)).log_batches())
    assert report["partitioner"]["placement"] == "legacy" and report["partitioner"]["markers"] == []
    assert "kcoord offsets load" in report["partitioner"]["note"]


def test_the_dump_names_the_marker_and_keeps_its_bytes():
    assert type_name(PARTITIONER_MARKER) == "PARTITIONER_MARKER"
    key, value = marker_record("kafka")
    stats = DumpStats()
    [lb] = LogBuilder().write(raw=[(key, value)]).log_batches()
    [entry] = entries_of(lb, stats, raw_bytes=True)
    assert entry["type"] == "PARTITIONER_MARKER" and entry["type_id"] == PARTITIONER_MARKER
    assert entry["value"] == {"partitioner": "kafka"}
    assert (entry["key_bytes"], entry["value_bytes"]) == (key, value)
    assert stats.by_type == {"PARTITIONER_MARKER": 1} and not stats.unknown_types
