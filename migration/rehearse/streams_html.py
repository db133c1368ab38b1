"""The Streams rehearsal's report as one self-contained HTML page: verdict, phases, checks and
an inline SVG timeline (instances x time, one bar per task span, coloured by protocol; the
group's type and state along the top). No scripts, no external resources."""
from __future__ import annotations

from typing import Any

from .html_report import _e, _table

COLOUR = {"classic": "#3465a4", "streams": "#4e9a06"}
LEFT, WIDTH, ROW = 150, 900, 16


def _x(t: float | None, duration: float) -> float:
    t = 0.0 if t is None else min(max(t, 0.0), duration)
    return round(LEFT + t / max(duration, 1e-3) * WIDTH, 1)


def timeline_svg(report: dict[str, Any]) -> str:
    duration = report["run"].get("duration_s") or 1.0
    parts = []
    y = 10
    for g, nxt in zip(report["group_timeline"], [*report["group_timeline"][1:], None]):
        x0, x1 = _x(g["t"], duration), _x(nxt["t"] if nxt else duration, duration)
        colour = COLOUR.get(g["type"] or "", "#cccccc")
        opacity = "1" if (g["state"] or "").lower() == "stable" else "0.35"
        parts.append(f'<rect x="{x0}" y="{y}" width="{max(x1 - x0, 0.8):.1f}" height="{ROW}" fill="{colour}" '
                     f'fill-opacity="{opacity}"><title>{_e(g["type"])} {_e(g["state"])} epoch '
                     f'{_e(g["group_epoch"])}, {_e(g["members"])} members, from {_e(g["t"])}s</title></rect>')
    parts.append(f'<text x="4" y="{y + 12}" font-size="11">group (coordinator)</text>')
    slots = sorted({i["slot"] for i in report["instances"]})
    for slot in slots:
        y += ROW + 8
        parts.append(f'<text x="4" y="{y + 12}" font-size="11">instance {slot}</text>')
        for inst in (i for i in report["instances"] if i["slot"] == slot):
            colour = COLOUR.get(inst["protocol"], "#cccccc")
            for span in inst["spans"]:
                x0, x1 = _x(span["from_s"], duration), _x(span["to_s"], duration)
                parts.append(f'<rect x="{x0}" y="{y}" width="{max(x1 - x0, 0.8):.1f}" height="{ROW}" '
                             f'fill="{colour}" fill-opacity="0.25" stroke="{colour}" stroke-width="0.3">'
                             f'<title>{_e(span["task"])} active on {_e(inst["client_id"])} ({_e(inst["protocol"])}) '
                             f'{_e(span["from_s"])}-{_e(span["to_s"])}s</title></rect>')
    for p in report["phases"]:
        for key in ("start_s", "empty_s"):
            if p[key] is not None:
                x = _x(p[key], duration)
                parts.append(f'<line x1="{x}" y1="4" x2="{x}" y2="{y + ROW + 4}" stroke="#555" stroke-dasharray="3,3">'
                             f'<title>phase {p["phase"]} {key[:-2]} at {p[key]}s</title></line>')
    height = y + ROW + 24
    parts.append(f'<text x="{LEFT}" y="{height - 4}" font-size="11">0 s</text>'
                 f'<text x="{LEFT + WIDTH - 40}" y="{height - 4}" font-size="11">{_e(duration)} s</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{LEFT + WIDTH + 20}" height="{height}">'
            + "".join(parts) + "</svg>")


def render_streams_html(report: dict[str, Any]) -> str:
    run = report["run"]
    verdict = report["verdict"]
    phases = _table(["phase", "protocol", "group while starting", "group type while running", "states",
                     "settled in (s)", "Empty at (s)", "committed at start", "committed when Empty", "ok"],
                    [[p["phase"], p["protocol"], " → ".join(p["states_while_starting"]),
                      ", ".join(p["group_types_while_running"]),
                      ", ".join(p["states_while_running"]), p["settle_s"], p["empty_s"], p["committed_at_start"],
                      p["committed_at_empty"], "yes" if p["ok"] else "NO: " + "; ".join(p["problems"])]
                     for p in report["phases"]])
    changes = _table(["phase", "conversion", "observed", "from an Empty group"],
                     [[e["phase"], f"{e['from']} → {e['to']}", e["observed"], e["from_empty"]]
                      for e in report["type_changes"]["expected"]])
    resumed = _table(["phase", "partition", "committed", "resumed at", "reprocessed below committed", "ok"],
                     [[r["phase"], r["partition"], r["committed"], r["resumed_at"],
                       r["reprocessed_below_committed"], r["ok"]] for r in report["resumptions"]])
    inp, counts = report["input"], report["counts"]
    checks = _table(["check", "result"], [
        ["input records produced / processed / never processed",
         f"{inp['produced']} / {inp['processed_unique']} / {inp['never_processed']}"],
        ["processed twice within a phase", inp["processed_twice_in_a_phase"]],
        ["output counts", f"{'complete and correct' if counts['ok'] else 'WRONG'} ({counts['words']} words)"],
        ["tasks active on two instances at once (each instance's own open and close of the task; "
         "each StreamsGroupDescribe)", len(report["active_twice"])],
        ["committed offsets kept across phases", all(k["kept"] for k in report["offsets"]["across_phases"])],
        ["committed offset decreases", len(report["offsets"]["decreases"])],
    ])
    listing = "".join(f"<li>{_e(x)}</li>" for x in report["failures"] + report["warnings"]) or "<li>none</li>"
    colour = "#2e7d32" if verdict == "pass" else "#c62828"
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>kcoord rehearse streams {_e(run['run_id'])}</title>
<style>body{{font-family:sans-serif;margin:20px}}table{{border-collapse:collapse;margin:8px 0}}
td,th{{border:1px solid #ccc;padding:3px 6px;font-size:13px;text-align:left}}</style></head><body>
<h1 style="color:{colour}">{_e(verdict.upper())}: Streams rehearsal {_e(' → '.join(run['phases']))}</h1>
<p>{_e(run['instances'])} instances of application <code>{_e(run['group'])}</code> ({_e(run['partitions'])} input
partitions, {_e(run['tasks'])} tasks), every instance stopped between phases by <b>{_e(run['stop'])}</b>, via
<code>{_e(run['bootstrap'])}</code>, started {_e(run['started_at'])}, {_e(run['duration_s'])} s.
Processing guarantee <b>{_e(run.get('guarantee', 'at_least_once'))}</b>; output topic read
{_e(run.get('output_isolation', 'read_uncommitted'))}.</p>
<p>Stopping: {_e(run.get('stop_why'))}.</p>
<h2>Failures and warnings</h2><ul>{listing}</ul>
<h2>Checks</h2>{checks}
<h2>Phases</h2>{phases}
<h2>Group type changes (Kafka's offline conversions)</h2>{changes}
<h2>Where processing resumed</h2>{resumed}
<h2>Timeline</h2><p>Top row: the group as the coordinator reported it (blue classic, green streams; pale when not
Stable). Below: each instance's active task spans, from the task's processors' init to their close on the
instance's stream thread; dashed lines: phase starts and the group reported Empty.</p>
{timeline_svg(report)}
</body></html>
"""
