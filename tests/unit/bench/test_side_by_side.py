"""bench/bench_side_by_side.py's pieces that can be wrong silently: the multi-partition
OffsetCommit frames (the blast reads every response's first error code at one fixed offset),
the CPU sets (server and load never overlap), and the table (medians, failed runs counted,
the CPU ratio kcoord's side over Kafka's)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"
sys.path.insert(0, str(BENCH))

import bench_side_by_side as sbs  # noqa: E402
from kio.schema.offset_commit.v8.request import OffsetCommitRequest  # noqa: E402
from side_by_side import pinning, report  # noqa: E402

from coordinator.protocol.codec import decode_body  # noqa: E402


def test_commit_frames_carry_every_partition_and_share_one_layout():
    frames = sbs.commit_frames("sbska", 3, "vsk-commit", 4)
    assert len(frames) == 3 and len({len(f) for f in frames}) == 1
    # size(4) api key(2) version(2) correlation(4) client id(2 + len) header tags(1), then the body
    client_id_len = int.from_bytes(frames[1][12:14], "big")
    request = decode_body(OffsetCommitRequest, frames[1], 4 + 2 + 2 + 4 + 2 + client_id_len + 1)
    assert request.group_id == "sbska-0001" and request.generation_id_or_member_epoch == -1
    (topic,) = request.topics
    assert topic.name == "vsk-commit" and [p.partition_index for p in topic.partitions] == [0, 1, 2, 3]


def test_cpu_sets_are_parsed_and_checked():
    mine = sorted(os.sched_getaffinity(0))
    assert pinning.parse_cpus(f"{mine[0]}") == {mine[0]}
    assert pinning.parse_cpus(f"{mine[0]}-{mine[0]}") == {mine[0]}
    with pytest.raises(SystemExit):
        pinning.parse_cpus("4096")                      # a CPU this process may not use
    if len(mine) >= 2:
        with pytest.raises(SystemExit, match="overlap"):
            sbs.parse_args(["--server-cpus", str(mine[0]), "--load-cpus", f"{mine[0]},{mine[1]}"])


def test_thread_cpus_counts_each_thread_under_its_own_cpu_list():
    """What the Streams bench logs to show a pinning took: every thread under the CPU list the
    kernel gives that thread. A helper thread narrows itself to one CPU: that list's count rises
    by one (a read of the process's affinity for every thread would not see it). Only that
    count is compared: other threads of a test worker may come and go meanwhile."""
    import threading
    mine = sorted(os.sched_getaffinity(0))
    if len(mine) < 2 or mine != list(range(mine[0], mine[-1] + 1)):
        pytest.skip("needs two or more contiguous CPUs")
    whole, one = f"{mine[0]}-{mine[-1]}", str(mine[-1])
    narrowed, release = threading.Event(), threading.Event()

    def narrow() -> None:
        os.sched_setaffinity(0, {mine[-1]})       # 0: the calling thread
        narrowed.set()
        release.wait(10)

    threads = threading.active_count()
    before = pinning.thread_cpus(os.getpid())
    assert sum(before.values()) >= threads and before.get(whole, 0) >= 1
    helper = threading.Thread(target=narrow, daemon=True)
    helper.start()
    try:
        assert narrowed.wait(10)
        after = pinning.thread_cpus(os.getpid())
        assert after.get(one, 0) == before.get(one, 0) + 1
    finally:
        release.set()
        helper.join(10)


def test_table_gives_medians_failures_and_the_cpu_ratio():
    def rate(cpu: float, r: float) -> dict[str, float]:
        return {"cpu_us_per_op": cpu, "rate": r, "p50_us": 900.0, "p99_us": 25_000.0}

    results = {"meta": {"args": {"commit_connections": 100, "pipeline_connections": 8, "pipeline_depth": 16,
                                 "members": 1000, "storm_members": 10, "storm_partitions": 20, "rate": 2000},
                        "config_titles": {"default": "Kafka at its defaults"}},
               "figures": {"default": {
                   "commit_closed": {"kafka": [rate(40, 20_000), rate(50, 18_000), rate(60, 16_000)],
                                     "kcoord": [rate(200, 5_000), None, rate(100, 6_000)]},
                   "storm": {"kafka": [None], "kcoord": [{"ms": 900.0, "server_cpu_s": 1.0}]}}}}
    lines = report.tables(results).splitlines()
    assert lines[0] == "### Kafka at its defaults"
    commit = next(line for line in lines if line.startswith("| durable OffsetCommit, 100 connections"))
    kafka, kcoord, ratio = commit.strip("| ").split(" | ")[1:]
    assert kafka.startswith("**50 µs** CPU/op (40–60); 18,000/s (16,000–20,000); p50 900 µs, p99 25.0 ms; n=3")
    assert kcoord.endswith("n=2, 1 failed") and kcoord.startswith("**150 µs**")
    assert ratio == "3.00×"
    storm = next(line for line in lines if line.startswith("| join storm"))
    assert "failed (1 of 1)" in storm and storm.endswith("| — |")
