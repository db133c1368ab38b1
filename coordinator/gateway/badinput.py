"""Bad input on a client connection (one `BadInput` per connection, connection.py owns it).

Kafka's rule: a request that does not parse, or whose key or version is not served, ends
the connection: Kafka never answers bytes it cannot parse. The only error answer is
ApiVersions at an unknown version (UNSUPPORTED_VERSION in the v0 format, KIP-511). Each
bad frame is counted in kcoord_gateway_bad_requests_total{reason} (a fixed set of
reasons, never a client's value) and logged, rate-limited, naming the peer, listener, API,
version and the fault (the decoder's message names the field). Requests read before the
bad one are still answered, in order; then the connection closes. A request served here is
read by `parse`, which refuses what does not parse. `BadInput` reaches its connection only
through `Refusing`.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

from .. import metrics
from ..protocol.api_versions import unsupported_version_body
from ..protocol.apis import (
    API_VERSIONS,
    GROUP_APIS,
    NOT_THROUGH_GATEWAY,
    api_name,
    kio_version_range,
    request_header_version,
)
from ..protocol.codec import BodyError, decode_request
from ..protocol.framing import HeaderError, request_body_offset, response_frame
from .routes import Route

if TYPE_CHECKING:
    from .ports import ConnectionServices

FRAME = "frame"
HEADER = "header"
BODY = "body"
UNKNOWN_API = "unknown_api"
UNSUPPORTED_VERSION = "unsupported_version"
BAD_REQUESTS = {r: metrics.GATEWAY_BAD_REQUESTS.labels(reason=r)
                for r in (FRAME, HEADER, BODY, UNKNOWN_API, UNSUPPORTED_VERSION)}


class Refusing(Protocol):
    """What bad-input handling uses of its connection."""

    @property
    def peer(self) -> tuple[str, int]: ...

    @property
    def listener_name(self) -> str: ...

    def answer(self, data: bytes) -> None:
        """Queue a ready answer, in request order."""

    def stop(self) -> None:
        """Read nothing more; answer what came before, then close."""


class BadInput:
    __slots__ = ("_client", "_gateway")

    def __init__(self, client: Refusing, gateway: ConnectionServices) -> None:
        self._client = client
        self._gateway = gateway

    def too_big(self, frame: bytes, route: Route | None, correlation_id: int, api_key: int | None = None,
                api_version: int | None = None) -> None:
        """A frame over max_decoded_request_bytes that is not a Produce."""
        limits = self._gateway.limits
        self.reject(f"request of {len(frame) - 4} bytes is above max_decoded_request_bytes="
                    f"{limits.max_decoded_frame - 4} (only Produce may be larger, up to "
                    f"socket.request.max.bytes={self._gateway.max_frame_size})", route, correlation_id, api_key,
                    api_version, reason=FRAME)

    def parse(self, frame: bytes, route: Route, correlation_id: int) -> tuple[str | None, Any] | None:
        """(client id, kio request) of a request served here; None after rejecting it."""
        try:
            assert route.request_class is not None
            return decode_request(route.request_class, frame, route.request_header_version)
        except HeaderError as e:
            self.reject(str(e), route, correlation_id, reason=HEADER)
            return None
        except BodyError as e:
            self.reject(f"body does not parse: {e}", route, correlation_id, reason=BODY)
            return None

    def unroutable(self, frame: bytes, api_key: int, api_version: int, correlation_id: int) -> None:
        """No route for this key and version (a frame over max_decoded_request_bytes is
        refused for its size first)."""
        if len(frame) > self._gateway.limits.max_decoded_frame:
            self.too_big(frame, None, correlation_id, api_key, api_version)
            return
        if api_key == API_VERSIONS:
            # Kafka answers an ApiVersions version it does not know with UNSUPPORTED_VERSION
            # in the v0 format, listing its own range (KIP-511), instead of closing.
            try:
                request_body_offset(frame, request_header_version(api_key, api_version))
            except HeaderError as e:
                self.reject(f"header does not parse: {e}", None, correlation_id, api_key, api_version,
                             reason=HEADER)
                return
            supported = self._gateway.api_versions[API_VERSIONS]
            self._client.answer(response_frame(correlation_id, unsupported_version_body(supported), 0))
            return
        advertised = self._gateway.api_versions.get(api_key)
        reason = UNKNOWN_API
        if kio_version_range(api_key) is None:
            what = f"unknown API key {api_key}"
        elif api_key in NOT_THROUGH_GATEWAY:
            what = f"{api_name(api_key)} is not served through the gateway: {NOT_THROUGH_GATEWAY[api_key]}"
        elif advertised is None and api_key in GROUP_APIS:
            what = f"group API {api_name(api_key)} is not served by the group service"
        elif advertised is None:
            what = f"{api_name(api_key)} is not supported by the upstream cluster"
        else:
            what = (f"unsupported version {api_version} of {api_name(api_key)} "
                    f"(supported {advertised[0]}-{advertised[1]})")
            reason = UNSUPPORTED_VERSION
        self.reject(what, None, correlation_id, api_key, api_version, reason=reason)

    def reject(self, what: str, route: Route | None = None, correlation_id: int | None = None,
                api_key: int | None = None, api_version: int | None = None, *, reason: str = BODY) -> None:
        """Bad input: count it, log one (rate-limited) line, answer what came before, then
        close (Kafka's SocketServer closes the channel on an InvalidRequestException)."""
        if route is not None:
            api_key, api_version = route.api_key, route.api_version
        api = f"{api_name(api_key)}({api_key}) v{api_version}" if api_key is not None else "unknown API"
        BAD_REQUESTS[reason].inc()
        client = self._client
        peer = client.peer
        self._gateway.bad_log.log(logging.WARNING, "closing connection from %s:%d on %s: %s [%s, correlation_id=%s]",
                                  peer[0], peer[1], client.listener_name, what, api, correlation_id)
        client.stop()
