"""The Grafana dashboard's panels rendered from a running kcoord: PNGs and an HTML page.

    .venv/bin/python -m ops.deploy.render_dashboard --attach http://HOST:PORT/metrics [...]
        [--seconds 90] [--interval 1] [--out dashboard]

Grafana and Prometheus need not run, so this does their part for the dashboard's own
queries: it scrapes every ``--attach`` target's /metrics each interval as Prometheus would
(adding `instance` and `job` labels), adding no load, evaluates every panel's PromQL over
the samples with ops/deploy/promql.py, and draws one PNG per panel (matplotlib) plus
`index.html` in the dashboard's layout. A query outside promql.py's subset is shown as
unsupported, never approximated. Progress is printed every 5 s.

The pictures in docs/dashboard/ come from runs under load: bench/dashboard_load.py starts
kcoord (one process, or a three-process cluster with `--cluster`), drives the load and
renders with this module's `Scraper` and `write`. This module ships; the load driver stays
in bench/ with the load generator it needs.
"""
from __future__ import annotations

import argparse
import html
import json
import math
import sys
import threading
import time
import urllib.request
from pathlib import Path

from ops.deploy.promql import Store, Unsupported, evaluate, legend, parse

DASHBOARD = Path(__file__).resolve().parent / "grafana" / "dashboards" / "kcoord.json"
# Grafana's units of the dashboard -> (axis label, factor applied to the values)
UNITS = {"s": ("ms", 1000.0), "ms": ("ms", 1.0), "reqps": ("requests/s", 1.0), "Bps": ("bytes/s", 1.0),
         "short": ("", 1.0)}


class Scraper(threading.Thread):
    """Scrapes every URL's /metrics each `interval` seconds into one Store (times relative to
    `t0`), labelling each target's samples with its `instance` (host:port) and `job`, as
    Prometheus does. A target that fails a scrape has no samples then (its series go stale)."""

    def __init__(self, urls: list[str], interval: float, t0: float) -> None:
        super().__init__(daemon=True, name="scraper")
        self.urls, self.interval, self.t0 = urls, interval, t0
        self.store = Store()
        self.failures: list[str] = []
        self.done = threading.Event()

    def run(self) -> None:
        from prometheus_client.parser import text_string_to_metric_families

        next_at = time.monotonic()
        while not self.done.is_set():
            at = time.monotonic()
            samples: list = []
            for url in self.urls:
                extra = {"instance": url.split("//", 1)[-1].split("/", 1)[0], "job": "kcoord"}
                try:
                    with urllib.request.urlopen(url, timeout=max(0.5, self.interval)) as r:
                        text = r.read().decode()
                    samples += [({"__name__": s.name, **s.labels, **extra}, s.value)
                                for family in text_string_to_metric_families(text) for s in family.samples]
                except (OSError, ValueError) as e:      # a missed scrape is a gap, as in Prometheus
                    self.failures.append(f"{at - self.t0:.1f}s {url}: {e}")
            if samples:
                self.store.add_scrape(at - self.t0, samples)
            next_at += self.interval
            self.done.wait(max(0.0, next_at - time.monotonic()))


# --- rendering -----------------------------------------------------------------------------------

def panel_series(expr: str, store: Store, legend_format: str) -> dict[str, tuple[list[float], list[float]]]:
    """legend -> (times, values) of the query evaluated at every scrape time; NaN where the
    series is absent, so a line breaks there as Grafana's does instead of bridging the gap."""
    node = parse(expr)
    found: dict[str, dict[float, float]] = {}
    for t in store.scrape_times:
        result = evaluate(node, store, t)
        if not isinstance(result, dict):
            raise Unsupported(f"{expr!r} is a number, not a vector")
        for labels, value in result.items():
            found.setdefault(legend(legend_format, labels), {})[t] = value
    times = list(store.scrape_times)
    return {name: (times, [by_time.get(t, math.nan) for t in times]) for name, by_time in found.items()}


