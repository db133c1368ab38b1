"""Reports people would rather look at: an HTML page for a replay (plots drawn as inline
SVG by ops/svg.py, so the file is self-contained) and the text of a downgrade check."""
from __future__ import annotations

import html
from collections import Counter, defaultdict

from ops.describe import render_table
from ops.recordjson import type_name
from ops.value_versions import render_lines as render_value_versions
from records import OffsetCommitKey, UnknownRecord
from records.batch import RecordBatch
from records.connect_records import CONNECT_GROUP_METADATA
from records.streams_records import STREAMS_GROUP_METADATA

MINUTE_MS = 60_000
TOP_GROUPS = 6


class ReportCollector:
    """What the plots need, gathered while the replay runs (`OffsetsReplay(on_record=...)`)."""

    def __init__(self) -> None:
        self.commits_per_minute: Counter = Counter()            # minute -> commits
        self.group_commits: dict[str, Counter] = defaultdict(Counter)   # group -> minute -> n
        self.records_per_minute: Counter = Counter()
        self.types: Counter = Counter()
        self.epochs: dict[str, list[tuple[int, int]]] = defaultdict(list)   # group -> (ts, epoch)
        self.markers: Counter = Counter()

    def observe(self, partition: int, record, offset: int, timestamp: int) -> None:
        minute = timestamp // MINUTE_MS * MINUTE_MS
        self.records_per_minute[minute] += 1
        if isinstance(record, RecordBatch):
            self.markers["COMMIT" if record.control_type == 1 else "ABORT"] += 1
            return
        if isinstance(record, UnknownRecord):
            self.types["unknown"] += 1
            return
        key, value = record.key, record.value
        self.types[type_name(key.record_type)] += 1
        if type(key) is OffsetCommitKey:
            if value is not None:
                self.commits_per_minute[minute] += 1
                self.group_commits[key.group][minute] += 1
        elif value is not None and key.record_type == 3:         # consumer group epoch
            self.epochs[key.group_id].append((timestamp, value.epoch))
        elif value is not None and key.record_type == 2:         # classic generation
            self.epochs[key.group].append((timestamp, value.generation))
        elif value is not None and key.record_type in (CONNECT_GROUP_METADATA, STREAMS_GROUP_METADATA):
            self.epochs[key.group_id].append((timestamp, value.epoch))   # connect and streams group epochs


def _page(title: str, body: list[str]) -> str:
    style = ("body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;"
             "font-size:12px}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}"
             "th{background:#f4f4f4}.warn{color:#b00}h2{margin-top:28px}")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body><h1>{html.escape(title)}</h1>"
            + "\n".join(body) + "</body></html>\n")


def _table(headers: list[str], rows: list[list]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>"
                   for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def render_html(model: dict, c: ReportCollector) -> str:
    from ops.svg import bar_chart, line_chart
    s = model["summary"]
    body = [f"<p>{s['records']:,} records in {s['batches']:,} batches, partitions "
            f"{', '.join(map(str, s['partitions']))}; {s['groups']} groups; {s['tombstones']:,} "
            f"tombstones; {s['commit_markers']} COMMIT / {s['abort_markers']} ABORT markers.</p>"]
    if s["problems"]:
        body.append(f"<p class='warn'>{len(s['problems'])} damaged parts of the input were skipped; "
                    "the state may be incomplete.</p>")
        body.append(_table(["source", "byte", "offset", "reason", "skipped"],
                           [[p["source"], p["position"], p["offset"], p["reason"], p["skipped"]]
                            for p in s["problems"]]))
    top = sorted(c.group_commits, key=lambda g: -sum(c.group_commits[g].values()))[:TOP_GROUPS]
    series = {"all groups": sorted(c.commits_per_minute.items())}
    series.update({g: sorted(c.group_commits[g].items()) for g in top})
    body.append("<h2>Offset commits per minute</h2>")
    body.append(line_chart(series, title="offset commits per minute (all groups and the busiest)",
                           y_label="commits / minute"))
    rebalancing = sorted(c.epochs, key=lambda g: -len(c.epochs[g]))[:TOP_GROUPS]
    body.append("<h2>Group epochs and generations over time</h2>")
    body.append(line_chart({g: c.epochs[g] for g in rebalancing}, step=True,
                           title="group epoch (consumer) / generation (classic), most rebalanced "
                                 "groups", y_label="epoch"))
    body.append("<h2>Records by type</h2>")
    body.append(bar_chart(sorted(s["by_type"].items(), key=lambda kv: -kv[1]),
                          title="records by type"))
    types = Counter(g["type"] + " / " + g["state"] for g in model["groups"])
    body.append(bar_chart(sorted(types.items()), title="groups by type and state"))
    body.append("<h2>Groups</h2>")
    body.append(_table(["group", "partition", "type", "state", "epoch / generation", "members",
                        "committed partitions"],
                       [[g["group"], g["partition"], g["type"], g["state"],
                         g.get("group_epoch", g.get("generation")), len(g["members"]),
                         len(g["offsets"])] for g in model["groups"]]))
    return _page("kcoord offsets replay", body)


def write_html(path: str, model: dict, collector: ReportCollector) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(render_html(model, collector))


def render_downgrade_text(report: dict) -> str:
    out = [f"KIP-915 downgrade check: {report['verdict']}", ""]
    rows = []
    for g in sorted(report["groups"], key=lambda g: (not g["would_lose_state"], g["group"])):
        rows.append([g["group"], g["partition"], g["full"]["type"], g["full"].get("state", "-"),
                     g["full"].get("members", "-"), g["classic_view"]["type"]
                     + (" (simple)" if g["classic_view"].get("simple") else ""),
                     sum(g["new_protocol_records"].values()), g["live_new_protocol_keys"],
                     "LOSES STATE" if g["would_lose_state"] else "ok"])
    out.append(render_table(["GROUP", "PARTITION", "TYPE", "STATE", "#MEMBERS", "CLASSIC-VIEW",
                             "NEW-PROTOCOL-RECORDS", "LIVE-KEYS", "VERDICT"], rows))
    out.append("")
    for g in report["groups"]:
        if g["reasons"]:
            out.append(f"{g['group']}:")
            out.extend(f"  - {r}" for r in g["reasons"])
    o = report["offsets"]
    out.append("")
    out.append(f"committed offsets: {o['compared']} compared, {len(o['missing'])} missing and "
               f"{len(o['different'])} different in the classic-only view, "
               f"{len(o['only_in_classic_view'])} only there")
    for d in o["missing"][:20]:
        out.append(f"  missing: {d['group']} {d['topic']}-{d['partition']} offset {d['offset']}")
    for d in o["different"][:20]:
        out.append(f"  different: {d['group']} {d['topic']}-{d['partition']} {d['fields']}")
    out.append("")
    out.extend(render_value_versions(report["value_versions"]))
    s = report["summary"]
    out.append(f"{s['new_protocol_records']} new-protocol records, {s['live_new_protocol_keys']} "
               f"of their keys still live; skipped by the classic view: {s['skipped_by_classic_view']}")
    t = report.get("tombstones")
    if t:
        out.append(f"tombstones for review: {t['count']} written to {t['file']}"
                   f"{' and APPLIED' if t['applied'] else ' (not applied; use --apply)'}")
        for g in t["groups_left_alone"]:
            out.append(f"  left alone: {g['group']}: {g['reason']}")
    if s["problems"]:
        out.append(f"WARNING: {len(s['problems'])} damaged parts of the input were skipped")
    return "\n".join(out) + "\n"
