"""kcoord's one upstream client: one connection, kio request in, kio response out, pipelined
by correlation id.

Every link kcoord opens to the upstream for its own traffic is one of these (the package's
rules: coordinator/upstream/__init__.py); forwarded client requests are relayed as bytes
elsewhere (gateway/forward.py). ``opener(security, client_id)`` is the one connection
factory: callers take links from it (an ``OpenLink``), never build sockets themselves.

Security: ``connect(..., security=UpstreamSecurity)`` opens TLS (hostname verified
unless the settings turn it off) and authenticates with SASL (security/sasl_client.py:
ApiVersions, SaslHandshake v1, SaslAuthenticate) before the link is handed out. A refused
credential raises UpstreamAuthenticationError at once (every broker would refuse it too).

KIP-368: when the broker gives the session a lifetime (SessionLifetimeMs, set by the broker's
``connections.max.reauth.ms``), the link does not re-authenticate in place (that would need
every other request held while the exchange runs); it *reconnects* instead.
``reauthentication_due`` turns true at 85-95% of the lifetime (Java's client picks the same
window), and the owner of the link (the metadata link, the fenced log's links) then retires
it (in-flight requests finish) and opens a new, freshly authenticated one. A request on a
link whose session has expired is refused here (UpstreamError) rather than sent to a broker
that would close the connection.

Bounds: a response size comes from the upstream; one outside [4, MAX_RESPONSE_BYTES] fails
the link at once, naming the size, instead of being buffered or read (a state-topic fetch
answer is bounded by the fetch's max bytes: anything near 1 GiB is broken).

Timeouts: a request not answered within its timeout fails (UpstreamError) and closes the link
(answers come in order: a lost one makes the connection unusable, and closing it fails the
other requests in flight). The bound is one timer per link, not one per request (a
`asyncio.timeout` per request cost a timer handle, its heap entry and a context manager on
every state-topic write: docs/measurements/write-path-cost.md): each request keeps its
deadline, and while any request is pending the link's timer is armed at or before the
earliest deadline; when it fires, the requests past their deadline fail, and it is armed
again for the earliest left. A caller's cancellation cancels only its own wait.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import random
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..aio import within
from ..protocol.apis import (
    API_VERSIONS,
    PRODUCE,
    api_name,
    request_class,
    request_header_version,
    response_class,
    response_header_version,
)
from ..protocol.bootstrap import parse_bootstrap as parse_bootstrap  # its callers import it from here
from ..protocol.codec import BodyError, decode_body, encode_body
from ..protocol.framing import SIZE, RequestHeader, decode_response_header, split_frames
from ..protocol.produce_answer import read_produce_v9
from ..security.sasl_client import SASL_AUTHENTICATE, SaslAuthenticationError, SaslError, authenticate

if TYPE_CHECKING:
    from ..security.upstream import UpstreamSecurity

log = logging.getLogger("kcoord.upstream")

MAX_RESPONSE_BYTES = 1 << 30
_NEVER = float("inf")       # the deadline of a request without a timeout


class EncodedRequest:
    """A request whose body is encoded already (the lean writer's ProduceRequest, written in
    one pass from its batches' bytes: a request per write). `send` writes `body` as it is
    under the subclass's `__api_key__` and `__version__`, and decodes the answer as that
    API's, as for a kio request."""

    __slots__ = ("body",)
    __api_key__: int
    __version__: int

    def __init__(self, body: bytes) -> None:
        self.body = body


class UpstreamError(Exception):
    """The upstream connection failed or answered something unreadable."""


class UpstreamAuthenticationError(UpstreamError):
    """The upstream refused kcoord's SASL credentials (or mechanism)."""


# SaslAuthenticate versions kcoord speaks (v1 adds SessionLifetimeMs, v2 flexible).
_SASL_AUTHENTICATE_MAX = 2
# KIP-368: reconnect at this fraction of the session lifetime (Java: 85-95%, randomized so
# that many links do not re-authenticate at once).
_REAUTH_WINDOW = (0.85, 0.95)


class UpstreamClient(asyncio.Protocol):
    def __init__(self, address: tuple[str, int], client_id: str) -> None:
        self.address = address
        self.client_id = client_id
        self._transport: asyncio.Transport | None = None
        self._buf = bytearray()
        # correlation id -> (the caller's future, api key, version, deadline (loop time), timeout)
        self._pending: dict[int, tuple[asyncio.Future[Any], int, int, float, float | None]] = {}
        self._timer: asyncio.TimerHandle | None = None      # armed while requests are pending
        self._kinds: dict[type, tuple[int, int, bytes, bytes]] = {}     # `_kind`, per request class
        self._correlation = itertools.count(1)
        self._lost: Exception | None = None
        self._closed_here = False
        self._retiring = False
        # KIP-368, monotonic seconds; None: no SASL session lifetime.
        self.session_lifetime_ms = 0
        self._reauth_at: float | None = None
        self._expires_at: float | None = None

    # --- connecting -------------------------------------------------------------------

    @classmethod
    async def connect(cls, addresses: Sequence[tuple[str, int]], client_id: str = "kcoord-gateway",
                      timeout: float = 5.0, *, security: UpstreamSecurity | None = None) -> UpstreamClient:
        """Connects to the first address that accepts (TLS and SASL done when ``security``
        asks for them); raises UpstreamError if none does, UpstreamAuthenticationError at
        once when a broker refuses the credentials."""
        loop = asyncio.get_running_loop()
        context = security.ssl_context() if security is not None else None
        errors = []
        for host, port in addresses:
            client = cls((host, port), client_id)
            try:
                # within, not wait_for: a task cancelled while its link connects or asks
                # must stop (coordinator/aio.py).
                if context is None:
                    await within(loop.create_connection(lambda c=client: c, host, port), timeout)  # type: ignore[misc]
                else:
                    await within(loop.create_connection(
                        lambda c=client: c, host, port, ssl=context, server_hostname=host,  # type: ignore[misc]
                        ssl_handshake_timeout=timeout), timeout)
            except ssl.SSLCertVerificationError as e:
                # OpenSSL's reason code too (CERTIFICATE_VERIFY_FAILED): what operators search for.
                reason = f" ({e.reason})" if e.reason else ""
                errors.append(f"{host}:{port}: TLS certificate verification failed: {e.verify_message or e}{reason}")
                continue
            except ssl.SSLError as e:
                errors.append(f"{host}:{port}: TLS handshake failed: {e.reason or e}")
                continue
            except (TimeoutError, OSError) as e:
                errors.append(f"{host}:{port}: {e or type(e).__name__}")
                continue
            if security is None or not security.sasl:
                return client
            try:
                await client.authenticate(security, timeout)
                return client
            except UpstreamAuthenticationError:
                client.close()
                raise
            except UpstreamError as e:
                client.close()
                errors.append(f"{host}:{port}: {e}")
        raise UpstreamError("no upstream broker reachable: " + "; ".join(errors))

    async def authenticate(self, security: UpstreamSecurity, timeout: float = 5.0) -> None:
        """ApiVersions (for the SaslAuthenticate version), then the SASL exchange. Sets the
        KIP-368 session deadline. Raises UpstreamAuthenticationError if refused."""
        from ..security.settings import SecurityConfigError

        where = self._where()
        started = time.monotonic()
        versions = await self._sasl_authenticate_range(timeout)
        if versions is None:
            raise UpstreamAuthenticationError(f"SASL authentication with {where} impossible: the upstream "
                                              f"lists no SaslAuthenticate in ApiVersions")
        version = min(versions[1], _SASL_AUTHENTICATE_MAX)
        try:
            mechanism = await security.new_mechanism()
            lifetime = await authenticate(lambda r: self.request(r, timeout), mechanism,
                                          authenticate_version=version)
        except SaslAuthenticationError as e:
            raise UpstreamAuthenticationError(f"{where}: {e}") from None
        except (SaslError, SecurityConfigError) as e:
            raise UpstreamAuthenticationError(f"SASL authentication with {where} failed: {e}") from None
        self.session_lifetime_ms = lifetime
        if lifetime > 0:
            self._expires_at = started + lifetime / 1000
            self._reauth_at = started + lifetime / 1000 * random.uniform(*_REAUTH_WINDOW)
        log.debug("authenticated with %s (%s), session lifetime %s", where, security.mechanism,
                  f"{lifetime} ms" if lifetime else "unbounded")

    async def _sasl_authenticate_range(self, timeout: float) -> tuple[int, int] | None:
        response = await self.request(request_class(API_VERSIONS, 3)(
            client_software_name="kcoord", client_software_version="0.1.0"), timeout)
        if int(response.error_code) == 35:     # older broker: ask at v0
            response = await self.request(request_class(API_VERSIONS, 0)(), timeout)
        if int(response.error_code) != 0:
            raise UpstreamError(f"ApiVersions to {self._where()} failed with error {int(response.error_code)}")
        for key in response.api_keys:
            if int(key.api_key) == SASL_AUTHENTICATE:
                return int(key.min_version), int(key.max_version)
        return None

    @property
    def reauthentication_due(self) -> bool:
        """KIP-368: the SASL session nears its end; reconnect (ClusterView does)."""
        return self._reauth_at is not None and time.monotonic() >= self._reauth_at

    @property
    def session_expired(self) -> bool:
        return self._expires_at is not None and time.monotonic() >= self._expires_at

    def retire(self) -> None:
        """Close once the requests in flight are answered (a reconnect for KIP-368)."""
        self._retiring = True
        if not self._pending:
            self.close()

    @property
    def closed(self) -> bool:
        return self._transport is None or self._lost is not None

    @property
    def lost(self) -> Exception | None:
        """Why the upstream ended the connection (it closed it, reset it, sent garbage);
        None while it is open or when kcoord closed it itself."""
        return None if self._closed_here else self._lost

    def close(self) -> None:
        if self._lost is None:
            self._closed_here = True
        if self._transport is not None:
            self._transport.close()

    # --- requests ---------------------------------------------------------------------

    async def request(self, request: Any, timeout: float = 10.0) -> Any:
        """Send a kio request at its class's version and wait for the decoded response."""
        # The bare future, not wait_for: no cancellation of the caller's is dropped
        # (coordinator/aio.py); the link's timer bounds the wait (module rules).
        return await self.send(request, timeout)

    def send(self, request: Any, timeout: float | None = 10.0) -> asyncio.Future[Any]:
        """`request` without its coroutine: the future of the decoded response (UpstreamError
        when the link fails or the answer is late), for callers that take the answer in a
        callback (the lean state-topic writer, a request per write). Raises UpstreamError at
        once on a closed link or an expired session."""
        if self.closed:
            raise UpstreamError(f"connection to {self._where()} is closed")
        if self.session_expired:
            self.close()
            raise UpstreamError(f"the SASL session with {self._where()} expired "
                                f"(lifetime {self.session_lifetime_ms} ms, KIP-368): reconnect")
        kind = self._kinds.get(type(request))
        if kind is None:
            kind = self._kind(request)
        api_key, api_version, head, tail = kind
        correlation_id = next(self._correlation)
        body = request.body if isinstance(request, EncodedRequest) else encode_body(request)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        deadline = loop.time() + timeout if timeout is not None else _NEVER
        self._pending[correlation_id] = (future, api_key, api_version, deadline, timeout)
        timer = self._timer
        if timer is None or timer.when() > deadline:
            if timer is not None:
                timer.cancel()
            if deadline != _NEVER:
                self._timer = loop.call_at(deadline, self._expire)
        assert self._transport is not None
        self._transport.write(b"".join((SIZE.pack(8 + len(tail) + len(body)), head, SIZE.pack(correlation_id),
                                        tail, body)))
        return future

    def _kind(self, request: Any) -> tuple[int, int, bytes, bytes]:
        """A request class's api key, version and header bytes around the correlation id
        (`RequestHeader.encode`'s, with this link's client id), kept per class: the header
        is the same on every request of a class but that id (a request per write)."""
        api_key, api_version = int(request.__api_key__), int(request.__version__)
        header = RequestHeader(api_key, api_version, 0, self.client_id).encode(
            request_header_version(api_key, api_version))
        kind = self._kinds[type(request)] = (api_key, api_version, header[:4], header[8:])
        return kind

    def _expire(self) -> None:
        """The link's timer: requests past their deadline fail and the link closes (answers
        come in order); else the timer is armed for the earliest deadline left."""
        self._timer = None
        if not self._pending:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        expired = [(c, entry) for c, entry in self._pending.items() if entry[3] <= now]
        if not expired:
            earliest = min(entry[3] for entry in self._pending.values())
            if earliest != _NEVER:
                self._timer = loop.call_at(earliest, self._expire)
            return
        for correlation_id, (future, api_key, api_version, _, timeout) in expired:
            del self._pending[correlation_id]
            if not future.done():
                future.set_exception(UpstreamError(f"{api_name(api_key)} v{api_version} to {self._where()} "
                                                   f"timed out after {timeout}s"))
        self.close()

    # --- asyncio.Protocol -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._buf += data
        frames, used, error = split_frames(self._buf, MAX_RESPONSE_BYTES)
        del self._buf[:used]
        for frame in frames:
            if len(frame) < 8:      # no room for the correlation id
                self._bad_size(len(frame) - 4)
                return
            self._complete(frame)
        if error is not None:
            self._bad_size(SIZE.unpack_from(self._buf)[0])

    def _bad_size(self, size: int) -> None:
        self._fail(UpstreamError(f"{self._where()} sent a response of {size} bytes; expected 4 to "
                                 f"{MAX_RESPONSE_BYTES}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(UpstreamError(f"connection to {self._where()} lost" + (f": {exc}" if exc else "")))

    def _complete(self, frame: bytes) -> None:
        (correlation_id,) = SIZE.unpack_from(frame, 4)
        entry = self._pending.pop(correlation_id, None)
        if entry is None:
            return  # answer to a request that already timed out
        future, api_key, api_version, _, _ = entry
        if self._retiring and not self._pending:
            asyncio.get_running_loop().call_soon(self.close)
        if future.done():
            return
        try:
            future.set_result(_decode(frame, api_key, api_version))
        except (BodyError, ValueError) as e:
            future.set_exception(UpstreamError(f"{api_name(api_key)} v{api_version} response from "
                                               f"{self._where()} does not parse: {e}"))
        except Exception as e:
            # Anything else (a response header that does not decode: HeaderError) fails the
            # request and the link: the request is no longer pending, so nothing else would
            # ever answer it (the link's timer bounds only pending requests), and an upstream
            # that sends such headers is not one to keep talking to.
            error = UpstreamError(f"{api_name(api_key)} v{api_version} response from {self._where()} "
                                  f"does not parse: {type(e).__name__}: {e}")
            future.set_exception(error)
            self._fail(error)

    def _fail(self, error: Exception) -> None:
        if self._lost is None:
            self._lost = error
        pending, self._pending = self._pending, {}
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for future, *_ in pending.values():
            if not future.done():
                future.set_exception(error)
        self.close()

    def _where(self) -> str:
        return f"{self.address[0]}:{self.address[1]}"


def _decode(frame: bytes, api_key: int, api_version: int) -> Any:
    if api_key == PRODUCE and api_version == 9 and len(frame) > 9 and frame[8] == 0:
        # The state topic's acknowledgement, one per write: its header (v1: the correlation
        # id, then a tagged-field count, 0 here) and its body's common shape read at fixed
        # offsets (produce_answer.py); anything else is decoded below as before.
        answer = read_produce_v9(frame, 9)
        if answer is not None:
            return answer
    _, offset = decode_response_header(frame, response_header_version(api_key, api_version))
    try:
        return decode_body(response_class(api_key, api_version), frame, offset)
    except BodyError:
        # A broker that does not know our ApiVersions version answers UNSUPPORTED_VERSION
        # in the v0 format (KIP-511).
        if api_key == API_VERSIONS and api_version > 0:
            return decode_body(response_class(API_VERSIONS, 0), frame, offset)
        raise


OpenLink = Callable[[Sequence[tuple[str, int]]], Awaitable[UpstreamClient]]


def opener(security: UpstreamSecurity | None, client_id: str) -> OpenLink:
    """The one connection factory: links to the first reachable address, with kcoord's TLS
    and SASL when ``security`` asks for them."""
    async def open_link(addresses: Sequence[tuple[str, int]]) -> UpstreamClient:
        return await UpstreamClient.connect(addresses, client_id=client_id, security=security)
    return open_link


# The fenced state log's default opener (tests, benchmarks, unauthenticated upstreams).
open_plain_link = opener(None, "kcoord-state")
