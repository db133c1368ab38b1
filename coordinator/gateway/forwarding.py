"""A client connection's requests on their way upstream (the link itself is forward.py).

Rules: Kafka closes the connection on a header that does not parse, and so does kcoord
before forwarding (the log names the client and the fault); a body that fails the route's
check closes it too. Fetch's max_bytes and DescribeTopicPartitions' partition limit over
Kafka's bounds are clamped (fetch_bounds.py). In front of Tansu, a ListOffsets asking LATEST
takes a Fetch of the high watermarks along (tansu_list_offsets.py); in front of Kafka, while a
topic this process created is fresh, its answer may be held until the topic's logs exist
(list_offsets_hold.py), and a SASL frame (a KIP-368 re-authentication) first ends every such
hold on its link, so that no retry goes up inside the SASL exchange.
The upstream link opens with the connection's first forwarded request; while it opens the
client is not read (UPSTREAM, flow.py), so the link's outbox holds at most one read's
frames. Frames of one read go up in one write, after the read (``send_read``). Each
forwarded request takes its place in the connection's ordered answers and in the link's
waiting list, and counts in the process-wide queue until its answer comes (acks=0 Produce:
no answer, no place). `Forwarding` reaches its connection only through `Forwarder`.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..metrics import forwarded
from ..protocol.apis import CREATE_TOPICS, SASL_AUTHENTICATE, SASL_HANDSHAKE, api_name, request_class
from ..protocol.checked import Malformed
from ..protocol.codec import decode_body
from ..protocol.framing import HeaderError, body_offset
from .badinput import BODY, HEADER
from .forward import CLIENT_WRITE, MergingPending, Pending, UpstreamLink
from .fresh_topics import FreshTopics
from .keyed_arrays import KEYED, duplicate_key
from .list_offsets_hold import HoldablePending, settle
from .routes import FORWARD_LATEST, Route
from .tansu_list_offsets import latest_request
from .upstream_facts import is_kafka
from .validate_only import answered_here

if TYPE_CHECKING:
    from .ports import ConnectionServices


class Forwarder(Protocol):
    """What forwarding uses of its connection (which is also the link's Downstream)."""

    link: UpstreamLink | None
    write_paused: bool

    @property
    def peer(self) -> tuple[str, int]: ...

    @property
    def listener_name(self) -> str: ...

    @property
    def transport(self) -> Any: ...

    def close(self) -> None: ...

    def reject(self, what: str, route: Route | None = None, correlation_id: int | None = None,
               api_key: int | None = None, api_version: int | None = None, *, reason: str = ...) -> None: ...

    def answer(self, data: bytes) -> None: ...

    def wait_for(self, pending: Pending) -> None:
        """Queue ``pending`` in request order (counted in the process-wide queue if sized)."""

    def pause_reading(self) -> None:
        """Stop reading the client until the link is open (UPSTREAM)."""


class Forwarding:
    __slots__ = ("outgoing", "_client", "_gateway", "_fresh")

    def __init__(self, client: Forwarder, gateway: ConnectionServices) -> None:
        # Frames of this read not sent yet: one list for the connection's life (the
        # connection tests it after each read without a call).
        self.outgoing: list[bytes] = []
        self._client = client
        self._gateway = gateway
        # The process's just-created topics (fresh_topics.py), made by the service's wiring;
        # None when the service keeps none (then ListOffsets is never held).
        self._fresh: FreshTopics | None = getattr(getattr(gateway, "service", None), "fresh_topics", None)

    def checked(self, frame: bytes, route: Route, correlation_id: int,
                merge: Callable[[bytes], bytes] | None = None) -> None:
        """Check the header and the body's shape, then forward (``merge``: a hook that
        completes upstream's answer before the client gets it, forward.MergingPending)."""
        client = self._client
        try:
            offset = body_offset(frame, route.request_header_version)   # the client id is not decoded
        except HeaderError as e:
            client.reject(str(e), route, correlation_id, reason=HEADER)
            return
        try:
            route.body_check(frame, offset, len(frame))  # type: ignore[misc]
        except Malformed as e:
            client.reject(f"body does not parse: {api_name(route.api_key)} v{route.api_version}: {e}",
                          route, correlation_id, reason=BODY)
            return
        if route.api_key in KEYED:     # a key named twice costs Kafka's parse N**2 (keyed_arrays.py)
            twice = duplicate_key(route.api_key, decode_body(request_class(route.api_key, route.api_version),
                                                             frame, offset))
            if twice is not None:
                client.reject(f"{api_name(route.api_key)} v{route.api_version}: {twice}", route, correlation_id,
                              reason=BODY)
                return
        clamp = route.clamp
        if clamp is not None:      # numbers over Kafka's bounds (fetch_bounds.py)
            frame = clamp(frame, offset)
        if route.kind == FORWARD_LATEST and self._latest(frame, route, correlation_id, offset):
            return
        self.forward(frame, Pending(correlation_id, route, len(frame)) if merge is None
                     else MergingPending(correlation_id, route, len(frame), merge))

    def _latest(self, frame: bytes, route: Route, correlation_id: int, offset: int) -> bool:
        """In front of Tansu, a ListOffsets asking LATEST goes up with the Fetch that reads
        its high watermarks right behind it (tansu_list_offsets.py); in front of Kafka, while
        some topic is fresh, it goes up in a slot that may hold its answer (list_offsets_hold.py);
        False: forward it as is."""
        if is_kafka(getattr(self._gateway.cluster, "upstream_api_versions", ())):
            fresh = self._fresh
            if fresh is None or not fresh:
                return False
            holdable = HoldablePending(correlation_id, route, frame, offset, fresh)
            self.forward(frame, holdable)
            holdable.link = self._client.link
            return True
        latest = latest_request(route, frame, offset, correlation_id)
        if latest is None:
            return False
        pending, fetch, fetch_pending = latest
        self.forward(frame, pending)
        link: Any = self._client.link
        self.outgoing.append(fetch)
        link.waiting.append(fetch_pending)     # not in the client's queue: its answer completes `pending`
        return True

    def forward(self, frame: bytes, pending: Pending | None) -> None:
        """Send ``frame`` upstream after this read; ``pending`` (None: no answer expected)
        gets upstream's answer."""
        client = self._client
        if pending is not None and pending.route.api_key == CREATE_TOPICS:   # validate_only.py
            local = answered_here(frame, pending, self._gateway)
            if local is not None:
                client.answer(local)
                return
        api_key = int.from_bytes(frame[4:6], "big", signed=True)
        requests, sent = forwarded(api_key, client.listener_name, api_name)
        requests.inc()
        sent.inc(len(frame))
        link = client.link
        if link is not None:
            if (api_key == SASL_HANDSHAKE or api_key == SASL_AUTHENTICATE) and self._fresh is not None:
                # Kafka's SaslServerAuthenticator closes the connection on any other request
                # between SaslHandshake and the end of SaslAuthenticate: no held ListOffsets
                # may send its retry after this frame (list_offsets_hold.py, SASL).
                settle(link)
        else:
            gateway = self._gateway
            link = client.link = UpstreamLink(client, gateway)   # type: ignore[arg-type]
            link.open(gateway.upstream_of(client.listener_name))
            if client.write_paused:
                link.pause_reading(CLIENT_WRITE)
            # Requests read while it opens wait in its outbox: stop reading the client
            # until it is open (UpstreamLink.connection_made resumes), so that outbox holds
            # at most what this read brought, acks=0 Produce frames included.
            client.pause_reading()
        self.outgoing.append(frame)
        if pending is not None:
            client.wait_for(pending)
            link.waiting.append(pending)

    def send_read(self) -> None:
        """Send the frames of this read upstream, in one write."""
        outgoing = self.outgoing
        if outgoing:
            link: Any = self._client.link
            link.send(outgoing)       # the link keeps none of the list
            outgoing.clear()

    def upstream_failed(self, reason: str) -> None:
        """The upstream link broke: close the client, which reconnects and retries (never a crash)."""
        client = self._client
        if client.transport is None:
            return
        # Rate-limited: in an upstream outage every client connection fails at once.
        peer = client.peer
        self._gateway.upstream_log.log(logging.WARNING, "closing connection from %s:%d on %s: %s",
                                       peer[0], peer[1], client.listener_name, reason)
        client.close()
