"""Kafka 4.4's group coordinator metrics under the names dashboards written for Kafka query.

Naming: what the Prometheus JMX exporter makes of a Kafka broker's MBeans.
- Kafka Metrics, the group coordinator's metrics from 4.4 on (KIP-1301): the MBean
  `kafka.server:type=group-coordinator-metrics,<tags>`, attribute `<name>`, through the
  exporter's default export (no rules): `<domain>_<type>_<attribute>`, every character outside
  [a-zA-Z0-9:_] an underscore, the MBean's other keys as labels, untyped. So `group-count`
  with tag protocol=classic is `kafka_server_group_coordinator_metrics_group_count{protocol="classic"}`.
- The Yammer gauges KIP-1301 deprecates (exported until 5.0):
  `kafka.coordinator.group:type=GroupMetadataManager,name=NumGroups`, attribute Value, through
  the rule Kafka dashboards ship with (confluentinc/jmx-monitoring-stacks, kafka_broker.yml:
  `kafka.coordinator.(\\w+)<type=(.+), name=(.+)><>(Count|Value)` -> `kafka_coordinator_$1_$2_$3`,
  lowercaseOutputName): `kafka_coordinator_group_groupmetadatamanager_numgroups`. They count
  classic groups only, as Kafka's do.
Names and state values are read off Kafka 4.4's GroupCoordinatorMetrics and
CoordinatorRuntimeMetricsImpl (kafka-group-coordinator, kafka-coordinator-common 4.4.0).

Rules: everything is computed at scrape time, from the shards and metrics.py's own series;
label values come from fixed sets (group types, group and shard states), never from a client.
Kafka's windowed statistics (`-avg`, `-max`, `-rate`, the percentiles) cover the last 60 s,
Kafka's default of two 30 s samples (metrics.num.samples, metrics.sample.window.ms).

Group counts cover all four of Kafka's group types, as Kafka registers them: kcoord serves
no share groups, so theirs read 0, as on a Kafka that has none. kcoord's connect groups have
no Kafka name. NOT_EXPORTED lists, by prefix, Kafka 4.4's metrics kcoord leaves out, and why;
tests/integration/ops/test_kafka_metric_names_jvm.py holds the two sets together against the
names Kafka 4.4's own classes register.
"""
from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from prometheus_client.core import UnknownMetricFamily

T = TypeVar("T")

KAFKA = "kafka_server_group_coordinator_metrics_"
YAMMER = "kafka_coordinator_group_groupmetadatamanager_"
WINDOW_S = 60.0        # two samples of metrics.sample.window.ms (30 s)
SAMPLE_S = 30.0
# Kafka's group types and their states (toString of each State enum), 4.4.
STATES = {
    "classic": ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty"),
    "consumer": ("Empty", "Assigning", "Reconciling", "Stable", "Dead"),
    "streams": ("Empty", "NotReady", "Assigning", "Reconciling", "Stable", "Dead"),
    "share": ("Empty", "Stable", "Dead"),
}
# Kafka 4.4's group coordinator metrics kcoord does not export (name prefixes), and why.
NOT_EXPORTED = {
    "offset-expiration-": "kcoord does not count expired offsets yet",
    "offset-deletion-": "kcoord does not count deleted offsets yet",
    "streams-group-rebalance-": "kcoord's rebalance count has no streams groups yet",
    "share-group-rebalance-": "kcoord serves no share groups",
    "streams-group-topology-description-": "kcoord has no topology-description plugin (KIP-1331)",
    "event-queue-size": "Kafka's event accumulator: kcoord runs operations on one event loop, no queue",
    "thread-idle-ratio-avg": "Kafka's event processor threads: none in kcoord",
    "background-": "Kafka's background threads: none in kcoord",
    "batch-": "Kafka's append buffers and their flushes; kcoord's write latency is kcoord_state_write_seconds",
    "event-purgatory-time-ms-": "the wait for the write's replication: part of kcoord_group_request_seconds",
    "count": "kafka-metrics-count, the Kafka Metrics registry's own size, no group coordinator metric",
}
YAMMER_STATES = {"numgroupspreparingrebalance": "PreparingRebalance",
                 "numgroupscompletingrebalance": "CompletingRebalance", "numgroupsstable": "Stable",
                 "numgroupsdead": "Dead", "numgroupsempty": "Empty"}
