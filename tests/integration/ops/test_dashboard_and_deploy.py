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
            text = r.read().decode()
            exported = exported_names(text)
    finally:
        kc.stop()
    # The operations guide's metrics table is the documentation: every metric it lists is exported.
    guide = (REPO / "docs" / "user" / "operations.md").read_text()
    table = guide[guide.index("| metric | type | meaning |"):guide.index("## Dashboard")]
    documented = set(re.findall(r"^\| `(kcoord_[a-z_]+)`", table, re.MULTILINE))
    assert len(documented) >= 25
    assert not documented - exported, f"documented but not exported: {sorted(documented - exported)}"
    # ... and so is every metric of its table of Kafka's names (coordinator/metrics_kafka.py),
    # the consumer's group counted under them.
    kafka_names = set(re.findall(r"^\| `(kafka_[a-z0-9_]+)`", table, re.MULTILINE))
    assert len(kafka_names) >= 20
    assert not kafka_names - exported, f"documented but not exported: {sorted(kafka_names - exported)}"
    assert 'kafka_server_group_coordinator_metrics_group_count{protocol="consumer"} 1.0' in text
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
    assert not wrong_label_values(dashboard, text)


def wrong_label_values(dashboard: dict, text: str) -> list[str]:
    """`label="v"` and `label!="v"` matchers whose value no sample of that metric has: an
    `=` that never matches draws nothing, a `!=` that never matches filters nothing (the
    errors panel once compared error!="NONE" where kcoord writes "none"). The scrape
    follows a consumer's join and heartbeats, so every value the panels name is present."""
    from ops.deploy.promql import parse

    def matchers(node):
        if isinstance(node, tuple):
            if node and node[0] in ("select", "range"):
                yield from node[1]
                return
            for child in node:
                yield from matchers(child)

    wrong = []
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            found = list(matchers(parse(target["expr"])))
            metric = next(v for label, _, v in found if label == "__name__")
            for label, op, value in found:
                if op in ("=", "!=") and label != "__name__" and not re.search(
                        rf'^{re.escape(metric)}{{[^}}]*\b{label}="{re.escape(value)}"', text, re.MULTILINE):
                    wrong.append(f"{panel['title']}: no {metric} sample has {label}={value!r}")
    return wrong


def test_compose_references_hold():
    compose = yaml.safe_load((REPO / "compose.yaml").read_text())
    services = compose["services"]
    assert {"kafka", "prometheus", "grafana"} <= set(services)
    kcoords = [s for s in services.values() if (s.get("command") or [])[:1] == ["serve"]]
    # Three processes in one kcoord cluster (issue 15 §5): distinct instance ids, one upstream.
    instances = [s["command"][s["command"].index("--instance-id") + 1]
                 for s in kcoords if "--instance-id" in s["command"]]
    processes = sum(int(s["command"][s["command"].index("--processes") + 1]) if "--processes" in s["command"] else 1
                    for s in kcoords)
    assert processes == 3 and len(set(instances)) == len(instances), (processes, instances)
    assert len({s["command"][s["command"].index("--upstream") + 1] for s in kcoords}) == 1
    for name, service in services.items():
        for dep in service.get("depends_on", []) or []:
            assert dep in services, f"{name} depends on unknown service {dep}"
        for volume in service.get("volumes", []):
            host = volume.split(":")[0]
            assert (REPO / host).exists(), f"{name} mounts {host}, which is not in the repository"
    # Prometheus scrapes every kcoord process: each service running `serve`, and with
    # `--processes N` its N children, whose metrics ports are port, port+1, ...
    # (coordinator/supervisor.py shifts --metrics-port by the child's index).
    expected = set()
    for name, service in services.items():
        command = service.get("command") or []
        if command[:1] != ["serve"]:
            continue
        metrics_port = int(command[command.index("--metrics-port") + 1])
        assert f"{metrics_port}:{metrics_port}" in service["ports"], f"{name} does not publish its metrics port"
        processes = int(command[command.index("--processes") + 1]) if "--processes" in command else 1
        expected |= {f"{name}:{metrics_port + i}" for i in range(processes)}
    assert expected, "no compose service runs kcoord serve"
    scrape = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    targets = [t for job in scrape["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]]
    assert sorted(targets) == sorted(expected)
    published = [str(p).rsplit(":", 1)[0] for service in services.values() for p in service.get("ports", [])]
    assert len(published) == len(set(published)), f"two services publish one host port: {sorted(published)}"
    source = yaml.safe_load((DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yaml").read_text())
    (ds,) = source["datasources"]
    assert ds["url"] == "http://prometheus:9090" and "9090:9090" in services["prometheus"]["ports"]
    uids = {t["datasource"]["uid"] for p in json.loads(DASHBOARD.read_text())["panels"] for t in p["targets"]}
    assert uids == {ds["uid"]}
    provider = yaml.safe_load((DEPLOY / "grafana" / "provisioning" / "dashboards" / "kcoord.yaml").read_text())
    mounted = {v.split(":")[1] for v in services["grafana"]["volumes"]}
    assert provider["providers"][0]["options"]["path"] in mounted
