"""bench/bench_vs_kafka.py's pieces that can be wrong silently: the fixed offset at which the
commit blast reads each OffsetCommit response's error code, and the side-by-side table's
ratios (always "how many times better kcoord is", whichever direction is better)."""
from __future__ import annotations

import struct
import sys
from datetime import timedelta
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "bench"
sys.path.insert(0, str(BENCH))

from kio.schema.errors import ErrorCode  # noqa: E402
from kio.schema.offset_commit.v8.response import (  # noqa: E402
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from vs_kafka import report, wire  # noqa: E402

from coordinator.protocol.codec import encode_body  # noqa: E402


def test_commit_error_offset_points_at_the_partition_error_code():
    topic = "vsk-commit"
    body = encode_body(OffsetCommitResponse(throttle_time=timedelta(0), topics=(OffsetCommitResponseTopic(
        name=topic, partitions=(OffsetCommitResponsePartition(
            partition_index=77, error_code=ErrorCode.coordinator_not_available),)),)))
    header = struct.pack(">i", 12345) + b"\x00"          # correlation id, no tagged fields (header v1)
    frame = struct.pack(">i", len(header) + len(body)) + header + body
    (code,) = struct.unpack_from(">h", frame, wire.commit_error_offset(topic))
    assert code == ErrorCode.coordinator_not_available
    # every frame of the blast has the same length, so every response has the same layout
    frames = wire.commit_frames("cm", 2, topic, 3)
    assert len(frames) == 6 and len({len(f) for f in frames}) == 1


def test_table_ratios_say_how_many_times_better_kcoord_is():
    args = dict(members=10, groups=2, storm_members=5, storm_partitions=10, commit_connections=4, record_size=1024)
    results = {"meta": {"args": args}, "figures": {
        "heartbeat_closed_loop": {"kafka-default": [1000.0], "kcoord": [3000.0]},          # higher is better
        "storm": {"kafka-default": [10_000.0], "kafka-500": [2000.0], "kcoord": [1000.0]},  # lower is better
    }}
    text = report.table(results)
    rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines()[2:]}
    assert rows["steady ConsumerGroupHeartbeat/s, 10 members in 2 groups, one request in flight per member"] \
        .endswith("| 3.00× | — |")
    assert rows["join storm: 5 members (10 partitions) all Stable at one epoch"].endswith("| 10.00× | 2.00× |")
