"""`kcoord serve --embedded kafka` keeps what it was given across a restart: the embedded
Apache Kafka broker's data directory holds the topic's records and kcoord's state topic, so
after a stop and a start on the same directory a group's committed offsets and the records
are still there, and the lag is counted in records (LOG-END-OFFSET = records produced; the
embedded Tansu counts 1 per 10-record batch). One test: the JVM's start dominates.

The jars come from the tests' own cache (KCOORD_KAFKA_CACHE, filled by scripts/fetch_kafka.py
through support.kafka_broker), so nothing is downloaded here; the first start formats the
directory, the second must not (it would give a new, empty cluster). Last, the broker is killed:
kcoord exits with status 3 and the exit report, as with the embedded Tansu.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from confluent_kafka import Consumer

from support import processes
from support.admin import committed_offsets, create_topic
from support.kafka_broker import KAFKA_44, libs_dir
from support.kcoord import REPO, free_port_block, launch_serve
from support.produce import produce_records

PARTITIONS, PER_PARTITION = 3, 10
START_TIMEOUT = 240.0       # a JVM start on a loaded 2-core machine
EXIT_EMBEDDED_BROKER_EXITED = 3   # coordinator.cli.EXIT_EMBEDDED_BROKER_EXITED


def _serve(tmp_path, data_dir, names_topic: str, log_name: str) -> tuple[subprocess.Popen, str, list[str], int]:
    port = free_port_block(2)
    lines: list[str] = []
    args = [sys.executable, "-m", "coordinator.cli", "serve", "--listen", f"127.0.0.1:{port}",
            "--embedded", "kafka", "--embedded-data-dir", str(data_dir),
            "--embedded-memory-max", "768m", "--state-topic", f"__kcoord_{names_topic}", "--state-partitions", "4"]
    cache = libs_dir(KAFKA_44).parent.parent
    process, log_path = launch_serve(args, REPO, log_name, lines, timeout=START_TIMEOUT,
                                     env={"KCOORD_KAFKA_CACHE": str(cache)})
    banner = next((line for line in lines if "embedded Kafka pid" in line), "")
    match = re.search(r"embedded Kafka pid (\d+)", banner)
    assert match, f"kcoord did not name the embedded broker's pid; stdout: {lines}"
    return process, f"127.0.0.1:{port}", [str(log_path)], int(match.group(1))


def _consume_all(bootstrap: str, topic: str, group: str, count: int, commit: bool) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    values: list[bytes] = []
    try:
        consumer.subscribe([topic])
        for _ in range(600):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
            if len(values) >= count:
                break
        if commit:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return values


def _cluster_id(data_dir) -> str:
    props = dict(line.split("=", 1) for line in (data_dir / "data" / "meta.properties").read_text().splitlines()
                 if "=" in line and not line.startswith("#"))
    return props["cluster.id"]


def _describe_offsets(bootstrap: str, group: str) -> list[dict]:
    run = subprocess.run([sys.executable, "-m", "coordinator.cli", "groups", "describe", "--group", group,
                          "--offsets", "--json", "--bootstrap-server", bootstrap],
                         capture_output=True, text=True, timeout=60, cwd=REPO)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_a_restart_keeps_the_groups_offsets_and_the_records(tmp_path, names):
    data_dir = tmp_path / "kafka"
    topic, group = names.topic(), names.group()
    state = names.topic()
    process, bootstrap, logs, _ = _serve(tmp_path, data_dir, state, "kcoord-embedded-kafka-1")
    try:
        create_topic(bootstrap, topic, PARTITIONS, timeout=30)
        produced = []
        for p in range(PARTITIONS):
            produced += [r.value for r in produce_records(bootstrap, topic, PER_PARTITION, partition=p)]
        total = PARTITIONS * PER_PARTITION
        assert len(_consume_all(bootstrap, topic, group, total, commit=True)) == total
        assert committed_offsets(bootstrap, group, topic, PARTITIONS) == {p: PER_PARTITION for p in range(PARTITIONS)}
        cluster_id = _cluster_id(data_dir)
        assert processes.stop(process, timeout=30) == 0
        first_log = open(logs[0]).read()
        assert " WARNING " not in first_log, f"the default path logged a WARNING:\n{first_log[-3000:]}"

        process, bootstrap, logs, broker_pid = _serve(tmp_path, data_dir, state, "kcoord-embedded-kafka-2")
        # The group's commits came back from the kept state topic ...
        assert committed_offsets(bootstrap, group, topic, PARTITIONS) == {p: PER_PARTITION for p in range(PARTITIONS)}
        rows = {int(r["partition"]): r for r in _describe_offsets(bootstrap, group) if r["topic"] == topic}
        # ... and the lag is counted in records: the log end is what was produced.
        assert {p: (r["current_offset"], r["log_end_offset"], r["lag"]) for p, r in rows.items()} == \
            {p: (PER_PARTITION, PER_PARTITION, 0) for p in range(PARTITIONS)}, rows
        # The records themselves are still there, every one.
        again = _consume_all(bootstrap, topic, names.group("reread"), total, commit=False)
        assert sorted(v.decode() for v in again) == sorted(produced)
        assert _cluster_id(data_dir) == cluster_id, "the second start formatted the data directory again"
        # Supervision: the broker's death takes kcoord down with the exit report, data kept.
        os.kill(broker_pid, signal.SIGKILL)
        rc, log = processes.exited(process, Path(logs[0]), 30, "its embedded Kafka broker died")
        assert rc == EXIT_EMBEDDED_BROKER_EXITED, f"kcoord exited {rc}; log:\n{log[-3000:]}"
        assert any(" ERROR " in line and "embedded Kafka broker" in line and "is kept" in line
                   for line in log.splitlines()), log[-3000:]
    finally:
        if process.poll() is None:
            processes.stop(process, timeout=30)
