"""One client connection: framing, dispatch, and responses written back in request order.

Kafka answers requests on a connection strictly in the order they were sent. Locally
served answers (ApiVersions, FindCoordinator for groups, group APIs) and forwarded ones
therefore go through one ordered queue; the head of the queue is written as soon as it
is ready, and every ready response of a batch goes out in one write. Many requests may
be in flight at once (pipelining).

Mixins hold the rest: bad input (badinput.py: Kafka closes the connection), flow control
(flow.py: why reading pauses, the idle sweep), requests checked against the state topic
(guarded.py). Per request the limit accounting is a few integer operations (a length
check, the request's share of the process-wide queue, its answer's bytes in ``held``);
the rest is per read or per flush: one read cuts no more frames than the in-flight bound
has room for (the rest wait in the buffer, uncut), the bytes of a frame read in part count
in the process-wide queue, and answers buffered for a client past
max_buffered_response_bytes_per_connection close it, local answers as well as upstream's.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from kio.schema.errors import ErrorCode

from ..authz import (
    ALLOW_ALL,
    DESCRIBE,
    TRANSACTIONAL_ID,
    Action,
    coordinator_keys_denied,
    refuse_coordinator_keys,
)
from ..authz import GROUP as GROUP_RESOURCE
from ..protocol.api_versions import invalid_request_body, valid_client_software
from ..protocol.apis import METADATA, api_name, request_header_version, response_header_version
from ..protocol.checked import Malformed
from ..protocol.codec import BodyError, decode_body, decode_response_frame, encode_body, encode_response_frame
from ..protocol.find_coordinator import (
    KEY_TYPE_GROUP,
    KEY_TYPE_TRANSACTION,
    MIN_BATCHED_VERSION,
    NO_NODE,
    group_coordinator_response,
    key_type_of,
    keys_of,
)
from ..protocol.framing import (
    REQUEST_PREFIX,
    SIZE,
    HeaderError,
    RequestHeader,
    body_offset,
    request_body_offset,
    response_frame,
    split_frames,
)
from ..protocol.service import ClientInfo
from ..runtime.metrics import GATEWAY_FORWARD_DENIED, forwarded
from ..security.metrics import count_denied
from . import eager
from .badinput import BODY, FRAME, HEADER, BadInput
from .eager import Done
from .flow import CLOSED_BUFFERED, INFLIGHT, QUEUE, UPSTREAM, WRITE, FlowControl
from .forward import CLIENT_WRITE, HELD, MergingPending, Pending, UpstreamLink
from .guarded import GuardedRequests
from .routes import API_VERSIONS_LOCAL, FIND_COORDINATOR_LOCAL, FORWARD, FORWARD_PRODUCE, GROUP, GUARD, SASL, Route
from .sasl import SaslConnection, SaslSession

# Route kinds answered by kcoord itself: the forward gate is not asked for them (SASL: the
# authentication itself, relayed or answered here, never business traffic).
_SERVED_HERE = frozenset({GROUP, API_VERSIONS_LOCAL, FIND_COORDINATOR_LOCAL, SASL})

if TYPE_CHECKING:
    from .listeners import ListenerInfo
    from .ports import ConnectionServices

log = logging.getLogger("kcoord.gateway")

_NO_CLIENT_ID = object()


_probe_ids = 0     # correlation ids of the authorizer's probes: negative, process-wide


class _ProbeAnswer(Pending):
    """A probe's slot in the link's waiting list (``probe_upstream``): the answer resolves the
    future instead of going to the client, and does not count in the client's ``held``."""

    __slots__ = ("_conn", "_future")

    def __init__(self, correlation_id: int, route: Route, conn: ClientConnection, future: asyncio.Future) -> None:
        self._conn = conn
        self._future = future
        super().__init__(correlation_id, route, 0)

    @property  # type: ignore[override]
    def data(self) -> bytes | None:
        return None

    @data.setter
    def data(self, frame: bytes | None) -> None:
        if frame is None:
            return
        self._conn.held -= len(frame)      # the link adds it to the client's held: not the client's
        future = self._future
        if future.done():
            return
        route = self.route
        try:
            future.set_result(decode_response_frame(route.api_key, route.api_version, frame)[1])
        except Exception as e:   # noqa: BLE001 - the prober fails closed on it
            future.set_exception(e)


