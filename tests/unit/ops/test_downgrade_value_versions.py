"""`kcoord offsets downgrade-check` reports value versions an older Kafka cannot read
(KAFKA-18672: a known record type at an unknown value version fails the partition's load)."""
from __future__ import annotations

import struct

from ops import downgrade
from ops.logsource import Problems
from ops.materialise import OffsetsReplay
from ops.value_versions import HIGHEST_VALUE_VERSION, ValueVersionScan, render_lines, value_version
from records.generated.index import RECORDS

from .logs import LogBuilder, commit, empty_group
from .test_ops_downgrade import run_check


def _key(rtype: int, group: str) -> bytes:
    g = group.encode()
    return struct.pack(">hh", rtype, len(g)) + g


def test_kafka_44_column_is_the_generated_records_index():
    # records/generated/ comes from Kafka 4.4's kafka-group-coordinator jar: same types, same
    # highest value version.
    highest: dict[int, int] = {}
    for rtype, _module, part, version in RECORDS:
        if part == "value":
            highest[rtype] = max(version, highest.get(rtype, -1))
    assert HIGHEST_VALUE_VERSION["4.4"] == highest


def test_kcoord_own_records_load_on_every_line():
    log = LogBuilder().write(commit("g", "orders", 0, 5, version=4), commit("g", "orders", 1, 6, version=3),
                             empty_group("classic"))
    report, _, _ = run_check(log.log_batches())
    section = report["value_versions"]
    assert list(section) == ["3.9", "4.0", "4.1", "4.2", "4.3", "4.4"]
    assert all(r["load"] == "loads" and r["records_above"] == 0 for r in section.values())
    assert not any("value versions" in reason for g in report["groups"] for reason in g["reasons"])


def test_a_type_an_older_line_knows_at_a_newer_version_fails_that_line_only():
    # Type 9 (ShareGroupPartitionMetadata) is known to 4.0 with value version 0 only, unknown to
    # kcoord and to 4.1+ (skipped there, KIP-915). A version-1 value fails 4.0's load.
    raw = [(_key(9, "share-g"), b"\x00\x01" + b"\x00" * 8), (_key(9, "share-g"), b"\x00\x00" + b"\x00" * 8)]
    report, _, _ = run_check(LogBuilder().write(raw=raw).log_batches())
    section = report["value_versions"]
    assert section["4.0"]["load"] == "fails"
    assert section["4.0"]["by_type_and_version"] == [{"type": 9, "value_version": 1, "records": 1}]
    assert section["4.0"]["examples"] == [{"partition": 0, "offset": 0, "type": 9, "value_version": 1,
                                           "highest_readable": 0, "group": "share-g"}]
    for line in ("3.9", "4.1", "4.2", "4.3", "4.4"):
        assert section[line]["load"] == "loads", line
    group = next(g for g in report["groups"] if g["group"] == "share-g")
    assert any("Kafka 4.0 cannot read" in r for r in group["reasons"])


def test_a_line_with_a_lower_highest_version_flags_decoded_records():
    # The table is data: a line whose OffsetCommitValue stopped at version 3 fails on kcoord's v4.
    scan = ValueVersionScan({"old": {1: 3}, "new": {1: 4}})
    new = downgrade.NewProtocolRecords(value_versions=scan)
    full = OffsetsReplay(Problems(), on_record=new.observe)
    log = LogBuilder().write(commit("g", "t", 0, 1, version=4), commit("g", "t", 1, 1, version=3))
    for lb in log.log_batches():
        full.feed(lb)
    report = scan.report()
    assert report["old"]["by_type_and_version"] == [{"type": 1, "value_version": 4, "records": 1}]
    assert report["new"]["load"] == "loads"
    assert scan.unreadable_lines("g") == ["old"]
    assert render_lines(report) == [
        "Kafka old: FAILS the load: 1 record(s) above its value versions: type 1 v4 (1)",
        "Kafka new: reads every value version in this log"]


def test_tombstones_and_superseded_records():
    scan = ValueVersionScan({"x": {1: 3}})
    scan.observe(0, 0, 1, 4, "g")          # superseded later, still in the log: counts
    scan.observe(0, 1, 1, None, "g")       # the tombstone has no value version
    assert scan.report()["x"]["records_above"] == 1
    assert value_version(None) is None and value_version(b"\x00") is None
    assert value_version(b"\x00\x05rest") == 5


def test_examples_stay_bounded():
    scan = ValueVersionScan({"x": {1: 0}})
    for i in range(1000):
        scan.observe(0, i, 1, 1, f"g{i % 3}")
    r = scan.report()["x"]
    assert r["records_above"] == 1000 and len(r["examples"]) == 20


def test_a_key_only_record_type_unknown_everywhere_is_never_flagged():
    report, _, _ = run_check(LogBuilder().write(raw=[(_key(500, "g"), b"\x00\x07")]).log_batches())
    assert all(r["load"] == "loads" for r in report["value_versions"].values())


def run_check_raw(batches):
    """The check as `downgrade-check --skip-corrupt` runs it with the raw scan wired in: every
    batch goes to the value-version scan before the replays."""
    problems = Problems(skip=True, echo=False)
    new = downgrade.NewProtocolRecords()
    full = OffsetsReplay(problems, on_record=new.observe)
    classic = OffsetsReplay(problems, decode=downgrade.classic_only_decode)
    for lb in batches:
        new.value_versions.feed(lb)
        full.feed(lb)
        classic.feed(lb)
    return downgrade.check(full, classic, new)


def test_the_raw_scan_sees_a_newer_kafkas_value_version_that_kcoord_cannot_decode():
    newer = LogBuilder().write(commit("g", "orders", 0, 5, version=4))
    key, value = newer.log_batches()[0].batch.records[0].key, newer.log_batches()[0].batch.records[0].value
    v5 = b"\x00\x05" + bytes(value[2:])          # an OffsetCommitValue version no Kafka line reads yet
    log = LogBuilder().write(commit("g", "orders", 1, 6, version=3), raw=[(bytes(key), v5)])
    report = run_check_raw(log.log_batches())
    assert report["summary"]["problems"], "kcoord's own decoder refuses the record (skipped with --skip-corrupt)"
    for line, r in report["value_versions"].items():
        assert r["by_type_and_version"] == [{"type": 1, "value_version": 5, "records": 1}], line
        assert r["examples"][0]["offset"] == 1 and r["examples"][0]["group"] == "g"
    group = next(g for g in report["groups"] if g["group"] == "g")
    assert any("Kafka 3.9, 4.0, 4.1, 4.2, 4.3, 4.4 cannot read" in r for r in group["reasons"])


def test_raw_and_decoded_records_are_counted_once():
    raw = [(_key(9, "share-g"), b"\x00\x01" + b"\x00" * 8)]
    report = run_check_raw(LogBuilder().write(commit("g", "t", 0, 1), raw=raw).log_batches())
    assert report["value_versions"]["4.0"]["records_above"] == 1
