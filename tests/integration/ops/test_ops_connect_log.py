"""The offsets tools on a real log holding a `connect` group (issue 18: connect records are
"covered by replay, bulk replay, `kcoord offsets` and the PySpark tables", and
`downgrade-check` reports them "so an operator can clean up before moving a log to Kafka").

The log is kcoord's own state topic, written by a real `kcoord serve` in front of Tansu
while three connect workers (members/connect/) ran and a librdkafka consumer group committed
offsets (connect_log.py). The commands run as an operator runs them: the installed `kcoord`
entry point, as a subprocess, on the live topic (`--bootstrap/--topic`) and on its dump.

The tests share one log and run in file order: the last one stops the workers, applies the
downgrade tombstones to the topic and restarts kcoord on it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from connect_log import TOPIC, UNITS, ConnectLog, build

from coordinator.protocol import connect_messages as cm
from ops.logfiles import iter_files
from ops.logsource import LogBatch, Problems, discover
from ops.tables import partition_tables
from support.admin import committed_offsets
from support.raw_client import call_with
from support.tansu import start_tansu
from support.wait import wait_until

pytestmark = [pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[3]
CONNECT_TYPES = range(1000, 1005)
GROUP_ID_NOT_FOUND = 69
LIST_GROUPS = 16


def kcoord(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`kcoord ARGS` as a user runs it: the venv's console script."""
    exe = Path(sys.executable).parent / "kcoord"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "coordinator.cli"]
    return subprocess.run([*cmd, *argv], cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})


def units_text(units) -> str:
    """membership_history's `connector:tasks` text of a set of (connector, task) units."""
    by: dict[str, list[int]] = {}
    for c, t in units:
        by.setdefault(c, []).append(t)
    return ";".join(f"{c}:{','.join(map(str, sorted(ts)))}" for c, ts in sorted(by.items()))


@pytest.fixture(scope="module")
def connect_log(tmp_path_factory) -> ConnectLog:
    tansu = start_tansu(log_dir=tmp_path_factory.mktemp("connect-log-tansu"))
    log = None
    try:
        log = build(tansu, "__kcoord_connect_log", "connect-workers", "orders-readers")
        yield log
    finally:
        if log is not None:
            log.stop_workers()
            log.kcoord.stop()
        tansu.stop()


@pytest.fixture(scope="module")
def dump_dir(connect_log, tmp_path_factory) -> Path:
    """The state topic as an operator copies it (one dump per partition), workers running."""
    out = tmp_path_factory.mktemp("connect-log-dump") / "dump"
    run = kcoord("offsets", "dump", "--bootstrap", connect_log.upstream, "--topic", connect_log.state_topic,
                 "--per-partition", "-o", str(out), "--no-progress")
    assert run.returncode == 0, run.stderr
    stats = json.loads(run.stderr.strip().splitlines()[-1])
    assert stats["unknown_types"] == {} and not stats["problems"], stats
    return out


def live(log: ConnectLog) -> list[str]:
    return ["--bootstrap", log.upstream, "--topic", log.state_topic, "--no-progress"]


def test_show_decodes_the_connect_records(connect_log):
    run = kcoord("offsets", "show", *live(connect_log), "--json")
    assert run.returncode == 0, run.stderr
    entries = [json.loads(line) for line in run.stdout.splitlines()]
    connect = [e for e in entries if e.get("type_id") in CONNECT_TYPES]
    assert {e["type_id"] for e in connect} == set(CONNECT_TYPES), Counter(e["type"] for e in entries)
    for e in connect:
        assert e["type"].startswith("CONNECT_GROUP_") and "error" not in e and "note" not in e, e
        assert e["key"]["group_id"] == connect_log.connect_group, e
    assert not [e for e in entries if e["type"] == "unknown" or "error" in e]
    # The workers' current assignments, as the last record of each says them.
    last = {}
    for e in connect:
        if e["type_id"] == 1004 and e["value"] is not None:
            last[e["key"]["member_id"]] = {(a["connector"], t) for a in e["value"]["assigned"] for t in a["tasks"]}
    assert last == {m: set(u) for m, u in connect_log.owned_by_member().items()}
    # The consumer group's records are there too.
    types = {e["type"] for e in entries}
    assert {"GROUP_METADATA", "OFFSET_COMMIT"} <= types

    text = kcoord("offsets", "show", *live(connect_log))
    assert text.returncode == 0, text.stderr
    assert "CONNECT_GROUP_CURRENT_MEMBER_ASSIGNMENT value version 0" in text.stdout
    assert "unknown record type" not in text.stdout and "ERROR" not in text.stdout


