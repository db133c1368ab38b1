"""The request path's lock-free metric families (coordinator/metrics_unlocked.py) expose
exactly what prometheus_client's Counter and Histogram expose for the same counts."""
from __future__ import annotations

import re

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from coordinator.metrics_unlocked import UnlockedCounter, UnlockedHistogram

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5)
# Every bound itself (inclusive upper bounds), values between and past the last.
VALUES = (0.0, 0.0001, 0.0005, 0.0007, 0.001, 0.003, 0.01, 0.2, 1.0, 4.9, 5.0, 7.5, 120.0)


def _exposition(registry: CollectorRegistry) -> str:
    # The _created timestamps differ by the microseconds between the two registrations.
    return re.sub(r"(_created(\{[^}]*\})?) \S+", r"\1 T", generate_latest(registry).decode())


def test_the_exposition_is_prometheus_client_s():
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    counters = (Counter("kcoord_x_total", "requests", ["api", "error"], registry=theirs),
                UnlockedCounter("kcoord_x_total", "requests", ["api", "error"], registry=ours))
    histograms = (Histogram("kcoord_y_seconds", "latency", ["api"], buckets=BUCKETS, registry=theirs),
                  UnlockedHistogram("kcoord_y_seconds", "latency", ["api"], buckets=BUCKETS, registry=ours))
    unlabelled = (Counter("kcoord_v_total", "commits", registry=theirs),
                  UnlockedCounter("kcoord_v_total", "commits", [], registry=ours))
    unlabelled[0].inc(3)
    unlabelled[1].labels().inc(2)
    unlabelled[1].inc()
    plain = (Histogram("kcoord_u_seconds", "writes", buckets=BUCKETS, registry=theirs),
             UnlockedHistogram("kcoord_u_seconds", "writes", [], buckets=BUCKETS, registry=ours))
    for histogram in plain:
        for value in VALUES:
            histogram.observe(value)
    for counter in counters:
        counter.labels(api="OffsetCommit", error="none").inc()
        counter.labels(api="OffsetCommit", error="none").inc(2)
        counter.labels(api="Heartbeat", error="NOT_COORDINATOR").inc()
    for histogram in histograms:
        for i, value in enumerate(VALUES):
            histogram.labels(api="OffsetCommit" if i % 3 else "Heartbeat").observe(value)
    assert _exposition(ours) == _exposition(theirs)
    assert "kcoord_y_seconds_bucket{api=\"Heartbeat\",le=\"+Inf\"}" in _exposition(ours)


def test_a_name_taken_twice_or_a_wrong_label_is_refused():
    registry = CollectorRegistry()
    counter = UnlockedCounter("kcoord_z_total", "z", ["api"], registry=registry)
    with pytest.raises(ValueError):
        Counter("kcoord_z_total", "z", ["api"], registry=registry)
    with pytest.raises(ValueError):
        counter.labels(apy="x")
    with pytest.raises(ValueError):
        UnlockedHistogram("kcoord_w_seconds", "w", [], buckets=(1, 0.5), registry=registry)
