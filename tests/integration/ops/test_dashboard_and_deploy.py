"""The Grafana dashboard and the compose deployment name only what exists (issue 15, points
4 and 5): Grafana and Docker cannot run here, so every panel query's metric is checked
against the /metrics of a real `kcoord serve`, and compose.yaml's references (files,
ports, the scrape target, the provisioned data source and dashboard) against each other."""
from __future__ import annotations

import json
import re
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer

from support.admin import create_topic
from support.metrics import kcoord_with_metrics
from support.wait import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
REPO = Path(__file__).resolve().parents[3]
DEPLOY = REPO / "ops" / "deploy"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "kcoord.json"
_METRIC = re.compile(r"\bkcoord_[a-z_]+\b")


def exported_names(text: str) -> set[str]:
    """Every series name a Prometheus query may use: counters' `_total`, histograms'
    `_bucket`/`_sum`/`_count`, gauges as they are (from the # TYPE lines, so a labelled
    metric counts even before its first sample)."""
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            if kind == "counter":
                names |= {name, f"{name}_total"}
            elif kind == "histogram":
                names |= {name, f"{name}_bucket", f"{name}_sum", f"{name}_count"}
            else:
                names.add(name)
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def test_every_dashboard_query_names_a_metric_kcoord_exports(tansu):
    topic = f"dash-{uuid.uuid4().hex[:6]}"
    create_topic(tansu.bootstrap, topic, 2)
    kc = kcoord_with_metrics(tansu.bootstrap, f"__kcoord_dash_{uuid.uuid4().hex[:6]}", state_partitions=2).start()
    try:
        consumer = Consumer({"bootstrap.servers": kc.bootstrap, "group.id": "dash", "group.protocol": "consumer"})
        try:
            consumer.subscribe([topic])
            wait_until(lambda: consumer.poll(0.2) is None and consumer.assignment(), 60,
                       message="the consumer to be assigned")
        finally:
            consumer.close()
        with urllib.request.urlopen(f"http://127.0.0.1:{kc.metrics_port}/metrics", timeout=5) as r:
            exported = exported_names(r.read().decode())
    finally:
        kc.stop()
    # The README's metrics table is the documentation: every metric it lists is exported.
    readme = (REPO / "README.md").read_text()
    table = readme[readme.index("| metric | type | meaning |"):readme.index("**Dashboard and compose.**")]
    documented = set(re.findall(r"^\| `(kcoord_[a-z_]+)`", table, re.MULTILINE))
    assert len(documented) >= 25
    assert not documented - exported, f"documented but not exported: {sorted(documented - exported)}"
    dashboard = json.loads(DASHBOARD.read_text())
    assert len(dashboard["panels"]) >= 12
    missing = {}
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            names = set(_METRIC.findall(target["expr"]))
            assert names, f"panel {panel['title']!r} queries no kcoord metric"
            if names - exported:
                missing[panel["title"]] = sorted(names - exported)
    assert not missing, f"panels query metrics kcoord does not export: {missing}"


def test_compose_references_hold():
    compose = yaml.safe_load((REPO / "compose.yaml").read_text())
    services = compose["services"]
    assert {"kafka", "kcoord", "prometheus", "grafana"} <= set(services)
    for name, service in services.items():
        for dep in service.get("depends_on", []) or []:
            assert dep in services, f"{name} depends on unknown service {dep}"
        for volume in service.get("volumes", []):
            host = volume.split(":")[0]
            assert (REPO / host).exists(), f"{name} mounts {host}, which is not in the repository"
    command = services["kcoord"]["command"]
    metrics_port = command[command.index("--metrics-port") + 1]
    assert f"{metrics_port}:{metrics_port}" in services["kcoord"]["ports"]
    scrape = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    targets = [t for job in scrape["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]]
    assert targets == [f"kcoord:{metrics_port}"]
    source = yaml.safe_load((DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yaml").read_text())
    (ds,) = source["datasources"]
    assert ds["url"] == "http://prometheus:9090" and "9090:9090" in services["prometheus"]["ports"]
    uids = {t["datasource"]["uid"] for p in json.loads(DASHBOARD.read_text())["panels"] for t in p["targets"]}
    assert uids == {ds["uid"]}
    provider = yaml.safe_load((DEPLOY / "grafana" / "provisioning" / "dashboards" / "kcoord.yaml").read_text())
    mounted = {v.split(":")[1] for v in services["grafana"]["volumes"]}
    assert provider["providers"][0]["options"]["path"] in mounted
