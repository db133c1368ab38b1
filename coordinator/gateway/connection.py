"""One client connection: framing, dispatch, and responses written back in request order.

Kafka answers requests on a connection strictly in the order they were sent. Locally
served answers (ApiVersions, FindCoordinator for groups, group APIs) and forwarded ones
therefore go through one ordered queue; the head of the queue is written as soon as it
is ready, and every ready response of a batch goes out in one write. Many requests may
be in flight at once (pipelining).
"""
from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import TYPE_CHECKING, Any

from ..protocol.api_versions import invalid_request_body, unsupported_version_body, valid_client_software
from ..protocol.apis import (
    API_VERSIONS, GROUP_APIS, NOT_THROUGH_GATEWAY, api_name, kio_version_range, request_header_version,
)
from ..protocol.codec import BodyError, decode_body, encode_body
from ..protocol.find_coordinator import KEY_TYPE_TRANSACTION, group_coordinator_response, key_type_of
from ..protocol.framing import REQUEST_PREFIX, HeaderError, request_body_offset, response_frame, split_frames
from ..protocol.produce import produce_acks
from ..protocol.service import ClientInfo
from . import eager
from .eager import Done
from .forward import NoResponseExpected, Pending, UpstreamLink
from .routes import API_VERSIONS_LOCAL, FIND_COORDINATOR_LOCAL, FORWARD, FORWARD_PRODUCE, GROUP, Route

if TYPE_CHECKING:
    from .gateway import Gateway
    from .listeners import ListenerInfo

log = logging.getLogger("kcoord.gateway")

_NO_CLIENT_ID = object()


