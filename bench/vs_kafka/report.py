"""The side-by-side table (Markdown, fine in a terminal too), the JSON result and an HTML
page with one SVG bar chart per figure (ops/svg.py)."""
from __future__ import annotations

import html
import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ops.svg import bar_chart

COLUMNS = ("kafka-default", "kafka-500", "kcoord")
TITLES = {"kafka-default": "Kafka 4.4, defaults (5 s interval)",
          "kafka-500": "Kafka 4.4, 500 ms interval",
          "kcoord": "kcoord (defaults) in front of the same Kafka"}


@dataclass(frozen=True)
class Row:
    key: str            # results["figures"][key][column] = list of run values
    label: str
    unit: str           # "/s", "ms", "s", "MB/s", "us"
    higher_is_better: bool


ROWS = (
    Row("heartbeat_closed_loop",
        "steady ConsumerGroupHeartbeat/s, {members:,} members in {groups} groups, one request in flight per member",
        "/s", True),
    Row("heartbeat_closed_loop_cpu", "  server CPU per heartbeat (closed loop)", "us", False),
    Row("heartbeat_pipelined",
        "steady ConsumerGroupHeartbeat/s, pipelined (Kafka reads one request per connection at a time)", "/s", True),
    Row("heartbeat_formation", "  forming the heartbeat groups (all Stable)", "s", False),
    Row("storm", "join storm: {storm_members:,} members ({storm_partitions:,} partitions) all Stable at one epoch",
        "ms", False),
    Row("join_first_record", "11th member: its first record after subscribe()", "s", False),
    Row("join_stable", "11th member: stable complete disjoint assignment", "s", False),
    Row("join_nobody_consumed", "11th member: longest time nobody in the group consumed", "s", False),
    Row("join_kept_pause", "11th member: longest pause of a member that kept its partitions", "s", False),
    Row("join_pause_before", "  longest pause of any member in the 5 s before the join (steady rhythm)", "s", False),
    Row("formation", "formation: 10 librdkafka members (consumer protocol) subscribe at once, until all "
        "partitions are owned", "s", False),
    Row("formation_classic", "formation, classic eager range (initial rebalance delay 3 s on both)", "s", False),
    Row("commit_closed_loop", "durable OffsetCommit/s, {commit_connections} connections, one in flight each", "/s",
        True),
    Row("commit_pipelined", "durable OffsetCommit/s, pipelined", "/s", True),
    Row("consume_mb", "consume {record_size} B records, one consumer (Kafka column: direct; kcoord: Fetch "
        "forwarded)", "MB/s", True),
    Row("consume_records", "  the same in records/s", "/s", True),
)


def median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def fmt(values: list[float | None] | None, unit: str) -> str:
    if not values:
        return "—"
    med = median(values)
    if med is None:
        return "failed"
    digits = 2 if unit == "s" else (1 if unit in ("MB/s", "us") else 0)

    def one(v: float) -> str:
        return f"{v:,.{digits}f}"

    text = f"{one(med)} {unit.lstrip('/') if unit != '/s' else '/s'}"
    if len([v for v in values if v is not None]) > 1:
        present = [v for v in values if v is not None]
        text += f" ({one(min(present))}–{one(max(present))}, n={len(present)})"
    return text


def ratio(row: Row, kc: float | None, other: float | None) -> str:
    if not kc or not other:
        return "—"
    r = kc / other if row.higher_is_better else other / kc
    return f"{r:.2f}×"


def table(results: dict[str, Any]) -> str:
    figures = results["figures"]
    head = ["figure", *(TITLES[c] for c in COLUMNS), "kcoord vs Kafka defaults", "kcoord vs Kafka 500 ms"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for row in ROWS:
        per = figures.get(row.key)
        if not per:
            continue
        kc = median(per.get("kcoord") or [])
        label = row.label.format(**results["meta"]["args"])
        cells = [label.replace("  ", "↳ ", 1) if label.startswith("  ") else label,
                 *(fmt(per.get(c), row.unit) for c in COLUMNS),
                 ratio(row, kc, median(per.get("kafka-default") or [])),
                 ratio(row, kc, median(per.get("kafka-500") or []))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_json(path: Path, results: dict[str, Any]) -> None:
    path.write_text(json.dumps(results, indent=1, default=str))


def write_html(path: Path, results: dict[str, Any], text_table: str) -> None:
    charts = []
    for row in ROWS:
        per = results["figures"].get(row.key)
        if not per:
            continue
        items = [(TITLES[c], median(per[c])) for c in COLUMNS if per.get(c) and median(per[c]) is not None]
        if items:
            better = "higher is better" if row.higher_is_better else "lower is better"
            charts.append(bar_chart([(label, float(v)) for label, v in items],
                                    title=f"{row.label.format(**results['meta']['args']).strip()} "
                                          f"({row.unit}, {better})"))
    meta = html.escape(json.dumps(results["meta"], indent=1, default=str))
    path.write_text(
        "<!doctype html><meta charset='utf-8'><title>kcoord vs Apache Kafka 4.4, same run</title>"
        "<body style='font-family:sans-serif'><h1>kcoord vs Apache Kafka 4.4's group coordinator</h1>"
        f"<pre>{html.escape(text_table)}</pre>" + "".join(f"<div>{c}</div>" for c in charts)
        + f"<h2>Run</h2><pre>{meta}</pre></body>")
