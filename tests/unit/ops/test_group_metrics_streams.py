"""Both group collectors (coordinator/metrics.py, metrics_kafka.py) scrape a process that
serves a streams group. A streams group computes its state (`StreamsGroup.state()`) where the
other types keep it, so the collectors read every state through the group type's `state`
(`group_admin.group_state_name`, which `kcoord serve` hands them). Before, every scrape of
`/metrics` failed with an AttributeError once a streams group existed."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from coordinator import metrics
from coordinator.group.group_admin import group_state_name
from coordinator.metrics import GroupCollector
from coordinator.metrics_kafka import KAFKA, KafkaNamesCollector
from tests.unit.group.streams.driver import Driver, image, join, subtopology, topology



def _scrape(registry: CollectorRegistry) -> dict[tuple[str, frozenset], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(generate_latest(registry).decode())
            for s in family.samples}


def test_a_streams_group_is_counted_by_its_state_in_both_collectors():
    d = Driver(image(input=2, **{"app-counts-changelog": 2}), streams_initial_rebalance_delay_ms=0,
               streams_assignment_interval_ms=0)
    top = topology(subtopology("0", sources=["input"], changelogs=["app-counts-changelog"]))
    d.hb(join("m1", "p1", top))
    d.hb(join("m2", "p2", top, group="other"))
    registry = CollectorRegistry()
    registry.register(GroupCollector(lambda: [d.shard], group_state_name))
    registry.register(KafkaNamesCollector(lambda: [d.shard], metrics.kafka_sources(), group_state_name))
    scraped = _scrape(registry)
    states = {group_state_name(g) for g in d.shard.groups.values()}
    assert sum(v for (name, labels), v in scraped.items()
               if name == "kcoord_groups" and dict(labels)["type"] == "streams") == 2.0
    assert {dict(labels)["state"] for (name, labels), v in scraped.items()
            if name == "kcoord_groups" and v} == states
    assert scraped[("kcoord_group_members", frozenset({("type", "streams")}))] == 2.0
    by_state = {dict(labels)["state"]: v for (name, labels), v in scraped.items()
                if name == KAFKA + "streams_group_count"}
    assert set(by_state) == {"Empty", "NotReady", "Assigning", "Reconciling", "Stable", "Dead"}
    assert sum(by_state.values()) == 2.0 and all(by_state[s] for s in states)
    assert scraped[(KAFKA + "group_count", frozenset({("protocol", "streams")}))] == 2.0
