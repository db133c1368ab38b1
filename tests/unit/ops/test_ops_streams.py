"""Streams groups (KIP-1071, record types 17 and 19-23) in the offsets tools: `replay` describes
the group (epochs, topology, members' tasks) and counts its records by name, `dump` decodes them
and round-trips them through JSON and Avro, `downgrade-check` reports the group and builds the
tombstones of an empty one, the tables (the Spark job's) show its members, and `load` routes its
records to the group's partition."""
from __future__ import annotations

import io

import fastavro

from coordinator.group.hashing import partition_for
from ops import downgrade
from ops.describe import render_text, replay_model
from ops.dumpfile import DumpStats, DumpWriter, entries_of, read_dump
from ops.load import LoadPlan, plan
from ops.logsource import Problems
from ops.materialise import OffsetsReplay
from ops.recordjson import RECORD_CLASSES, from_dict, to_dict
from ops.tables import partition_tables
from records import CoordinatorRecord, decode_record, encode_key, encode_record, encode_value
from records.batch import build_batch
from tests.unit.group.streams.driver import beat
from tests.unit.group.streams.test_heartbeat import App, _fast

from .test_ops_downgrade import run_check

STREAMS_NAMES = {"STREAMS_GROUP_METADATA", "STREAMS_GROUP_MEMBER_METADATA", "STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA",
                 "STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER", "STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT",
                 "STREAMS_GROUP_TOPOLOGY"}


def running_app() -> App:
    """Two members of one application, settled on the 6 tasks of subtopology 0."""
    app = App(_fast())
    app.join("m1", "p1")
    app.join("m2", "p2")
    app.settle()
    return app


def _pairs(app: App) -> list[tuple[bytes, bytes | None]]:
    return [encode_record(e) if isinstance(e, CoordinatorRecord) else e for e in app.d.log]


def log_of(app: App) -> list:
    from ops.segment import iter_buffer
    buf = b"".join(build_batch([p], base_offset=i, timestamp_ms=1_000 + i) for i, p in enumerate(_pairs(app)))
    return list(iter_buffer(buf, len(buf), "__consumer_offsets-0", 0, Problems()))


def test_replay_describes_a_streams_group_as_the_shard_holds_it():
    app = running_app()
    shard_group = app.d.group()
    for model in (replay_model(OffsetsReplay().feed_all(log_of(app))),
                  replay_model(OffsetsReplay(on_record=lambda *a: None).feed_all(log_of(app)))):
        (g,) = model["groups"]
        assert (g["group"], g["type"], g["protocol_type"], g["state"]) == ("app", "streams", "streams", "Stable")
        assert (g["group_epoch"], g["assignment_epoch"]) == (shard_group.group_epoch,
                                                             shard_group.target_assignment_epoch)
        assert g["topology"]["epoch"] == 1
        assert g["topology"]["subtopologies"][0]["source_topics"] == ["input"]
        owned = {}
        for m in g["members"]:
            assert m["member_type"] == "streams" and m["state"] == "STABLE"
            assert m["member_epoch"] == shard_group.members[m["member_id"]].member_epoch
            assert m["assignment"] == m["target_assignment"]
            owned.update({("0", p): m["member_id"] for p in m["assignment"].get("0", [])})
        assert sorted(owned) == [("0", p) for p in range(6)] and len(set(owned.values())) == 2
        s = model["summary"]
        assert set(s["by_type"]) == STREAMS_NAMES and s["unknown_types"] == {}
    lines = render_text(model).splitlines()
    assert lines[1].split() == ["app", "Streams", "streams", "Stable"]


def test_dump_decodes_streams_records_and_they_round_trip_through_json_and_avro(tmp_path):
    app = running_app()
    stats = DumpStats()
    entries = [e for lb in log_of(app) for e in entries_of(lb, stats)]
    assert {e["type"] for e in entries} == STREAMS_NAMES and stats.unknown_types == {}
    for key, value in _pairs(app):
        rec = decode_record(key, value)
        kc, vc = RECORD_CLASSES[rec.key.record_type]
        assert encode_key(from_dict(kc, to_dict(rec.key))) == key
        if value is not None:
            assert encode_value(from_dict(vc, to_dict(rec.value)), rec.value_version) == value
    for fmt in ("jsonl", "avro"):
        out = io.BytesIO()
        writer = DumpWriter(out, fmt)
        for lb in log_of(app):
            writer.write_batch(lb)
        writer.close()
        if fmt == "avro":
            assert len(list(fastavro.reader(io.BytesIO(out.getvalue())))) == writer.stats.entries
        path = tmp_path / f"dump.{fmt}"
        path.write_bytes(out.getvalue())
        got = replay_model(OffsetsReplay().feed_all(read_dump(path, Problems())))
        assert got["groups"] == replay_model(OffsetsReplay().feed_all(log_of(app)))["groups"]


def test_downgrade_check_reports_a_running_streams_group_and_leaves_it_alone():
    report, full, new = run_check(log_of(running_app()))
    (g,) = report["groups"]
    assert g["would_lose_state"] and report["groups_losing_state"] == ["app"]
    assert g["full"]["type"] == "streams" and g["full"]["members"] == 2
    assert set(g["new_protocol_records"]) == STREAMS_NAMES
    assert any("group.protocol=classic" in r for r in g["reasons"])
    items, skipped = downgrade.tombstones(full, new)
    assert items == [] and skipped[0]["group"] == "app" and "stop the application" in skipped[0]["reason"]


def test_downgrade_tombstones_remove_every_live_key_of_an_empty_streams_group():
    app = running_app()
    for m in ("m1", "m2"):
        app.d.hb(beat(m, -1))
    assert not app.d.group().members
    report, full, new = run_check(log_of(app))
    items, skipped = downgrade.tombstones(full, new)
    live = {k for (p, k), (gid, _) in new.live.items() if gid == "app"}
    assert skipped == [] and live and live <= {t["key"] for t in items}
    assert {t["type"] for t in items} <= STREAMS_NAMES
    report2, _, new2 = run_check(log_of(app) + downgrade.tombstone_batches(items, 9_999))
    assert new2.live == {} and "app" not in report2["groups_losing_state"]


def test_tables_show_streams_members_and_their_active_tasks():
    app = running_app()
    tables = partition_tables(log_of(app))
    rows = [r for r in tables["membership_history"] if r[5] == "streams"]
    assert {r[1] for r in rows if r[6] == "join_or_update"} == {"m1", "m2"}
    last = {}
    for r in rows:
        if r[6] == "assignment":
            last[r[1]] = r
    assert all(r[8] == "STABLE" and r[9].startswith("0:") for r in last.values())
    counts = {r[2] for r in tables["record_type_counts"] if r[0] == "app"}
    assert counts == STREAMS_NAMES


def test_load_routes_streams_records_to_the_groups_partition():
    result = LoadPlan(7)
    out = list(plan(log_of(running_app()), 7, result))
    assert out and {target for target, *_ in out} == {partition_for("app", 7)}
    assert result.no_group == 0
