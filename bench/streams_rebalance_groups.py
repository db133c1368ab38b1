"""The group's own side of a Streams rebalance benchmark start (bench/bench_streams_rebalance.py),
from what each coordinator left behind: Kafka's GroupMetadataManager INFO lines in the broker's
server.log, and kcoord's group records in its state topic (read with `kcoord offsets dump`,
each record's batch timestamp the wall clock kcoord wrote it at). Both give when each member
joined, when the topology was first validated (its internal topics seen), how many members
had joined by then, and the most active tasks one member was assigned in the first target
after that: a member given many tasks early must release most of them to the later ones.

Rules: diagnosis only; times are seconds from the caller's origin (wall clock, seconds); a log
or a dump that cannot be read gives {"error": ...}, never an exception.
"""
from __future__ import annotations

import calendar
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
_KAFKA_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\] ")


def _summary(joins: list[float], ready: float | None, first_active: list[int], origin: float) -> dict[str, Any]:
    def s(t: float | None) -> float | None:
        return None if t is None else round(t - origin, 3)
    return {"joins": len(joins), "first_join": s(min(joins, default=None)), "last_join": s(max(joins, default=None)),
            "topology_ready": s(ready), "joined_by_ready": sum(1 for j in joins if ready is not None and j <= ready),
            "first_target_after_ready_active_per_member": sorted(first_active, reverse=True)}


def kafka_group(log_path: Path, group: str, origin_wall: float) -> dict[str, Any]:
    """From Kafka 4.4's server.log (its clock: UTC on this machine, as the bench's)."""
    joins: list[float] = []
    ready: float | None = None
    first_active: dict[str, int] = {}
    try:
        text = log_path.read_text(errors="replace")
    except OSError as e:
        return {"error": f"{e}"}
    for line in text.splitlines():
        if f"[GroupId {group}]" not in line or not (m := _KAFKA_LINE.match(line)):
            continue
        t = calendar.timegm(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) + int(m.group(2)) / 1000
        if "Member joins the streams group" in line:
            joins.append(t)
        elif ready is None and re.search(r"validated topic epoch (\d+)", line):
            ready = t
        elif ready is not None and "new assignment state" in line and (a := re.search(
                r"\[MemberId ([^\]]+)\].*assignedTasks=\(active=\[([^\]]*)\]", line)):
            first_active.setdefault(a.group(1), a.group(2).count("@"))
    return _summary(joins, ready, list(first_active.values()), origin_wall)


def kcoord_group(bootstrap: str, state_topic: str, group: str, origin_wall: float) -> dict[str, Any]:
    """From kcoord's state topic on the upstream (``kcoord offsets dump --bootstrap``)."""
    try:
        dump = subprocess.run([sys.executable, "-m", "coordinator.cli", "offsets", "dump", "--no-progress",
                               "--bootstrap", bootstrap, "--topic", state_topic],
                              cwd=REPO, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"error": f"{e}"}
    joins: dict[str, float] = {}
    ready: float | None = None
    first_active: dict[str, int] = {}
    records = []
    for line in dump.stdout.splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if (r.get("key") or {}).get("group_id") == group and r.get("value"):
            records.append(r)
    for r in sorted(records, key=lambda r: r["timestamp"]):
        t, kind, key, value = r["timestamp"] / 1000, r["type"], r["key"], r["value"]
        if kind == "STREAMS_GROUP_MEMBER_METADATA":
            joins.setdefault(key["member_id"], t)
        elif kind == "STREAMS_GROUP_METADATA" and ready is None and value.get("validated_topology_epoch", -1) >= 0:
            ready = t
        elif kind == "STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER" and ready is not None:
            first_active.setdefault(key["member_id"], sum(len(x.get("partitions", []))
                                                          for x in value.get("active_tasks", [])))
    if not records:
        return {"error": f"no records of {group} in {state_topic} (exit {dump.returncode}: {dump.stderr[-300:]})"}
    return _summary(list(joins.values()), ready, list(first_active.values()), origin_wall)
