"""`kcoord cluster status` (issue 15 §2) against real processes: three `kcoord serve
--instance-id` processes (with --metrics-port) in front of Apache Kafka 4.4, a single kcoord
process, and Kafka itself.

- The map covers every shard exactly once; every instance names the same coordinator; each
  instance's shards match its own kcoord_cluster_shards and kcoord_shard_state metrics;
  `--json` parses and the tables show the same.
- kill -9 of one instance: at once it is shown unreachable (exit 2); once settled, the two
  survivors hold every shard, active, and the command exits 0.
- A single process: "single process", every shard served by it; Kafka: "not kcoord".

Tansu 0.6 cannot carry the membership group (test_cluster_membership), so the cluster runs
on Kafka only, as in tests/integration/cluster/test_kcoord_cluster.py."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from coordinator.cluster.balancer import NODE_ID_BASE
from coordinator.group.hashing import partition_for
from ops.cluster_status import Options, collect
from support import raw_client
from support.kcoord import CLUSTER
from support.metrics import kcoord_with_metrics, sample
from support.wait import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
REPO = Path(__file__).resolve().parents[3]
SHARDS = 12
FIND_COORDINATOR = 10
ENTRY = ["-m", "coordinator.cli", "cluster"]


def status(bootstrap: str, *args: str, json_out: bool = True) -> tuple[int, dict | str]:
    run = subprocess.run([sys.executable, *ENTRY, "status", "--bootstrap-server", bootstrap, *args,
                          *(["--json"] if json_out else [])],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert run.returncode in (0, 2, 3), f"kcoord cluster status failed ({run.returncode}): {run.stderr}"
    return run.returncode, json.loads(run.stdout) if json_out else run.stdout


def metrics_args(procs) -> list[str]:
    return [arg for p in procs for arg in ("--metrics-url", f"127.0.0.1:{p.metrics_port}")]


def holders(doc: dict) -> dict[int, list[int]]:
    """node id -> the shards the status shows it holding."""
    return {i["node_id"]: i["shards"] for i in doc["instances"]}


def settled(procs, instances: int) -> dict | None:
    """The status (asked in this process: faster than the command) once every one of
    `instances` answers, agrees and serves its share, every shard active; else None."""
    bootstrap = ",".join(p.bootstrap for p in procs if p.process.poll() is None)
    st = asyncio.run(collect(Options(bootstrap, timeout=5)))
    if st.exit_code != 0 or len(st.instances) != instances or not all(i.shards for i in st.instances):
        return None
    return st.to_json()


@pytest.fixture
def trio(kafka44, names):
    topic = names.topic()
    procs = [kcoord_with_metrics(kafka44.bootstrap, f"__kc_{topic}", state_partitions=SHARDS, config=CLUSTER,
                                 extra_args=("--instance-id", f"kc-{i}")) for i in range(3)]
    try:
        for p in procs:
            p.start(timeout=120)   # three processes start side by side on a loaded machine
        wait_until(lambda: settled(procs, 3) is not None, 90, interval=0.5, message="the cluster settles")
        yield procs
    finally:
        for p in procs:
            if p.process is not None and p.process.poll() is None:
                p.stop()


def assert_covers_every_shard_once(doc: dict, procs) -> None:
    assert doc["kind"] == "cluster" and doc["state_partitions"] == SHARDS, doc
    held = [s for i in doc["instances"] for s in i["shards"]]
    assert sorted(held) == list(range(SHARDS)), holders(doc)        # every shard, exactly once
    ports = sorted(p.port for p in procs)
    assert sorted(i["port"] for i in doc["instances"]) == ports
    assert all(i["node_id"] >= NODE_ID_BASE and i["reachable"] for i in doc["instances"]), doc["instances"]
    owner_of = {s: i["node_id"] for i in doc["instances"] for s in i["shards"]}
    for s in doc["shards"]:
        assert partition_for(s["probe_group"], SHARDS) == s["shard"], s
        assert s["agree"] and s["state"] == "active", s
        assert s["coordinator"]["node_id"] == owner_of[s["shard"]], s
        assert set(s["answers"]) == {f"127.0.0.1:{p}" for p in ports}, s      # every instance was asked
    assert doc["disagreements"] == [] and doc["unreachable"] == [] and doc["exit_code"] == 0


def assert_matches_metrics(doc: dict, procs) -> None:
    """Each instance's shards in the status are the ones its own metrics report."""
    by_port = {p.port: p for p in procs}
    for i in doc["instances"]:
        m = i["metrics"]
        assert m is not None and m["error"] is None, i
        assert m["node_id"] == i["node_id"] and m["shards"] == len(i["shards"]), i
        assert m["instances"] == len(procs), i
        assert m["generation"] is not None and m["lease_remaining_s"] > 0, m
        active = sorted(int(p) for p, state in m["shard_states"].items() if state == "active")
        assert active == i["shards"], (i["address"], active, i["shards"])
        # and read directly, beside the command
        scraped = by_port[i["port"]].metrics()
        assert sample(scraped, "kcoord_cluster_shards") == len(i["shards"])
        assert sample(scraped, "kcoord_cluster_node_id") == i["node_id"]


