"""The side-by-side result as Markdown (docs/measurements/side-by-side.md) and an HTML page
with SVG bars (ops/svg.py): one table per broker configuration, Kafka alone against kcoord
in front of the same Kafka, every cell the median of the alternating runs.

results["figures"][config][workload][side] is the list of each run's figure dict (None
for a failed run); the keys a workload's dicts carry are named by its Row.
"""
from __future__ import annotations

import html
import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ops.svg import bar_chart

SIDES = ("kafka", "kcoord")
SIDE_TITLES = {"kafka": "Kafka 4.4 alone (its own coordinator)", "kcoord": "kcoord in front of the same Kafka"}


@dataclass(frozen=True)
class Row:
    workload: str
    label: str
    kind: str     # "rate": rate, p50/p99, CPU per op; "storm": time to Stable and CPU; "join": client figures


ROWS = (
    Row("commit_closed", "durable OffsetCommit, {commit_connections} connections, one in flight each", "rate"),
    Row("commit_pipelined", "durable OffsetCommit, pipelined ({pipeline_connections} connections × "
        "{pipeline_depth})", "rate"),
    Row("heartbeat_closed", "steady ConsumerGroupHeartbeat, {members:,} members, one in flight each", "rate"),
    Row("heartbeat_pipelined", "steady ConsumerGroupHeartbeat, pipelined ({pipeline_connections} connections × "
        "{pipeline_depth})", "rate"),
    Row("storm", "join storm: {storm_members:,} members, {storm_partitions:,} partitions, until all Stable at "
        "one epoch", "storm"),
    Row("join", "11th librdkafka member joins ten consuming {rate:,.0f} records/s (22 partitions)", "join"),
)


def median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _pick(runs: list[dict[str, Any] | None], key: str) -> list[float | None]:
    return [r.get(key) if r else None for r in runs]


def _n(runs: list[dict[str, Any] | None]) -> int:
    return sum(1 for r in runs if r)


def _us(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v / 1000:,.1f} ms" if v >= 10_000 else f"{v:,.0f} µs"


def _spread(values: list[float | None], fmt: str) -> str:
    present = [v for v in values if v is not None]
    if len(present) < 2:
        return ""
    return f" ({fmt.format(min(present))}–{fmt.format(max(present))})"


def cell(row: Row, runs: list[dict[str, Any] | None] | None, missing: str = "—") -> str:
    if not runs:
        return missing
    n = _n(runs)
    failed = len(runs) - n
    if not n:
        return f"failed ({failed} of {len(runs)})"
    tail = f"; n={n}" + (f", {failed} failed" if failed else "")
    if row.kind == "rate":
        cpu = _pick(runs, "cpu_us_per_op")
        rate = _pick(runs, "rate")
        return (f"**{median(cpu):,.0f} µs** CPU/op{_spread(cpu, '{:,.0f}')}; {median(rate):,.0f}/s"
                f"{_spread(rate, '{:,.0f}')}; p50 {_us(median(_pick(runs, 'p50_us')))}, "
                f"p99 {_us(median(_pick(runs, 'p99_us')))}{tail}")
    if row.kind == "storm":
        ms = _pick(runs, "ms")
        cpu = _pick(runs, "server_cpu_s")
        return (f"**{median(ms):,.0f} ms**{_spread(ms, '{:,.0f}')}; server CPU {median(cpu):.1f} s"
                f"{_spread(cpu, '{:.1f}')}{tail}")
    first = _pick(runs, "first_record_s")
    stable = _pick(runs, "stable_s")
    cpu = _pick(runs, "server_cpu_s")
    return (f"first record **{median(first):.2f} s**{_spread(first, '{:.2f}')}, stable {median(stable):.2f} s"
            f"{_spread(stable, '{:.2f}')}; server CPU {median(cpu):.1f} s over the run{tail}")


def ratio(row: Row, kafka: list[dict[str, Any] | None] | None, kcoord: list[dict[str, Any] | None] | None) -> str:
    """kcoord's server CPU per operation (or per storm) over Kafka's: below 1 is kcoord cheaper."""
    key = {"rate": "cpu_us_per_op", "storm": "server_cpu_s", "join": "server_cpu_s"}[row.kind]
    k = median(_pick(kafka or [], key))
    c = median(_pick(kcoord or [], key))
    return f"{c / k:.2f}×" if k and c else "—"


def tables(results: dict[str, Any]) -> str:
    args = results["meta"]["args"]
    out = []
    for config, title in results["meta"]["config_titles"].items():
        per = results["figures"].get(config)
        if not per:
            continue
        titles = {**SIDE_TITLES, **results["meta"].get("side_titles", {}).get(config, {})}
        not_served = results["meta"].get("not_served", {}).get(config, {})
        head = ["workload", *(titles[s] for s in SIDES), "CPU, kcoord side / upstream alone"]
        lines = [f"### {title}", "", "| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
        for row in ROWS:
            if row.workload not in per:
                continue
            runs = per[row.workload]
            missing = {"kafka": not_served.get(row.workload, "—")}
            lines.append("| " + " | ".join([row.label.format(**args),
                                             *(cell(row, runs.get(s), missing.get(s, "—")) for s in SIDES),
                                             ratio(row, runs.get("kafka"), runs.get("kcoord"))]) + " |")
        out.append("\n".join(lines))
    return "\n\n".join(out)


def write_json(path: Path, results: dict[str, Any]) -> None:
    path.write_text(json.dumps(results, indent=1, default=str))


def write_html(path: Path, results: dict[str, Any], text: str) -> None:
    """One bar chart per table row: server CPU per operation (per storm, per 11th-member run)."""
    charts = []
    args = results["meta"]["args"]
    for row in ROWS:
        key = {"rate": "cpu_us_per_op", "storm": "server_cpu_s", "join": "server_cpu_s"}[row.kind]
        unit = "µs per operation" if row.kind == "rate" else "CPU seconds"
        items = []
        for config, title in results["meta"]["config_titles"].items():
            runs = results["figures"].get(config, {}).get(row.workload, {})
            titles = {**SIDE_TITLES, **results["meta"].get("side_titles", {}).get(config, {})}
            for side in SIDES:
                v = median(_pick(runs.get(side) or [], key))
                if v is not None:
                    items.append((f"{title}: {titles[side]}", float(v)))
        if items:
            charts.append(bar_chart(items, title=f"{row.label.format(**args)}: server CPU, {unit} "
                                                 "(lower is better)"))
    meta = html.escape(json.dumps(results["meta"], indent=1, default=str))
    path.write_text(
        "<!doctype html><meta charset='utf-8'><title>kcoord and Kafka 4.4 side by side</title>"
        "<body style='font-family:sans-serif'><h1>kcoord and the upstream's own coordinator, side by side</h1>"
        f"<pre>{html.escape(text)}</pre>" + "".join(f"<div>{c}</div>" for c in charts)
        + f"<h2>Run</h2><pre>{meta}</pre></body>")
