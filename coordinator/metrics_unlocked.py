"""Counter and histogram families that the request path counts into without a lock.

prometheus_client's children take a threading.Lock per increment, and its histogram walks
the buckets in Python: about 2 µs per request for one count and one latency (CPython 3.11),
against about 0.5 µs here (a float added, a bucket found by `bisect`), on every request of
the group APIs (docs/measurements/cpu-per-commit.md).

Rules:
- Only for metrics that the event loop's thread alone counts into. The scrape (on
  prometheus_client's HTTP thread) reads plain floats: it may see a histogram's sum one
  observation ahead of its buckets, as prometheus_client's own per-value locks allow too.
- The exposition is prometheus_client's Counter and Histogram's: the same samples, labels,
  `le` strings and `_created` series (left out where prometheus_client is told to leave them
  out). Children are made by `labels(...)` and kept; callers cache them. An unlabelled
  family is counted into as prometheus_client's is (`inc`, `observe` on the family).
"""
from __future__ import annotations

import bisect
import time
from collections.abc import Iterator, Sequence
from typing import Any

from prometheus_client import metrics as _prometheus_metrics
from prometheus_client.core import REGISTRY
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

_INF = float("inf")
_bisect_left = bisect.bisect_left    # one global read per observation, not a module's attribute too


def _created_series() -> bool:
    return bool(getattr(_prometheus_metrics, "_use_created", True))


class CounterChild:
    """A labelled counter's value. ``value`` is public: a caller on a request's path (the
    service's release, a shard's committed offsets) adds to it in place of ``inc()``, one
    Python call per request fewer; ``inc()``'s one line is all there is to repeat."""

    __slots__ = ("value", "created")

    def __init__(self) -> None:
        self.value = 0.0
        self.created = time.time()

    def inc(self, amount: float = 1) -> None:
        self.value += amount


class HistogramChild:
    """A labelled histogram's buckets. Its fields are public: the service's release adds
    each request's latency in place of ``observe()`` (its two lines, one Python call per
    request fewer)."""

    __slots__ = ("bounds", "counts", "sum", "created")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * len(bounds)
        self.sum = 0.0
        self.created = time.time()

    def observe(self, amount: float) -> None:
        # Bucket i counts the values <= bounds[i] and > bounds[i - 1] (cumulated at the scrape).
        self.sum += amount
        self.counts[_bisect_left(self.bounds, amount)] += 1


class _Family(Collector):
    kind = ""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str],
                 registry: CollectorRegistry | None = REGISTRY) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self.children: dict[tuple[str, ...], CounterChild | HistogramChild] = {}
        if not self.labelnames:
            self.labels()     # unlabelled: exported from the start, as prometheus_client's
        if registry is not None:
            registry.register(self)

    def _key(self, labels: dict[str, str]) -> tuple[str, ...]:
        if set(labels) != set(self.labelnames):
            raise ValueError(f"{self.name}: labels {sorted(labels)}, expected {sorted(self.labelnames)}")
        return tuple(str(labels[n]) for n in self.labelnames)

    def labels(self, **labels: str) -> Any:
        raise NotImplementedError

    def describe(self) -> Iterator[Metric]:
        yield Metric(self.name, self.documentation, self.kind)


class UnlockedCounter(_Family):
    kind = "counter"

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str],
                 registry: CollectorRegistry | None = REGISTRY) -> None:
        super().__init__(name[:-6] if name.endswith("_total") else name, documentation, labelnames, registry)

    def labels(self, **labels: str) -> CounterChild:
        key = self._key(labels)
        child = self.children.get(key)
        if child is None:
            child = self.children[key] = CounterChild()
        return child  # type: ignore[return-value]

    def inc(self, amount: float = 1) -> None:
        """An unlabelled counter's increment (as prometheus_client's family takes it)."""
        self.children[()].inc(amount)  # type: ignore[union-attr]

    def collect(self) -> Iterator[Metric]:
        metric = Metric(self.name, self.documentation, self.kind)
        created = _created_series()
        for key, child in list(self.children.items()):
            labels = dict(zip(self.labelnames, key))
            metric.add_sample(self.name + "_total", labels, child.value)  # type: ignore[union-attr]
            if created:
                metric.add_sample(self.name + "_created", labels, child.created)
        yield metric


class UnlockedHistogram(_Family):
    kind = "histogram"

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str], buckets: Sequence[float],
                 registry: CollectorRegistry | None = REGISTRY) -> None:
        bounds = tuple(float(b) for b in buckets)
        if list(bounds) != sorted(bounds):
            raise ValueError(f"{name}: buckets not in order")
        self.bounds = bounds if bounds and bounds[-1] == _INF else (*bounds, _INF)
        super().__init__(name, documentation, labelnames, registry)

    def labels(self, **labels: str) -> HistogramChild:
        key = self._key(labels)
        child = self.children.get(key)
        if child is None:
            child = self.children[key] = HistogramChild(self.bounds)
        return child  # type: ignore[return-value]

    def observe(self, amount: float) -> None:
        """An unlabelled histogram's observation (as prometheus_client's family takes it)."""
        self.children[()].observe(amount)  # type: ignore[union-attr]

    def collect(self) -> Iterator[Metric]:
        metric = Metric(self.name, self.documentation, self.kind)
        created = _created_series()
        les = [floatToGoString(b) for b in self.bounds]
        for key, child in list(self.children.items()):
            labels = dict(zip(self.labelnames, key))
            total = 0
            for le, count in zip(les, list(child.counts)):  # type: ignore[union-attr]
                total += count
                metric.add_sample(self.name + "_bucket", {**labels, "le": le}, float(total))
            metric.add_sample(self.name + "_count", labels, float(total))
            metric.add_sample(self.name + "_sum", labels, child.sum)  # type: ignore[union-attr]
            if created:
                metric.add_sample(self.name + "_created", labels, child.created)
        yield metric
