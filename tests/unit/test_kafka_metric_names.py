"""The group coordinator metrics under Kafka 4.4's names (coordinator/metrics_kafka.py): queries
from dashboards written for Kafka, evaluated on kcoord's exposition after group activity."""
from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from coordinator import metrics
from coordinator.group.group_admin import group_state_name
from coordinator.metrics import RecentObservations
from coordinator.metrics_kafka import KAFKA, YAMMER, KafkaNamesCollector, Sources, WindowedRate, percentile
from coordinator.runtime.shard_runtime import group_shards
from ops.deploy.promql import Store, evaluate, parse
from records import decode_record
from tests.unit.group.context import ShardContext, topic
from tests.unit.group.test_offsets_and_admin import commit

# confluentinc/jmx-monitoring-stacks, grafana-dashboards/kafka-cluster.py, row "Group Coordinator":
# "Number of Groups per Broker" and the stacked groups-by-state panel (Yammer names through the
# JMX exporter rules of shared-assets/jmx-exporter/kafka_broker.yml).
CONFLUENT_GROUPS = 'kafka_coordinator_group_groupmetadatamanager_numgroups{namespace="$ns",pod=~"$broker"}'
CONFLUENT_BY_STATE = {
    "stable": 'sum(kafka_coordinator_group_groupmetadatamanager_numgroupsstable{namespace="$ns",pod=~"$broker"})',
    "preparing_rebalance": 'sum(kafka_coordinator_group_groupmetadatamanager_numgroupspreparingrebalance'
                           '{namespace="$ns",pod=~"$broker"})',
    "dead": 'sum(kafka_coordinator_group_groupmetadatamanager_numgroupsdead{namespace="$ns",pod=~"$broker"})',
    "completing_rebalance": 'sum(kafka_coordinator_group_groupmetadatamanager_numgroupscompletingrebalance'
                            '{namespace="$ns",pod=~"$broker"})',
    "empty": 'sum(kafka_coordinator_group_groupmetadatamanager_numgroupsempty{namespace="$ns",pod=~"$broker"})',
}
# Kafka Metrics names under the JMX exporter's default export, as managed-Kafka metric tables
# list them (kafka_server_group_coordinator_metrics_consumer_group_rebalance_rate), and the
# usual PromQL over a count and a labelled gauge.
KAFKA_METRICS_QUERIES = {
    "rebalance_rate": "sum(kafka_server_group_coordinator_metrics_consumer_group_rebalance_rate) by (pod)",
    "rebalances_5m": "sum(increase(kafka_server_group_coordinator_metrics_consumer_group_rebalance_count[5m]))",
    "groups_by_protocol": "sum(kafka_server_group_coordinator_metrics_group_count) by (protocol)",
    "consumer_groups_by_state": "sum(kafka_server_group_coordinator_metrics_consumer_group_count) by (state)",
}
TARGET = {"namespace": "kafka", "pod": "kcoord-0", "job": "kcoord"}     # what service discovery adds


def _grafana(query: str) -> str:
    return query.replace("$ns", "kafka").replace("$broker", "kcoord-.*")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _scrape(registry: CollectorRegistry) -> list[tuple[dict[str, str], float]]:
    out = []
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            out.append(({"__name__": s.name, **s.labels, **TARGET}, s.value))
    return out


def _activity() -> tuple[ShardContext, list]:
    """A KIP-848 group with two members and offsets, a simple classic group with offsets; the
    records the shard wrote, for the runtime's rebalance count."""
    ctx = ShardContext(topic("foo", 4))
    ctx.heartbeat("cg", "m1", 0, topics=["foo"])
    ctx.heartbeat("cg", "m2", 0, topics=["foo"])
    commit(ctx, "cg", "m1", ctx.member("cg", "m1").member_epoch, {"foo": {0: 10, 1: 11}})
    commit(ctx, "simple", "", -1, {"foo": {2: 7}})
    return ctx, [decode_record(k, v) for _, k, v in ctx.log]


class Fixture:
    """A simulated clock and the sources metrics.py would hand the collector (the process's
    rebalance counter; private windows, so no other test's observations count)."""

    def __init__(self) -> None:
        self.clock = Clock()

        def window(name: str) -> RecentObservations:
            return RecentObservations(Histogram(name, "test", registry=None), clock=self.clock)

        self.sources = Sources(shard_states=lambda: {0: "active", 1: "active", 2: "loading", 3: "failed"},
                               rebalances=metrics.REBALANCES, loads=window("loads"),
                               event_queue=window("queue"), event_processing=window("processing"),
                               event_sample=metrics.EVENT_SAMPLE)

    def registry(self, shards) -> CollectorRegistry:
        registry = CollectorRegistry()
        registry.register(KafkaNamesCollector(lambda: shards, self.sources, group_state_name, clock=self.clock))
        return registry


@pytest.fixture
def windows() -> Fixture:
    return Fixture()