PERCENTILES = (("p50", 50.0), ("p95", 95.0), ("p99", 99.0), ("p999", 99.9))
# kcoord's rebalance counter, by its type label -> Kafka's sensor prefix.
REBALANCE_NAMES = {"classic": "group_completed_rebalance", "consumer": "consumer_group_rebalance"}


def _family(name: str, doc: str, labels: Iterable[str] = ()) -> UnknownMetricFamily:
    return UnknownMetricFamily(name, doc, labels=list(labels))


def percentile(values: list[float], pct: float) -> float:
    """The value at `pct` percent (nearest rank, as HdrHistogram reports it); 0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(round(pct * len(ordered) / 100.0, 9)))     # 99.9% of 1000 is rank 999
    return ordered[rank - 1]


class WindowedRate:
    """Events per second over the last WINDOW_S, from a cumulative count read at each scrape
    (Kafka's Rate: the count in the window over the window's length, at least one sample)."""

    def __init__(self, now: float, count: float) -> None:
        self._points: deque[tuple[float, float]] = deque([(now, count)], maxlen=1024)

    def rate(self, now: float, count: float) -> float:
        points = self._points
        points.append((now, count))
        while len(points) > 2 and points[1][0] <= now - WINDOW_S:
            points.popleft()
        start, base = points[0]
        return max(0.0, count - base) / max(now - start, SAMPLE_S)


def _counter_values(counter, label: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for family in counter.collect():
        for s in family.samples:
            if s.name.endswith("_total"):
                out[s.labels[label]] = s.value
    return out


def _total(counter) -> float:
    """An unlabelled Counter's total (0 for None)."""
    if counter is None:
        return 0.0
    return sum(s.value for family in counter.collect() for s in family.samples if s.name.endswith("_total"))


# A scrape runs on prometheus_client's HTTP thread while the event loop changes the shards'
# dicts (a group created or deleted, a member joining, a transactional offset written): a
# Python loop over one of them that meets such a change raises "dictionary changed size during
# iteration". So the walks loop over copies (``list(d.values())`` is one C call, which the loop's
# thread cannot interleave), and a walk that still meets a change (a dict read inside a called
# method) is taken again from the start, up to SCRAPE_WALK_ATTEMPTS times; any other error, and
# the last attempt's, is raised.
SCRAPE_WALK_ATTEMPTS = 5
# CPython's messages: "dictionary changed size", "dictionary keys changed", "Set changed size",
# "OrderedDict mutated" ... "during iteration".
_CHANGED_UNDER_WALK = "during iteration"


def walk_retrying(walk: Callable[[], T]) -> T:
    """``walk()``, taken again when a dict or set changed under it (the rule above)."""
    for _ in range(SCRAPE_WALK_ATTEMPTS - 1):
        try:
            return walk()
        except RuntimeError as exc:
            if _CHANGED_UNDER_WALK not in str(exc):
                raise
    return walk()


@dataclass(frozen=True)
class Sources:
    """What coordinator/metrics.py counts that the Kafka names are computed from (handed in,
    so this module imports nothing of kcoord's)."""
    shard_states: Callable[[], dict[int, str]]
    rebalances: Any                 # the kcoord_group_rebalances_total Counter, by type
    loads: Any                      # RecentObservations of partition loads, seconds
    event_queue: Any                # ... of operations' queue time, seconds (sampled)
    event_processing: Any           # ... of operations' processing time, seconds (sampled)
    event_sample: int               # one operation in event_sample is timed
    offset_commits: Any = None      # the kcoord_offset_commits_total Counter (None: not counted)


