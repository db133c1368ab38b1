"""kcoord's private connect-group records (types 1000-1004, seed 001) in the offsets tools:
downgrade-check reports them and builds their tombstones, dumps decode and round-trip them,
the tables show connect workers, and bulk replay loads them as a record-by-record replay does."""
from __future__ import annotations

import pytest

from coordinator.group.bulk_replay import BulkReplay
from coordinator.group.modern.connect.group import ConnectGroup
from coordinator.group.shard import GroupCoordinatorShard
from ops import downgrade
from ops.dumpfile import DumpStats, DumpWriter, entries_of, read_dump
from ops.logsource import Problems
from ops.recordjson import RECORD_CLASSES, from_dict, to_dict, type_name
from ops.tables import partition_tables
from records import decode_record, encode_key, encode_value
from tests.unit.connect.driver import ConnectContext

from .test_ops_downgrade import coordinator_log, run_check

W = "workers"


def running_group() -> ConnectContext:
    """One worker W1 that installed an assignment of connector A and its task 0."""
    c = ConnectContext()
    c.cgh(W, "W1", 0)
    c.prepare(W, "W1", 1)
    assert c.install(W, "W1", 1, 2, {"W1": (["A", "A/0"], 2, b"m1")}).error_code == 0
    c.cgh(W, "W1", 1)
    return c


def test_downgrade_check_reports_a_running_connect_group_and_leaves_it_alone():
    c = running_group()
    report, full, new = run_check(coordinator_log(c))
    g = {x["group"]: x for x in report["groups"]}[W]
    assert g["would_lose_state"] and report["groups_losing_state"] == [W]
    assert g["full"]["type"] == "connect" and g["full"]["members"] == 1
    assert "CONNECT_GROUP_MEMBER_METADATA" in g["new_protocol_records"]
    assert any("never deletes" in r for r in g["reasons"])
    assert g["live_new_protocol_keys"] > 0
    items, skipped = downgrade.tombstones(full, new)
    # Tombstoning a running group would fence its workers: only reported.
    assert items == [] and skipped[0]["group"] == W and "stop them first" in skipped[0]["reason"]


def test_downgrade_tombstones_remove_every_live_key_of_an_empty_connect_group():
    c = running_group()
    c.cgh(W, "W1", -1)
    assert not c.group(W).members
    report, full, new = run_check(coordinator_log(c))
    items, skipped = downgrade.tombstones(full, new)
    live = {k for (p, k), (gid, _) in new.live.items() if gid == W}
    assert skipped == [] and live and live <= {t["key"] for t in items}
    assert all(t["type"].startswith("CONNECT_GROUP_") for t in items)
    # Applying them leaves no live connect key: a log that moves to Kafka is clean.
    report2, _, new2 = run_check(coordinator_log(c) + downgrade.tombstone_batches(items, 9_999))
    assert new2.live == {} and W not in report2["groups_losing_state"]


def test_connect_records_decode_by_name_and_round_trip_through_json():
    c = running_group()
    stats = DumpStats()
    entries = [e for lb in coordinator_log(c) for e in entries_of(lb, stats)]
    connect = [e for e in entries if 1000 <= e.get("type_id", 0) <= 1004]
    assert {e["type"] for e in connect} >= {"CONNECT_GROUP_METADATA", "CONNECT_GROUP_CURRENT_MEMBER_ASSIGNMENT"}
    assert stats.unknown_types == {}
    for _, key, value in c.log:
        rec = decode_record(key, value)
        kc, vc = RECORD_CLASSES[rec.key.record_type]
        assert encode_key(from_dict(kc, to_dict(rec.key))) == key
        if value is not None:
            assert encode_value(from_dict(vc, to_dict(rec.value)), rec.value_version) == value
    assert type_name(1004) == "CONNECT_GROUP_CURRENT_MEMBER_ASSIGNMENT"


def test_membership_history_shows_connect_workers_and_their_units():
    c = running_group()
    tables = partition_tables(coordinator_log(c))
    rows = [r for r in tables["membership_history"] if r[5] == "connect"]
    assert any(r[1] == "W1" and r[6] == "join_or_update" for r in rows)
    assert any(r[6] == "assignment" and r[9] == "A:-1,0" and r[8] == "STABLE" for r in rows)
    counts = {r[2] for r in tables["record_type_counts"] if r[0] == W}
    assert "CONNECT_GROUP_METADATA" in counts and "unknown" not in counts


def _bulk(c: ConnectContext, log) -> tuple[GroupCoordinatorShard, BulkReplay]:
    shard = GroupCoordinatorShard(0, c.config, c.shard.image)
    bulk = BulkReplay(shard)
    bulk.add_batch([type("R", (), {"key": k, "value": v, "offset": o}) for o, k, v in log])
    bulk.flush()
    return shard, bulk


def test_bulk_replay_loads_connect_groups_like_a_record_by_record_replay():
    c = running_group()
    c.cgh(W, "W2", 0)
    running = list(c.log)
    shard, bulk = _bulk(c, running)
    a, b = shard.groups.get(W), c.reload(running).groups.get(W)
    assert isinstance(a, ConnectGroup) and set(a.members) == {"W1", "W2"}
    assert (a.group_epoch, a.assignment_epoch, {m: a.members[m].assigned for m in a.members}) == \
        (b.group_epoch, b.assignment_epoch, {m: b.members[m].assigned for m in b.members})
    # Connect records are counted under their own type ids (their key's first byte is 3).
    assert sum(bulk.type_counts.get(t, 0) for t in range(1000, 1005)) == sum(1 for _, k, _ in running if k[0] == 3)
    c.advance(120_000)        # sessions expire: fencing and removal records too
    shard, _ = _bulk(c, c.log)
    assert type(shard.groups.get(W)) is type(c.reload().groups.get(W))


def test_a_dump_of_connect_records_reads_back_to_the_same_bytes(tmp_path):
    c = running_group()
    for fmt in ("jsonl", "avro"):
        if fmt == "avro":
            pytest.importorskip("fastavro")
        path = tmp_path / f"log.{fmt}"
        with open(path, "wb") as f:
            w = DumpWriter(f, fmt)
            for lb in coordinator_log(c):
                w.write_batch(lb)
            w.close()
        problems = Problems()
        back = [(r.key, r.value) for lb in read_dump(path, problems) for r in lb.batch.records]
        assert problems.items == [], f"{fmt}: {problems.items}"
        assert back == [(k, v) for _, k, v in c.log], f"{fmt} dump changed the records"