def test_kafka_dashboards_queries_read_kcoord_after_group_activity(windows):
    clock = windows.clock
    ctx, written = _activity()
    registry = windows.registry([ctx.shard])
    store = Store()
    store.add_scrape(clock.now, _scrape(registry))
    group_shards(lambda p: ctx.shard).records_written(written)      # the runtime counts what was written
    windows.sources.loads.observe(0.25)
    windows.sources.loads.observe(0.75)
    clock.now += 30
    store.add_scrape(clock.now, _scrape(registry))

    def q(query: str):
        return evaluate(parse(_grafana(query)), store, clock.now)

    # The classic (Yammer) gauges count the one classic group, "simple", which is Empty.
    [(labels, groups)] = q(CONFLUENT_GROUPS).items()
    assert groups == 1.0 and dict(labels)["pod"] == "kcoord-0"
    by_state = {name: q(query) for name, query in CONFLUENT_BY_STATE.items()}
    assert by_state == {"stable": {(): 0.0}, "preparing_rebalance": {(): 0.0}, "dead": {(): 0.0},
                        "completing_rebalance": {(): 0.0}, "empty": {(): 1.0}}
    assert q(KAFKA_METRICS_QUERIES["groups_by_protocol"]) == {
        (("protocol", "classic"),): 1.0, (("protocol", "consumer"),): 1.0,
        (("protocol", "streams"),): 0.0, (("protocol", "share"),): 0.0}
    states = q(KAFKA_METRICS_QUERIES["consumer_groups_by_state"])
    assert set(states) == {(("state", s),) for s in ("Empty", "Assigning", "Reconciling", "Stable", "Dead")}
    assert sum(states.values()) == 1.0 and states[(("state", "Empty"),)] == 0.0
    # Two heartbeats that changed the group: its epoch rose twice.
    rebalances = sum(1 for r in written if type(r.key).__name__ == "ConsumerGroupMetadataKey" and r.value)
    assert rebalances >= 1
    rate = q(KAFKA_METRICS_QUERIES["rebalance_rate"])
    assert list(rate) == [(("pod", "kcoord-0"),)]
    assert rate[(("pod", "kcoord-0"),)] == pytest.approx(rebalances / 30)
    assert q(KAFKA_METRICS_QUERIES["rebalances_5m"])[()] > 0
    scraped = {(labels["__name__"], labels.get("state")): v for labels, v in _scrape(registry)}
    assert scraped[(KAFKA + "offset_count", None)] == 3.0
    assert scraped[(YAMMER + "numoffsets", None)] == 3.0
    assert scraped[(KAFKA + "num_partitions", "active")] == 2.0
    assert scraped[(KAFKA + "num_partitions", "failed")] == 1.0
    assert scraped[(KAFKA + "partition_load_time_avg", None)] == pytest.approx(500.0)
    assert scraped[(KAFKA + "partition_load_time_max", None)] == pytest.approx(750.0)


def test_label_values_come_from_fixed_sets_never_from_clients(windows):
    ctx, _ = _activity()
    registry = windows.registry([ctx.shard])
    text = generate_latest(registry).decode()
    assert '"cg"' not in text and '"simple"' not in text and "foo" not in text
    labels = {k for labels, _ in _scrape(registry) for k in labels} - set(TARGET) - {"__name__"}
    assert labels == {"protocol", "state"}
    # Untyped, as the JMX exporter exposes MBean attributes: no _total suffix on counts.
    assert f"# TYPE {KAFKA}consumer_group_rebalance_count untyped" in text


def test_windowed_statistics_forget_observations_older_than_60_s(windows):
    clock, queue = windows.clock, windows.sources.event_queue
    registry = windows.registry([])
    queue.observe(0.5)
    clock.now += 61
    for v in (0.001, 0.002, 0.003, 0.004):
        queue.observe(v)
    scraped = {labels["__name__"]: v for labels, v in _scrape(registry)}
    assert scraped[KAFKA + "event_queue_time_ms_max"] == pytest.approx(4.0)
    assert scraped[KAFKA + "event_queue_time_ms_p50"] == pytest.approx(2.0)
    assert scraped[KAFKA + "event_processing_time_ms_p99"] == 0.0         # nothing sampled
    # No load in the window: Kafka's Avg and Max read NaN.
    assert math.isnan(scraped[KAFKA + "partition_load_time_avg"])


def test_percentile_is_nearest_rank():
    values = [float(i) for i in range(1, 1001)]
    assert percentile(values, 50) == 500.0
    assert percentile(values, 99.9) == 999.0
    assert percentile([], 99) == 0.0
    assert percentile([3.0], 95) == 3.0


def test_windowed_rate():
    rate = WindowedRate(0.0, 0.0)
    assert rate.rate(10.0, 6.0) == pytest.approx(6 / 30)         # at least one 30 s sample
    assert rate.rate(40.0, 12.0) == pytest.approx(12 / 40)
    assert rate.rate(130.0, 12.0) == pytest.approx(0.0)          # nothing in the last 60 s
    assert rate.rate(140.0, 15.0) == pytest.approx(3 / 100)      # from the last point before the window