class ClientConnection(asyncio.Protocol):
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

    # --- asyncio.Protocol -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self._peer = (str(peer[0]), int(peer[1]))
        self._gateway.connections.add(self)

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        buf = self._buf
        if buf:
            buf += data
            frames, used, error = split_frames(buf, self._max_frame_size)
            del buf[:used]
        else:
            frames, used, error = split_frames(data, self._max_frame_size)
            if used < len(data) and error is None:
                buf += data[used:]
        handle = self._handle
        for frame in frames:
            handle(frame)
            if self._closing:
                break
        if error is not None and not self._closing:
            self._reject(str(error))
        if self._outgoing:
            assert self._link is not None
            self._link.send(self._outgoing)
            self._outgoing = []
        self.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._closing = True
        # Requests already handed to the GroupService run to completion, as in Kafka a
        # JoinGroup goes on when its client disconnects; only the answers are dropped.
        for entry in self._queue:
            if entry.__class__ is Pending and entry.task is not None and not entry.task.done():  # type: ignore[union-attr]
                self._gateway.keep_until_done(entry.task)  # type: ignore[union-attr]
        self._queue.clear()
        if self._link is not None:
            self._link.close()
        self._gateway.connections.discard(self)

    def pause_writing(self) -> None:
        # The client reads slower than upstream answers: stop reading upstream.
        if self._link is not None:
            self._link.pause_reading()

    def resume_writing(self) -> None:
        if self._link is not None:
            self._link.resume_reading()

    # --- dispatch ---------------------------------------------------------------------

    def _handle(self, frame: bytes) -> None:
        if len(frame) < 12:
            self._reject(f"request header truncated ({len(frame) - 4} bytes, need at least 8)")
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
            try:
                _, offset = request_body_offset(frame, route.request_header_version)
                _, acks = produce_acks(frame, offset, route.flexible)
            except HeaderError as e:
                self._reject(str(e), route, correlation_id)
                return
            if acks == 0:   # Kafka sends no response: nothing is queued for the client
                self._forward(frame, None)
                assert self._link is not None
                self._link.expect_nothing(NoResponseExpected(correlation_id, route))
            else:
                self._forward(frame, Pending(correlation_id, route))
        elif kind == API_VERSIONS_LOCAL:
            self._serve_api_versions(frame, route, correlation_id)
        elif kind == FIND_COORDINATOR_LOCAL:
            self._serve_find_coordinator(frame, route, correlation_id)
        else:  # FORWARD_REWRITE, FORWARD_REFRESH: handled when the response comes back
            self._forward_checked(frame, route, correlation_id)

    def _forward_checked(self, frame: bytes, route, correlation_id: int) -> None:
        # Kafka closes the connection on a header that does not parse; check it here
        # rather than leave it to upstream, so the log names the client and the fault.
        try:
            request_body_offset(frame, route.request_header_version)
        except HeaderError as e:
            self._reject(str(e), route, correlation_id)
            return
        self._forward(frame, Pending(correlation_id, route))

    def _forward(self, frame: bytes, pending: Pending | None) -> None:
        link = self._link
        if link is None:
            link = self._link = UpstreamLink(self, self._gateway)
            link.open(self._gateway.upstream_of(self._listener.name))
        self._outgoing.append(frame)
        if pending is not None:
            self._queue.append(pending)
            link.waiting.append(pending)

    def _parse(self, frame: bytes, route: Route, correlation_id: int) -> tuple[str | None, Any] | None:
        """(client id, kio request) of a request served here; None after rejecting it."""
        try:
            client_id, offset = request_body_offset(frame, route.request_header_version)
            assert route.request_class is not None
            return client_id, decode_body(route.request_class, frame, offset)
        except (HeaderError, BodyError) as e:
            self._reject(str(e), route, correlation_id)
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
            self._forward(frame, Pending(correlation_id, route))   # node rewritten on the way back
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
        pending = Pending(correlation_id, route)
        pending.task = outcome   # type: ignore[assignment]
        self._queue.append(pending)
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
        # Calls finishing in the same loop iteration share one flush (one write).
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self._flush_scheduled = False
        self.flush()

    def _unroutable(self, frame: bytes, api_key: int, api_version: int, correlation_id: int) -> None:
        if api_key == API_VERSIONS:
            # Kafka answers an ApiVersions version it does not know with UNSUPPORTED_VERSION
            # in the v0 format, listing its own range (KIP-511), instead of closing.
            try:
                request_body_offset(frame, request_header_version(api_key, api_version))
            except HeaderError as e:
                self._reject(f"header does not parse: {e}", None, correlation_id, api_key, api_version)
                return
            supported = self._gateway.api_versions[API_VERSIONS]
            self._queue.append(response_frame(correlation_id, unsupported_version_body(supported), 0))
            return
        advertised = self._gateway.api_versions.get(api_key)
        if kio_version_range(api_key) is None:
            what = f"unknown API key {api_key}"
        elif api_key in NOT_THROUGH_GATEWAY:
            what = f"{api_name(api_key)} is not served through the gateway: {NOT_THROUGH_GATEWAY[api_key]}"
        elif advertised is None and api_key in GROUP_APIS:
            what = f"group API {api_name(api_key)} is not served by the group service"
        elif advertised is None:
            what = f"{api_name(api_key)} is not supported by the upstream cluster"
        else:
            what = f"unsupported version {api_version} of {api_name(api_key)} (supported {advertised[0]}-{advertised[1]})"
        self._reject(what, None, correlation_id, api_key, api_version)

    # --- responses and closing --------------------------------------------------------

    def flush(self) -> None:
        """Write every response at the head of the queue that is ready, in one write."""
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        queue = self._queue
        out = []
        while queue:
            head = queue[0]
            if head.__class__ is bytes:
                out.append(head)
            else:
                data = head.data  # type: ignore[union-attr]
                if data is None:
                    break
                out.append(data)
            queue.popleft()
        if out:
            transport.write(out[0] if len(out) == 1 else b"".join(out))
        if self._closing and not queue:
            transport.close()

    def _reject(self, what: str, route: Route | None = None, correlation_id: int | None = None,
                api_key: int | None = None, api_version: int | None = None) -> None:
        """Bad input: log one line, answer what came before, then close (Kafka's SocketServer
        closes the channel on an InvalidRequestException)."""
        if route is not None:
            api_key, api_version = route.api_key, route.api_version
        api = f"{api_name(api_key)}({api_key}) v{api_version}" if api_key is not None else "unknown API"
        log.warning("closing connection from %s:%d on %s: %s [%s, correlation_id=%s]",
                    self._peer[0], self._peer[1], self._listener.name, what, api, correlation_id)
        self._closing = True
        self._buf.clear()
        if self._transport is not None:
            self._transport.pause_reading()

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
    def closing(self) -> bool:
        return self._closing

    def pause_reading(self) -> None:
        if self._transport is not None and not self._closing:
            self._transport.pause_reading()

    def resume_reading(self) -> None:
        if self._transport is not None and not self._closing:
            self._transport.resume_reading()