def render(store: Store, out: Path, title_note: str) -> list[str]:
    """One PNG per panel and index.html; returns the problems (unsupported queries)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dashboard = json.loads(DASHBOARD.read_text())
    panels = sorted(dashboard["panels"], key=lambda p: (p["gridPos"]["y"], p["gridPos"]["x"]))
    out.mkdir(parents=True, exist_ok=True)
    problems, figures = [], []
    for panel in panels:
        unit_label, factor = UNITS.get(panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "short"),
                                       ("", 1.0))
        fig, ax = plt.subplots(figsize=(9.0, 3.0), dpi=100)
        note = ""
        try:
            drawn = 0
            for target in panel["targets"]:
                for name, (times, values) in sorted(panel_series(target["expr"], store,
                                                                 target.get("legendFormat", "")).items()):
                    ys = [v * factor if math.isfinite(v) else math.nan for v in values]
                    ax.plot(times, ys, label=name, linewidth=1.4, marker="o", markersize=1.5)
                    drawn += 1
            if drawn:
                ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
            else:
                note = "No data in this run"
        except Unsupported as e:
            note = f"unsupported query: {e}"
            problems.append(f"{panel['title']}: {e}")
        if note:
            ax.text(0.5, 0.5, note, ha="center", va="center", transform=ax.transAxes, color="grey", wrap=True)
        ax.set_title(panel["title"], fontsize=10, loc="left")
        ax.set_xlabel("seconds into the run", fontsize=8)
        ax.set_ylabel(unit_label, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        name = f"panel-{panel['id']:02d}.png"
        fig.savefig(out / name)
        plt.close(fig)
        figures.append((panel, name, note))
        print(f"  rendered {name}: {panel['title']}" + (f" ({note})" if note else ""), flush=True)
    (out / "index.html").write_text(_html(dashboard, figures, title_note))
    return problems


def _html(dashboard: dict, figures: list, note: str) -> str:
    cells = []
    for panel, name, problem in figures:
        queries = "".join(f"<code>{html.escape(t['expr'])}</code>" for t in panel["targets"])
        extra = f"<br><em>{html.escape(problem)}</em>" if problem else ""
        cells.append(f'<figure><img src="{name}" alt="{html.escape(panel["title"])}" width="900">'
                     f"<figcaption>{queries}{extra}</figcaption></figure>")
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(dashboard['title'])} dashboard, rendered</title>
<style>body{{font-family:sans-serif;margin:1em}} .grid{{display:grid;grid-template-columns:repeat(2,910px);gap:8px}}
figure{{margin:0}} code{{font-size:11px;display:block}}</style></head>
<body><h1>{html.escape(dashboard['title'])} dashboard ({len(figures)} panels)</h1>
<p>{html.escape(note)}</p>
<div class="grid">
{chr(10).join(cells)}
</div></body></html>
"""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attach", action="append", metavar="URL", required=True,
                   help="scrape this /metrics URL of a running kcoord (repeatable: every instance of a cluster)")
    p.add_argument("--seconds", type=float, default=90.0, help="length of the run (default 90)")
    p.add_argument("--interval", type=float, default=1.0, help="scrape interval in seconds (default 1)")
    p.add_argument("--out", type=Path, default=Path("dashboard"))
    args = p.parse_args(argv)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    scraper = Scraper(args.attach, args.interval, time.monotonic())
    scraper.start()
    try:
        while (elapsed := time.monotonic() - scraper.t0) < args.seconds:
            print(f"[{elapsed:5.1f}/{args.seconds:.0f}s] scrapes {len(scraper.store.scrape_times)} "
                  f"(failed {len(scraper.failures)})", flush=True)
            scraper.done.wait(5)
    finally:
        scraper.done.set()
        scraper.join(5)
    note = f"Scraped {', '.join(args.attach)} every {args.interval:g}s for {args.seconds:g}s from {started}."
    command = " ".join(["python -m ops.deploy.render_dashboard", *(argv if argv is not None else sys.argv[1:])])
    return write(scraper, args.out, note, command)


def write(scraper: Scraper, out: Path, note: str, command: str) -> int:
    """Render a finished scrape to ``out``; 1 when fewer than 2 scrapes succeeded."""
    if len(scraper.store.scrape_times) < 2:
        print(f"render_dashboard: fewer than 2 scrapes succeeded: {scraper.failures[-3:]}", file=sys.stderr)
        return 1
    print(f"{len(scraper.store.scrape_times)} scrapes, {len(scraper.store.series)} series; rendering "
          f"to {out}", flush=True)
    problems = render(scraper.store, out, f"{note} Command: {command}")
    for problem in problems:
        print(f"unsupported: {problem}", flush=True)
    print(f"wrote {out / 'index.html'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
