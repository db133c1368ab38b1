"""Just enough SVG to plot a replay: line charts over time and horizontal bar charts.

Self-contained strings (no scripts, no external resources), so a report is one file
that any browser shows.
"""
from __future__ import annotations

import html
import math
from datetime import UTC, datetime

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf"]


def _nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    start = math.ceil(lo / step) * step
    out, v = [], start
    while v <= hi + step * 1e-9:
        out.append(v)
        v += step
    return out


def _fmt(v: float) -> str:
    if abs(v) >= 1e6:
        return f"{v / 1e6:g}M"
    if abs(v) >= 1e3:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


def _time_label(ms: float) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%m-%d %H:%M")


def line_chart(series: dict[str, list[tuple[float, float]]], *, title: str, y_label: str,
               width: int = 860, height: int = 300, time_axis: bool = True, step: bool = False) -> str:
    """One polyline per series; x in epoch ms when time_axis."""
    left, right, top, bottom = 60, 170, 30, 40
    pts = [p for s in series.values() for p in s]
    if not pts:
        return f"<p><em>{html.escape(title)}: no data</em></p>"
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    y1 = max(p[1] for p in pts) or 1
    x1 = x1 if x1 > x0 else x0 + 1
    w, h = width - left - right, height - top - bottom
    sx = lambda x: left + (x - x0) / (x1 - x0) * w  # noqa: E731
    sy = lambda y: top + h - y / y1 * h  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<text x="{left}" y="16" font-size="13" font-weight="bold">{html.escape(title)}</text>']
    for t in _nice_ticks(0, y1):
        y = sy(t)
        out.append(f'<line x1="{left}" x2="{left + w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>'
                   f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
    for t in _nice_ticks(x0, x1, 6):
        x = sx(t)
        label = _time_label(t) if time_axis else _fmt(t)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top + h}" y2="{top + h + 4}" stroke="#555"/>'
                   f'<text x="{x:.1f}" y="{top + h + 16}" text-anchor="middle">{label}</text>')
    out.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{top + h}" stroke="#555"/>'
               f'<line x1="{left}" x2="{left + w}" y1="{top + h}" y2="{top + h}" stroke="#555"/>'
               f'<text transform="translate(14,{top + h / 2}) rotate(-90)" text-anchor="middle">'
               f'{html.escape(y_label)}</text>')
    for i, (name, s) in enumerate(series.items()):
        color = PALETTE[i % len(PALETTE)]
        coords = []
        prev_y = None
        for x, y in sorted(s):
            if step and prev_y is not None:   # a step plot holds the previous value until x
                coords.append(f"{sx(x):.1f},{sy(prev_y):.1f}")
            coords.append(f"{sx(x):.1f},{sy(y):.1f}")
            prev_y = y
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" '
                   f'points="{" ".join(coords)}"/>')
        ly = top + 12 + i * 15
        out.append(f'<rect x="{left + w + 10}" y="{ly - 8}" width="10" height="10" fill="{color}"/>'
                   f'<text x="{left + w + 24}" y="{ly + 1}">{html.escape(name[:24])}</text>')
    out.append("</svg>")
    return "".join(out)


def bar_chart(items: list[tuple[str, float]], *, title: str, width: int = 860) -> str:
    if not items:
        return f"<p><em>{html.escape(title)}: no data</em></p>"
    bar_h, top = 18, 30
    label_w = int(max(len(label) for label, _ in items) * 7.8) + 12
    height = top + bar_h * len(items) + 10
    vmax = max(v for _, v in items) or 1
    w = width - label_w - 80
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<text x="0" y="16" font-size="13" font-weight="bold">{html.escape(title)}</text>']
    for i, (label, v) in enumerate(items):
        y = top + i * bar_h
        bw = max(1.0, v / vmax * w)
        out.append(f'<text x="{label_w - 6}" y="{y + 13}" text-anchor="end">{html.escape(label)}</text>'
                   f'<rect x="{label_w}" y="{y + 2}" width="{bw:.1f}" height="{bar_h - 4}" '
                   f'fill="{PALETTE[i % len(PALETTE)]}"/>'
                   f'<text x="{label_w + bw + 4:.1f}" y="{y + 13}">{v:,.0f}</text>')
    out.append("</svg>")
    return "".join(out)
