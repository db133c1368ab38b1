"""kcoord's metrics under Kafka's names (coordinator/metrics_kafka.py) are the names Kafka 4.4
itself registers: its GroupCoordinatorMetrics and GroupCoordinatorRuntimeMetrics, built in a JVM
from the 4.4 jars (no broker), list every Kafka Metrics name with its tags and every Yammer
MBean; each becomes the name the JMX exporter gives it, and kcoord must export exactly those,
less NOT_EXPORTED, with the same label values."""
from __future__ import annotations

import re
import subprocess

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from coordinator.metrics import kafka_sources
from coordinator.metrics_kafka import NOT_EXPORTED, KafkaNamesCollector
from support.kafka_broker import KAFKA_44, libs_dir

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

LIST_NAMES = """
import com.yammer.metrics.core.MetricsRegistry;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.coordinator.group.metrics.GroupCoordinatorMetrics;
import org.apache.kafka.coordinator.group.metrics.GroupCoordinatorRuntimeMetrics;

public class ListNames {
    public static void main(String[] args) {
        Metrics metrics = new Metrics();
        MetricsRegistry registry = new MetricsRegistry();
        new GroupCoordinatorMetrics(registry, metrics);
        new GroupCoordinatorRuntimeMetrics(metrics);
        metrics.metrics().keySet().forEach(n -> System.out.println("kafka\\t" + n.group() + "\\t" + n.name()
            + "\\t" + n.tags().entrySet().stream().map(e -> e.getKey() + "=" + e.getValue())
                .reduce((a, b) -> a + "," + b).orElse("")));
        registry.allMetrics().keySet().forEach(n -> System.out.println("yammer\\t" + n.getMBeanName()));
    }
}
"""


def _safe(text: str) -> str:
    """The JMX exporter's safeName: characters outside [a-zA-Z0-9:_] to '_', runs of '_' merged."""
    return re.sub("__+", "_", re.sub("[^a-zA-Z0-9:_]", "_", text))


def kafka_series(tmp_path) -> tuple[set, set]:
    """(exporter-named series of Kafka 4.4, Kafka Metrics names left out by NOT_EXPORTED)."""
    source = tmp_path / "ListNames.java"
    source.write_text(LIST_NAMES)
    out = subprocess.run(["java", "-cp", f"{libs_dir(KAFKA_44)}/*", str(source)], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    series, left_out = set(), set()
    for line in out.splitlines():
        kind, _, rest = line.partition("\t")
        if kind == "kafka":
            group, name, tags = rest.split("\t")
            if any(name.startswith(prefix) for prefix in NOT_EXPORTED):
                left_out.add(name)
                continue
            labels = frozenset(tuple(t.split("=", 1)) for t in tags.split(",") if t)
            # Default export: kafka.server:type=<group>,<tags> attribute <name>.
            series.add((_safe(f"kafka.server_{group}_{name}"), labels))
        elif kind == "yammer":
            # kafka.coordinator.group:type=GroupMetadataManager,name=NumGroups, attribute Value,
            # through `kafka.coordinator.(\\w+)<type=(.+), name=(.+)><>(Count|Value)`, lowercased.
            m = re.fullmatch(r"kafka\.coordinator\.(\w+):type=(.+),name=(.+)", rest)
            assert m, rest
            series.add((f"kafka_coordinator_{m[1]}_{m[2]}_{m[3]}".lower(), frozenset()))
    return series, left_out


def kcoord_series() -> set:
    registry = CollectorRegistry()
    registry.register(KafkaNamesCollector(lambda: [], kafka_sources(), lambda group: group.state.value))
    return {(s.name, frozenset(s.labels.items()))
            for family in text_string_to_metric_families(generate_latest(registry).decode())
            for s in family.samples}


def test_kcoord_exports_kafka_44s_names_less_the_ones_it_leaves_out_and_says_why(tmp_path):
    kafka, left_out = kafka_series(tmp_path)
    assert len(kafka) >= 40 and any(name.endswith("_numgroups") for name, _ in kafka)
    kcoord = kcoord_series()
    assert not kcoord - kafka, f"kcoord invents: {sorted(kcoord - kafka)}"
    assert not kafka - kcoord, f"Kafka 4.4 has, kcoord lacks: {sorted(kafka - kcoord)}"
    # Every NOT_EXPORTED prefix still names something Kafka 4.4 has (no stale excuse), but
    # event-queue-size, registered only once a runtime starts.
    unused = {p for p in NOT_EXPORTED if not any(n.startswith(p) for n in left_out)}
    assert unused <= {"event-queue-size"}, unused
