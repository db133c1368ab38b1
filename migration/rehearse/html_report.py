"""The rehearsal report as one self-contained HTML page: summary tables and an inline
SVG timeline (members x time, coloured by protocol, shaded by state, conversions marked).
No scripts and no external resources, so the file can be mailed or attached to a ticket."""
from __future__ import annotations

import html
from typing import Any

PROTOCOL_COLOUR = {"classic": "#3465a4", "consumer": "#e6760f"}
LEAVING = "#a0a0a0"
LEFT, WIDTH, ROW, GAP = 120, 940, 20, 6
THROUGHPUT_HEIGHT = 70


def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v))


class _Axis:
    def __init__(self, duration: float) -> None:
        self.duration = max(duration, 1e-3)

    def x(self, t: float | None) -> float:
        t = 0.0 if t is None else min(max(t, 0.0), self.duration)
        return round(LEFT + t / self.duration * WIDTH, 1)


def _patterns() -> str:
    out = []
    for name, colour in PROTOCOL_COLOUR.items():
        out.append(f'<pattern id="hatch-{name}" width="6" height="6" patternUnits="userSpaceOnUse" '
                   f'patternTransform="rotate(45)"><rect width="6" height="6" fill="{colour}" fill-opacity="0.25"/>'
                   f'<line x1="0" y1="0" x2="0" y2="6" stroke="{colour}" stroke-width="3"/></pattern>')
    return "<defs>" + "".join(out) + "</defs>"


def _fill(protocol: str | None, state: str) -> tuple[str, str]:
    """(fill, extra attributes) for a bar of ``protocol`` in ``state``."""
    colour = PROTOCOL_COLOUR.get(protocol or "", "#cccccc")
    if state in ("consuming", "Stable"):
        return colour, ""
    if state in ("joining", "Empty"):
        return colour, ' fill-opacity="0.3"'
    if state == "leaving":
        return LEAVING, ""
    return f"url(#hatch-{protocol})" if protocol in PROTOCOL_COLOUR else "#dddddd", ""


def _rect(axis: _Axis, t0: float, t1: float, y: float, h: float, fill: str, extra: str, tip: str) -> str:
    x0, x1 = axis.x(t0), axis.x(t1)
    return (f'<rect x="{x0}" y="{y}" width="{max(x1 - x0, 0.8):.1f}" height="{h}" fill="{fill}"{extra}>'
            f"<title>{_e(tip)}</title></rect>")


def timeline_svg(report: dict[str, Any]) -> str:
    run = report["run"]
    duration = run.get("duration_s") or 1.0
    axis = _Axis(duration)
    slots = sorted({m["slot"] for m in report["members"]})
    rows_top = 40
    lane_y = {slot: rows_top + (i + 1) * (ROW + GAP) for i, slot in enumerate(slots)}
    tp_top = rows_top + (len(slots) + 1) * (ROW + GAP) + 24
    height = tp_top + THROUGHPUT_HEIGHT + 30
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{LEFT + WIDTH + 20}" height="{height}" '
             f'font-family="sans-serif" font-size="11">', _patterns()]

    # Time axis.
    step = next(s for s in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1e9) if duration / s <= 12)
    t = 0.0
    while t <= duration + 1e-9:
        x = axis.x(t)
        parts.append(f'<line x1="{x}" y1="{rows_top - 6}" x2="{x}" y2="{tp_top + THROUGHPUT_HEIGHT}" stroke="#eeeeee"/>'
                     f'<text x="{x}" y="{rows_top - 10}" text-anchor="middle" fill="#555">{t:g}s</text>')
        t += step

    # The group lane: type by colour, state by shading, epochs written in.
    parts.append(f'<text x="{LEFT - 8}" y="{rows_top + ROW - 6}" text-anchor="end" font-weight="bold">group</text>')
    points = report["group_timeline"]
    labelled = None
    for i, p in enumerate(points):
        t_to = points[i + 1]["t"] if i + 1 < len(points) else duration
        if not p.get("type"):
            continue
        fill, extra = _fill(p["type"], p.get("state") or "")
        epoch = p.get("group_epoch")
        tip = (f"{p['type']} group, {p.get('state')}, {p.get('members')} members"
               + (f", group epoch {epoch}, assignment epoch {p.get('assignment_epoch')}" if epoch is not None else "")
               + f" ({p['t']}s-{t_to}s)")
        parts.append(_rect(axis, p["t"], t_to, rows_top, ROW, fill, extra, tip))
        if epoch is not None and epoch != labelled and axis.x(t_to) - axis.x(p["t"]) > 16:
            labelled = epoch
            ink = "#fff" if p.get("state") == "Stable" else "#222"
            parts.append(f'<text x="{(axis.x(p["t"]) + axis.x(t_to)) / 2}" y="{rows_top + ROW - 6}" '
                         f'text-anchor="middle" fill="{ink}">{epoch}</text>')

    # One lane per member slot; each incarnation's own view of its membership.
    for m in report["members"]:
        y = lane_y[m["slot"]]
        if m["incarnation"] == 0:
            parts.append(f'<text x="{LEFT - 8}" y="{y + ROW - 6}" text-anchor="end">member m{m["slot"]}</text>')
        for seg in m["segments"]:
            fill, extra = _fill(m["protocol"], seg["state"])
            tip = (f"{m['client_id']} ({m['protocol']}): {seg['state']} {seg['from']}s-{seg['to']}s, "
                   f"partitions {seg['partitions']}")
            parts.append(_rect(axis, seg["from"], seg["to"], y, ROW, fill, extra, tip))

    # Restarts (thin) and conversions (red, labelled).
    for st in report["steps"]:
        x = axis.x(st["close_requested_s"])
        parts.append(f'<line x1="{x}" y1="{rows_top}" x2="{x}" y2="{tp_top - 20}" stroke="#666" '
                     f'stroke-dasharray="2,3"><title>step {st["index"]}: m{st["slot"]} {st["from"]} -&gt; '
                     f'{st["to"]}</title></line>')
    for c in report["conversions"]:
        a, b = c["observed_between_s"]
        x = axis.x((a + b) / 2)
        label = f"{c['from']} → {c['to']}"
        anchor, dx = ("end", -3) if x > LEFT + WIDTH * 0.8 else ("start", 3)
        parts.append(f'<line x1="{x}" y1="{rows_top - 4}" x2="{x}" y2="{tp_top + THROUGHPUT_HEIGHT}" stroke="#cc0000" '
                     f'stroke-width="2"><title>{_e(label)} between {a}s and {b}s</title></line>'
                     f'<text x="{x + dx}" y="{rows_top - 24}" text-anchor="{anchor}" fill="#cc0000">{_e(label)}</text>')

    parts.append(_throughput(report, axis, tp_top))
    parts.append("</svg>")
    return "".join(parts)


