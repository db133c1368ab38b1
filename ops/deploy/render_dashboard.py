"""The Grafana dashboard's panels rendered from a real run: PNGs and an HTML page.

    .venv/bin/python -m ops.deploy.render_dashboard [--seconds 90] [--out docs/dashboard]
        [--attach http://HOST:PORT/metrics ...] [--cluster]

Grafana and Prometheus do not run here, so this does their part for the dashboard's own
queries: it starts a Tansu broker and a real `kcoord serve --metrics-port` in front of it
(or, with `--attach`, scrapes a kcoord that is already running, adding no load), puts load
on it, scrapes /metrics every second as Prometheus would (adding `instance` and `job`
labels), evaluates every panel's PromQL over the samples with ops/deploy/promql.py, and
draws one PNG per panel (matplotlib) plus `index.html` in the dashboard's layout. A query
outside promql.py's subset is shown as unsupported, never approximated.

The load, over `--seconds` (fractions of the run):
- 0: 4 KIP-848 groups of 40 simulated consumers (bench/loadgen) heartbeat on the interval
  kcoord hands them; a producer sends 50 records/s through kcoord (forwarded to Tansu);
- 1/3: 2 more groups of 40 and 40 more members in the first group (rebalances, and the
  adaptive interval stretches: kcoord runs with a heartbeat budget of 300/s);
- 0.45 and 0.55: two classic consumers (librdkafka, group.protocol=classic) join one group;
- 2/3: the second wave stops heartbeating and is expired by the 10 s session timeout;
- 0.8: one classic consumer leaves (LeaveGroup).
`--cluster` runs three instances in front of Apache Kafka 4.3 instead, with real consumers,
a kill -9 and a scale-down (ops/deploy/cluster_load.py).
Progress is printed every 5 s. Ports come from KCOORD_BENCH_PORTS (bench/loadgen/procs.py)
and KCOORD_TEST_PORTS (tests/support/ports.py).
"""
from __future__ import annotations

import argparse
import asyncio
import html
import json
import math
import os
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path

from ops.deploy.promql import Store, Unsupported, evaluate, legend, parse

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "ops" / "deploy" / "grafana" / "dashboards" / "kcoord.json"
TOPIC_PARTITIONS = 12
KCOORD_CONFIG = ("consumer_session_timeout_ms=10000", "consumer_heartbeat_budget_per_second=300")
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


# --- the load -----------------------------------------------------------------------------

def _classic_consumer(bootstrap: str, topic: str, group: str, stop: threading.Event) -> threading.Thread:
    from confluent_kafka import Consumer

    def run() -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "classic",
                             "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
                             "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        try:
            while not stop.is_set():
                consumer.poll(0.2)
        finally:
            consumer.close()        # LeaveGroup

    thread = threading.Thread(target=run, daemon=True, name=f"classic-{group}")
    thread.start()
    return thread


def _producer(bootstrap: str, topic: str, stop: threading.Event) -> threading.Thread:
    from confluent_kafka import Producer

    def run() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 2})   # as cluster_load
        payload = os.urandom(512)
        while not stop.wait(0.02):          # 50 records/s
            producer.produce(topic, payload)
            producer.poll(0)
        producer.flush(10)

    thread = threading.Thread(target=run, daemon=True, name="producer")
    thread.start()
    return thread


async def run_load(host: str, port: int, topic: str, seconds: float, scraper: Scraper) -> None:
    from bench.loadgen.client import MemberDriver, open_connections
    from bench.loadgen.consumer_member import ConsumerMember

    bootstrap = f"{host}:{port}"
    run_id = uuid.uuid4().hex[:6]
    stop_threads, stop_first_classic = threading.Event(), threading.Event()
    threads = [_producer(bootstrap, topic, stop_threads)]
    conns = await open_connections(host, port, 4)
    wave1 = [ConsumerMember(f"dash-{run_id}-g{g}", (topic,)) for g in range(4) for _ in range(40)]
    wave2 = [ConsumerMember(f"dash-{run_id}-g{g}", (topic,)) for g in (0, 4, 5) for _ in range(40)]
    drivers = [MemberDriver(conns[:2], wave1)]
    drivers[0].start()
    classic = f"dash-{run_id}-classic"
    events = [(seconds / 3, "second wave: 120 members join", lambda: _start(drivers, conns[2:], wave2)),
              (seconds * 0.45, "classic consumer 1 joins",
               lambda: threads.append(_classic_consumer(bootstrap, topic, classic, stop_first_classic))),
              (seconds * 0.55, "classic consumer 2 joins",
               lambda: threads.append(_classic_consumer(bootstrap, topic, classic, stop_threads))),
              (seconds * 2 / 3, "second wave stops heartbeating", lambda: drivers[1].stop()),
              (seconds * 0.8, "classic consumer 1 leaves", stop_first_classic.set)]
    t0, next_report = scraper.t0, 0.0
    try:
        while (elapsed := time.monotonic() - t0) < seconds:
            while events and events[0][0] <= elapsed:
                _, what, action = events.pop(0)
                action()
                print(f"[{elapsed:5.1f}s] {what}", flush=True)
            if elapsed >= next_report:
                sent = sum(d.requests for d in drivers)
                print(f"[{elapsed:5.1f}/{seconds:.0f}s] scrapes {len(scraper.store.scrape_times)} "
                      f"(failed {len(scraper.failures)}), heartbeats sent {sent}", flush=True)
                next_report += 5
            await asyncio.sleep(0.1)
    finally:
        for d in drivers:
            d.stop()
        for c in conns:
            c.close()
        stop_threads.set()
        stop_first_classic.set()
        for t in threads:
            t.join(15)


