"""`kcoord groups` against a running cluster (issue 15, point 1): the same scenario through
kcoord (on Tansu and on Kafka 4.3) and, on Kafka 4.3, against the broker's own coordinator;
the command's answers agree.

Scenario: 30 records over 3 partitions; a consumer reads 5 records of each partition,
commits and stays in its group: describe shows offsets, log-end offsets, lag and the owner;
--members and --state show the member and the group; once the consumer has left,
reset-offsets (dry run, then execute), delete-offsets and delete act as kafka-consumer-groups'
do."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from support.admin import create_topic
from support.kafka_broker import KafkaCluster
from support.kafka_tools import consumer_groups
from support.kcoord import KcoordProcess
from support.kcoord_tool import run_tool
from support.produce import produce_records
from support.wait import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
REPO = Path(__file__).resolve().parents[3]
PARTITIONS = 3
PER_PARTITION = 10
READ = 5


def groups(bootstrap: str, *args: str) -> list | int:
    """`kcoord groups ... --json`, in this process (support.kcoord_tool; the `--export` runs
    below start the console script)."""
    code, out, err = run_tool("groups", *args, "--bootstrap-server", bootstrap, "--json")
    assert code == 0, f"kcoord groups {' '.join(args)} failed ({code}): {err}"
    return json.loads(out)


def scenario(bootstrap: str, topic: str, protocol: str) -> dict:
    """Runs the scenario through `bootstrap` and returns what the commands answered,
    without the ids and addresses that differ between clusters."""
    group = f"groups-cli-{uuid.uuid4().hex[:8]}"
    seen: dict = {}
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
            "auto.offset.reset": "earliest", "enable.auto.commit": False, "client.id": "groups-cli-test"}
    if protocol == "classic":
        conf["session.timeout.ms"] = 6000
    consumer = Consumer(conf)
    try:
        consumer.subscribe([topic])
        read: dict[int, int] = {}

        def five_each() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                read[msg.partition()] = msg.offset() + 1
            return len(read) == PARTITIONS and all(o >= READ for o in read.values())

        wait_until(five_each, 90, interval=0, message=lambda: f"read {read}")
        from confluent_kafka import TopicPartition
        consumer.commit(offsets=[TopicPartition(topic, p, READ) for p in range(PARTITIONS)], asynchronous=False)
        rows = groups(bootstrap, "describe", "--group", group)
        seen["describe"] = sorted((r["topic"], r["partition"], r["current_offset"], r["log_end_offset"], r["lag"],
                                   r["consumer_id"] is not None, r["client_id"]) for r in rows)
        members = groups(bootstrap, "describe", "--group", group, "--members")
        seen["members"] = [(m["client_id"], m["partitions"]) for m in members]
        seen["member_epoch_known"] = [m["member_epoch"] is not None for m in members]
        (state,) = groups(bootstrap, "describe", "--group", group, "--state")
        seen["state"] = (state["type"], state["state"], state["members"], state["group_epoch"] is not None)
        listed = groups(bootstrap, "list")
        seen["listed"] = [(g["type"], g["state"]) for g in listed if g["group"] == group]
    finally:
        consumer.close()

    def empty() -> bool:
        (s,) = groups(bootstrap, "describe", "--group", group, "--state")
        return s["state"] in ("Empty", "EMPTY") and s["members"] == 0
    wait_until(empty, 60, interval=0.5, message="the group to be empty after the consumer left")

    dry = groups(bootstrap, "reset-offsets", "--group", group, "--topic", topic, "--shift-by", "-2", "--dry-run")
    seen["dry_run"] = sorted((r["partition"], r["new_offset"]) for r in dry)
    after_dry = groups(bootstrap, "describe", "--group", group)
    seen["unchanged_by_dry_run"] = sorted((r["partition"], r["current_offset"]) for r in after_dry)
    groups(bootstrap, "reset-offsets", "--group", group, "--topic", f"{topic}:0,1", "--to-earliest", "--execute")
    groups(bootstrap, "reset-offsets", "--group", group, "--topic", f"{topic}:2", "--to-offset", "99", "--execute")
    reset = groups(bootstrap, "describe", "--group", group)
    seen["reset"] = sorted((r["partition"], r["current_offset"], r["lag"]) for r in reset)
    deleted = groups(bootstrap, "delete-offsets", "--group", group, "--topic", f"{topic}:0")
    seen["delete_offsets"] = [(d["partition"], d["status"]) for d in deleted]
    gone = groups(bootstrap, "delete", "--group", group)
    seen["delete"] = [d["status"] for d in gone]
    seen["listed_after_delete"] = [g for g in groups(bootstrap, "list") if g["group"] == group]
    return seen


def expected(protocol: str) -> dict:
    return {
        "describe": [("t", p, READ, PER_PARTITION, PER_PARTITION - READ, True, "groups-cli-test")
                     for p in range(PARTITIONS)],
        "members": [("groups-cli-test", PARTITIONS)],
        "member_epoch_known": [protocol == "consumer"],     # KIP-848 member epochs
        "state": ("consumer" if protocol == "consumer" else "classic", "Stable", 1, protocol == "consumer"),
        "listed": [("consumer" if protocol == "consumer" else "classic", "Stable")],
        "dry_run": [(p, READ - 2) for p in range(PARTITIONS)],
        "unchanged_by_dry_run": [(p, READ) for p in range(PARTITIONS)],
        # --to-offset 99 is past the end: moved to the log-end offset, as Kafka's tool does.
        "reset": [(0, 0, PER_PARTITION), (1, 0, PER_PARTITION), (2, PER_PARTITION, 0)],
        "delete_offsets": [(0, "Successful")],
        "delete": ["Successful"],
        "listed_after_delete": [],
    }


@pytest.fixture(scope="module")
def topic_and_kcoord(upstream, tmp_path_factory):
    topic = f"groups-cli-{uuid.uuid4().hex[:6]}"
    create_topic(upstream.bootstrap, topic, PARTITIONS)
    for p in range(PARTITIONS):
        produce_records(upstream.bootstrap, topic, PER_PARTITION, partition=p)
    kc = KcoordProcess(upstream=upstream.bootstrap, state_topic=f"__kcoord_groups_cli_{uuid.uuid4().hex[:6]}",
                       state_partitions=4, config=("consumer_heartbeat_interval_ms=500",
                                                   "consumer_session_timeout_ms=10000",
                                                   "group_initial_rebalance_delay_ms=0")).start(timeout=60)
    try:
        yield topic, kc
    finally:
        kc.stop()


def _named(result: dict, topic: str) -> dict:
    result = dict(result)
    result["describe"] = [("t" if row[0] == topic else row[0], *row[1:]) for row in result["describe"]]
    return result


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_groups_cli_through_kcoord(upstream, topic_and_kcoord, protocol):
    topic, kc = topic_and_kcoord
    assert _named(scenario(kc.bootstrap, topic, protocol), topic) == expected(protocol)


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_groups_cli_agrees_with_kafkas_own_coordinator(upstream, topic_and_kcoord, protocol):
    if not isinstance(upstream, KafkaCluster):
        pytest.skip("the comparison needs Apache Kafka's own coordinator (Tansu has no KIP-848 and a partial "
                    "DescribeGroups, environment.md)")
    topic, kc = topic_and_kcoord
    direct = _named(scenario(upstream.bootstrap, topic, protocol), topic)
    through = _named(scenario(kc.bootstrap, topic, protocol), topic)
    assert direct == through == expected(protocol)


def test_reset_plans_round_trip_and_read_as_kafkas_tool_writes_them(upstream, topic_and_kcoord, tmp_path):
    """--from-file --execute sets two empty groups' offsets (one past the log end: moved to
    it); --to-current --export prints them back, in the layout Kafka 4.4's
    kafka-consumer-groups.sh prints for the same command, line for line; the export read back
    with --from-file is the same plan, and Kafka's tool reads kcoord's two-group export as
    kcoord does."""
    topic, kc = topic_and_kcoord
    prefix = f"groups-plan-{uuid.uuid4().hex[:8]}"
    g1, g2 = f"{prefix}-a", f"{prefix}-b"      # in the order the plan is printed

    def csv(*args: str) -> str:
        run = subprocess.run([sys.executable, "-m", "coordinator.cli", "groups", "reset-offsets", *args, "--export",
                              "--bootstrap-server", kc.bootstrap], cwd=REPO, capture_output=True, text=True,
                             timeout=120)
        assert run.returncode == 0, f"reset-offsets {' '.join(args)} failed ({run.returncode}): {run.stderr}"
        return run.stdout

    plan = tmp_path / "plan.csv"
    plan.write_text(f"{g1},{topic},0,3\n{g1},{topic},1,5\n{g2},{topic},2,99\n")
    executed = csv("--group", g1, "--group", g2, "--from-file", str(plan), "--execute")
    expected_two = f"{g1},{topic},0,3\n{g1},{topic},1,5\n{g2},{topic},2,{PER_PARTITION}\n\n"
    assert executed == expected_two
    current = csv("--group", g1, "--all-topics", "--to-current", "--dry-run")
    assert current == f"{topic},0,3\n{topic},1,5\n\n"
    (tmp_path / "current.csv").write_text(current)
    assert csv("--group", g1, "--from-file", str(tmp_path / "current.csv"), "--dry-run") == current
    (tmp_path / "two.csv").write_text(executed)
    if shutil.which("java") is None:
        pytest.skip("java not on PATH: Kafka's tool is not there to compare with")
    kafkas = consumer_groups(kc.bootstrap, "--reset-offsets", "--group", g1, "--all-topics", "--to-current",
                             "--dry-run", "--export").check()
    assert sorted(kafkas.stdout.split("\n")) == sorted(current.split("\n")), kafkas.describe()
    kafkas = consumer_groups(kc.bootstrap, "--reset-offsets", "--group", g1, "--group", g2, "--from-file",
                             str(tmp_path / "two.csv"), "--dry-run", "--export").check()
    assert sorted(kafkas.stdout.split("\n")) == sorted(executed.split("\n")), kafkas.describe()