def _throughput(report: dict[str, Any], axis: _Axis, top: float) -> str:
    tp = report.get("throughput") or {}
    consumed, produced, bucket = tp.get("consumed", []), tp.get("produced", []), tp.get("bucket_s", 1.0)
    # Scale to the steady rate, not to the catch-up burst after a stall; taller bars are clipped.
    steady = sorted(consumed)[int(len(consumed) * 0.9)] if consumed else 0
    peak = max([steady, *produced, 1]) * 1.25
    out = [f'<text x="{LEFT - 8}" y="{top + THROUGHPUT_HEIGHT / 2}" text-anchor="end">records/{bucket:g}s</text>',
           f'<line x1="{LEFT}" y1="{top + THROUGHPUT_HEIGHT}" x2="{LEFT + WIDTH}" y2="{top + THROUGHPUT_HEIGHT}" '
           'stroke="#999"/>',
           f'<text x="{LEFT + 2}" y="{top - 2}" fill="#555">scale 0-{peak:.0f}; max {max(consumed + [0])} '
           f'consumed in one bucket</text>']
    for i, n in enumerate(consumed):
        h = min(n / peak, 1.0) * THROUGHPUT_HEIGHT
        x0, x1 = axis.x(i * bucket), axis.x((i + 1) * bucket)
        out.append(f'<rect x="{x0}" y="{top + THROUGHPUT_HEIGHT - h:.1f}" width="{max(x1 - x0 - 1, 0.8):.1f}" '
                   f'height="{h:.1f}" fill="#4e9a06"><title>{i * bucket:g}s: {n} consumed, '
                   f'{produced[i] if i < len(produced) else 0} produced</title></rect>')
    pts = " ".join(f"{axis.x((i + 0.5) * bucket)},{top + THROUGHPUT_HEIGHT - n / peak * THROUGHPUT_HEIGHT:.1f}"
                   for i, n in enumerate(produced))
    if pts:
        out.append(f'<polyline points="{pts}" fill="none" stroke="#222" stroke-width="1.2"/>')
    return "".join(out)


def _legend() -> str:
    items = []
    for proto, colour in PROTOCOL_COLOUR.items():
        items.append(f'<span class="sw" style="background:{colour}"></span>{proto}: consuming / Stable')
        items.append(f'<span class="sw" style="background:{colour};opacity:.3"></span>joining / Empty')
        items.append(f'<span class="sw" style="background:repeating-linear-gradient(45deg,{colour} 0 3px,'
                     f'#fff 3px 6px)"></span>rebalancing (no partitions yet, or group not Stable)')
    items.append(f'<span class="sw" style="background:{LEAVING}"></span>leaving (close requested)')
    items.append('<span class="sw" style="background:#cc0000;width:3px"></span>group type change')
    items.append('<span class="sw" style="background:#4e9a06"></span>records consumed; black line: produced')
    return '<p class="legend">' + " &nbsp; ".join(items) + "</p>"