def _start(drivers: list, conns: list, members: list) -> None:
    from bench.loadgen.client import MemberDriver

    driver = MemberDriver(conns, members)
    drivers.append(driver)
    driver.start()


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
    p.add_argument("--seconds", type=float, default=90.0, help="length of the run (default 90)")
    p.add_argument("--interval", type=float, default=1.0, help="scrape interval in seconds (default 1)")
    p.add_argument("--out", type=Path, default=REPO / "docs" / "dashboard")
    p.add_argument("--attach", action="append", metavar="URL",
                   help="scrape this /metrics URL of a running kcoord instead, adding no load (repeatable: "
                        "every instance of a cluster)")
    p.add_argument("--cluster", action="store_true",
                   help="three `kcoord serve --instance-id` processes in front of Apache Kafka 4.3, with "
                        "real consumers, a kill -9 and a scale-down (ops/deploy/cluster_load.py)")
    args = p.parse_args(argv)
    sys.path.insert(0, str(REPO))          # bench/ is not a package of the distribution
    sys.path.insert(0, str(REPO / "tests"))   # support/: the brokers and kcoord processes of the tests
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    if args.attach:
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
    elif args.cluster:
        from ops.deploy.cluster_load import run_cluster
        scraper, note = run_cluster(args.seconds, args.interval, Scraper)
        note = f"A real run from {started}. {note}"
    else:
        scraper, note = _run_with_load(args, started)
    if len(scraper.store.scrape_times) < 2:
        print(f"render_dashboard: fewer than 2 scrapes succeeded: {scraper.failures[-3:]}", file=sys.stderr)
        return 1
    print(f"{len(scraper.store.scrape_times)} scrapes, {len(scraper.store.series)} series; rendering "
          f"to {args.out}", flush=True)
    command = " ".join(["python -m ops.deploy.render_dashboard", *(argv if argv is not None else sys.argv[1:])])
    problems = render(scraper.store, args.out, f"{note} Command: {command}")
    for problem in problems:
        print(f"unsupported: {problem}", flush=True)
    print(f"wrote {args.out / 'index.html'}", flush=True)
    return 0


def _run_with_load(args, started: str) -> tuple[Scraper, str]:
    from bench.loadgen import procs

    broker = procs.tansu()
    kcoord = None
    try:
        topic = f"dash-{uuid.uuid4().hex[:6]}"
        procs.run(procs.create_topic(broker.host, broker.port, topic, TOPIC_PARTITIONS))
        metrics_port = procs.free_ports(1)
        kcoord = procs.Kcoord(broker.bootstrap, config=KCOORD_CONFIG, state_partitions=4,
                              extra_args=("--metrics-port", str(metrics_port))).start()
        print(f"kcoord on 127.0.0.1:{kcoord.port} (pid {kcoord.pid}), upstream Tansu {broker.bootstrap}; "
              f"metrics on :{metrics_port}", flush=True)
        scraper = Scraper([f"http://127.0.0.1:{metrics_port}/metrics"], args.interval, time.monotonic())
        scraper.start()
        try:
            procs.run(run_load("127.0.0.1", kcoord.port, topic, args.seconds, scraper))
        finally:
            scraper.done.set()
            scraper.join(5)
    finally:
        if kcoord is not None:
            kcoord.stop()
        broker.stop()
    note = (f"A real run from {started}: kcoord (--config {' '.join(KCOORD_CONFIG)}, 4 state partitions) in "
            f"front of one Tansu broker, scraped every {args.interval:g}s for {args.seconds:g}s; load as in "
            f"ops/deploy/render_dashboard.py (KIP-848 and classic groups, a producer). Queries evaluated by "
            f"ops/deploy/promql.py, the dashboard's own PromQL.")
    return scraper, note


if __name__ == "__main__":
    sys.exit(main())
