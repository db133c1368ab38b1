"""One client connection: framing, dispatch, and responses written back in request order.

Kafka answers requests on a connection strictly in the order they were sent. Locally
served answers (ApiVersions, FindCoordinator for groups, group APIs) and forwarded ones
therefore go through one ordered queue (responses.py); the head of the queue is written as
soon as it is ready, and every ready response of a batch goes out in one write. Many
requests may be in flight at once (pipelining).

The connection composes its parts, each an object (or function) with a narrow view of it:
flow control (flow.py: why reading pauses, the unread bytes counted in the queue, the
buffered-answers limit, the idle sweep), bad input (badinput.py: parsing what is served
here; Kafka closes the connection on what does not parse), how it ends (ending.py), who the
client is and its SASL gate (identity.py, sasl.py on SASL listeners only), the guard stage
(guarded.py: requests checked against the state topic and the safeguards), the forward gate
(gate.py), forwarding (forwarding.py), the group requests served here (group_requests.py),
calls that wait (group_calls.py), ApiVersions and FindCoordinator (served_here.py) and the
authorizer's probes (probe.py). Reading, dispatch and the flush stay here: they are the
heartbeat's path, and no part adds a call to it (a group request is one call into its part,
as it was into a method here; any other part is called only when a pause, a partial frame or
a limit is in play; what others call is bound to the part in ``__init__``).

Per request the limit accounting is a few integer operations (a length check, the request's
share of the process-wide queue, its answer's bytes in ``held``); the rest is per read or
per flush: one read cuts no more frames than the in-flight bound has
room for (the rest wait in the buffer, uncut), the bytes of a frame read in part count in
the process-wide queue, and answers buffered for a client past
max_buffered_response_bytes_per_connection close it, local answers as well as upstream's.
"""
from __future__ import annotations

import asyncio
import struct
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from ..protocol.framing import REQUEST_PREFIX, SIZE, FrameError, split_frames
from ..protocol.service import ClientInfo
from ..runtime.parts import Forward
from .badinput import FRAME, HEADER, BadInput
from .ending import ConnectionEnd
from .flow import INFLIGHT, UPSTREAM, FlowControl
from .forward import HELD, Pending, UpstreamLink
from .forwarding import Forwarding
from .gate import gate_allows
from .group_calls import GroupCalls
from .group_requests import GroupRequests
from .guarded import GuardStage
from .identity import ClientIdentity
from .probe import probe_upstream
from .responses import ResponseQueue
from .routes import API_VERSIONS_LOCAL, FIND_COORDINATOR_LOCAL, FORWARD, FORWARD_PRODUCE, GROUP, GUARD, SASL
from .sasl import answer_not_enabled
from .served_here import serve_api_versions, serve_find_coordinator

# A request's api key and version as one unsigned int, and its correlation id (_handle).
_ROUTE_AND_ID = struct.Struct(">Ii")

# Route kinds answered by kcoord itself: the forward gate is not asked for them (SASL: the
# authentication itself, relayed or answered here, never business traffic).
_SERVED_HERE = frozenset({GROUP, API_VERSIONS_LOCAL, FIND_COORDINATOR_LOCAL, SASL})

if TYPE_CHECKING:
    from .listeners import ListenerInfo
    from .ports import ConnectionServices


