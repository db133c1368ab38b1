"""Java kafka-clients through JavaConsumer, and the shared clock it relies on. The consumers here
run straight against Tansu 0.6, so they use the 4.3.1 client (support.java's TANSU_BASELINE_JARS:
Tansu drops the 4.4 client's ApiVersions v5, test_harness_tansu.py)."""
from __future__ import annotations

import subprocess
import time

import pytest

from support import processes
from support.admin import committed_offsets, create_topic
from support.java import TANSU_BASELINE_JARS, JavaConsumer, java_command
from support.produce import produce_records

pytestmark = pytest.mark.java


def test_java_nanotime_and_python_monotonic_share_a_clock(java_classes) -> None:
    """Java's System.nanoTime() and time.monotonic_ns() read the same clock (CLOCK_MONOTONIC on Linux).

    Each Java stamp must fall inside the Python window [before write, after read]: a different
    clock (REALTIME, or a JVM-relative origin) would be off by far more than the ~ms round trip.
    """
    assert time.get_clock_info("monotonic").implementation == "clock_gettime(CLOCK_MONOTONIC)"
    proc = processes.track(subprocess.Popen(java_command("NanoClock"), stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, text=True, bufsize=1))
    try:
        windows = []
        for _ in range(20):
            before = time.monotonic_ns()
            proc.stdin.write("tick\n")
            stamp = int(proc.stdout.readline())
            after = time.monotonic_ns()
            windows.append((before, stamp, after))
    finally:
        proc.stdin.close()
        proc.wait(10)
        processes.untrack(proc)
    outside = [w for w in windows if not w[0] <= w[1] <= w[2]]
    assert outside == [], f"Java stamps outside the Python window: {outside[:3]}"
    assert proc.returncode == 0


def test_java_classic_consumer_consumes_commits_and_closes(tansu, names, ledger, drivers, java_classes) -> None:
    topic, group = names.topic(), names.group()
    create_topic(tansu.bootstrap, topic, 3)
    produced = produce_records(tansu.bootstrap, topic, 60)
    consumer = drivers.add(JavaConsumer(tansu.bootstrap, topic, group, ledger=ledger, session_timeout_ms=6000,
                                        jars=TANSU_BASELINE_JARS))
    consumer.start()

    ready = consumer.events("ready")[0]
    assert ready["protocol"] == "classic"
    assigned = consumer.wait_for_event("assigned", 20)
    assert sorted(map(tuple, assigned["partitions"])) == [(topic, p) for p in range(3)]
    assert assigned["member_id"]  # the coordinator handed out a member id
    consumer.wait_for(lambda: len(consumer.consumed()) >= len(produced), 20, "all records")

    assert consumer.close() == 0
    assert consumer.events("closed")
    revoked = consumer.events("revoked")
    assert revoked and {tuple(p) for p in revoked[-1]["partitions"]} == {(topic, p) for p in range(3)}
    assert consumer.assignment() == frozenset()

    got = sorted((r.partition, r.offset, r.value) for r in consumer.consumed())
    assert got == sorted((r.partition, r.offset, r.value) for r in produced)
    assert consumer.stdout_noise() == []
    ledger.assert_no_double_ownership(allow_anomalies=False)
    assert ledger.records_outside_ownership(consumer.consumed()) == []
    end = {p: 1 + max(r.offset for r in produced if r.partition == p) for p in {r.partition for r in produced}}
    assert committed_offsets(tansu.bootstrap, group, topic, 3) == {p: end.get(p, -1001) for p in range(3)}


def test_java_kill_ends_ownership_in_the_ledger(tansu, names, ledger, drivers, java_classes) -> None:
    topic, group = names.topic(), names.group()
    create_topic(tansu.bootstrap, topic, 2)
    consumer = drivers.add(JavaConsumer(tansu.bootstrap, topic, group, ledger=ledger, session_timeout_ms=6000,
                                        jars=TANSU_BASELINE_JARS))
    consumer.start()
    consumer.wait_for_assignment(lambda a: len(a) == 2, 20)
    assert consumer.kill() == -9
    assert consumer.events("gone") and consumer.assignment() == frozenset()
    assert ledger.current_assignment() == {}
    assert not consumer.events("closed")
