"""Connection limits, the creation-rate bucket and the rate-limited log (pure parts)."""
from __future__ import annotations

import logging

import pytest

from coordinator.config import CoordinatorConfig
from coordinator.gateway.limits import CREATION_RATE, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_IP, Limits, TokenBucket
from coordinator.gateway.ratelog import RateLimitedLog


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_max_connections_and_per_ip_count_in_and_out() -> None:
    limits = Limits(CoordinatorConfig(max_connections=3, max_connections_per_ip=2))
    assert limits.admit("10.0.0.1", "bootstrap") is None
    assert limits.admit("10.0.0.1", "broker-1") is None
    assert limits.admit("10.0.0.1", "bootstrap") == MAX_CONNECTIONS_PER_IP
    assert limits.admit("10.0.0.2", "bootstrap") is None
    assert limits.admit("10.0.0.3", "bootstrap") == MAX_CONNECTIONS
    limits.release("10.0.0.1")
    assert limits.per_ip == {"10.0.0.1": 1, "10.0.0.2": 1} and limits.connections == 2
    assert limits.admit("10.0.0.3", "bootstrap") is None
    limits.release("10.0.0.2")
    assert "10.0.0.2" not in limits.per_ip   # no entry kept per IP once it has no connection


def test_creation_rate_is_process_wide_and_refills() -> None:
    """Review item 21: Kafka's max.connection.creation.rate is broker-wide; with one bucket
    per listener a gateway fronting N brokers allowed (N+1) times the rate."""
    clock = Clock()
    limits = Limits(CoordinatorConfig(max_connection_creation_rate=2), clock=clock)
    assert [limits.admit(f"10.0.0.{i}", "bootstrap") for i in range(3)] == [None, None, CREATION_RATE]
    assert limits.admit("10.0.0.9", "broker-1") == CREATION_RATE   # the same budget on every listener
    clock.now += 0.5                                               # one token back
    assert limits.admit("10.0.0.4", "broker-1") is None
    assert limits.admit("10.0.0.5", "bootstrap") == CREATION_RATE
    assert limits.connections == 3   # refused connections are not counted in


def test_token_bucket_never_stores_more_than_a_second() -> None:
    clock = Clock()
    bucket = TokenBucket(5, clock)
    clock.now += 3600
    assert sum(bucket.take() for _ in range(20)) == 5


def test_queue_bounds_and_sweep_interval() -> None:
    limits = Limits(CoordinatorConfig(queued_max_requests=2, queued_max_request_bytes=100,
                                      connections_max_idle_ms=600_000))
    assert not limits.queue_over()
    limits.queued_requests, limits.queued_bytes = 1, 100
    assert limits.queue_over()
    limits.queued_bytes = 10
    assert not limits.queue_over()
    assert limits.sweep_interval() == 1.0
    assert Limits(CoordinatorConfig(connections_max_idle_ms=100)).sweep_interval() == 0.05


def test_rate_limited_log_counts_what_it_suppresses(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="kcoord.test.ratelog")
    clock = Clock()
    limited = RateLimitedLog(logging.getLogger("kcoord.test.ratelog"), 2, clock)
    written = [limited.log(logging.WARNING, "bad frame %d", i) for i in range(5)]
    assert written == [True, True, False, False, False]
    clock.now += 1.0
    assert limited.log(logging.WARNING, "bad frame %d", 5)
    assert [r.getMessage() for r in caplog.records] == [
        "bad frame 0", "bad frame 1", "bad frame 5 (3 similar lines suppressed)"]
    silent = RateLimitedLog(logging.getLogger("kcoord.test.ratelog"), 0, clock)
    assert not silent.log(logging.WARNING, "never") and silent.suppressed == 1


def test_rate_limited_log_below_one_line_a_second_still_writes() -> None:
    """Review item 18: the log is a TokenBucket holding at least one token, so a rate of
    0.5 writes one line every two seconds (it could never write one before)."""
    clock = Clock()
    limited = RateLimitedLog(logging.getLogger("kcoord.test.ratelog"), 0.5, clock)
    assert limited.allow() and not limited.allow()
    clock.now += 1.0
    assert not limited.allow()
    clock.now += 1.0
    assert limited.allow() and limited.suppressed == 2


def test_over_fair_share() -> None:
    limits = Limits(CoordinatorConfig(queued_max_requests=100, queued_max_request_bytes=1000))
    limits.connections = 4                        # a fair share: 25 requests, 250 bytes
    assert not limits.over_fair_share(24, 249)
    assert limits.over_fair_share(25, 0) and limits.over_fair_share(1, 250)