class ClientConnection(asyncio.Protocol):
    def __init__(self, gateway: ConnectionServices, listener: ListenerInfo) -> None:
        self.gateway = gateway
        self.listener = listener
        self.listener_name = listener.name
        self._routes = gateway.routes
        self._max_frame_size = gateway.max_frame_size
        # Read by the parts and on every waiting call's answer: a plain attribute, no property.
        self.transport: asyncio.Transport | None = None
        self.unread = bytearray()          # read, not handled yet: a partial frame, or frames kept back
        self._queue = queue = ResponseQueue()
        self.link: UpstreamLink | None = None
        self.closing = False
        self.peer: tuple[str, int] = ("?", 0)
        self.info: ClientInfo | None = None   # of the latest group request (group_requests.py)
        self.loop = loop = asyncio.get_running_loop()
        limits = self._limits = gateway.limits
        self.forward_gate = gateway.forward_gate
        self._max_inflight = limits.max_inflight
        self._max_buffered = limits.max_buffered_response_bytes
        self._max_decoded_frame = limits.max_decoded_frame
        self.write_paused = self.admitted = False
        self.active = limits.now           # coarse time of the last read or drained write
        # Bytes of answers produced (upstream's, or a group call that waited) and not
        # yet written; past the soft limit the upstream link stops reading (forward.py).
        self.held = 0
        self.held_soft_limit = self._max_buffered // 2
        # This connection's share of the process-wide queue (Limits.queued_*): requests
        # not answered yet and their bytes, plus the bytes waiting in ``unread``
        # (FlowControl.buf_counted of them), for the fair-share pause (flow.py).
        self.q_requests = self.q_bytes = 0
        # The parts. Bound methods are kept where the gateway, the link or another part
        # calls them, so a delegation costs no extra call.
        flow = self._flow = FlowControl(self, limits, loop, gateway.limit_log)
        self.queue_paused, self.sweep = flow.queue_paused, flow.sweep        # from the gateway
        self.head_is_local, self.owes_answer = queue.head_is_local, queue.owes_answer
        bad = BadInput(self, gateway)
        self._unroutable, self._too_big, self.reject, self.parse = bad.unroutable, bad.too_big, bad.reject, bad.parse
        forwarding = self._forwarding = Forwarding(self, gateway)
        self._outgoing = forwarding.outgoing        # tested after each read
        self.forward, self.forward_checked = forwarding.forward, forwarding.checked
        self.send_read = forwarding.send_read
        # Upstream does not drain the requests forwarded to it (forward.py).
        self.pause_reading, self.resume_reading = partial(flow.pause, UPSTREAM), partial(flow.resume, UPSTREAM)
        self.probe_upstream = partial(probe_upstream, self)     # for the authorizer (authorizer=probe)
        self.upstream_failed = forwarding.upstream_failed      # from the link
        calls = GroupCalls(self, loop, queue)
        self.serve_outcome = calls.outcome
        self._guard = GuardStage(self, gateway, self._max_decoded_frame)
        # How it ends (ending.py).
        end = self._end = ConnectionEnd(self, gateway, limits, queue, flow)
        self.stop, self.close_when_answered, self.close, self.abort = end.stop, end.close_when_answered, end.close, \
            end.abort
        # Who the client is, and its SASL gate: None on a listener without SASL, so the
        # per-request cost there is one attribute test (identity.py).
        identity = self.identity = ClientIdentity(self, gateway, listener, loop)
        self.sasl_session, self._sasl = identity.sasl_session, identity.sasl
        self.request_info, self.client_principal = identity.request_info, identity.principal
        self._group = GroupRequests(self, gateway.service, loop, queue, calls)   # reads parse, request_info

    # --- asyncio.Protocol -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """A connection opened: its peer named, then admitted or closed over a connection limit."""
        # A stream server's transport (uvloop's TCPTransport is not an asyncio.Transport
        # subclass, so this is a cast, not a check).
        self.transport = stream = cast(asyncio.Transport, transport)
        peer = stream.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.peer = (str(peer[0]), int(peer[1]))
        if not self.gateway.admit(self):
            self.closing = True
            stream.abort()   # over a connection limit: closed before anything is read
            return
        self.admitted = True
        self.gateway.connections.add(self)
        # Not paused even while the process-wide queue is over its bounds: it holds none
        # of it (flow.py pauses only the connections holding their fair share).

    def data_received(self, data: bytes) -> None:
        if self.closing:
            return
        self.active = self._limits.now
        buf = self.unread
        queue = self._queue
        limit = self._max_inflight
        room = limit - len(queue)
        if not buf and room > 0 and data.__class__ is bytes and (size := len(data) - 4) >= 0 \
                and SIZE.unpack_from(data)[0] == size and size <= self._max_frame_size:
            # One whole frame and nothing before it (a member's heartbeat, one request in
            # flight): handled as read, without cutting it out into a copy of itself.
            self._handle(data)
            self._after_read(1, None)
            return
        handle = self._handle
        completed = 0
        error = None
        if buf or room <= 0:
            buf += data
            source: bytes | bytearray = buf
        else:
            source = data
        # Cut only as many frames as the in-flight bound has room for; the rest stay in
        # the buffer, uncut, for when answers make room (cutting them all on every answer
        # at the bound would be quadratic in the frames of one read).
        while room > 0:
            frames, used, error = split_frames(source, self._max_frame_size, room)
            if source is buf:
                del buf[:used]
            elif used < len(source) and error is None:
                buf += source[used:]
            completed += len(frames)
            for frame in frames:
                handle(frame)
                if self.closing:
                    break
            if self.closing or error is not None or len(frames) < room:
                break
            room = limit - len(queue)   # some frames took no slot (acks=0 Produce): cut more
            source = buf
        self._after_read(completed, error)

    def _after_read(self, completed: int, error: FrameError | None) -> None:
        """What every read ends with: a framing error rejected, reading paused at the
        in-flight bound, the forwarded requests sent, the ready answers written, the unread
        bytes counted in the process-wide queue and its pause applied."""
        if not self.closing:
            if error is not None:
                self.reject(str(error), reason=FRAME)
            elif len(self._queue) >= self._max_inflight:
                self._flow.pause(INFLIGHT)
        if self._outgoing:
            self.send_read()
        limits = self._limits
        flow = self._flow
        # A read whose oldest request still waits (a durable commit's write) has nothing to
        # write; the flush is skipped then unless it has a pause to lift, buffered answers to
        # bound or a link to resume. Its answer's flush comes when the write completes.
        head = self._queue[0] if self._queue else b""
        if (head.__class__ is bytes or head.data is not None or flow.paused  # type: ignore[union-attr]
                or limits.queue_paused or self.link is not None or self.write_paused
                or self.held > self.held_soft_limit):
            self.flush()
        if len(self.unread) != flow.buf_counted:   # a frame read in part counts in the queue
            flow.count_unread()
        if limits.queue_paused:
            flow.read_while_queue_paused(completed)
        elif limits.queued_requests >= limits.queued_max_requests \
                or limits.queued_bytes >= limits.queued_max_request_bytes:
            self.gateway.pause_queue()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self._end.lost()

    def pause_writing(self) -> None:
        self._flow.writing_paused()

    def resume_writing(self) -> None:
        self._flow.writing_resumed()

    # --- dispatch ---------------------------------------------------------------------

    def _handle(self, frame: bytes) -> None:
        if len(frame) < 12:
            self.reject(f"request header truncated ({len(frame) - 4} bytes, need at least 8)", reason=HEADER)
            return
        # The api key and version read as one unsigned int are the route's key
        # (routes.route_key) for every key a route has; a negative api key reads past them.
        key, correlation_id = _ROUTE_AND_ID.unpack_from(frame, 4)
        route = self._routes.get(key)
        if route is None:
            api_key, api_version, correlation_id = REQUEST_PREFIX.unpack_from(frame, 4)
            self._unroutable(frame, api_key, api_version, correlation_id)
            return
        kind = route.kind
        if len(frame) > self._max_decoded_frame and kind != FORWARD_PRODUCE:
            self._too_big(frame, route, correlation_id)
            return
        if self._sasl is not None and self._sasl.intercept(frame, route, correlation_id):
            return
        if self.forward_gate is not None and kind not in _SERVED_HERE \
                and not gate_allows(self, self.forward_gate, route, correlation_id, frame):
            return
        if kind == FORWARD:
            self.forward_checked(frame, route, correlation_id)
        elif kind == GROUP:
            self._group.serve(frame, route, correlation_id)
        elif kind == FORWARD_PRODUCE:
            self._guard.produce(frame, route, correlation_id)
        elif kind == API_VERSIONS_LOCAL:
            serve_api_versions(self, frame, route, correlation_id)
        elif kind == FIND_COORDINATOR_LOCAL:
            serve_find_coordinator(self, frame, route, correlation_id)
        elif kind == GUARD or route.guarded:
            self._guard.admin(frame, route, correlation_id)
        elif kind == SASL:   # SASL on a listener without it (a SASL listener took it above)
            answer_not_enabled(self, frame, route, correlation_id)
        else:  # FORWARD_REWRITE, FORWARD_REFRESH: handled when the response comes back
            self.forward_checked(frame, route, correlation_id)

    # --- answers ----------------------------------------------------------------------

    def wait_for(self, pending: Pending) -> None:
        """Queue ``pending`` in request order; a sized one counts in the process-wide queue."""
        self._queue.append(pending)
        size = pending.size
        if size:
            limits = self._limits
            limits.queued_requests += 1
            limits.queued_bytes += size
            self.q_requests += 1
            self.q_bytes += size

    def answered(self, size: int) -> None:
        """A counted request's answer is produced: out of the process-wide queue."""
        limits = self._limits
        limits.queued_requests -= 1
        limits.queued_bytes -= size
        self.q_requests -= 1
        self.q_bytes -= size

    def answer(self, data: bytes) -> None:
        """A ready answer. It counts in ``held`` until written, like upstream's: behind a
        request still unanswered (a JoinGroup waiting out its rebalance) answers made at
        once would otherwise pile up past max_buffered_response_bytes_per_connection."""
        self._queue.append(data)
        self.held += len(data)

    def flush(self) -> None:
        """Write every response at the head of the queue that is ready, in one write."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        queue = self._queue
        if len(queue) == 1 and ((data := queue[0]).__class__ is bytes or (data := data.data) is not None):
            # One ready answer (one request in flight: a heartbeat's, a commit's): written as it is.
            queue.popleft()
            transport.write(data)
            released = len(data)
        else:
            released = _write_ready(queue, transport)
        if released:
            if not self.write_paused:
                self.active = self._limits.now
            self.held -= released
        flow = self._flow
        if flow.paused:
            flow.answers_written(len(queue) < self._max_inflight)
        link = self.link
        if link is not None and link.paused & HELD and (self.held <= self.held_soft_limit or not queue.head_is_local()):
            link.resume_reading(HELD)
        if (self.write_paused or self.held > self.held_soft_limit) \
                and flow.over_buffered(self.held + transport.get_write_buffer_size()):
            return
        if self._limits.queue_paused:
            self.gateway.check_queue()
        if self.closing and not queue:
            self.close()

    # --- what the link, the parts and the authorizer use ------------------------------

    _paused = Forward("_flow", "paused")     # why reading is paused (flow.py's bits)
    sasl_principal = Forward("identity", "sasl_principal")
    forward_link_opener = Forward("identity", "forward_link_opener")

    def principal_changed(self) -> None:
        self.info = None     # rebuilt with the new principal at the next group request


def _write_ready(queue: Any, transport: asyncio.Transport) -> int:
    """Write every answer at the head of ``queue`` that is ready, in one write; the bytes
    written (the flush writes one ready answer alone itself)."""
    out = []
    released = 0
    while queue:
        head = queue[0]
        if head.__class__ is bytes:
            out.append(head)
            released += len(head)
        else:
            data = head.data
            if data is None:
                break
            out.append(data)
            released += len(data)
        queue.popleft()
    if out:
        transport.write(out[0] if len(out) == 1 else b"".join(out))
    return released
