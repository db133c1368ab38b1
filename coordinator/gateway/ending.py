"""How a client connection ends (connection.py's part).

Rules:
- `stop`: read nothing more (bad input, a refusal); what came before is answered, then the
  connection closes (its flush closes it once the queue is empty);
- `close_when_answered`: the same, without stopping the reads already under way;
- `close`: close after what is buffered is written; a client that does not read it
  (writing paused) is aborted at once, since a graceful close would wait for it forever,
  holding its slot;
- `abort`: at once, nothing more is written;
- `lost` (the transport is gone): the connection's share of the process-wide queue, its
  connection slot and its upstream link are released; group calls still running are kept
  by the gateway until they finish (responses.py). Once its share is gone the queue may be
  under its bounds again, so the gateway checks it.
`ConnectionEnd` reaches its connection only through `Ending`.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .flow import FlowControl
    from .limits import Limits
    from .ports import ConnectionServices
    from .responses import ResponseQueue


class Ending(Protocol):
    """What ending uses of its connection."""

    closing: bool
    unread: bytearray
    write_paused: bool
    admitted: bool         # the gateway counted it against its connection limits
    held: int
    q_requests: int
    q_bytes: int

    @property
    def transport(self) -> asyncio.Transport | None: ...

    @property
    def link(self) -> Any:
        """Its upstream link (forward.UpstreamLink), or None."""
        ...


class ConnectionEnd:
    __slots__ = ("_conn", "_gateway", "_limits", "_queue", "_flow")

    def __init__(self, conn: Ending, gateway: ConnectionServices, limits: Limits, queue: ResponseQueue,
                 flow: FlowControl) -> None:
        self._conn = conn
        self._gateway = gateway
        self._limits = limits
        self._queue = queue
        self._flow = flow

    def stop(self) -> None:
        conn = self._conn
        conn.closing = True
        conn.unread.clear()
        transport = conn.transport
        if transport is not None:
            transport.pause_reading()

    def close_when_answered(self) -> None:
        self._conn.closing = True

    def close(self) -> None:
        conn = self._conn
        conn.closing = True
        transport = conn.transport
        if transport is not None:
            if conn.write_paused:
                transport.abort()
            else:
                transport.close()

    def abort(self) -> None:
        conn = self._conn
        conn.closing = True
        transport = conn.transport
        if transport is not None:
            transport.abort()

    def lost(self) -> None:
        conn = self._conn
        conn.closing = True
        limits, gateway = self._limits, self._gateway
        self._queue.drop(limits, gateway.keep_until_done)
        conn.unread = bytearray()
        self._flow.release_unread()
        conn.q_requests = conn.q_bytes = 0
        conn.held = 0
        link = conn.link
        if link is not None:
            link.close()
        if conn.admitted:
            conn.admitted = False
            gateway.release(conn)
        if limits.queue_paused:
            gateway.check_queue()
