"""ops/deploy/render_dashboard.py's output: one PNG per panel and an index.html that shows
them all, panels without data saying so, and an unsupported query reported rather than
drawn (the real run is `python -m ops.deploy.render_dashboard`, docs/dashboard/)."""
from __future__ import annotations

import json
import math

import pytest

from ops.deploy import render_dashboard
from ops.deploy.promql import Store


def samples() -> Store:
    s = Store()
    for t in range(0, 30, 2):
        s.add_scrape(float(t), [
            ({"__name__": "kcoord_groups", "type": "consumer", "state": "stable", "instance": "a"}, 3.0),
            ({"__name__": "kcoord_group_requests_total", "api": "ConsumerGroupHeartbeat", "error": "none"},
             10.0 * t),
        ])
    return s


def test_every_panel_gets_a_png_and_a_place_on_the_page(tmp_path):
    problems = render_dashboard.render(samples(), tmp_path, "a test run")
    panels = json.loads(render_dashboard.DASHBOARD.read_text())["panels"]
    page = (tmp_path / "index.html").read_text()
    assert problems == []
    for panel in panels:
        png = tmp_path / f"panel-{panel['id']:02d}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
        assert f'src="{png.name}"' in page
    assert page.count("No data in this run") == len(panels) - 2   # groups and requests have data
    series = render_dashboard.panel_series("sum by (api) (rate(kcoord_group_requests_total[1m]))", samples(),
                                           "{{api}}")
    times, values = series["ConsumerGroupHeartbeat"]
    # No rate from one sample (a gap, NaN), then 0..280 over 28 s, from zero: 280 / 60 s.
    assert times[:2] == [0.0, 2.0] and math.isnan(values[0]) and values[-1] == pytest.approx(280 / 60)


def test_an_unsupported_query_is_reported_not_drawn(tmp_path, monkeypatch):
    dashboard = {"title": "t", "panels": [{"id": 1, "title": "Top groups", "gridPos": {"x": 0, "y": 0},
                                           "targets": [{"expr": "topk(3, kcoord_groups)"}]}]}
    path = tmp_path / "d.json"
    path.write_text(json.dumps(dashboard))
    monkeypatch.setattr(render_dashboard, "DASHBOARD", path)
    problems = render_dashboard.render(samples(), tmp_path / "out", "note")
    assert problems == ["Top groups: function topk() is outside the supported subset"]
    assert "unsupported query: function topk()" in (tmp_path / "out" / "index.html").read_text()


def test_the_scraper_labels_each_target_and_records_a_dead_one():
    """Two real prometheus_client endpoints and one port nobody listens on."""
    import time

    from prometheus_client import CollectorRegistry, Gauge, start_http_server

    from support import ports
    from support.wait import wait_until

    urls, servers = [], []
    for value in (1, 2):
        registry = CollectorRegistry()
        Gauge("kcoord_serving", "test", registry=registry).set(value)
        port = ports.free_port()
        servers.append(start_http_server(port, addr="127.0.0.1", registry=registry))
        urls.append(f"http://127.0.0.1:{port}/metrics")
    dead = ports.free_port()
    scraper = render_dashboard.Scraper([*urls, f"http://127.0.0.1:{dead}/metrics"], 0.2, time.monotonic())
    scraper.start()
    try:
        wait_until(lambda: len(scraper.store.scrape_times) >= 3, 20, message="three scrapes")
    finally:
        scraper.done.set()
        scraper.join(5)
        for server, thread in servers:
            server.shutdown()
            thread.join(5)
    t = scraper.store.scrape_times[-1]
    by_instance = render_dashboard.panel_series("max by (instance) (kcoord_serving)", scraper.store,
                                                "{{instance}}")
    assert {name: values[-1] for name, (_, values) in by_instance.items()} == {
        url.split("//")[1].split("/")[0]: float(v) for url, v in zip(urls, (1, 2))}
    assert t > 0 and any(f":{dead}/metrics" in f for f in scraper.failures)
