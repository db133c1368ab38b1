"""One client connection: framing, dispatch, and responses written back in request order.

Kafka answers requests on a connection strictly in the order they were sent. Locally
served answers (ApiVersions, FindCoordinator for groups, group APIs) and forwarded ones
therefore go through one ordered queue; the head of the queue is written as soon as it
is ready, and every ready response of a batch goes out in one write. Many requests may
be in flight at once (pipelining).

Mixins hold the rest: bad input (badinput.py: Kafka closes the connection), flow control
(flow.py: why reading pauses, the idle sweep), requests checked against the state topic
(guarded.py). Per request the limit accounting is a length check; the rest of it is per
read or per flush (one read never handles frames past max_inflight_requests_per_connection;
they wait in the buffer), and answers buffered for a client past
max_buffered_response_bytes_per_connection close it.
"""
from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import TYPE_CHECKING, Any

from ..protocol.api_versions import invalid_request_body, valid_client_software
from ..protocol.apis import api_name
from ..protocol.checked import Malformed
from ..protocol.codec import BodyError, decode_body, encode_body
from ..protocol.find_coordinator import KEY_TYPE_TRANSACTION, group_coordinator_response, key_type_of
from ..protocol.framing import REQUEST_PREFIX, HeaderError, request_body_offset, response_frame, split_frames
from ..protocol.service import ClientInfo
from . import eager
from .badinput import BODY, FRAME, HEADER, BadInput
from .eager import Done
from .flow import CLOSED_BUFFERED, INFLIGHT, QUEUE, UPSTREAM, WRITE, FlowControl
from .forward import CLIENT_WRITE, HELD, Pending, UpstreamLink
from .guarded import GuardedRequests
from .routes import API_VERSIONS_LOCAL, FIND_COORDINATOR_LOCAL, FORWARD, FORWARD_PRODUCE, GROUP, GUARD, Route

if TYPE_CHECKING:
    from .gateway import Gateway
    from .listeners import ListenerInfo

log = logging.getLogger("kcoord.gateway")

_NO_CLIENT_ID = object()