def test_replay_has_the_connect_group_and_the_consumer_groups_offsets(connect_log, dump_dir, tmp_path):
    run = kcoord("offsets", "replay", *live(connect_log), "--json")
    assert run.returncode == 0, run.stderr
    model = json.loads(run.stdout)
    groups = {g["group"]: g for g in model["groups"]}
    cg = groups[connect_log.connect_group]
    assert (cg["type"], cg["protocol_type"], cg["state"]) == ("connect", "connect", "Stable"), cg
    owned = connect_log.owned_by_member()
    assert {m["member_id"] for m in cg["members"]} == set(owned)
    for m in cg["members"]:
        got = {(c, t) for c, ts in m["assignment"].items() for t in ts}
        assert got == owned[m["member_id"]], m
    assert set().union(*owned.values()) == UNITS
    consumer = groups[connect_log.consumer_group]
    assert consumer["type"] == "classic" and consumer["state"] == "Empty"
    assert {(o["topic"], o["partition"]): o["offset"] for o in consumer["offsets"]} == connect_log.committed
    s = model["summary"]
    assert s["unknown_types"] == {} and not s["problems"]
    assert {f"CONNECT_GROUP_{n}" for n in ("METADATA", "MEMBER_METADATA", "CURRENT_MEMBER_ASSIGNMENT")} \
        <= set(s["by_type"]), s["by_type"]
    assert sum(s["by_type"].values()) == s["records"], s

    # The dump replays to the same groups (bulk replay: no per-record hook); with --html the
    # replay runs record by record (the report's hook) and the page names the connect group.
    bulk = kcoord("offsets", "replay", str(dump_dir), "--json", "--no-progress")
    assert bulk.returncode == 0 and json.loads(bulk.stdout)["groups"] == model["groups"], bulk.stderr
    page = tmp_path / "report.html"
    from_dump = kcoord("offsets", "replay", str(dump_dir), "--json", "--no-progress", "--html", str(page))
    assert from_dump.returncode == 0, from_dump.stderr
    assert json.loads(from_dump.stdout)["groups"] == model["groups"]
    assert connect_log.connect_group in page.read_text()

    text = kcoord("offsets", "replay", *live(connect_log))
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert any(line.split()[:4] == [connect_log.connect_group, "Connect", "connect", "Stable"] for line in lines)
    for member, units in owned.items():
        assert any(member in line and units_text(units) in line for line in lines), (member, text.stdout)


def _without_connect_records(batches) -> list[LogBatch]:
    """The log with every record of types 1000-1004 removed (offsets of the rest unchanged)."""
    import dataclasses
    out = []
    for lb in batches:
        keep = [r for r in lb.batch.records
                if r.key is None or int.from_bytes(bytes(r.key[:2]), "big") not in CONNECT_TYPES]
        out.append(LogBatch(lb.source, lb.partition, dataclasses.replace(lb.batch, records=keep)))
    return out


@pytest.mark.spark
@pytest.mark.timeout(600)     # local[1]: ~165 s wall here with CI on both cores (JVM, Python workers)
def test_spark_tables_show_the_connect_workers(connect_log, dump_dir, tmp_path):
    pytest.importorskip("pyspark")
    from ops.spark.job import run_job, session

    started = time.monotonic()
    spark = session("local[1]", app_name="kcoord-connect-log")
    try:
        spark.sparkContext.setLogLevel("ERROR")
        summary = run_job([str(dump_dir)], str(tmp_path / "tables"), spark=spark)
        tables = {t: Counter(tuple(r) for r in spark.read.parquet(str(tmp_path / "tables" / t)).collect())
                  for t in ("final_offsets", "membership_history", "record_type_counts", "commit_rate")}
    finally:
        spark.stop()
    print(f"spark local[1]: {summary['records']} records, job {summary['seconds']} s, "
          f"session + job + reads {time.monotonic() - started:.1f} s wall")   # shown with -s
    assert not summary["problems"] and summary["records"] > 0

    single = partition_tables(iter_files(discover([dump_dir]), Problems()))
    for table, rows in tables.items():
        assert rows == Counter(single[table]), table

    # The connect workers' membership: join and assignment rows, the last assignment of
    # each worker being the units it runs.
    group = connect_log.connect_group
    history = sorted((r for r in tables["membership_history"] if r[0] == group), key=lambda r: (r[2], r[3]))
    owned = connect_log.owned_by_member()
    assert {r[5] for r in history} == {"connect"}
    assert {r[1] for r in history if r[6] == "join_or_update"} == set(owned)
    last = {r[1]: r for r in history if r[6] == "assignment"}
    assert {m: (r[8], r[9]) for m, r in last.items()} == {m: ("STABLE", units_text(u)) for m, u in owned.items()}
    counts = {r[2] for r in tables["record_type_counts"] if r[0] == group}
    assert {"CONNECT_GROUP_METADATA", "CONNECT_GROUP_CURRENT_MEMBER_ASSIGNMENT"} <= counts
    assert "unknown" not in counts

    # The consumer group's rows are the ones of the same log without any connect record.
    bare = partition_tables(_without_connect_records(iter_files(discover([dump_dir]), Problems())))
    for table, rows in tables.items():
        others = Counter({r: n for r, n in rows.items() if r[0] != group})
        assert others == Counter(bare[table]), table
    offsets = {(r[1], r[2]): r[3] for r in tables["final_offsets"] if r[0] == connect_log.consumer_group}
    assert offsets == connect_log.committed
    assert any(r[0] == connect_log.consumer_group and r[5] == "classic" for r in tables["membership_history"])


