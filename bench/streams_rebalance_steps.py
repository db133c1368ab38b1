"""One Streams instance's start, step by step, from its client and Streams log
(bench/bench_streams_rebalance.py --instances-log: <work dir>/<group>/i<N>.log, each line
stamped with the wall clock in ms; "light" logs keep only some of the steps). Steps, the first
of each unless said otherwise: start() done ("Started N stream threads"), the first
StreamsGroupHeartbeat sent, the last answer that said "Internal topics are missing" (status 3),
the first answer with active tasks and the last that changed them, the first and last
tasks-assigned callbacks with tasks, the first state directory lock and the first RocksDB
"Opening store" (between the two the JVM's first RocksDB open loads its native library), the
first and last task "Initialized", OffsetFetch sent and answered, restore start and end (the
changelogs' "Start restoring" and "Finished restoring"), the last "Restored and ready to run",
the last ListOffsets partition the admin client retried (a changelog partition with no leader
on the broker yet), and the last REBALANCING -> RUNNING; every error code the client logged as
a retriable failure (OffsetFetch STALE_MEMBER_EPOCH, ListOffsets / Metadata partition errors,
coordinator errors); and each API's request latency (sent -> answered, paired by client id and
correlation id; DEBUG logs only).

    .venv/bin/python bench/streams_rebalance_steps.py <work dir>/<group> <origin wall s> [<until s>]

Rules: diagnosis only, no I/O but the log files group_steps reads; times in seconds from the
caller's origin (the bench's "origin_wall": the last instance's "ready" line), lines after
``until`` (the start's end) left out.
"""
from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

# (step, pattern, which: "first" or "last")
STEPS = (
    ("started", re.compile(r"KafkaStreams - .*Started \d+ stream threads"), "first"),
    ("hb_sent", re.compile(r"Sending STREAMS_GROUP_HEARTBEAT"), "first"),
    ("missing_topics", re.compile(r"Received STREAMS_GROUP_HEARTBEAT.*statusCode=3"), "last"),
    ("tasks_answer", re.compile(r"Assigning active tasks \{[0-9]"), "first"),
    ("tasks_answer_last", re.compile(r"Assigning active tasks \{[0-9]"), "last"),
    ("callback", re.compile(r"Received broker assignment Assignment\{activeTasks=\[[0-9]"), "first"),
    ("callback_last", re.compile(r"Received broker assignment Assignment\{activeTasks=\[[0-9]"), "last"),
    ("offset_fetch_sent", re.compile(r"Sending OFFSET_FETCH"), "first"),
    ("offset_fetch_answered", re.compile(r"Received OFFSET_FETCH"), "last"),
    ("first_lock", re.compile(r"StreamTask - .* Acquired state directory lock"), "first"),
    ("first_store_open", re.compile(r"RocksDB\w*Store - Opening store"), "first"),
    ("task_init", re.compile(r"StreamTask - .* Initialized$"), "first"),
    ("task_init_last", re.compile(r"StreamTask - .* Initialized$"), "last"),
    ("restore_start", re.compile(r"Start restoring changelog"), "first"),
    ("restore_end", re.compile(r"Finished restoring changelog"), "last"),
    ("ready_to_run_last", re.compile(r"Restored and ready to run"), "last"),
    ("list_offsets_retried_last", re.compile(r"ListOffsetsHandler - .* will be retried"), "last"),
    ("running", re.compile(r"KafkaStreams - .*State transition from REBALANCING to RUNNING"), "last"),
)
ERRORS = (
    ("OffsetFetch STALE_MEMBER_EPOCH", re.compile(r"OffsetFetch failed with STALE_MEMBER_EPOCH")),
    ("OffsetCommit STALE_MEMBER_EPOCH", re.compile(r"OffsetCommit failed with STALE_MEMBER_EPOCH")),
    ("OffsetFetch/Commit other", re.compile(r"Offset(Fetch|Commit) failed with (?!STALE)")),
    ("ListOffsets NOT_LEADER_OR_FOLLOWER", re.compile(r"Received LIST_OFFSETS.*errorCode=6[,)]")),
    ("admin ListOffsets partition retried", re.compile(r"ListOffsetsHandler - .* will be retried")),
    ("ListOffsets UNKNOWN_TOPIC_OR_PARTITION", re.compile(r"Received LIST_OFFSETS.*errorCode=3[,)]")),
    ("Metadata UNKNOWN_TOPIC_OR_PARTITION", re.compile(r"Received METADATA.*errorCode=3[,)]")),
    ("Metadata LEADER_NOT_AVAILABLE", re.compile(r"Received METADATA.*errorCode=5[,)]")),
    ("FindCoordinator error", re.compile(r"Received FIND_COORDINATOR.*errorCode=(1[45]|16)[,)]")),
    ("heartbeat error", re.compile(r"Received STREAMS_GROUP_HEARTBEAT.*errorCode=[1-9]")),
)


