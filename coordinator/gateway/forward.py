"""Forwarding: one upstream connection per client connection, opened on first use.

Request frames go upstream byte for byte (correlation id unchanged). Upstream answers a
connection in request order, so each response completes the oldest awaited request.

Opening: the client is not read until the link is open (requests read meanwhile wait in
the outbox, so it holds at most one read's worth), and the connect is bounded by
upstream_connect_timeout_ms; then the client's connection is closed, as for any upstream
failure.

Backpressure: the link stops reading upstream while its client does not drain what was
written to it (CLIENT_WRITE), and while upstream answers wait in the client's queue behind
a slower locally served answer for more than half of
max_buffered_response_bytes_per_connection (HELD). Either way the answers stay in the
upstream socket, not in kcoord's memory.
"""
from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..aio import within
from ..metrics import GATEWAY_FORWARDED_BYTES
from ..protocol.apis import api_name
from ..protocol.codec import BodyError
from ..protocol.framing import SIZE, HeaderError, split_frames
from ..protocol.rewrite import rewrite_response_frame
from .leader_endpoints import body_offset, rewrite_leader_endpoints
from .routes import FIND_COORDINATOR_LOCAL, FORWARD_LATEST, FORWARD_REFRESH, FORWARD_REWRITE, Route

if TYPE_CHECKING:
    from .ports import Downstream, LinkServices

_MAX_RESPONSE = 2**31 - 1
# acks=0 Produce entries kept for stray answers (see NoResponseExpected); beyond this many
# in a row, the oldest are forgotten so a conforming upstream cannot make the deque grow.
_MAX_UNANSWERED = 4096

# Reasons the link stops reading upstream (bits).
CLIENT_WRITE = 1
HELD = 2


class Pending:
    """A response slot in a client connection's ordered queue."""

    __slots__ = ("correlation_id", "route", "data", "task", "size")
    # False: its answer is kcoord's own and never reaches the client (a held ListOffsets'
    # retry, list_offsets_hold.py); it is not counted in the bytes forwarded to the client.
    to_client = True

    def __init__(self, correlation_id: int, route: Route, size: int = 0) -> None:
        self.correlation_id = correlation_id
        self.route = route
        self.data: bytes | None = None
        self.task: asyncio.Task[None] | None = None   # the GroupService call filling it, if any
        # Request bytes counted in the process-wide queue (Limits.queued_*) until the
        # answer is produced; 0 = not counted.
        self.size = size


class MergingPending(Pending):
    """A forwarded request the state-topic guard split: upstream's answer gets the refused
    entries added (state_guard.Split.merge) before it reaches the client."""

    __slots__ = ("merge",)

    def __init__(self, correlation_id: int, route: Route, size: int, merge) -> None:  # type: ignore[no-untyped-def]
        super().__init__(correlation_id, route, size)
        self.merge = merge


class NoResponseExpected(Pending):
    """A forwarded Produce with acks=0. Kafka sends nothing back; Tansu 0.6 answers it
    anyway. Such an answer is dropped (the client expects none); when the next response
    has another correlation id, the upstream rightly sent nothing and the entry goes."""

    __slots__ = ()


