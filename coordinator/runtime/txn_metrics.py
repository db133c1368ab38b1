"""Metrics of transactional offsets: computed at scrape time from the shards.

A transaction left open holds the state partition's last stable offset ("we do not clean
beyond the last stable offset", Kafka's LogCleaner) and keeps its offsets pending, so the
operator needs to see it: `kcoord_pending_txn_offsets` (pending partitions, per state
partition), `kcoord_open_txn_producers` and `kcoord_pending_txn_oldest_age_seconds` (the age of
the oldest pending offset; alert when it passes the upstream's transaction.max.timeout.ms,
then docs/design/transactions.md says how to abort the transaction). Rules as metrics.py: one
registry per process, nothing on the request path.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from prometheus_client.core import REGISTRY, GaugeMetricFamily

from ..metrics_kafka import walk_retrying


class TxnOffsetCollector:
    def __init__(self, shards: Callable[[], Iterable], clock_ms: Callable[[], int] | None = None) -> None:
        self._shards = shards
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))

    def collect(self):
        pending = GaugeMetricFamily("kcoord_pending_txn_offsets", "Transactional offsets waiting for their "
                                    "transaction's marker, by state partition", labels=["partition"])
        producers = GaugeMetricFamily("kcoord_open_txn_producers", "Producers with transactional offsets "
                                      "pending, by state partition", labels=["partition"])
        oldest = GaugeMetricFamily("kcoord_pending_txn_oldest_age_seconds", "Age of the oldest pending "
                                   "transactional offset (0 when none)")
        now = self._clock_ms()
        # the walk of the pending offsets meets TxnOffsetCommits and markers of the event loop's
        # thread: taken again if one changed a dict under it (metrics_kafka.walk_retrying)
        rows, oldest_ms = walk_retrying(self._walk)
        for partition, total, open_producers in rows:
            pending.add_metric([partition], total)
            producers.add_metric([partition], open_producers)
        oldest.add_metric([], max(0, now - oldest_ms) / 1000 if oldest_ms is not None else 0)
        yield pending
        yield producers
        yield oldest


    def _walk(self) -> tuple[list[tuple[str, int, int]], int | None]:
        rows: list[tuple[str, int, int]] = []
        oldest_ms = None
        for shard in self._shards():
            store = shard.offsets
            rows.append((str(shard.partition), store.pending_total(), len(store.pending_transactional)))
            first = store.oldest_pending_commit_ms()
            if first is not None and (oldest_ms is None or first < oldest_ms):
                oldest_ms = first
        return rows, oldest_ms


def register_txn_collector(shards: Callable[[], Iterable]) -> TxnOffsetCollector:
    collector = TxnOffsetCollector(shards)
    REGISTRY.register(collector)
    return collector
