"""The gateway's open client connections and the limits they share (Gateway's part).

Rules:
- admission: max.connections, max.connections.per.ip and max.connection.creation.rate
  (limits.py) are checked before anything is read; a refused connection is counted by
  reason and logged, rate-limited;
- the process-wide request queue (queued.max.requests, queued.max.request.bytes): when it
  is over, only the connections holding at least their fair share of it stop reading, and
  they read again once answers bring it back under (`check_queue`). Pausing every
  connection would let a few clients with many waiting requests (JoinGroups in a
  rebalance) stop everyone's heartbeats;
- connections.max.idle.ms: one sweep per `Limits.sweep_interval()`, which also advances
  the coarse clock connections stamp their activity with;
- a GroupService call whose client went away is held until it finishes (`keep_until_done`).
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from .. import metrics
from .limits import CREATION_RATE, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_IP, Limits
from .listener_table import ListenerTable
from .ratelog import RateLimitedLog

_REJECTED = {r: metrics.GATEWAY_CONNECTIONS_REJECTED.labels(reason=r)
             for r in (MAX_CONNECTIONS, MAX_CONNECTIONS_PER_IP, CREATION_RATE)}

_LIMIT_TEXT: dict[str, Callable[[Limits], str]] = {
    MAX_CONNECTIONS: lambda limits: f"max.connections={limits.max_connections}",
    MAX_CONNECTIONS_PER_IP: lambda limits: f"max.connections.per.ip={limits.max_connections_per_ip}",
    CREATION_RATE: lambda limits: f"max.connection.creation.rate={limits.creation_rate}/s (all listeners)",
}


class ConnectionRegistry:
    def __init__(self, limits: Limits, table: ListenerTable, limit_log: RateLimitedLog) -> None:
        self.limits = limits
        self._table = table
        self.limit_log = limit_log
        self.connections: set[Any] = set()
        self.orphans: set[asyncio.Task[None]] = set()
        self._sweeper: asyncio.Task[None] | None = None

    def admit(self, connection: Any) -> bool:
        """max.connections, max.connections.per.ip, max.connection.creation.rate."""
        ip, port = connection.peer
        listener = connection.listener_name
        reason = self.limits.admit(ip, listener)
        if reason is None:
            self._gauge(listener).inc()
            return True
        _REJECTED[reason].inc()
        self.limit_log.log(logging.WARNING, "refusing connection from %s:%d on %s: over %s",
                           ip, port, listener, _LIMIT_TEXT[reason](self.limits))
        return False

    def release(self, connection: Any) -> None:
        self.connections.discard(connection)
        self.limits.release(connection.peer[0])
        self._gauge(connection.listener_name).dec()

    def _gauge(self, port_name: str) -> Any:
        info = self._table.infos.get(port_name)
        return (self._table.set_of(info) if info is not None else self._table.sets[0]).connections

    def keep_until_done(self, task: asyncio.Task[None]) -> None:
        """Holds a GroupService call whose client went away until it finishes."""
        self.orphans.add(task)
        task.add_done_callback(self.orphans.discard)

    def pause_queue(self) -> None:
        """The process-wide queue is over its bounds: connections holding at least their
        fair share of it stop reading until answers bring it back under."""
        limits = self.limits
        limits.queue_paused = True
        self.limit_log.log(logging.WARNING, "request queue full (%d requests, %d bytes; queued.max.requests=%d, "
                           "queued.max.request.bytes=%d): reading paused on the connections holding "
                           "their fair share of it",
                           limits.queued_requests, limits.queued_bytes, limits.queued_max_requests,
                           limits.queued_max_request_bytes)
        for connection in list(self.connections):
            connection.queue_paused(True)

    def check_queue(self) -> None:
        limits = self.limits
        if limits.queue_paused and not limits.queue_over():
            limits.queue_paused = False
            for connection in list(self.connections):
                connection.queue_paused(False)

    def abort_all(self) -> None:
        for connection in list(self.connections):
            connection.abort()

    def start_sweeping(self) -> None:
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep(), name="kcoord-gateway-idle-sweep")

    def stop_sweeping(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None

    async def _sweep(self) -> None:
        """connections.max.idle.ms; stamps are taken from the coarse clock, up to one
        interval old: allow for it, so that no connection is closed before it was really
        idle for the full time."""
        limits = self.limits
        interval = limits.sweep_interval()
        idle = limits.idle_seconds + interval
        while True:
            await asyncio.sleep(interval)
            now = limits.now = time.monotonic()
            for connection in list(self.connections):
                connection.sweep(now, idle)