class ClientConnection(FlowControl, GuardedRequests, BadInput, asyncio.Protocol):
    def __init__(self, gateway: Gateway, listener: ListenerInfo) -> None:
        self._gateway = gateway
        self._listener = listener
        self._routes = gateway.routes
        self._service = gateway.service
        self._max_frame_size = gateway.max_frame_size
        self._transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._queue: deque[bytes | Pending] = deque()
        self._outgoing: list[bytes] = []
        self._link: UpstreamLink | None = None
        self._closing = False
        self._flush_scheduled = False
        self._peer: tuple[str, int] = ("?", 0)
        self._info: ClientInfo | None = None
        self._info_client_id: Any = _NO_CLIENT_ID
        self._loop = asyncio.get_running_loop()
        limits = self._limits = gateway.limits
        self._guard = gateway.guard
        self._max_inflight = limits.max_inflight
        self._max_buffered = limits.max_buffered_response_bytes
        self._paused = 0                   # INFLIGHT | QUEUE | WRITE | UPSTREAM
        self._write_paused = False
        self._admitted = False
        self._active = limits.now          # coarse time of the last read or drained write
        # Bytes of answers produced (upstream's, or a group call that waited) and not
        # yet written; past the soft limit the upstream link stops reading (forward.py).
        self.held = 0
        self.held_soft_limit = self._max_buffered // 2

    # --- asyncio.Protocol -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self._peer = (str(peer[0]), int(peer[1]))
        if not self._gateway.admit(self):
            self._closing = True
            transport.abort()   # over a connection limit: closed before anything is read
            return
        self._admitted = True
        self._gateway.connections.add(self)
        if self._limits.queue_paused:
            self._pause(QUEUE)

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        self._active = self._limits.now
        buf = self._buf
        from_buf = bool(buf)
        if from_buf:
            buf += data
            frames, used, error = split_frames(buf, self._max_frame_size)
            del buf[:used]
        else:
            frames, used, error = split_frames(data, self._max_frame_size)
            if used < len(data) and error is None:
                buf += data[used:]
        handle = self._handle
        queue = self._queue
        limit = self._max_inflight
        handled = 0
        for frame in frames:
            handle(frame)
            handled += 1
            if self._closing:
                break
            if len(queue) >= limit:
                if handled < len(frames) or error is not None:
                    # Keep what was not handled for when reading resumes (the fault, if
                    # any, is found again then): one read never overshoots the limit.
                    leftover = bytes(buf) if buf else (data[used:] if error is not None else b"")
                    self._buf = bytearray(b"".join(frames[handled:]) + leftover)
                    error = None
                self._pause(INFLIGHT)
                break
        if error is not None and not self._closing:
            self._reject(str(error), reason=FRAME)
        if self._outgoing:
            assert self._link is not None
            self._link.send(self._outgoing)
            self._outgoing = []
        self.flush()
        limits = self._limits
        if not limits.queue_paused and (limits.queued_requests >= limits.queued_max_requests
                                        or limits.queued_bytes >= limits.queued_max_request_bytes):
            self._gateway.pause_queue()

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._closing = True
        # Requests already handed to the GroupService run to completion, as in Kafka a
        # JoinGroup goes on when its client disconnects; only the answers are dropped.
        limits = self._limits
        for entry in self._queue:
            if entry.__class__ is bytes:
                continue
            if entry.size:   # type: ignore[union-attr]
                limits.queued_requests -= 1
                limits.queued_bytes -= entry.size  # type: ignore[union-attr]
                entry.size = 0  # type: ignore[union-attr]
            task = entry.task  # type: ignore[union-attr]
            if task is not None and not task.done():
                self._gateway.keep_until_done(task)
        self._queue.clear()
        self._buf = bytearray()
        if self._link is not None:
            self._link.close()
        if self._admitted:
            self._admitted = False
            self._gateway.release(self)
        if limits.queue_paused:   # its share of the queue is gone: maybe under the bounds again
            self._gateway.check_queue()

    def pause_writing(self) -> None:
        # The client reads slower than answers come: stop reading its requests and
        # upstream's answers to it, so neither piles up here (the idle sweep closes it if
        # it never drains).
        self._write_paused = True
        self._pause(WRITE)
        if self._link is not None:
            self._link.pause_reading(CLIENT_WRITE)

    def resume_writing(self) -> None:
        self._write_paused = False
        self._active = self._limits.now
        if self._link is not None:
            self._link.resume_reading(CLIENT_WRITE)
        self._resume(WRITE)

    # --- dispatch ---------------------------------------------------------------------

    def _handle(self, frame: bytes) -> None:
        if len(frame) < 12:
            self._reject(f"request header truncated ({len(frame) - 4} bytes, need at least 8)", reason=HEADER)
            return
        api_key, api_version, correlation_id = REQUEST_PREFIX.unpack_from(frame, 4)
        route = self._routes.get((api_key << 16) | (api_version & 0xFFFF))
        if route is None:
            self._unroutable(frame, api_key, api_version, correlation_id)
            return
        kind = route.kind
        if kind == FORWARD:
            self._forward_checked(frame, route, correlation_id)
        elif kind == GROUP:
            self._serve_group(frame, route, correlation_id)
        elif kind == FORWARD_PRODUCE:
            self._serve_produce(frame, route, correlation_id)
        elif kind == API_VERSIONS_LOCAL:
            self._serve_api_versions(frame, route, correlation_id)
        elif kind == FIND_COORDINATOR_LOCAL:
            self._serve_find_coordinator(frame, route, correlation_id)
        elif kind == GUARD or route.guarded:
            self._serve_guarded(frame, route, correlation_id)
        else:  # FORWARD_REWRITE, FORWARD_REFRESH: handled when the response comes back
            self._forward_checked(frame, route, correlation_id)

    def _forward_checked(self, frame: bytes, route, correlation_id: int) -> None:
        # Kafka closes the connection on a header that does not parse; check it here
        # rather than leave it to upstream, so the log names the client and the fault.
        try:
            _, offset = request_body_offset(frame, route.request_header_version)
        except HeaderError as e:
            self._reject(str(e), route, correlation_id, reason=HEADER)
            return
        try:
            route.body_check(frame, offset, len(frame))  # type: ignore[misc]
        except Malformed as e:
            self._reject(f"body does not parse: {api_name(route.api_key)} v{route.api_version}: {e}",
                         route, correlation_id, reason=BODY)
            return
        self._forward(frame, Pending(correlation_id, route, len(frame)))

    def _forward(self, frame: bytes, pending: Pending | None) -> None:
        link = self._link
        if link is None:
            link = self._link = UpstreamLink(self, self._gateway)
            link.open(self._gateway.upstream_of(self._listener.name))
            if self._write_paused:
                link.pause_reading(CLIENT_WRITE)
        self._outgoing.append(frame)
        if pending is not None:
            self._queue.append(pending)
            link.waiting.append(pending)
            limits = self._limits
            limits.queued_requests += 1
            limits.queued_bytes += pending.size

    def _parse(self, frame: bytes, route: Route, correlation_id: int) -> tuple[str | None, Any] | None:
        """(client id, kio request) of a request served here; None after rejecting it."""
        try:
            client_id, offset = request_body_offset(frame, route.request_header_version)
            assert route.request_class is not None
            return client_id, decode_body(route.request_class, frame, offset)
        except HeaderError as e:
            self._reject(str(e), route, correlation_id, reason=HEADER)
            return None
        except BodyError as e:
            self._reject(f"body does not parse: {e}", route, correlation_id, reason=BODY)
            return None

    def _serve_api_versions(self, frame: bytes, route: Route, correlation_id: int) -> None:
        parsed = self._parse(frame, route, correlation_id)
        if parsed is None:
            return
        request = parsed[1]
        version = route.api_version
        if version >= 3 and not valid_client_software(request.client_software_name, request.client_software_version):
            body = invalid_request_body(version)
        else:
            body = self._gateway.api_versions_bodies[version]
        self._queue.append(response_frame(correlation_id, body, 0))

    def _serve_find_coordinator(self, frame: bytes, route: Route, correlation_id: int) -> None:
        parsed = self._parse(frame, route, correlation_id)
        if parsed is None:
            return
        request = parsed[1]
        if key_type_of(request) == KEY_TYPE_TRANSACTION:
            self._forward(frame, Pending(correlation_id, route, len(frame)))   # node rewritten on the way back
            return
        response = group_coordinator_response(route.api_version, request, self._gateway.locate_group)
        self._queue.append(response_frame(correlation_id, encode_body(response), route.response_header_version))

    def _serve_group(self, frame: bytes, route: Route, correlation_id: int) -> None:
        parsed = self._parse(frame, route, correlation_id)
        if parsed is None:
            return
        client_id, request = parsed
        if client_id != self._info_client_id:
            self._info_client_id = client_id
            self._info = ClientInfo(client_id, self._peer[0], self._peer[1], self._listener.name)
        # Run the service at once: most answers need no wait (see eager.py), and those go
        # straight into the queue, written by the flush at the end of this read.
        outcome = eager.start(self._service.handle(route.api_key, route.api_version, request, self._info),
                              self._loop)
        if outcome.__class__ is Done:
            if outcome.error is None:   # type: ignore[union-attr]
                data = self._group_frame(route, correlation_id, outcome.value)  # type: ignore[union-attr]
                if data is not None:
                    self._queue.append(data)
            else:
                self._group_failed(route, correlation_id, outcome.error)  # type: ignore[union-attr]
            return
        pending = Pending(correlation_id, route, len(frame))
        pending.task = outcome   # type: ignore[assignment]
        self._queue.append(pending)
        limits = self._limits
        limits.queued_requests += 1
        limits.queued_bytes += pending.size
        outcome.add_done_callback(lambda task: self._group_done(pending, task))  # type: ignore[union-attr]

    def _group_frame(self, route: Route, correlation_id: int, response: Any) -> bytes | None:
        """The framed answer; None (and the connection closing) if it cannot be encoded."""
        try:
            body = response if isinstance(response, (bytes, bytearray)) else encode_body(response)
        except Exception as e:
            self._group_failed(route, correlation_id, e)
            return None
        return response_frame(correlation_id, bytes(body), route.response_header_version)

    def _group_failed(self, route: Route, correlation_id: int, error: BaseException) -> None:
        if isinstance(error, asyncio.CancelledError):
            self.close()
            return
        log.error("closing connection from %s:%d on %s: group service failed on %s v%d "
                  "(correlation_id=%d): %s", self._peer[0], self._peer[1], self._listener.name,
                  api_name(route.api_key), route.api_version, correlation_id, error,
                  exc_info=(type(error), error, error.__traceback__))
        self.close()

    def _group_done(self, pending: Pending, task: asyncio.Task[Any]) -> None:
        """A service call that had to wait (e.g. for its state-topic write) has finished."""
        if self._transport is None:
            return   # the client went away; the call ran to completion all the same
        size = pending.size
        if size:
            limits = self._limits
            limits.queued_requests -= 1
            limits.queued_bytes -= size
            pending.size = 0
        route = pending.route
        if task.cancelled():
            self._group_failed(route, pending.correlation_id, asyncio.CancelledError())
            return
        error = task.exception()
        if error is not None:
            self._group_failed(route, pending.correlation_id, error)
            return
        data = self._group_frame(route, pending.correlation_id, task.result())
        if data is None:
            return
        pending.data = data
        self.held += len(data)
        # Calls finishing in the same loop iteration share one flush (one write).
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self._flush_scheduled = False
        self.flush()

    # --- responses and closing --------------------------------------------------------

    def flush(self) -> None:
        """Write every response at the head of the queue that is ready, in one write."""
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        queue = self._queue
        out = []
        released = 0
        while queue:
            head = queue[0]
            if head.__class__ is bytes:
                out.append(head)
            else:
                data = head.data  # type: ignore[union-attr]
                if data is None:
                    break
                out.append(data)
                released += len(data)
            queue.popleft()
        if out:
            transport.write(out[0] if len(out) == 1 else b"".join(out))
            if not self._write_paused:
                self._active = self._limits.now
        if released:
            self.held -= released
        if self._paused:
            if self._paused & INFLIGHT and len(queue) < self._max_inflight and not self._closing:
                self._resume(INFLIGHT)
        link = self._link
        if link is not None and link.paused & HELD and (self.held <= self.held_soft_limit or not self.head_is_local()):
            link.resume_reading(HELD)
        if self._write_paused or self.held > self.held_soft_limit:
            buffered = self.held + transport.get_write_buffer_size()
            if buffered > self._max_buffered:
                self._close_for_limit(CLOSED_BUFFERED, f"{buffered} bytes of answers buffered, over "
                                      f"max_buffered_response_bytes_per_connection={self._max_buffered}")
                return
        if self._limits.queue_paused:
            self._gateway.check_queue()
        if self._closing and not queue:
            transport.close()

    def head_is_local(self) -> bool:
        """The oldest unanswered request waits for the GroupService (not for upstream)."""
        queue = self._queue
        if not queue:
            return False
        head = queue[0]
        return head.__class__ is not bytes and head.task is not None and head.data is None  # type: ignore[union-attr]

    def upstream_failed(self, reason: str) -> None:
        """The upstream connection broke: the client reconnects and retries (never a crash)."""
        if self._transport is None:
            return
        log.warning("closing connection from %s:%d on %s: %s", self._peer[0], self._peer[1],
                    self._listener.name, reason)
        self.close()

    def close(self) -> None:
        self._closing = True
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        self._closing = True
        if self._transport is not None:
            self._transport.abort()

    @property
    def peer(self) -> tuple[str, int]:
        return self._peer

    @property
    def listener_name(self) -> str:
        return self._listener.name

    @property
    def closing(self) -> bool:
        return self._closing

    def pause_reading(self) -> None:
        """Upstream does not drain the requests forwarded to it (forward.py)."""
        self._pause(UPSTREAM)

    def resume_reading(self) -> None:
        self._resume(UPSTREAM)
