"""Helpers shared by the rebalance tests and bench/bench_rebalance.py.

- MetricsKcoord: a `kcoord serve` child process with `--metrics-port`, so a test can read
  what the server saw.
- heartbeat_count(): kcoord_group_requests_total{api="ConsumerGroupHeartbeat"} summed over
  error labels, scraped from that port.
- assignment_ok(): "complete, disjoint and balanced" over a set of members' assignments.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from support import ports
from support.kcoord import KcoordProcess
from support.metrics import scrape


def fixed_policy(interval_ms: int) -> tuple[str, ...]:
    """Kafka's behaviour; below 5 s its minimum (group.consumer.min.heartbeat.interval.ms) is lowered too."""
    return ("consumer_heartbeat_policy=fixed", f"consumer_heartbeat_interval_ms={interval_ms}",
            f"consumer_min_heartbeat_interval_ms={min(interval_ms, 5000)}")


def adaptive_policy(stable_ms: int = 500, pending_ms: int = 100) -> tuple[str, ...]:
    return ("consumer_heartbeat_policy=adaptive", f"consumer_heartbeat_stable_interval_ms={stable_ms}",
            f"consumer_heartbeat_pending_interval_ms={pending_ms}")


@dataclass
class MetricsKcoord(KcoordProcess):
    """KcoordProcess plus a Prometheus endpoint (``metrics_port``); its log level is
    KcoordProcess.log_level."""

    metrics_port: int = 0

    def serve_args(self) -> list[str]:
        return super().serve_args() + ["--metrics-port", str(self.metrics_port)]

    def start(self, timeout: float = 30.0) -> MetricsKcoord:
        if not self.metrics_port:
            self.metrics_port = ports.free_port()
        super().start(timeout)
        return self

    def stop(self, timeout: float = 15.0) -> int:
        rc = super().stop(timeout)
        ports.release(self.metrics_port)
        return rc

    def metrics(self) -> dict[str, float]:
        """Every sample line of /metrics: 'name{labels}' -> value."""
        return scrape(self.metrics_port)

    def request_count(self, api: str) -> float:
        """Requests of one group API served so far, whatever their error code."""
        needle = f'api="{api}"'
        return sum(v for k, v in self.metrics().items()
                   if k.startswith("kcoord_group_requests_total{") and needle in k)

    def heartbeat_count(self) -> float:
        return self.request_count("ConsumerGroupHeartbeat")


def assignment_ok(assignments: Mapping[str, Iterable[tuple[str, int]]], topic: str, partitions: int) -> bool:
    """Every partition owned exactly once, and every member within one partition of the others."""
    owned = [p for tps in assignments.values() for (t, p) in tps if t == topic]
    if sorted(owned) != list(range(partitions)) or not assignments:
        return False
    sizes = [sum(1 for t, _ in tps if t == topic) for tps in assignments.values()]
    return max(sizes) - min(sizes) <= 1