class UpstreamLink(asyncio.Protocol):
    def __init__(self, client: Downstream, gateway: LinkServices) -> None:
        self.waiting: deque[Pending] = deque()
        self._client = client
        self._gateway = gateway
        self._transport: asyncio.Transport | None = None
        self._outbox: list[bytes] = []
        self._buf = bytearray()
        self._closed = False
        self._target = "?"
        self.paused = 0           # CLIENT_WRITE | HELD
        # ListOffsets answers held for a just-created topic's log (list_offsets_hold.py): at
        # most one per request in the client's queue; closing the link cancels them.
        self.holds: set[Any] = set()
        # False only for a bare link in tests/unit/protocol/test_forward_matching.py, whose
        # fake client keeps no accounts (read once here, not per upstream read).
        self._accounts = gateway is not None
        self._received = (GATEWAY_FORWARDED_BYTES.labels(listener=client.listener_name, direction="to_client")
                          if self._accounts else None)

    def open(self, addresses: Sequence[tuple[str, int]]) -> None:
        asyncio.get_running_loop().create_task(self._connect(tuple(addresses)))

    async def _connect(self, addresses: tuple[tuple[str, int], ...]) -> None:
        loop = asyncio.get_running_loop()
        # Bounded, as Kafka clients bound it (socket.connection.setup.timeout.ms): the
        # client is not read while its link opens (forwarding.Forwarding.forward), so an
        # upstream that never answers the SYN must not hold it (and its slot) for the
        # kernel's minutes of retries.
        timeout = self._gateway.limits.upstream_connect_timeout
        # TLS to the upstream (upstream.security.protocol=SSL|SASL_SSL), the broker's name
        # verified; SASL on this link is the client's own exchange, passed through.
        context = self._gateway.upstream_ssl
        # Unless kcoord established the client's identity (SASL terminated here, or mTLS):
        # then the link authenticates as kcoord first (gateway/sasl.py forward_link_opener).
        opener = getattr(self._client, "forward_link_opener", None)
        errors = []
        for host, port in addresses:
            if self._closed:
                return
            try:
                self._target = f"{host}:{port}"
                if opener is not None:
                    await within(opener(self, host, port, timeout), 2 * timeout)
                elif context is None:
                    await within(loop.create_connection(lambda: self, host, port), timeout)
                else:
                    await within(loop.create_connection(
                        lambda: self, host, port, ssl=context, server_hostname=host,
                        ssl_handshake_timeout=timeout), timeout)
                return
            except TimeoutError:
                errors.append(f"{host}:{port}: not connected after upstream_connect_timeout_ms="
                              f"{int(timeout * 1000)}")
            except ssl.SSLCertVerificationError as e:
                errors.append(f"{host}:{port}: TLS certificate verification failed: {e.verify_message or e}")
            except OSError as e:
                errors.append(f"{host}:{port}: {e.strerror or e}")
        if not self._closed:
            self._client.upstream_failed("no upstream broker reachable (" + "; ".join(errors) + ")")

    def expect_nothing(self, pending: NoResponseExpected) -> None:
        waiting = self.waiting
        waiting.append(pending)
        if len(waiting) > _MAX_UNANSWERED and waiting[0].__class__ is NoResponseExpected:
            waiting.popleft()

    def send(self, frames: list[bytes]) -> None:
        transport = self._transport
        if transport is None:
            self._outbox.extend(frames)
        else:
            transport.write(frames[0] if len(frames) == 1 else b"".join(frames))

    def close(self) -> None:
        self._closed = True
        for held in list(self.holds):
            held.cancel()
        if self._transport is not None:
            self._transport.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def deliver(self, pending: Pending, frame: bytes) -> None:
        """``pending``'s answer, released outside an upstream read (a held ListOffsets whose
        bound passed: list_offsets_hold.py), accounted as data_received accounts one."""
        if self._closed:
            return
        self._release(pending, frame)
        if self._accounts:
            self._flush()
        else:
            self._client.flush()

    def _release(self, pending: Pending, frame: bytes) -> None:
        """``pending`` answered with ``frame``: out of the process-wide queue, held for the client."""
        pending.data = frame
        size = pending.size
        client = self._client
        if size:   # answered: out of the process-wide queue
            client.answered(size)
            pending.size = 0
        if self._accounts:
            client.held += len(frame)

    def _flush(self) -> None:
        client = self._client
        client.flush()
        # Answers still held behind a slower local answer at the head of the queue: past
        # half the per-connection bound, leave the rest upstream (flush resumes).
        if client.held > client.held_soft_limit and client.head_is_local():
            self.pause_reading(HELD)

    def pause_reading(self, reason: int = CLIENT_WRITE) -> None:
        was = self.paused
        self.paused = was | reason
        if not was and self._transport is not None and not self._closed:
            self._transport.pause_reading()

    def resume_reading(self, reason: int = CLIENT_WRITE) -> None:
        was = self.paused
        if not was & reason:
            return
        self.paused = was & ~reason
        if not self.paused and self._transport is not None and not self._closed:
            self._transport.resume_reading()

    # --- asyncio.Protocol -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        if self._closed:
            transport.close()
            return
        if self.paused:
            transport.pause_reading()  # type: ignore[attr-defined]
        # The client was not read while this opened: read it again, before the outbox is
        # written (a write over the high-water mark pauses it again via pause_writing).
        self._client.resume_reading()
        if self._outbox:
            self._transport.write(b"".join(self._outbox))  # type: ignore[union-attr]
            self._outbox = []

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        if not self._closed:
            self._closed = True
            self._client.upstream_failed(f"upstream {self._target} closed the connection"
                                         + (f" ({exc})" if exc else ""))

    def pause_writing(self) -> None:
        # Upstream reads slower than the client sends: stop reading the client.
        self._client.pause_reading()

    def resume_writing(self) -> None:
        self._client.resume_reading()

    def data_received(self, data: bytes) -> None:
        # Bytes of the answers read, as upstream sent them, that reach the client: not the
        # partial frame kept for the next read, a stray acks=0 answer or a retry's (to_client).
        seen = 0
        buf = self._buf
        if buf:
            buf += data
            frames, used, error = split_frames(buf, _MAX_RESPONSE)
            del buf[:used]
        else:
            frames, used, error = split_frames(data, _MAX_RESPONSE)
            if used < len(data) and error is None:
                buf += data[used:]
        waiting = self.waiting
        client = self._client
        for frame in frames:
            (correlation_id,) = SIZE.unpack_from(frame, 4)
            while True:
                if not waiting:
                    return self._broken(f"upstream {self._target} sent a response (correlation id "
                                        f"{correlation_id}) to no request")
                pending = waiting.popleft()
                if pending.__class__ is not NoResponseExpected:
                    break
                if correlation_id == pending.correlation_id:
                    break
            if pending.__class__ is NoResponseExpected:
                continue
            if correlation_id != pending.correlation_id:
                return self._broken(f"upstream {self._target} answered correlation id {correlation_id}, "
                                    f"expected {pending.correlation_id}")
            seen += len(frame)
            route = pending.route
            kind = route.kind
            if route.endpoints:
                # KIP-951 NodeEndpoints name upstream brokers: the gateway's addresses instead.
                # Every Produce and Fetch answer passes here: the common one (no leader
                # change) is let through by leader_endpoints' fast check, the header unbuilt.
                try:
                    frame = rewrite_leader_endpoints(
                        route.api_key, route.api_version, frame,
                        body_offset(frame, route.response_header_version), self._gateway.address_of)
                except (BodyError, HeaderError, OSError, ValueError) as e:
                    return self._broken(f"{api_name(route.api_key)} v{route.api_version} response from "
                                        f"upstream {self._target} could not be rewritten: {e}")
            elif kind == FORWARD_REWRITE or kind == FIND_COORDINATOR_LOCAL:
                try:
                    frame = rewrite_response_frame(route.api_key, route.api_version, frame,
                                                   self._gateway.address_of, self._gateway.state_topic,
                                                   self._gateway.coordinator_nodes)
                except (BodyError, HeaderError, OSError, ValueError) as e:
                    return self._broken(f"{api_name(route.api_key)} v{route.api_version} response from "
                                        f"upstream {self._target} could not be rewritten: {e}")
            elif kind == FORWARD_REFRESH:
                self._gateway.cluster.request_refresh()
            elif kind == FORWARD_LATEST and pending.__class__ is not Pending:
                # In front of Tansu: the ListOffsets answer waits for the Fetch behind it,
                # whose answer completes it (tansu_list_offsets.py). In front of Kafka, while a
                # topic kcoord created is fresh: held until its log exists (list_offsets_hold.py).
                if not pending.to_client:
                    seen -= len(frame)
                try:
                    done = pending.completed(frame)  # type: ignore[attr-defined]
                except ValueError as e:
                    return self._broken(f"{api_name(route.api_key)} v{route.api_version} response from "
                                        f"upstream {self._target}: {e}")
                if done is None:
                    continue
                pending, frame = done
            if pending.__class__ is MergingPending:
                try:
                    frame = pending.merge(frame)  # type: ignore[attr-defined]
                except (BodyError, HeaderError, ValueError) as e:
                    return self._broken(f"{api_name(route.api_key)} v{route.api_version} response from "
                                        f"upstream {self._target} could not be merged: {e}")
            self._release(pending, frame)
        if seen and self._received is not None:
            self._received.inc(seen)
        if error is not None:
            return self._broken(f"upstream {self._target}: {error}")
        if self._accounts:
            self._flush()
        else:
            client.flush()

    def _broken(self, what: str) -> None:
        self.close()
        self._client.upstream_failed(what)
