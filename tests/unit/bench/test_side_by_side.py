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



def test_thread_cpus_counts_each_thread_under_its_cpu_list():
    """What the Streams bench logs to show a pinning took: every thread of the process under
    the CPU list it may run on, here one thread narrowed to a single CPU and put back."""
    import threading
    mine = sorted(os.sched_getaffinity(0))
    whole = f"{mine[0]}-{mine[-1]}" if mine == list(range(mine[0], mine[-1] + 1)) else ",".join(map(str, mine))
    before = pinning.thread_cpus(os.getpid())
    assert sum(before.values()) >= threading.active_count() and whole in before   # native threads too
    if len(mine) >= 2:
        os.sched_setaffinity(threading.get_native_id(), {mine[-1]})
        try:
            narrowed = pinning.thread_cpus(os.getpid())
            assert narrowed.get(str(mine[-1]), 0) >= before.get(str(mine[-1]), 0) + 1
        finally:
            os.sched_setaffinity(threading.get_native_id(), set(mine))

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