def _table(headers: list[str], rows: list[list[Any]], raw: bool = False) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c if raw else _e(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _offsets_cell(before: dict | None, after: dict | None) -> str:
    if before is None and after is None:
        return "n/a"
    keys = sorted(set(before or {}) | set(after or {}), key=int)
    cells = []
    for k in keys:
        b, a = (before or {}).get(k), (after or {}).get(k)
        bad = b is not None and (a is None or a < b)
        cells.append(f'<span class="{"bad" if bad else ""}">p{_e(k)}: {_e(b)}→{_e(a)}</span>')
    return " ".join(cells)


def render_html(report: dict[str, Any]) -> str:
    run, rec = report["run"], report["records"]
    title = f"kcoord rehearse {run['direction']}{' and back' if run['round_trip'] else ''}: {run['group']}"
    verdict = report["verdict"]
    conv_rows = [[f"{c['from']} → {c['to']}", f"{c['observed_between_s'][0]}–{c['observed_between_s'][1]}s",
                  c["during_step"], f"{_e(c['epoch_before'])} → {_e(c['epoch_after'])}",
                  f"{c['members_before']} → {c['members_after']}",
                  _offsets_cell(c["offsets_before"], c["offsets_after"]),
                  "none" if not c["offset_regressions"] else f'<span class="bad">{len(c["offset_regressions"])}</span>']
                 for c in report["conversions"]]
    type_rows = [[c["step"], c["to"], c["why"], c["window_s"], c["observed_between_s"],
                  "yes" if c["as_expected"] else "NO"] for c in report["type_changes"]["conversions"]]
    step_rows = [[s["index"], f"m{s['slot']}", f"{s['from']} → {s['to']}", s["close_requested_s"], s["spawned_s"],
                  s["settled_s"], s["settle_s"]] for s in report["steps"]]
    member_rows = [[m["client_id"], m["protocol"], m["member_id"], m["records"],
                    ", ".join(map(str, m["generations"])) or "",
                    "; ".join(f"{e['error']}: {e['message']}" for e in m["errors"])] for m in report["members"]]
    group_rows = [[p["t"], p["type"], p["state"], p["group_epoch"], p["assignment_epoch"], p["members"],
                   p.get("error", "")] for p in report["group_timeline"]]
    lists = "".join(f'<li class="bad">{_e(f)}</li>' for f in report["failures"]) + "".join(
        f"<li>{_e(w)}</li>" for w in report["warnings"])
    triggers = 'as expected' if report['type_changes']['ok'] else '<b class="bad">NOT as expected</b>'
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; color: #222; }}
table {{ border-collapse: collapse; margin: .5em 0 1.2em; font-size: 13px; }}
td, th {{ border: 1px solid #ccc; padding: 3px 7px; text-align: left; vertical-align: top; }}
th {{ background: #f3f3f3; }}
.verdict {{ display: inline-block; padding: 4px 12px; color: #fff; font-weight: bold; border-radius: 4px; }}
.pass {{ background: #4e9a06; }} .fail {{ background: #cc0000; }} .bad {{ color: #cc0000; font-weight: bold; }}
.legend {{ font-size: 12px; }} .sw {{ display: inline-block; width: 14px; height: 10px; margin-right: 4px; }}
</style></head><body>
<h1>{_e(title)}</h1>
<p><span class="verdict {verdict}">{verdict.upper()}</span>
 {_e(run['members'])} {_e(run['client'])} members, topic {_e(run['topic'])} ({_e(run['partitions'])} partitions),
 via {_e(run['bootstrap'])}, started {_e(run['started_at'])}, {_e(run['duration_s'])}s.</p>
<ul>{lists}</ul>
<h2>Records</h2>
{_table(["produced", "consumed", "duplicates", "lost", "producer failures"],
        [[rec["produced"], rec["consumed_unique"], rec["duplicates"], rec["lost"], rec["producer_failures"]]])}
<h2>Timeline</h2>
{timeline_svg(report)}
{_legend()}
<h2>Group type changes</h2>
{_table(["change", "observed between", "step", "group epoch", "members", "committed offsets before → after",
         "regressions"], conv_rows, raw=True)}
<p>Kafka's triggers (docs/design/kafka-facts.md §5): {triggers}.</p>
{_table(["step", "to", "Kafka converts when", "trigger window (s)", "observed (s)", "as expected"], type_rows)}
<h2>Rolling restarts</h2>
{_table(["step", "member", "protocol", "stop requested (s)", "new process (s)", "stable again (s)", "settle (s)"],
        step_rows)}
<h2>Member processes</h2>
{_table(["client id", "protocol", "member id", "records", "generations / epochs seen", "errors"], member_rows)}
<details><summary>Group as the coordinator described it ({len(group_rows)} changes)</summary>
{_table(["t (s)", "type", "state", "group epoch", "assignment epoch", "members", "probe error"], group_rows)}
</details>
</body></html>
"""
