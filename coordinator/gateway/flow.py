"""Flow control of a client connection (a mixin of ClientConnection; limits in limits.py).

Rules: reading stops (transport.pause_reading) while any reason holds and resumes when
none does — INFLIGHT: max_inflight_requests_per_connection requests unanswered; QUEUE: the
process-wide queue is over queued.max.requests / queued.max.request.bytes and this
connection holds at least its fair share of it (limits.py); WRITE: the client does not
drain its answers (asyncio pause_writing); UPSTREAM: its upstream connection is still
opening, or upstream does not drain the requests forwarded to it. Frames read past the
in-flight limit are kept in the connection's buffer and handled before anything more is
read. The idle sweep closes a connection with no read and no drained write for
connections.max.idle.ms, unless it waits for an answer kcoord owes it and can take it; a
connection already closing (after a bad frame, a failure, a refusal) that has not gone
after that time is aborted, since a graceful close waits for a client that may never read.
Closing for a limit aborts: what is buffered for a client that does not read is not worth
keeping.
"""
from __future__ import annotations

import logging
from typing import Any

from ..runtime import metrics
from .connection_state import ConnectionState

# Why reading is paused (bits).
INFLIGHT = 1
QUEUE = 2
WRITE = 4
UPSTREAM = 8
_PAUSE_NAMES = {INFLIGHT: "inflight", QUEUE: "queue", WRITE: "write", UPSTREAM: "upstream"}
_PAUSES = {bit: metrics.GATEWAY_READ_PAUSES.labels(reason=name) for bit, name in _PAUSE_NAMES.items()}

CLOSED_IDLE = metrics.GATEWAY_CONNECTIONS_CLOSED.labels(reason="idle")
CLOSED_BUFFERED = metrics.GATEWAY_CONNECTIONS_CLOSED.labels(reason="buffered_responses")


class FlowControl(ConnectionState):
    def _pause(self, reason: int) -> None:
        was = self._paused
        if was & reason:
            return
        self._paused = was | reason
        counter = _PAUSES.get(reason)
        if counter is not None:
            counter.inc()
        if not was and self._transport is not None:
            self._transport.pause_reading()

    def _resume(self, reason: int) -> None:
        was = self._paused
        if not was & reason:
            return
        self._paused = was & ~reason
        if self._paused or self._closing or self._transport is None:
            return
        if self._buf:
            # Frames kept back at the in-flight limit are handled before anything more is
            # read, so the buffer never holds more than one read's worth.
            self._loop.call_soon(self._drain)
        else:
            self._transport.resume_reading()

    def _drain(self) -> None:
        if self._paused or self._closing or self._transport is None:
            return
        if self._buf:
            self.data_received(b"")
        if not self._paused and not self._closing and self._transport is not None:
            self._transport.resume_reading()

    def queue_paused(self, paused: bool) -> None:
        """The process-wide request queue went over (or back under) its bounds. Over them,
        only a connection holding requests of it, at least its fair share, stops reading
        (one in the middle of a frame first reads it to its end: data_received pauses it)."""
        if paused:
            if self.q_requests and not self._buf and self._limits.over_fair_share(self.q_requests, self.q_bytes):
                self._pause(QUEUE)
        else:
            self._resume(QUEUE)

    def sweep(self, now: float, idle: float) -> None:
        """connections.max.idle.ms, from the gateway's periodic sweep."""
        if now - self._active < idle:
            return
        if self._closing:
            if self._transport is not None:   # closed gracefully, but the client reads nothing
                self._close_for_limit(CLOSED_IDLE, f"idle for connections.max.idle.ms="
                                                   f"{int(self._limits.idle_seconds * 1000)} while closing "
                                                   f"(its last answers are not being read)")
            return
        if not self._write_paused:
            if self._paused & (INFLIGHT | QUEUE | UPSTREAM):
                return   # kcoord stopped reading it, not the other way round
            queue = self._queue
            if queue:
                head = queue[0]
                if head.__class__ is not bytes and head.data is None:  # type: ignore[union-attr]
                    return   # waiting for an answer kcoord owes it: not idle
        if self._write_paused:
            what = "its answers are not being read"
        elif self._buf:
            what = f"half-sent frame of {len(self._buf)} bytes"
            if len(self._buf) >= 4 and len(self._buf) >= 4 + int.from_bytes(self._buf[:4], "big", signed=True):
                what = f"{len(self._buf)} bytes of requests not handled yet"
        else:
            what = "no requests"
        self._close_for_limit(CLOSED_IDLE, f"idle for connections.max.idle.ms="
                                            f"{int(self._limits.idle_seconds * 1000)} ({what})")

    def _close_for_limit(self, counter: Any, what: str) -> None:
        counter.inc()
        self._gateway.limit_log.log(logging.INFO, "closing connection from %s:%d on %s: %s",
                                    self._peer[0], self._peer[1], self._listener.name, what)
        self.abort()   # nothing buffered for it is worth keeping: it is not read

