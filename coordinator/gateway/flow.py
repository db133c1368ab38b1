"""Flow control of a client connection: why its reading is paused (limits in limits.py).

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

The bytes of a frame read in part count in the process-wide queue (as Kafka's memory pool
reserves a request's bytes once it has read its size prefix). Answers buffered for a client
past max_buffered_response_bytes_per_connection close it.

`FlowControl` is one object per connection (connection.py owns it). It owns the pause
bits and the unread bytes it counted in the queue, and reads its connection only through
`Reader`, so a unit test can drive it with a small fake. The connection calls it only when
a pause, a partial frame or a limit is in play: the steady path stays in connection.py.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Protocol

from .. import metrics
from .forward import CLIENT_WRITE

if TYPE_CHECKING:
    from .limits import Limits
    from .ratelog import RateLimitedLog

# Why reading is paused (bits).
INFLIGHT = 1
QUEUE = 2
WRITE = 4
UPSTREAM = 8
_PAUSE_NAMES = {INFLIGHT: "inflight", QUEUE: "queue", WRITE: "write", UPSTREAM: "upstream"}
_PAUSES = {bit: metrics.GATEWAY_READ_PAUSES.labels(reason=name) for bit, name in _PAUSE_NAMES.items()}

CLOSED_IDLE = metrics.GATEWAY_CONNECTIONS_CLOSED.labels(reason="idle")
CLOSED_BUFFERED = metrics.GATEWAY_CONNECTIONS_CLOSED.labels(reason="buffered_responses")


class Reader(Protocol):
    """What flow control reads of its connection."""

    q_requests: int
    q_bytes: int
    active: float              # coarse time of the last read or drained write
    write_paused: bool         # asyncio paused its writing

    @property
    def closing(self) -> bool: ...

    @property
    def transport(self) -> asyncio.Transport | None: ...

    @property
    def unread(self) -> bytearray:
        """Bytes read and not yet handled (a partial frame, or frames kept back)."""
        ...

    @property
    def peer(self) -> tuple[str, int]: ...

    @property
    def listener_name(self) -> str: ...

    @property
    def link(self) -> Any:
        """Its upstream link (forward.UpstreamLink), or None."""
        ...

    def owes_answer(self) -> bool:
        """The oldest request waits for an answer kcoord has not produced yet."""
        ...

    def data_received(self, data: bytes) -> None: ...

    def abort(self) -> None: ...


class FlowControl:
    __slots__ = ("paused", "buf_counted", "_reader", "_limits", "_loop", "_limit_log")

    def __init__(self, reader: Reader, limits: Limits, loop: asyncio.AbstractEventLoop,
                 limit_log: RateLimitedLog) -> None:
        self.paused = 0                    # INFLIGHT | QUEUE | WRITE | UPSTREAM
        self.buf_counted = 0               # bytes of the reader's `unread` counted in the queue
        self._reader = reader
        self._limits = limits
        self._loop = loop
        self._limit_log = limit_log

    def pause(self, reason: int) -> None:
        was = self.paused
        if was & reason:
            return
        self.paused = was | reason
        counter = _PAUSES.get(reason)
        if counter is not None:
            counter.inc()
        transport = self._reader.transport
        if not was and transport is not None:
            transport.pause_reading()

    def resume(self, reason: int) -> None:
        was = self.paused
        if not was & reason:
            return
        self.paused = was & ~reason
        reader = self._reader
        transport = reader.transport
        if self.paused or reader.closing or transport is None:
            return
        if reader.unread:
            # Frames kept back at the in-flight limit are handled before anything more is
            # read, so the buffer never holds more than one read's worth.
            self._loop.call_soon(self._drain)
        else:
            transport.resume_reading()

    def _drain(self) -> None:
        reader = self._reader
        if self.paused or reader.closing or reader.transport is None:
            return
        if reader.unread:
            reader.data_received(b"")
        transport = reader.transport
        if not self.paused and not reader.closing and transport is not None:
            transport.resume_reading()

    def count_unread(self) -> None:
        """The unread bytes changed: count them in the process-wide queue, as Kafka's memory
        pool reserves a request's bytes once it has read its size prefix (a
        socket.request.max.bytes frame trickled in is not free)."""
        reader = self._reader
        counted = len(reader.unread)
        delta = counted - self.buf_counted
        self.buf_counted = counted
        self._limits.queued_bytes += delta
        reader.q_bytes += delta

    def release_unread(self) -> None:
        """The connection is gone: its unread bytes leave the process-wide queue."""
        self._limits.queued_bytes -= self.buf_counted
        self.buf_counted = 0

    def read_while_queue_paused(self, completed: int) -> None:
        """After a read while the process-wide queue is over its bounds. A connection reads
        a frame it has begun to its end before it is paused (as Kafka reads a request it
        has reserved memory for), so partial frames never hold the queue shut; one that
        completed a frame in this read (``completed``) is paused now."""
        reader = self._reader
        if not self.paused & QUEUE and (completed or not reader.unread) and reader.q_requests \
                and self._limits.over_fair_share(reader.q_requests, reader.q_bytes):
            self.pause(QUEUE)

    def answers_written(self, inflight_room: bool) -> None:
        """After a flush while paused: ``inflight_room``, fewer requests than the in-flight
        bound are unanswered."""
        reader = self._reader
        if reader.closing:
            return
        if self.paused & INFLIGHT and inflight_room:
            self.resume(INFLIGHT)
        if self.paused & QUEUE and not reader.q_requests:
            # It holds no request of the queue any more, only (part of) a frame: let it
            # read that to its end, or partial frames alone could hold the queue shut.
            self.resume(QUEUE)

    def over_buffered(self, buffered: int) -> bool:
        """``buffered`` bytes of answers wait for the client: past
        max_buffered_response_bytes_per_connection it is closed (True)."""
        limit = self._limits.max_buffered_response_bytes
        if buffered <= limit:
            return False
        self.close_for_limit(CLOSED_BUFFERED, f"{buffered} bytes of answers buffered, over "
                             f"max_buffered_response_bytes_per_connection={limit}")
        return True

    def writing_paused(self) -> None:
        """asyncio's pause_writing: the client reads slower than answers come. Stop reading
        its requests and upstream's answers to it, so neither piles up here (the idle sweep
        closes it if it never drains)."""
        reader = self._reader
        reader.write_paused = True
        self.pause(WRITE)
        link = reader.link
        if link is not None:
            link.pause_reading(CLIENT_WRITE)

    def writing_resumed(self) -> None:
        reader = self._reader
        reader.write_paused = False
        reader.active = self._limits.now
        link = reader.link
        if link is not None:
            link.resume_reading(CLIENT_WRITE)
        self.resume(WRITE)

    def queue_paused(self, paused: bool) -> None:
        """The process-wide request queue went over (or back under) its bounds. Over them,
        only a connection holding requests of it, at least its fair share, stops reading
        (one in the middle of a frame first reads it to its end: data_received pauses it)."""
        reader = self._reader
        if paused:
            if reader.q_requests and not reader.unread \
                    and self._limits.over_fair_share(reader.q_requests, reader.q_bytes):
                self.pause(QUEUE)
        else:
            self.resume(QUEUE)

    def sweep(self, now: float, idle: float) -> None:
        """connections.max.idle.ms, from the gateway's periodic sweep."""
        reader = self._reader
        if now - reader.active < idle:
            return
        idle_ms = int(self._limits.idle_seconds * 1000)
        if reader.closing:
            if reader.transport is not None:   # closed gracefully, but the client reads nothing
                self.close_for_limit(CLOSED_IDLE, f"idle for connections.max.idle.ms={idle_ms} while closing "
                                                  f"(its last answers are not being read)")
            return
        if not reader.write_paused:
            if self.paused & (INFLIGHT | QUEUE | UPSTREAM):
                return   # kcoord stopped reading it, not the other way round
            if reader.owes_answer():
                return   # waiting for an answer kcoord owes it: not idle
        buf = reader.unread
        if reader.write_paused:
            what = "its answers are not being read"
        elif buf:
            what = f"half-sent frame of {len(buf)} bytes"
            if len(buf) >= 4 and len(buf) >= 4 + int.from_bytes(buf[:4], "big", signed=True):
                what = f"{len(buf)} bytes of requests not handled yet"
        else:
            what = "no requests"
        self.close_for_limit(CLOSED_IDLE, f"idle for connections.max.idle.ms={idle_ms} ({what})")

    def close_for_limit(self, counter: Any, what: str) -> None:
        counter.inc()
        reader = self._reader
        peer = reader.peer
        self._limit_log.log(logging.INFO, "closing connection from %s:%d on %s: %s",
                            peer[0], peer[1], reader.listener_name, what)
        reader.abort()   # nothing buffered for it is worth keeping: it is not read
