"""The group's own side of a Streams rebalance benchmark start (bench/bench_streams_rebalance.py),
from what each coordinator left behind: Kafka's GroupMetadataManager INFO lines in the broker's
server.log, and kcoord's group records in its state topic (read with `kcoord offsets dump`,
each record's batch timestamp the wall clock kcoord wrote it at). Both give when each member
joined, when the topology was first validated (its internal topics seen), how many members
had joined by then, and the most active tasks one member was assigned in the first target
after that: a member given many tasks early must release most of them to the later ones. And
when each member was first handed active tasks (`first_handed_s`: the answer that gave it its
first ones; kcoord's record 22, keyed by the instance its client id names; Kafka's "new
assignment state" line, keyed by member id): from there to the instance's first task open is
the client's own time (docs/measurements/streams-rebalance.md, the seventh section); from
kcoord's records also when each was last handed tasks it did not have (`last_handed_s`: the
answer that completed its start set, e.g. the quiet hold's trickle's rest; the ninth section).

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


def _summary(joins: list[float], ready: float | None, first_active: list[int], origin: float,
             handed: dict[str, float], last_handed: dict[str, float] | None = None) -> dict[str, Any]:
    def s(t: float | None) -> float | None:
        return None if t is None else round(t - origin, 3)
    out = {"joins": len(joins), "first_join": s(min(joins, default=None)), "last_join": s(max(joins, default=None)),
           "topology_ready": s(ready), "joined_by_ready": sum(1 for j in joins if ready is not None and j <= ready),
           "first_target_after_ready_active_per_member": sorted(first_active, reverse=True),
           "first_handed_s": {who: s(t) for who, t in sorted(handed.items(), key=lambda kv: kv[1])}}
    if last_handed is not None:
        out["last_handed_s"] = {who: s(t) for who, t in sorted(last_handed.items(), key=lambda kv: kv[1])}
    return out


def _instance(client_id: str) -> str:
    """The instance a Streams client id names ("<name>-StreamThread-1-consumer" -> "<name>")."""
    return client_id.split("-StreamThread-")[0]


def kafka_group(log_path: Path, group: str, origin_wall: float) -> dict[str, Any]:
    """From Kafka 4.4's server.log (its clock: UTC on this machine, as the bench's)."""
    joins: list[float] = []
    ready: float | None = None
    first_active: dict[str, int] = {}
    handed: dict[str, float] = {}
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
        elif "new assignment state" in line and (a := re.search(
                r"\[MemberId ([^\]]+)\].*assignedTasks=\(active=\[([^\]]*)\]", line)):
            if a.group(2).count("@"):
                handed.setdefault(a.group(1), t)
            if ready is not None:
                first_active.setdefault(a.group(1), a.group(2).count("@"))
    return _summary(joins, ready, list(first_active.values()), origin_wall, handed)


def kcoord_group(bootstrap: str, state_topic: str, group: str, origin_wall: float) -> dict[str, Any]:
    """From kcoord's state topic on the upstream (``kcoord offsets dump --bootstrap``)."""
    try:
        dump = subprocess.run([sys.executable, "-m", "coordinator.cli", "offsets", "dump", "--no-progress",
                               "--bootstrap", bootstrap, "--topic", state_topic],
                              cwd=REPO, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"error": f"{e}"}
    got = dump_summary(dump.stdout.splitlines(), group, origin_wall)
    if got is None:
        return {"error": f"no records of {group} in {state_topic} (exit {dump.returncode}: {dump.stderr[-300:]})"}
    return got


def dump_summary(dump_lines: list[str], group: str, origin_wall: float) -> dict[str, Any] | None:
    """The summary from the lines of ``kcoord offsets dump`` (one JSON record each), or None
    without any record of ``group``."""
    joins: dict[str, float] = {}
    ready: float | None = None
    first_active: dict[str, int] = {}
    clients: dict[str, str] = {}
    handed: dict[str, float] = {}
    # the last answer that gave the member active tasks it did not have (its start set complete)
    last_handed: dict[str, float] = {}
    active: dict[str, set] = {}
    records = []
    for line in dump_lines:
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
            clients.setdefault(key["member_id"], _instance(value.get("client_id") or key["member_id"]))
        elif kind == "STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT" and any(x.get("partitions")
                                                                       for x in value.get("active_tasks", [])):
            who = clients.get(key["member_id"], key["member_id"])
            handed.setdefault(who, t)
            now = {(x.get("subtopology_id"), p) for x in value.get("active_tasks", []) for p in x.get("partitions", [])}
            if not now <= active.get(who, set()):
                last_handed[who] = t
            active[who] = now
        elif kind == "STREAMS_GROUP_METADATA" and ready is None and value.get("validated_topology_epoch", -1) >= 0:
            ready = t
        elif kind == "STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER" and ready is not None:
            first_active.setdefault(key["member_id"], sum(len(x.get("partitions", []))
                                                          for x in value.get("active_tasks", [])))
    if not records:
        return None
    return _summary(list(joins.values()), ready, list(first_active.values()), origin_wall, handed, last_handed)