class KafkaNamesCollector:
    """The group coordinator's metrics under Kafka 4.4's names, at scrape time."""

    def __init__(self, shards: Callable[[], Iterable], sources: Sources, state_of: Callable[[Any], str],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._shards = shards
        self._state_of = state_of
        self._sources = sources
        self._clock = clock
        now = clock()
        counts = _counter_values(sources.rebalances, "type")
        self._rates = {kind: WindowedRate(now, counts.get(kind, 0.0)) for kind in REBALANCE_NAMES}
        self._commits = WindowedRate(now, _total(sources.offset_commits))

    def collect(self):
        now = self._clock()
        yield from self._groups()
        yield from self._partitions()
        yield from self._rebalances(now)
        yield from self._offset_commits(now)
        yield from self._event_times(now)

    def _walk_groups(self) -> tuple[dict[str, dict[str, int]], int]:
        by_state: dict[str, dict[str, int]] = {kind: dict.fromkeys(states, 0) for kind, states in STATES.items()}
        offsets = 0
        for shard in self._shards():
            for g in list(shard.groups.values()):
                kind = g.group_type
                states = by_state.get(kind)
                if states is not None:
                    state = self._state_of(g)
                    states[state] = states.get(state, 0) + 1
            for topics in list(shard.offsets.offsets.values()):
                for parts in list(topics.values()):
                    offsets += len(parts)
        return by_state, offsets

    def _groups(self):
        by_state, offsets = walk_retrying(self._walk_groups)
        total = _family(KAFKA + "group_count", "Groups by rebalance protocol (Kafka: group-count)", ["protocol"])
        for kind, states in by_state.items():
            total.add_metric([kind], sum(states.values()))
            family = _family(f"{KAFKA}{kind}_group_count", f"{kind} groups by state (Kafka: "
                             f"{kind}-group-count)", ["state"])
            for state, n in states.items():
                family.add_metric([state], n)
            yield family
        yield total
        count = _family(KAFKA + "offset_count", "Committed offsets retained (Kafka: offset-count)")
        count.add_metric([], offsets)
        yield count
        classic = by_state["classic"]
        yield self._gauge(YAMMER + "numgroups", "Classic groups (Kafka: NumGroups, deprecated by KIP-1301)",
                          sum(classic.values()))
        yield self._gauge(YAMMER + "numoffsets", "Committed offsets (Kafka: NumOffsets)", offsets)
        for name, state in YAMMER_STATES.items():
            yield self._gauge(YAMMER + name, f"Classic groups in state {state} (Kafka: {name})", classic[state])

    @staticmethod
    def _gauge(name: str, doc: str, value: float) -> UnknownMetricFamily:
        family = _family(name, doc)
        family.add_metric([], value)
        return family

    def _partitions(self):
        family = _family(KAFKA + "num_partitions", "State-topic partitions by state (Kafka: num-partitions)",
                         ["state"])
        counts = dict.fromkeys(("loading", "active", "failed"), 0)
        for state in self._sources.shard_states().values():
            if state in counts:
                counts[state] += 1
        for state, n in counts.items():
            family.add_metric([state], n)
        yield family

    def _rebalances(self, now: float):
        counts = _counter_values(self._sources.rebalances, "type")
        for kind, name in REBALANCE_NAMES.items():
            n = counts.get(kind, 0.0)
            yield self._gauge(f"{KAFKA}{name}_count", f"{kind} group rebalances (Kafka: {name}-count)", n)
            yield self._gauge(f"{KAFKA}{name}_rate", f"{kind} group rebalances per second (Kafka: {name}-rate)",
                              self._rates[kind].rate(now, n))

    def _offset_commits(self, now: float):
        if self._sources.offset_commits is None:
            return
        n = _total(self._sources.offset_commits)
        yield self._gauge(KAFKA + "offset_commit_count", "Committed offsets written (Kafka: offset-commit-count)", n)
        yield self._gauge(KAFKA + "offset_commit_rate", "Committed offsets written per second (Kafka: "
                          "offset-commit-rate)", self._commits.rate(now, n))

    def _event_times(self, now: float):
        start, src = now - WINDOW_S, self._sources
        loads = [v * 1000.0 for v in src.loads.since(start)]
        yield self._gauge(KAFKA + "partition_load_time_avg", "Average partition load time, ms, last 60 s "
                          "(Kafka: partition-load-time-avg)", sum(loads) / len(loads) if loads else math.nan)
        yield self._gauge(KAFKA + "partition_load_time_max", "Longest partition load, ms, last 60 s "
                          "(Kafka: partition-load-time-max)", max(loads) if loads else math.nan)
        for name, source in (("event_queue_time_ms", src.event_queue),
                             ("event_processing_time_ms", src.event_processing)):
            values = [v * 1000.0 for v in source.since(start)]
            kafka_name = name.replace("_", "-")
            yield self._gauge(f"{KAFKA}{name}_max", f"Longest {kafka_name}, last 60 s, one operation in "
                              f"{src.event_sample} sampled", max(values) if values else 0.0)
            for suffix, pct in PERCENTILES:
                yield self._gauge(f"{KAFKA}{name}_{suffix}", f"{kafka_name}-{suffix}, last 60 s, one operation "
                                  f"in {src.event_sample} sampled", percentile(values, pct))


__all__ = ["KAFKA", "NOT_EXPORTED", "SCRAPE_WALK_ATTEMPTS", "YAMMER", "KafkaNamesCollector", "Sources",
           "WindowedRate", "percentile", "walk_retrying"]