_SENT = re.compile(r"Sending ([A-Z_]+) request with header RequestHeader\(apiKey=\w+, apiVersion=\d+, "
                   r"clientId=([^,]+), correlationId=(\d+)")
_RECEIVED = re.compile(r"Received ([A-Z_]+) response from node \S+ for request with header "
                       r"RequestHeader\(apiKey=\w+, apiVersion=\d+, clientId=([^,]+), correlationId=(\d+)")


def steps(lines: list[str], origin_wall: float, until: float | None = None) -> dict[str, Any]:
    """The instance's steps (seconds from ``origin_wall``, lines after ``until`` left out), its
    error counts, and each API's request latencies in ms (sent -> answered, by correlation id)."""
    out: dict[str, Any] = {name: None for name, _, _ in STEPS}
    errors: Counter[str] = Counter()
    sent: dict[tuple[str, str], int] = {}
    latencies: dict[str, list[int]] = {}
    for line in lines:
        stamp, _, rest = line.partition(" ")
        if not stamp.isdigit():
            continue
        t = round(int(stamp) / 1000 - origin_wall, 3)
        if until is not None and t > until:     # not break: another thread's earlier line may come later
            continue
        if (m := _SENT.search(rest)) is not None:
            sent[(m.group(2), m.group(3))] = int(stamp)
        elif (m := _RECEIVED.search(rest)) is not None and (m.group(2), m.group(3)) in sent:
            latencies.setdefault(m.group(1), []).append(int(stamp) - sent.pop((m.group(2), m.group(3))))
        for name, pattern, which in STEPS:
            if (which == "last" or out[name] is None) and pattern.search(rest):
                out[name] = t
        for name, pattern in ERRORS:
            if pattern.search(rest):
                errors[name] += 1
    out["errors"] = dict(errors)
    out["latency_ms"] = latencies
    return out


def group_steps(group_dir: Path, origin_wall: float, until: float | None = None) -> dict[str, dict[str, Any]]:
    """Every instance's steps in ``group_dir`` (i<N>.log), by file stem."""
    return {p.stem: steps(p.read_text(errors="replace").splitlines(), origin_wall, until)
            for p in sorted(group_dir.glob("i*.log"), key=lambda p: int(p.stem[1:]))}


def main(argv: list[str]) -> None:
    got = group_steps(Path(argv[0]), float(argv[1]), float(argv[2]) if len(argv) > 2 else None)
    names = [n for n, _, _ in STEPS]
    print("inst " + " ".join(f"{n[:9]:>9}" for n in names) + "  errors")
    for inst, s in sorted(got.items(), key=lambda kv: kv[1]["running"] or 0):
        print(f"{inst:4} " + " ".join(f"{'—' if s[n] is None else s[n]:>9}" for n in names) + f"  {s['errors']}")
    every: dict[str, list[int]] = {}
    for s in got.values():
        for api, ms in s["latency_ms"].items():
            every.setdefault(api, []).extend(ms)
    print("request latencies, ms (count, median, p90, max): " + "; ".join(
        f"{api} {len(ms)}, {sorted(ms)[len(ms) // 2]}, {sorted(ms)[len(ms) * 9 // 10]}, {max(ms)}"
        for api, ms in sorted(every.items())))


if __name__ == "__main__":
    main(sys.argv[1:])