class ClientConnection(FlowControl, GuardedRequests, BadInput, SaslConnection, asyncio.Protocol):
    def __init__(self, gateway: ConnectionServices, listener: ListenerInfo) -> None:
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
        self._forward_gate = gateway.forward_gate
        # Client SASL (sasl.py): None on a listener without it, so the per-request cost there
        # is one attribute test.
        sasl = getattr(gateway, "sasl", None)
        self._sasl: SaslSession | None = SaslSession(sasl) if sasl is not None and sasl.applies_to(listener) \
            else None
        self._max_inflight = limits.max_inflight
        self._max_buffered = limits.max_buffered_response_bytes
        self._max_decoded_frame = limits.max_decoded_frame
        self._paused = 0                   # INFLIGHT | QUEUE | WRITE | UPSTREAM
        self._write_paused = False
        self._admitted = False
        self._active = limits.now          # coarse time of the last read or drained write
        # Bytes of answers produced (upstream's, or a group call that waited) and not
        # yet written; past the soft limit the upstream link stops reading (forward.py).
        self.held = 0
        self.held_soft_limit = self._max_buffered // 2
        # This connection's share of the process-wide queue (Limits.queued_*): requests
        # not answered yet and their bytes, plus the bytes waiting in _buf
        # (_buf_counted of them), for the fair-share pause (flow.py).
        self.q_requests = 0
        self.q_bytes = 0
        self._buf_counted = 0

    # --- asyncio.Protocol -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream server's transport (uvloop's TCPTransport is not an asyncio.Transport
        # subclass, so this is a cast, not a check).
        transport = self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self._peer = (str(peer[0]), int(peer[1]))
        if not self._gateway.admit(self):
            self._closing = True
            transport.abort()   # over a connection limit: closed before anything is read
            return
        self._admitted = True
        self._gateway.connections.add(self)
        # Not paused even while the process-wide queue is over its bounds: it holds none
        # of it (flow.py pauses only the connections holding their fair share).

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        self._active = self._limits.now
        buf = self._buf
        queue = self._queue
        limit = self._max_inflight
        handle = self._handle
        room = limit - len(queue)
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
                if self._closing:
                    break
            if self._closing or error is not None or len(frames) < room:
                break
            room = limit - len(queue)   # some frames took no slot (acks=0 Produce): cut more
            source = buf
        if not self._closing:
            if error is not None:
                self._reject(str(error), reason=FRAME)
            elif len(queue) >= limit:
                self._pause(INFLIGHT)
        if self._outgoing:
            assert self._link is not None
            self._link.send(self._outgoing)
            self._outgoing = []
        self.flush()
        limits = self._limits
        # Bytes of frames read in part (or kept back at the in-flight bound) count in the
        # process-wide queue, as Kafka's memory pool reserves a request's bytes once it has
        # read its size prefix: a socket.request.max.bytes frame trickled in is not free.
        counted = len(self._buf)
        if counted != self._buf_counted:
            delta = counted - self._buf_counted
            self._buf_counted = counted
            limits.queued_bytes += delta
            self.q_bytes += delta
        if limits.queue_paused:
            # A connection reads a frame it has begun to its end before it is paused (as
            # Kafka reads a request it has reserved memory for), so partial frames never
            # hold the queue shut; one that completed a frame in this read is paused now.
            if not self._paused & QUEUE and (completed or not self._buf) and self.q_requests \
                    and limits.over_fair_share(self.q_requests, self.q_bytes):
                self._pause(QUEUE)
        elif limits.queued_requests >= limits.queued_max_requests \
                or limits.queued_bytes >= limits.queued_max_request_bytes:
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
        limits.queued_bytes -= self._buf_counted
        self._buf_counted = self.q_requests = self.q_bytes = 0
        self.held = 0
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
            if len(frame) > self._max_decoded_frame:
                self._too_big(frame, None, correlation_id, api_key, api_version)
                return
            self._unroutable(frame, api_key, api_version, correlation_id)
            return
        kind = route.kind
        if len(frame) > self._max_decoded_frame and kind != FORWARD_PRODUCE:
            self._too_big(frame, route, correlation_id)
            return
        if self._sasl is not None and self._sasl_intercept(frame, route, correlation_id):
            return
        if self._forward_gate is not None and kind not in _SERVED_HERE \
                and not self._gate_allows(route, correlation_id, frame):
            return
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
        elif kind == SASL:   # SASL on a listener without it (a SASL listener took it above)
            self._sasl_not_enabled(frame, route, correlation_id)
        else:  # FORWARD_REWRITE, FORWARD_REFRESH: handled when the response comes back
            self._forward_checked(frame, route, correlation_id)

    def _gate_allows(self, route: Route, correlation_id: int, frame: bytes | None = None) -> bool:
        """The forward gate (coordinator/authz.py). A gate with `check_forward` (RequestGate:
        security/forward_acl.py) sees the ClientInfo and the frame and may answer the request
        itself (its authorization error: bytes); any refusal without an answer closes the
        connection."""
        gate = self._forward_gate
        assert gate is not None
        check = getattr(gate, "check_forward", None)
        if check is not None and frame is not None:
            info = self._info
            if info is None:
                principal = self._client_principal()
                info = (ClientInfo(None, self._peer[0], self._peer[1], self._listener.name) if principal is None
                        else ClientInfo(None, self._peer[0], self._peer[1], self._listener.name, principal))
            verdict = check(info, route.api_key, route.api_version, frame, route.request_header_version)
            if verdict is True:
                if route.api_key == METADATA:
                    # Kafka hides the topics a client may not DESCRIBE: the answer is filtered
                    # (after the address rewrite) on its way back (forward_acl.py).
                    response_filter = getattr(gate, "metadata_response_filter", None)
                    merge = response_filter(info, route.api_version, frame, route.request_header_version) \
                        if response_filter is not None else None
                    if merge is not None:
                        self._forward_checked(frame, route, correlation_id, merge)
                        return False      # forwarded here
                return True
            if verdict is not False:     # the API's own authorization error, answered here
                GATEWAY_FORWARD_DENIED.labels(api=api_name(route.api_key)).inc()
                self._answer(response_frame(correlation_id, bytes(verdict), route.response_header_version))
                return False
        elif gate.allow_forward(self._peer[0], self._listener.name, route.api_key, route.api_version):
            return True
        api = api_name(route.api_key)
        GATEWAY_FORWARD_DENIED.labels(api=api).inc()
        self._gateway.bad_log.log(logging.WARNING, "closing connection from %s:%d on %s: the forward gate refused "
                                  "%s(%d) v%d [correlation_id=%d]", self._peer[0], self._peer[1], self._listener.name,
                                  api, route.api_key, route.api_version, correlation_id)
        self.abort()
        return False

    def _forward_checked(self, frame: bytes, route, correlation_id: int,
                         merge: Callable[[bytes], bytes] | None = None) -> None:
        # Kafka closes the connection on a header that does not parse; check it here
        # rather than leave it to upstream, so the log names the client and the fault.
        try:
            offset = body_offset(frame, route.request_header_version)   # the client id is not decoded
        except HeaderError as e:
            self._reject(str(e), route, correlation_id, reason=HEADER)
            return
        try:
            route.body_check(frame, offset, len(frame))  # type: ignore[misc]
        except Malformed as e:
            self._reject(f"body does not parse: {api_name(route.api_key)} v{route.api_version}: {e}",
                         route, correlation_id, reason=BODY)
            return
        clamp = route.clamp
        if clamp is not None:      # Fetch: max_bytes over Kafka's bound (fetch_bounds.py)
            frame = clamp(frame, offset)
        self._forward(frame, Pending(correlation_id, route, len(frame)) if merge is None
                      else MergingPending(correlation_id, route, len(frame), merge))

    def _forward(self, frame: bytes, pending: Pending | None) -> None:
        requests, sent = forwarded(int.from_bytes(frame[4:6], "big", signed=True), self._listener.name, api_name)
        requests.inc()
        sent.inc(len(frame))
        link = self._link
        if link is None:
            link = self._link = UpstreamLink(self, self._gateway)
            link.open(self._gateway.upstream_of(self._listener.name))
            if self._write_paused:
                link.pause_reading(CLIENT_WRITE)
            # Requests read while it opens wait in its outbox: stop reading the client
            # until it is open (UpstreamLink.connection_made resumes), so that outbox holds
            # at most what this read brought, acks=0 Produce frames included.
            self._pause(UPSTREAM)
        self._outgoing.append(frame)
        if pending is not None:
            self._queue.append(pending)
            link.waiting.append(pending)
            size = pending.size
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

    def _answer(self, data: bytes) -> None:
        """A ready answer. It counts in ``held`` until written, like upstream's: behind a
        request still unanswered (a JoinGroup waiting out its rebalance) answers made at
        once would otherwise pile up past max_buffered_response_bytes_per_connection."""
        self._queue.append(data)
        self.held += len(data)

    def _too_big(self, frame: bytes, route: Route | None, correlation_id: int, api_key: int | None = None,
                 api_version: int | None = None) -> None:
        self._reject(f"request of {len(frame) - 4} bytes is above max_decoded_request_bytes="
                     f"{self._max_decoded_frame - 4} (only Produce may be larger, up to "
                     f"socket.request.max.bytes={self._max_frame_size})", route, correlation_id, api_key,
                     api_version, reason=FRAME)

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
        self._answer(response_frame(correlation_id, body, 0))

    def _serve_find_coordinator(self, frame: bytes, route: Route, correlation_id: int) -> None:
        """FindCoordinator. GROUP keys are answered here; with an authorizer, each needs Group
        DESCRIBE (KafkaApis: GROUP_AUTHORIZATION_FAILED per key from v4, for the request
        before). TRANSACTION keys are forwarded (the node rewritten on the way back); when
        kcoord authorizes forwarded traffic (the ForwardAclGate), each needs TransactionalId
        DESCRIBE first: refused keys are answered here, the rest forwarded."""
        parsed = self._parse(frame, route, correlation_id)
        if parsed is None:
            return
        client_id, request = parsed
        version = route.api_version
        if key_type_of(request) == KEY_TYPE_TRANSACTION:
            gate_authorizer = getattr(self._forward_gate, "authorizer", None)
            if gate_authorizer is not None:
                denied = coordinator_keys_denied(gate_authorizer, self._request_info(client_id), KEY_TYPE_TRANSACTION,
                                                 keys_of(request, version))
                if denied:
                    self._find_coordinator_denied(frame, route, correlation_id, request, denied)
                    return
            self._forward(frame, Pending(correlation_id, route, len(frame)))   # node rewritten on the way back
            return
        authorizer: Any = getattr(self._service, "authorizer", ALLOW_ALL)
        if authorizer is not ALLOW_ALL and getattr(authorizer, "attached", True) is False:
            authorizer.attach(self._gateway)     # authorizer=probe: it finds clients' links here
        if authorizer is ALLOW_ALL:
            response = group_coordinator_response(version, request, self._gateway.locate_group)
            self._answer(response_frame(correlation_id, encode_body(response), route.response_header_version))
            return
        info = self._request_info(client_id)
        outcome = eager.start(self._authorized_find_coordinator(authorizer, info, version, request), self._loop)
        if outcome.__class__ is Done:
            if outcome.error is None:   # type: ignore[union-attr]
                data = self._group_frame(route, correlation_id, outcome.value)  # type: ignore[union-attr]
                if data is not None:
                    self._answer(data)
            else:
                self._group_failed(route, correlation_id, outcome.error)  # type: ignore[union-attr]
            return
        pending = Pending(correlation_id, route, 0)     # an authorizer's probe upstream (acl_probe.py)
        pending.task = outcome   # type: ignore[assignment]
        self._queue.append(pending)
        outcome.add_done_callback(lambda task: self._group_done(pending, task))  # type: ignore[union-attr]

    async def _authorized_find_coordinator(self, authorizer: Any, info: ClientInfo, version: int,
                                           request: Any) -> Any:
        keys = keys_of(request, version)
        prepare = getattr(authorizer, "prepare", None)
        if prepare is not None:     # an authorizer that asks upstream first (authorizer=probe)
            await prepare(info, [Action(DESCRIBE, GROUP_RESOURCE, k) for k in keys])
        denied = coordinator_keys_denied(authorizer, info, KEY_TYPE_GROUP, keys)
        response = group_coordinator_response(version, request, self._gateway.locate_group)
        if not denied:
            return response
        count_denied("FindCoordinator", GROUP_RESOURCE, len(denied))
        return refuse_coordinator_keys(version, response, denied, ErrorCode.group_authorization_failed)

    def _find_coordinator_denied(self, frame: bytes, route: Route, correlation_id: int, request: Any,
                                 denied: set[str]) -> None:
        """TRANSACTION keys refused TransactionalId DESCRIBE: answered here when every key is
        refused (or before v4, one key per request); else the rest is forwarded and the
        refusals added to upstream's answer."""
        version = route.api_version
        count_denied("FindCoordinator", TRANSACTIONAL_ID, len(denied))
        keys = keys_of(request, version)
        code = ErrorCode.transactional_id_authorization_failed
        if version < MIN_BATCHED_VERSION or all(k in denied for k in keys):
            response = refuse_coordinator_keys(version, group_coordinator_response(
                version, dataclasses.replace(request, key_type=KEY_TYPE_GROUP), lambda _: NO_NODE), denied, code)
            self._answer(response_frame(correlation_id, encode_body(response), route.response_header_version))
            return
        offset = body_offset(frame, route.request_header_version)
        payload = bytes(frame[4:offset]) + encode_body(dataclasses.replace(
            request, coordinator_keys=tuple(k for k in keys if k not in denied)))
        refusals = refuse_coordinator_keys(version, group_coordinator_response(
            version, dataclasses.replace(request, key_type=KEY_TYPE_GROUP,
                                         coordinator_keys=tuple(k for k in keys if k in denied)),
            lambda _: NO_NODE), denied, code).coordinators

        def merge(answer: bytes) -> bytes:
            cid, response = decode_response_frame(route.api_key, version, answer)
            return encode_response_frame(route.api_key, version, cid, dataclasses.replace(
                response, coordinators=tuple(response.coordinators) + tuple(refusals)))
        self._forward(SIZE.pack(len(payload)) + payload, MergingPending(correlation_id, route, len(frame), merge))

    def probe_upstream(self, api_key: int, api_version: int, request: Any) -> asyncio.Future:
        """Send ``request`` upstream on this client's own link, for the authorizer
        (authorizer=probe, security/acl_probe.py); the decoded answer never reaches the client.
        Fails at once without a link. Frames read but not yet sent go first, so the link's
        answers keep the order of its waiting list."""
        future: asyncio.Future = self._loop.create_future()
        link = self._link
        if link is None or self._closing:
            future.set_exception(ConnectionError("no upstream link on this connection"))
            return future
        global _probe_ids
        _probe_ids = _probe_ids - 1 if _probe_ids > -(2**31) + 1 else -1   # never a client's (>= 0)
        header_version, response_header = request_header_version(api_key, api_version), \
            response_header_version(api_key, api_version)
        payload = RequestHeader(api_key, api_version, _probe_ids, "kcoord-acl-probe").encode(header_version) \
            + encode_body(request)
        route = Route(FORWARD, api_key, api_version, header_version, response_header, header_version == 2, None)
        if self._outgoing:
            link.send(self._outgoing)
            self._outgoing = []
        link.waiting.append(_ProbeAnswer(_probe_ids, route, self, future))
        link.send([SIZE.pack(len(payload)) + payload])
        return future

    def _request_info(self, client_id: str | None) -> ClientInfo:
        """Who sends this request (the principal as `_serve_group` sees it)."""
        principal = self._client_principal()
        return (ClientInfo(client_id, self._peer[0], self._peer[1], self._listener.name) if principal is None
                else ClientInfo(client_id, self._peer[0], self._peer[1], self._listener.name, principal))

    def _serve_group(self, frame: bytes, route: Route, correlation_id: int) -> None:
        parsed = self._parse(frame, route, correlation_id)
        if parsed is None:
            return
        client_id, request = parsed
        info = self._info
        if client_id != self._info_client_id or info is None:
            self._info_client_id = client_id
            # SASL's principal first, else the listener's mTLS one (listeners.py), else
            # ClientInfo's default ANONYMOUS (sasl.py _client_principal).
            principal = self._client_principal()
            info = self._info = (ClientInfo(client_id, self._peer[0], self._peer[1], self._listener.name)
                                 if principal is None else
                                 ClientInfo(client_id, self._peer[0], self._peer[1], self._listener.name, principal))
        # Run the service at once: most answers need no wait (see eager.py), and those go
        # straight into the queue, written by the flush at the end of this read.
        outcome = eager.start(self._service.handle(route.api_key, route.api_version, request, info),
                              self._loop)
        if outcome.__class__ is Done:
            if outcome.error is None:   # type: ignore[union-attr]
                data = self._group_frame(route, correlation_id, outcome.value)  # type: ignore[union-attr]
                if data is not None:   # inline _answer: the heartbeat path
                    self._queue.append(data)
                    self.held += len(data)
            else:
                self._group_failed(route, correlation_id, outcome.error)  # type: ignore[union-attr]
            return
        pending = Pending(correlation_id, route, len(frame))
        pending.task = outcome   # type: ignore[assignment]
        self._queue.append(pending)
        size = pending.size
        limits = self._limits
        limits.queued_requests += 1
        limits.queued_bytes += size
        self.q_requests += 1
        self.q_bytes += size
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
            self.answered(size)
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
                released += len(head)
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
            if self._paused & QUEUE and not self.q_requests and not self._closing:
                # It holds no request of the queue any more, only (part of) a frame: let it
                # read that to its end, or partial frames alone could hold the queue shut.
                self._resume(QUEUE)
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
            self.close()

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
        # Rate-limited: in an upstream outage every client connection fails at once.
        self._gateway.upstream_log.log(logging.WARNING, "closing connection from %s:%d on %s: %s",
                                       self._peer[0], self._peer[1], self._listener.name, reason)
        self.close()

    def close(self) -> None:
        """Close after what is buffered is written; abort at once if the client does not
        read it (a graceful close would wait for it forever, holding its slot)."""
        self._closing = True
        transport = self._transport
        if transport is not None:
            if self._write_paused:
                transport.abort()
            else:
                transport.close()

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
