"""Connection and request limits of the gateway, under Kafka's broker setting names.

Rules (each setting in coordinator/config.py, Kafka's name in brackets):
- [max.connections], [max.connections.per.ip]: a new connection over either count is
  closed at once, as Kafka's ConnectionQuotas closes connections over the per-IP quota
  (for the broker-wide count Kafka stops accepting instead; asyncio cannot hold an accept
  back, so the gateway closes, which a client sees the same way: a retried connect).
- [max.connection.creation.rate] (KIP-612): new connections per second, all listeners
  together (Kafka's setting is broker-wide, and the gateway is one broker to its clients),
  measured by one token bucket holding one second's worth; one over it is closed. Kafka
  delays the accept for the broker/listener rate; closing is the per-IP quota behaviour.
- [connections.max.idle.ms]: one periodic sweep (Gateway), never a timer per read. A
  connection is idle when nothing was read from it and no write drained for that long,
  unless it is waiting for an answer kcoord has not produced yet. That ends a half-sent
  frame followed by silence, and a client that stopped reading its responses.
- [queued.max.requests], [queued.max.request.bytes]: requests read and not yet answered,
  process-wide, and the bytes of frames read in part (Kafka's memory pool reserves a
  request's bytes as soon as it reads the size prefix). While over either bound, a
  connection holding at least its fair share (the bound divided by the live connections)
  stops reading; the others go on, so a few clients with many waiting requests (JoinGroups
  in a rebalance, long-poll Fetches) cannot stop everyone's heartbeats being read. A
  connection in the middle of a frame reads it to its end first, as Kafka reads a request
  it has reserved memory for, so partial frames never hold the queue shut.
- max_decoded_request_bytes (kcoord's own): a request other than Produce above it closes
  the connection (reason "frame"): its walk and decoding run on the event loop.
- max_inflight_requests_per_connection and max_buffered_response_bytes_per_connection are
  enforced by the connection itself (connection.py), from the values held here.
Rejections are counted in ``kcoord_gateway_connections_rejected_total{reason}``.
"""
from __future__ import annotations

import time
from collections.abc import Callable

from ..config import CoordinatorConfig

# Reasons: a fixed set (metric label values never come from the client).
MAX_CONNECTIONS = "max_connections"
MAX_CONNECTIONS_PER_IP = "max_connections_per_ip"
CREATION_RATE = "max_connection_creation_rate"


class TokenBucket:
    """``rate`` events per second, bursts of up to ``capacity`` (default: one second's
    worth). A rate of 0 never gives a token."""

    __slots__ = ("rate", "capacity", "tokens", "last", "_clock")

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic,
                 capacity: float | None = None) -> None:
        self.rate = max(0.0, float(rate))
        self.capacity = self.rate if capacity is None else float(capacity)
        self.tokens = self.capacity if self.rate else 0.0
        self._clock = clock
        self.last = clock()

    def take(self) -> bool:
        now = self._clock()
        self.tokens = min(self.capacity, self.tokens + (now - self.last) * self.rate)
        self.last = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class Limits:
    """Counts shared by every connection of one gateway; plain attributes on purpose (the
    connection reads and bumps them on its hot path)."""

    def __init__(self, config: CoordinatorConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_connections = config.max_connections
        self.max_connections_per_ip = config.max_connections_per_ip
        self.creation_rate = config.max_connection_creation_rate
        self.idle_seconds = config.connections_max_idle_ms / 1000.0
        self.max_inflight = max(1, config.max_inflight_requests_per_connection)
        self.max_buffered_response_bytes = config.max_buffered_response_bytes_per_connection
        self.queued_max_requests = config.queued_max_requests
        self.queued_max_request_bytes = config.queued_max_request_bytes
        # Frame size (prefix included) above which a request other than Produce is refused.
        self.max_decoded_frame = config.max_decoded_request_bytes + 4
        self.upstream_connect_timeout = config.upstream_connect_timeout_ms / 1000.0
        self._clock = clock
        self.connections = 0
        self.per_ip: dict[str, int] = {}
        self._creation = (TokenBucket(self.creation_rate, clock) if self.creation_rate < 2**31 - 1 else None)
        # Requests read whose answer is not produced yet (and their request bytes),
        # all connections together; ``queue_paused`` while over either bound.
        self.queued_requests = 0
        self.queued_bytes = 0
        self.queue_paused = False
        # Coarse clock, advanced by the idle sweep: a read stamps it on its connection
        # (one attribute copy, no clock call per read).
        self.now = clock()

    # --- connections ------------------------------------------------------------------

    def admit(self, ip: str, listener: str) -> str | None:
        """Counts a new connection in, or returns the reason it must be closed."""
        if self.connections >= self.max_connections:
            return MAX_CONNECTIONS
        count = self.per_ip.get(ip, 0)
        if count >= self.max_connections_per_ip:
            return MAX_CONNECTIONS_PER_IP
        if self._creation is not None and not self._creation.take():
            return CREATION_RATE
        self.connections += 1
        self.per_ip[ip] = count + 1
        return None

    def release(self, ip: str) -> None:
        self.connections -= 1
        count = self.per_ip.get(ip, 0) - 1
        if count > 0:
            self.per_ip[ip] = count
        else:
            self.per_ip.pop(ip, None)

    # --- the process-wide request queue -----------------------------------------------

    def queue_over(self) -> bool:
        return (self.queued_requests >= self.queued_max_requests
                or self.queued_bytes >= self.queued_max_request_bytes)

    def over_fair_share(self, requests: int, nbytes: int) -> bool:
        """A connection holding ``requests`` and ``nbytes`` of the queue holds at least its
        fair share of either bound (the bound divided by the live connections)."""
        live = max(1, self.connections)
        return bool((requests and requests * live >= self.queued_max_requests)
                    or (nbytes and nbytes * live >= self.queued_max_request_bytes))

    def sweep_interval(self) -> float:
        """A quarter of the idle time, between 50 ms and 1 s: an idle connection is closed
        within connections.max.idle.ms plus at most that."""
        return min(1.0, max(0.05, self.idle_seconds / 4))
