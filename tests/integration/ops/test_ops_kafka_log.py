"""Kafka's own `__consumer_offsets`, replayed (issue 11 §5): a real Apache Kafka 4.4 broker
writes the log during a mixed workload (kafka_log_scenario), with zstd batches, several
segments per partition and the older ones compacted by its log cleaner; then

  * `kcoord offsets replay` over the copied segment files (and over the live topic) gives the
    state Kafka's own APIs reported (groups, types, states, committed offsets, consumer-group
    members and epochs), reads the streams group's records (KIP-1071) into a streams group, and
    skips the share-group records it does not know (KIP-915); `show`, `dump` and
    `downgrade-check` read the same log;
  * `kcoord offsets load` + `kcoord serve` answer ListGroups, OffsetFetch, DescribeGroups and
    ConsumerGroupDescribe exactly as Kafka did.

The log is copied from the running broker's data directory once the workload is quiet and
Kafka's answers were recorded (kafka_log_files). kcoord then serves in front of that same
broker: the log's assignments name topics by id, and only that cluster has those ids. At the
end the live members leave and the broker stops cleanly; the log it leaves replays to the same
state for every group nobody touched after the copy (what a Kafka restart would reload).
docs/design/kafka-log-replay.md has the results.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest
from kafka_log_files import copy_all, copy_when_quiet, data_dir
from kafka_log_scenario import (
    BROKER_OVERRIDES,
    DELETED_GROUPS,
    IN_FLIGHT,
    OTHER_TYPES,
    Scenario,
    run,
)
from kafka_log_view import consumer_describe, describe, offsets, settled, view
from ops_serve import KcoordServe

from coordinator.cli import build_parser
from records import RecordType
from support import ports
from support.wait import wait_until

STATE_PARTITIONS = 3        # not the log's 5: `offsets load` re-partitions
SHARE_TYPES, STREAMS_TYPES = set(range(10, 16)), set(range(17, 24))
STREAMS_GROUP = next(g for g, t in OTHER_TYPES.items() if t == "streams")
MEMBER_TYPES = {0: "classic", 1: "consumer"}          # ConsumerGroupDescribe v1 memberType

pytestmark = pytest.mark.timeout(360)


def kcoord(capsys, *argv: str) -> tuple[int, str]:
    args = build_parser().parse_args(list(argv))
    capsys.readouterr()
    rc = args.func(args)
    return rc, capsys.readouterr().out


@pytest.fixture(scope="module")
def scenario_broker(tmp_path_factory):
    from support.kafka_broker import KAFKA_44, start_kafka

    if shutil.which("java") is None:
        pytest.skip("java not on PATH: a JDK >= 17 runs the Apache Kafka broker")
    cluster = start_kafka(KAFKA_44, tmp_path_factory.mktemp("scenario-kafka"), overrides=BROKER_OVERRIDES)
    yield cluster
    cluster.stop()


def test_kafkas_own_log_replays_and_serves_as_kafka_reported(scenario_broker, tmp_path, capsys):
    cluster = scenario_broker
    address = ("127.0.0.1", cluster.port)
    s = Scenario(cluster.bootstrap)
    try:
        run(s, address)
        listed = wait_until(lambda: _listed(address), 30, 0.5, lambda: f"share and streams groups "
                            f"listed; they answered {s.share_streams_answers}, {_listed(address, True)}")
        groups = sorted(g for g, (t, *_r) in listed.items() if t in ("classic", "consumer"))
        cgroups = sorted(g for g, (t, *_r) in listed.items() if t == "consumer")
        asked = groups + list(DELETED_GROUPS)
        kafka = wait_until(lambda: (lambda v: v if settled(v, IN_FLIGHT) else None)(
                               view(address, asked, cgroups)),
                           60, 0.5, lambda: f"Kafka's groups settled: {view(address, asked, cgroups)}")
        log_dir = tmp_path / "log"
        copied = copy_when_quiet(cluster, log_dir)
        assert view(address, asked, cgroups) == kafka       # quiet: the copy is that state
        _check_the_scenario_happened(kafka, listed)

        rc, out = kcoord(capsys, "offsets", "replay", str(log_dir), "--json")
        assert rc == 0
        model = orjson.loads(out)
        _check_replay(model, kafka, groups, cgroups)
        # The log read live from the broker's __consumer_offsets (ops/live.py) replays the same.
        rc, out = kcoord(capsys, "offsets", "replay", "--bootstrap", cluster.bootstrap,
                         "--topic", "__consumer_offsets", "--json")
        # (Groups only: the cleaner may have compacted more since the copy, changing the counts.)
        assert rc == 0 and orjson.loads(out)["groups"] == model["groups"]

        # The other tools read the share/streams records without failing either.
        rc, out = kcoord(capsys, "offsets", "show", str(log_dir), "--json")
        shown = [orjson.loads(line) for line in out.splitlines()]
        assert rc == 0 and len(shown) == model["summary"]["records"] + _markers(model)
        rc, _ = kcoord(capsys, "offsets", "dump", str(log_dir), "-o", str(tmp_path / "dump.jsonl"))
        assert rc == 0
        rc, out = kcoord(capsys, "offsets", "downgrade-check", str(log_dir), "--json")
        live_consumer_groups = sorted(g for g in cgroups if kafka["consumer"][g][5])
        # A streams group always loses its state on a classic-only coordinator.
        assert rc == 0 and orjson.loads(out)["groups_losing_state"] == sorted([*live_consumer_groups, STREAMS_GROUP])

        rc, out = kcoord(capsys, "offsets", "load", str(log_dir), "--to", cluster.bootstrap,
                         "--state-topic", "kcoord-replayed", "--state-partitions", str(STATE_PARTITIONS))
        assert rc == 0, out
        loaded = orjson.loads(out)
        # The aborted transaction's 2 records are dropped, unless Kafka's cleaner already
        # removed them (it removes aborted records; the ABORT marker and an empty batch stay).
        assert loaded["committed_transactional_records"] == 2
        assert loaded["dropped_transactional_records"] in (0, 2) and not loaded["problems"]

        serve = KcoordServe(cluster.bootstrap, "kcoord-replayed", STATE_PARTITIONS,
                            tmp_path / "serve.log", port=ports.free_block(ports.pool(), 4))
        try:
            serve.wait_ready()
            served = view(serve.address, asked, cgroups)
            others = {side: (describe(a, list(OTHER_TYPES)), consumer_describe(a, list(OTHER_TYPES)),
                             offsets(a, list(OTHER_TYPES)))
                      for side, a in (("kafka", address), ("kcoord", serve.address))}
        finally:
            serve.stop()
        kafka_listed = {g: v for g, v in kafka["list"].items() if g not in OTHER_TYPES}
        # kcoord serves the streams group it loaded (the share group stays unknown). Its state is
        # not compared: kcoord's streams type computes the pending assignment on its own timer
        # after the load, Kafka only on the member's next heartbeat.
        assert served["list"].pop(STREAMS_GROUP)[0] == "streams"
        assert served["list"] == kafka_listed
        assert served["offsets"] == kafka["offsets"]
        assert served["describe"] == kafka["describe"]
        assert served["consumer"] == kafka["consumer"]
        assert others["kcoord"] == others["kafka"]      # share and streams groups, as Kafka answers them
        _results(tmp_path, model, loaded, kafka, shown, others, copied)
    finally:
        s.shutdown()
        cluster.stop()
    _check_the_log_after_a_clean_stop(capsys, cluster, tmp_path / "final", model)


def _check_the_log_after_a_clean_stop(capsys, cluster, into: Path, model: dict) -> None:
    """The members left, the broker stopped: groups without members replay as before."""
    copy_all(data_dir(cluster), into)
    rc, out = kcoord(capsys, "offsets", "replay", str(into), "--json")
    assert rc == 0
    final = {g["group"]: g for g in orjson.loads(out)["groups"]}
    quiet = {g["group"]: g for g in model["groups"] if not g["members"]}
    assert quiet and {gid: final.get(gid) for gid in quiet} == quiet


def _listed(address, anyway: bool = False):
    from kafka_log_view import list_groups

    listed = list_groups(address)
    return listed if anyway or all(g in listed for g in OTHER_TYPES) else None


def _check_the_scenario_happened(kafka: dict, listed: dict) -> None:
    """Kafka itself shows what the workload was meant to leave (so a no-op run cannot pass)."""
    types = {g: t for g, (t, *_r) in listed.items()}
    assert types == {"kip848-moves": "consumer", "kip848-empty": "consumer", "kip848-regex": "consumer",
                     "kip848-stuck": "consumer",
                     "classic-upgrade": "consumer", "classic-live": "classic",
                     "classic-downgrade": "classic", "txn-group": "classic",
                     "offset-deleted": "classic", "retention-group": "classic",
                     "share-g": "share", "streams-g": "streams"}
    assert kafka["consumer"]["kip848-stuck"][1] == "Reconciling"
    upgraded = kafka["consumer"]["classic-upgrade"][5]
    assert sorted(m[10] for m in upgraded) == [0, 1]        # member types: classic, consumer
    moves = kafka["consumer"]["kip848-moves"]
    assert len(moves[5]) == 1 and moves[2] >= 3          # joined, joined, left: epoch 3+
    assert kafka["offsets"]["txn-group"][1] == {("orders", 0): (11, -1, ""), ("orders", 1): (12, -1, "")}
    assert set(kafka["offsets"]["offset-deleted"][1]) == {("orders", p) for p in range(4)}
    assert kafka["offsets"]["group-deleted"][1] == {} == kafka["offsets"]["kip848-deleted"][1]


def _check_replay(model: dict, kafka: dict, groups: list[str], cgroups: list[str]) -> None:
    replayed = {g["group"]: g for g in model["groups"]}
    assert sorted(replayed) == sorted([*groups, STREAMS_GROUP])     # deleted groups gone, share skipped
    streams = replayed[STREAMS_GROUP]
    assert (streams["type"], streams["state"]) == tuple(kafka["list"][STREAMS_GROUP][:2])
    for gid in groups:
        g = replayed[gid]
        ktype, kstate, kprotocol_type = kafka["list"][gid]
        assert (g["type"], g["state"], g["protocol_type"] or "") == (ktype, kstate, kprotocol_type), gid
        want = {tp: o for tp, o in kafka["offsets"][gid][1].items()}
        got = {(o["topic"], o["partition"]): (o["offset"], o["leader_epoch"], o["metadata"])
               for o in g["offsets"]}
        assert got == want, gid
        assert not g["pending_transactional_offsets"], gid
    for gid in cgroups:
        _err, state, epoch, aepoch, assignor, members = kafka["consumer"][gid]
        g = replayed[gid]
        assert (g["group_epoch"], g["assignment_epoch"], g["assignor"]) == (epoch, aepoch, assignor)
        assert [(m["member_id"], m["member_epoch"], m["client_id"], m["client_host"], m["member_type"],
                 _owned(m), _named(m["target_assignment"])) for m in g["members"]] == \
            [(m[0], m[3], m[4], m[5], MEMBER_TYPES[m[10]], _named_kafka(m[8]), _named_kafka(m[9]))
             for m in members]
    for gid in groups:
        if gid not in cgroups:
            members = kafka["describe"][gid][4]
            assert sorted(m["member_id"] for m in replayed[gid]["members"]) == [m[0] for m in members]
    summary = model["summary"]
    unknown = {int(k): v for k, v in summary["unknown_types"].items()}
    assert set(unknown) & SHARE_TYPES and set(unknown) <= SHARE_TYPES, unknown
    streams_names = {"STREAMS_GROUP_METADATA", "STREAMS_GROUP_MEMBER_METADATA", "STREAMS_GROUP_TOPOLOGY"}
    assert streams_names <= set(summary["by_type"])
    assert summary["commit_markers"] >= 1 and summary["abort_markers"] >= 1
    assert not summary["problems"]
    known = {t.name for t in RecordType}
    assert {"OFFSET_COMMIT", "GROUP_METADATA", "CONSUMER_GROUP_MEMBER_METADATA"} <= set(summary["by_type"])
    assert set(summary["by_type"]) <= known | {"unknown"}


def _compacted_away(shown: list) -> int:
    """Offsets missing inside each partition's range: records Kafka's cleaner removed."""
    by_partition: dict[int, list[int]] = {}
    for r in shown:
        by_partition.setdefault(r["partition"], []).append(r["offset"])
    return sum(max(o) - min(o) + 1 - len(o) for o in by_partition.values())


def _markers(model: dict) -> int:
    return model["summary"]["commit_markers"] + model["summary"]["abort_markers"]


def _results(tmp_path: Path, model: dict, loaded: dict, kafka: dict, shown: list, others,
             copied: dict) -> None:
    """The numbers docs/design/kafka-log-replay.md reports, kept next to the test's log."""
    summary = {k: v for k, v in model["summary"].items() if k != "problems"}
    summary["offsets"] = sum(len(g["offsets"]) for g in model["groups"])
    summary["kafka_groups"] = {g: list(v) for g, v in kafka["list"].items()}
    summary["load"] = loaded
    summary["show_first_share_or_streams"] = next(
        (r for r in shown if r.get("type_id") in SHARE_TYPES | STREAMS_TYPES), None)
    summary["share_streams_answers"] = others
    summary["segment_files"] = sorted(copied)
    summary["removed_by_compaction"] = _compacted_away(shown)
    (tmp_path / "results.json").write_bytes(orjson.dumps(summary, option=orjson.OPT_INDENT_2,
                                                         default=str))


def _owned(member: dict) -> list:
    """What Kafka describes as a member's assignment: assigned and pending revocation."""
    merged: dict[str, set] = {}
    for part in (member["assignment"], member["partitions_pending_revocation"]):
        for t, ps in part.items():
            merged.setdefault(t, set()).update(ps)
    return sorted((t, tuple(sorted(ps))) for t, ps in merged.items())


def _named(assignment: dict) -> list:
    return sorted((t, tuple(ps)) for t, ps in assignment.items())


def _named_kafka(tps: list) -> list:
    return sorted((name, parts) for _tid, name, parts in tps if parts)
