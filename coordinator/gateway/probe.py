"""Requests the authorizer sends upstream on a client's own link (authorizer=probe,
security/acl_probe.py), whose answers never reach the client.

Rules: a probe takes a negative correlation id, process-wide (a client's are >= 0), and
its slot in the link's waiting list like any forwarded request, so the link's answers keep
their order; frames the client's read brought and not yet sent go first. The answer
resolves a future instead of going to the client, and does not count in the client's
``held``. Without a link (or on a closing connection) the probe fails at once.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

from ..protocol.apis import request_header_version, response_header_version
from ..protocol.codec import decode_response_frame, encode_body
from ..protocol.framing import SIZE, RequestHeader
from .forward import Pending
from .routes import FORWARD, Route

if TYPE_CHECKING:
    from .forward import UpstreamLink

_probe_ids = 0     # correlation ids of the authorizer's probes: negative, process-wide


class ProbingClient(Protocol):
    """What a probe uses of the client connection it rides on."""

    held: int

    @property
    def link(self) -> UpstreamLink | None: ...

    @property
    def closing(self) -> bool: ...

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    def send_read(self) -> None:
        """Send upstream the frames of this read not sent yet."""


class _ProbeAnswer(Pending):
    """A probe's slot in the link's waiting list: the answer resolves the future."""

    __slots__ = ("_client", "_future")

    def __init__(self, correlation_id: int, route: Route, client: ProbingClient, future: asyncio.Future) -> None:
        self._client = client
        self._future = future
        super().__init__(correlation_id, route, 0)

    @property  # type: ignore[override]
    def data(self) -> bytes | None:
        return None

    @data.setter
    def data(self, frame: bytes | None) -> None:
        if frame is None:
            return
        self._client.held -= len(frame)      # the link adds it to the client's held: not the client's
        future = self._future
        if future.done():
            return
        route = self.route
        try:
            future.set_result(decode_response_frame(route.api_key, route.api_version, frame)[1])
        except Exception as e:   # noqa: BLE001 - the prober fails closed on it
            future.set_exception(e)


def probe_upstream(client: ProbingClient, api_key: int, api_version: int, request: Any) -> asyncio.Future:
    """Send ``request`` upstream on ``client``'s link; the future gets the decoded answer."""
    future: asyncio.Future = client.loop.create_future()
    link = client.link
    if link is None or client.closing:
        future.set_exception(ConnectionError("no upstream link on this connection"))
        return future
    global _probe_ids
    _probe_ids = _probe_ids - 1 if _probe_ids > -(2**31) + 1 else -1   # never a client's (>= 0)
    header_version, response_header = request_header_version(api_key, api_version), \
        response_header_version(api_key, api_version)
    payload = RequestHeader(api_key, api_version, _probe_ids, "kcoord-acl-probe").encode(header_version) \
        + encode_body(request)
    route = Route(FORWARD, api_key, api_version, header_version, response_header, header_version == 2, None)
    client.send_read()
    link.waiting.append(_ProbeAnswer(_probe_ids, route, client, future))
    link.send([SIZE.pack(len(payload)) + payload])
    return future