def test_status_maps_every_shard_once_and_matches_each_instances_metrics(trio):
    def agreed() -> dict | None:
        code, doc = status(trio[0].bootstrap, *metrics_args(trio))
        return doc if code == 0 else None

    doc = wait_until(agreed, 60, interval=0.5, message="a status with exit code 0")
    assert isinstance(doc, dict)
    assert_covers_every_shard_once(doc, trio)
    assert_matches_metrics(doc, trio)
    # Each shard's last load time, from its owner's kcoord_partition_last_load_seconds.
    assert all(isinstance(sh["load_seconds"], float) and sh["load_seconds"] >= 0 for sh in doc["shards"]), doc["shards"]
    # Any instance gives the same map.
    _, other = status(trio[2].bootstrap)
    assert isinstance(other, dict)
    assert holders(other) == holders(doc)
    # The probe group's coordinator, asked of each process directly, is the one shown.
    for s in doc["shards"][:3]:
        for p in trio:
            r = raw_client.call_with(p.bootstrap, FIND_COORDINATOR, 3, key=s["probe_group"], key_type=0)
            assert (int(r.error_code), int(r.node_id)) == (0, s["coordinator"]["node_id"])
    # The tables: kafka-consumer-groups' layout, a row per instance and per shard.
    code, text = status(trio[1].bootstrap, *metrics_args(trio), json_out=False)
    assert code == 0 and isinstance(text, str)
    lines = text.splitlines()
    assert lines[0].startswith(f"kcoord cluster: 3 instances, {SHARDS} shards"), text
    header = next(line for line in lines if line.startswith("NODE-ID"))
    assert header.split() == ["NODE-ID", "HOST:PORT", "STATUS", "#SHARDS", "SHARDS", "GENERATION", "LEASE-LEFT",
                              "FENCED", "MOVES-IN/OUT", "LOADS", "LOAD-TIME-AVG"]
    for i in doc["instances"]:
        row = next(line.split() for line in lines if line.startswith(str(i["node_id"])))
        assert row[1:5] == [i["address"], "up", str(len(i["shards"])), i["shard_ranges"]], row
    first = lines.index(next(line for line in lines if line.startswith("SHARD ")))
    assert lines[first].split() == ["SHARD", "PROBE-GROUP", "COORDINATOR", "(ID)", "AGREE", "STATE", "LOAD-TIME",
                                    "DETAIL"]
    shard_rows = [line.split() for line in lines[first + 1:first + 1 + SHARDS]]
    assert [(int(r[0]), r[1], r[4], r[5]) for r in shard_rows] == [
        (s["shard"], s["probe_group"], "yes", "active") for s in doc["shards"]], text


def test_kill_dash_nine_then_two_instances_hold_every_shard(trio):
    _, before = status(trio[0].bootstrap, *metrics_args(trio))
    assert isinstance(before, dict)
    victim = max(trio, key=lambda p: len(holders(before)[next(
        i["node_id"] for i in before["instances"] if i["port"] == p.port)]))
    survivors = [p for p in trio if p is not victim]
    victim_node = next(i["node_id"] for i in before["instances"] if i["port"] == victim.port)
    assert victim.kill() == -9

    # At once (the membership session is 3 s): still listed, not answering, exit code 2.
    at_once = asyncio.run(collect(Options(survivors[0].bootstrap, timeout=5)))
    assert at_once.exit_code == 2, at_once.to_json()
    assert [i.node_id for i in at_once.unreachable] == [victim_node]

    # Settled: the two survivors hold every shard, each shard once, all active.
    wait_until(lambda: settled(survivors, 2) is not None, 60, interval=0.5,
               message="the survivors take the killed instance's shards")

    def agreed() -> dict | None:
        code, doc = status(survivors[1].bootstrap, *metrics_args(trio))   # the dead one's metrics too
        return doc if code == 0 and len(doc["instances"]) == 2 else None

    doc = wait_until(agreed, 60, interval=0.5, message="a two-instance status with exit code 0")
    assert isinstance(doc, dict)
    assert_covers_every_shard_once(doc, survivors)
    assert_matches_metrics(doc, survivors)
    assert victim_node not in holders(doc)
    # The survivors kept their node ids, and what they held.
    for node in holders(doc):
        assert set(holders(before)[node]) <= set(holders(doc)[node])
    assert any(f"127.0.0.1:{victim.metrics_port}" in n for n in doc["notes"]), doc["notes"]


def test_single_process_and_apache_kafka(kafka44, names):
    single = kcoord_with_metrics(kafka44.bootstrap, f"__kc_{names.topic()}", state_partitions=6)
    try:
        single.start(timeout=60)

        def active() -> dict | None:
            code, doc = status(single.bootstrap, "--metrics-url", f"127.0.0.1:{single.metrics_port}")
            return doc if code == 0 else None

        doc = wait_until(active, 60, interval=0.5, message="every shard of the single process active")
        assert isinstance(doc, dict)
        assert doc["kind"] == "single" and doc["state_partitions"] == 6, doc
        (only,) = doc["instances"]
        assert only["node_id"] is None and only["port"] == single.port and only["shards"] == list(range(6))
        assert only["metrics"]["loads"] >= 6 and only["metrics"]["fenced"] == 0, only["metrics"]
        assert all(s["state"] == "active" and s["coordinator"]["node_id"] < NODE_ID_BASE for s in doc["shards"])
        code, text = status(single.bootstrap, json_out=False)
        assert code == 0 and isinstance(text, str) and text.startswith("kcoord single process: 6 shards"), text

        # Kafka itself: not kcoord, also when named the state topic (an ordinary topic there).
        code, doc = status(kafka44.bootstrap)
        assert code == 0 and isinstance(doc, dict) and doc["kind"] == "kafka", doc
        code, doc = status(kafka44.bootstrap, "--state-topic", single.state_topic)
        assert isinstance(doc, dict) and doc["kind"] == "kafka" and "ordinary topic" in doc["notes"][0], doc
        code, text = status(kafka44.bootstrap, json_out=False)
        assert isinstance(text, str) and text.startswith(f"{kafka44.bootstrap} is not kcoord"), text
    finally:
        if single.process is not None:
            single.stop()
