"""Prometheus metrics of a running coordinator (`kcoord serve --metrics-port`)."""
from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.core import REGISTRY, GaugeMetricFamily

REQUESTS = Counter("kcoord_group_requests_total", "Group API requests served", ["api", "error"])
REQUEST_SECONDS = Histogram("kcoord_group_request_seconds", "Group API latency, including the "
                            "wait for the state-topic write", ["api"],
                            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5))
WRITE_SECONDS = Histogram("kcoord_state_write_seconds", "State-topic batch write latency",
                          buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5))
RECORDS_WRITTEN = Counter("kcoord_state_records_written_total", "Records appended to the state topic")
SHARD_STATE = Gauge("kcoord_shard_active", "1 when the shard serves, 0 while loading", ["partition"])


class GroupCollector:
    """Groups and members by type and state, computed at scrape time from the shards."""

    def __init__(self, shards: Callable[[], Iterable]) -> None:
        self._shards = shards

    def collect(self):
        groups = GaugeMetricFamily("kcoord_groups", "Groups by type and state", labels=["type", "state"])
        members = GaugeMetricFamily("kcoord_group_members", "Members by group type", labels=["type"])
        counts: dict[tuple[str, str], int] = {}
        member_counts: dict[str, int] = {}
        for shard in self._shards():
            for g in shard.groups.values():
                kind = g.group_type
                counts[(kind, g.state.value)] = counts.get((kind, g.state.value), 0) + 1
                member_counts[kind] = member_counts.get(kind, 0) + len(g.members)
        for (kind, state), n in counts.items():
            groups.add_metric([kind, state], n)
        for kind, n in member_counts.items():
            members.add_metric([kind], n)
        yield groups
        yield members


def register_group_collector(shards: Callable[[], Iterable]) -> GroupCollector:
    collector = GroupCollector(shards)
    REGISTRY.register(collector)
    return collector