def _describe_connect(log: ConnectLog):
    return call_with(log.kcoord.bootstrap, cm.CONNECT_GROUP_DESCRIBE, 0, group_ids=(log.connect_group,)).groups[0]


def test_downgrade_check_then_apply_removes_the_connect_group(connect_log, tmp_path):
    """Last: it changes the shared log."""
    log = connect_log
    tombs = tmp_path / "tombstones.jsonl"
    check = ("offsets", "downgrade-check", *live(log), "--json", "--fail-on-loss")

    # 1. Workers running: reported, and left alone (tombstoning them would fence them).
    run = kcoord(*check, "--write-tombstones", str(tombs))
    assert run.returncode == 3, (run.returncode, run.stderr)
    report = json.loads(run.stdout)
    assert report["groups_losing_state"] == [log.connect_group], report["groups_losing_state"]
    g = {x["group"]: x for x in report["groups"]}
    cg, consumer = g[log.connect_group], g[log.consumer_group]
    assert cg["full"] == {**cg["full"], "type": "connect", "members": 3}
    assert cg["classic_view"]["type"] == "absent" and cg["live_new_protocol_keys"] > 0
    assert set(cg["new_protocol_records"]) >= {"CONNECT_GROUP_METADATA", "CONNECT_GROUP_MEMBER_METADATA"}
    assert any("never deletes" in r for r in cg["reasons"])
    assert not consumer["would_lose_state"] and consumer["full"]["type"] == "classic"
    assert report["offsets"]["compared"] == len(log.committed)
    assert not report["offsets"]["missing"] and not report["offsets"]["different"]
    assert report["tombstones"]["count"] == 0
    assert [x["group"] for x in report["tombstones"]["groups_left_alone"]] == [log.connect_group]
    text = kcoord("offsets", "downgrade-check", *live(log))
    assert text.returncode == 0 and log.connect_group in text.stdout and "LOSES STATE" in text.stdout

    # 2. The workers leave; the operator stops kcoord, then applies the tombstones.
    log.stop_workers()
    wait_until(lambda: _describe_connect(log).group_state == "Empty", 30,
               message=lambda: f"connect group empty: {_describe_connect(log)}")
    assert log.kcoord.stop() == 0
    run = kcoord(*check, "--write-tombstones", str(tombs), "--apply", "--apply-bootstrap", log.upstream,
                 "--apply-topic", log.state_topic)
    assert run.returncode == 3, (run.returncode, run.stderr)
    applied = json.loads(run.stdout)["tombstones"]
    assert applied["applied"] and applied["count"] > 0 and applied["groups_left_alone"] == []
    written = [json.loads(line) for line in tombs.read_text().splitlines()]
    assert len(written) == applied["count"] and all(e["value"] is None for e in written)
    assert {e["type"] for e in written} <= {f"CONNECT_GROUP_{n}" for n in (
        "METADATA", "MEMBER_METADATA", "TARGET_ASSIGNMENT_METADATA", "TARGET_ASSIGNMENT_MEMBER",
        "CURRENT_MEMBER_ASSIGNMENT")}

    # 3. A second check is clean: nothing lost, no live connect key.
    run = kcoord(*check)
    assert run.returncode == 0, (run.stdout, run.stderr)
    after = json.loads(run.stdout)
    assert after["verdict"] == "no state lost" and after["summary"]["live_new_protocol_keys"] == 0
    # Its records (tombstones now) stay in the log until compaction: listed, deleted, not losing.
    gone = {x["group"]: x for x in after["groups"]}[log.connect_group]
    assert (gone["full"]["type"], gone["would_lose_state"], gone["live_new_protocol_keys"]) == ("absent", False, 0)
    assert gone["new_protocol_records"]["CONNECT_GROUP_METADATA"] >= 2      # written, then tombstoned
    assert after["offsets"]["compared"] == len(log.committed)

    # 4. kcoord reloads the topic: no connect group, the consumer group's offsets intact.
    log.kcoord.restart()
    described = _describe_connect(log)
    assert described.error_code == GROUP_ID_NOT_FOUND, described
    listed = call_with(log.kcoord.bootstrap, LIST_GROUPS, 5, states_filter=(), types_filter=())
    ids = {x.group_id for x in listed.groups}
    assert log.consumer_group in ids and log.connect_group not in ids, ids
    got = committed_offsets(log.kcoord.bootstrap, log.consumer_group, TOPIC, 2)
    assert {(TOPIC, p): o for p, o in got.items()} == log.committed
