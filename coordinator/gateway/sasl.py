"""Client SASL on a connection (`SaslGate`, one per connection on a SASL listener, owned by
connection.py): passthrough with inspection, or termination at kcoord.
docs/user/security-sasl.md is the user's side of this.

Passthrough (the default on SASL_* listeners): SaslHandshake and SaslAuthenticate go upstream
on the client's own link, byte for byte, so the broker authenticates. kcoord reads the client's
tokens (coordinator/security/sasl_inspect.py) and the broker's answers (through
forward.MergingPending, which hands each answer to a callback before the client gets it), and
records the principal only once the broker answered the exchange with success.

Termination (`sasl.termination=true`): kcoord answers both APIs itself against the credential
file (coordinator/security/sasl_server.py); forward links then run as kcoord: when the upstream
has SASL they authenticate with kcoord's `upstream.sasl.*` credentials before the client's
first byte goes up (`open_as_kcoord`, asked for by forward.UpstreamLink through
`forward_link_opener`), and the forward gate (security/forward_acl.py) authorizes each forwarded
request for the client's principal. Fail closed: without a forward gate (and not
authorizer=none) the link stays unauthenticated, so the upstream refuses it. The same holds for
an SSL listener's mTLS clients. A forward link is not re-authenticated (KIP-368): when the
upstream bounds sessions (connections.max.reauth.ms) it closes the link at its first request
after expiry, and kcoord closes the client connection, which reconnects.

Per listener (Kafka's `listener.name.<listener>.<setting>`, the listener name lower-cased):
`sasl.termination`, `sasl.enabled.mechanisms`, `sasl.credentials.file`, and the other names
SaslSettings reads, so one listener (INTERNAL) can terminate while another (EXTERNAL) passes
SASL through. `SaslSettings.for_listener` gives a listener's settings; a connection takes them
on its first request (`SaslGate.intercept`).

A SASL listener treats a connection as Kafka's SaslServerAuthenticator does:
- before the handshake, only ApiVersions and SaslHandshake are read; anything else closes the
  connection ("Unexpected Kafka request of type X during SASL handshake");
- after it, only SaslAuthenticate until the exchange ends; anything else closes it;
- SASL frames before authentication are bounded by `sasl.server.max.receive.size` (512 KiB);
- a failed exchange is answered (SASL_AUTHENTICATION_FAILED, or UNSUPPORTED_SASL_MECHANISM on
  the handshake) and the connection closed, after `connection.failed.authentication.delay.ms`
  when kcoord terminates (the broker's own delay applies in passthrough);
- KIP-368: a SaslHandshake after authentication starts a re-authentication; SessionLifetimeMs
  is relayed unchanged, and the first request other than SaslHandshake after the session
  expired closes the connection (Kafka's SocketServer does the same), so a connection that
  carries only group APIs, which the broker never sees, still loses them with its credential.
- SaslHandshake is advertised at v1 only: v0 switches the connection to raw, unframed tokens.

Mechanisms whose name kcoord cannot learn (GSSAPI, AWS_MSK_IAM, SCRAM with a delegation
token, a token kcoord cannot parse): the client is authenticated (the broker said so) but has
no principal here, and its group APIs answer GROUP_AUTHORIZATION_FAILED unless `authorizer=none`.
For such a mechanism the end of the exchange is not visible in its bytes: it counts as
complete when, after a SaslAuthenticate answered without error, the client sends another kind
of request (a client only does so once authenticated; the broker closes it otherwise).

Parts, each an object of its own: the settings (sasl_settings.py), the session and how an
exchange ends (sasl_session.py), passthrough (sasl_relay.py), termination
(sasl_termination.py). This module keeps the per-request gate (`SaslGate.intercept`), the
dispatch of the two SASL APIs, and what the forward link needs (`forward_link_sasl`).
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from ..group.errors import ApiError
from ..protocol.api_versions import api_versions_bodies, sasl_versions
from ..protocol.apis import SASL_AUTHENTICATE, SASL_HANDSHAKE, api_name
from ..protocol.codec import encode_body
from ..protocol.framing import response_frame
from .routes import API_VERSIONS_LOCAL, GROUP, SASL, Route, build_routes
from .sasl_relay import SaslRelay
from .sasl_session import (
    AUTHENTICATED,
    EXCHANGE,
    FAILED,
    INITIAL,
    ExchangeOutcome,
    SaslClient,
    SaslSession,
    session_principal,
)
from .sasl_settings import LISTENER_NAMES, SaslSettings, listeners_with_overrides
from .sasl_termination import SaslTermination, answer_not_enabled

if TYPE_CHECKING:
    from ..security.upstream import UpstreamSecurity

__all__ = ["AUTHENTICATED", "EXCHANGE", "FAILED", "INITIAL", "LISTENER_NAMES", "SaslClient", "SaslGate", "SaslSession",
           "SaslSettings", "answer_not_enabled", "client_principal", "enable_sasl", "forward_link_opener",
           "forward_link_sasl", "listeners_with_overrides", "open_as_kcoord", "session_principal"]

log = logging.getLogger("kcoord.gateway.sasl")


def enable_sasl(gateway: Any, settings: SaslSettings) -> None:
    """Advertise and route SaslHandshake (v1) and SaslAuthenticate on ``gateway`` and give its
    connections ``settings``. Call it in Gateway.start() once the routes are built (or on a
    started gateway before clients connect: tests do). In passthrough the versions are the
    upstream's (∩ kio's); when terminating, kcoord's."""
    # Passthrough on any listener: the upstream's versions (kcoord's server speaks them too).
    specs = [lset.spec for lset in getattr(gateway, "_sets", ())]
    names = None if settings.default_on or not specs else \
        [spec.name for spec in specs if str(spec.protocol).startswith("SASL_")]
    upstream = gateway.cluster.upstream_api_versions if settings.passes_through(names) else None
    versions = sasl_versions(upstream)
    gateway.sasl = settings
    gateway.api_versions = dict(sorted({**gateway.api_versions, **versions}.items()))
    gateway.routes.update(build_routes(versions, ()))
    gateway.api_versions_bodies = api_versions_bodies(gateway.api_versions, gateway.features)


class SaslGate:
    """The SASL side of one client connection on a SASL listener: every request passes
    `intercept` first. It holds the connection's SaslSession."""

    __slots__ = ("session", "_client", "_gateway", "_outcome", "_relay", "_termination")

    def __init__(self, client: SaslClient, gateway: Any, session: SaslSession,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.session = session
        self._client = client
        self._gateway = gateway
        # The parts: how an exchange ends (sasl_session.py), passthrough (sasl_relay.py) and
        # termination (sasl_termination.py).
        outcome = self._outcome = ExchangeOutcome(client, gateway.bad_log)
        self._relay = SaslRelay(client, outcome)
        self._termination = SaslTermination(client, outcome, loop)

    # --- the per-request gate ------------------------------------------------------------


    def intercept(self, frame: bytes, route: Route, correlation_id: int) -> bool:
        """On a SASL listener: True when the request was handled here (a SASL request, or a
        refusal); False lets the connection serve or forward it as usual."""
        session = self.session
        if not session.listener_known:
            session.settings = session.settings.for_listener(getattr(self._client.listener, "listener", None))
            session.listener_known = True
        kind = route.kind
        if session.close_scheduled:
            return True   # failed; frames of the same read are dropped until the delayed close
        if session.maybe_done and route.api_key != SASL_AUTHENTICATE:
            # A mechanism kcoord does not read answered its last round without error and the
            # client went on: the broker accepted it (it closes a client that did not finish).
            self._outcome.succeeded(session, None, None,
                                    session.inspector.unknown_reason if session.inspector is not None else "")
        if session.state == AUTHENTICATED:
            if kind == SASL:
                self._request(frame, route, correlation_id, session)
                return True
            if session.deadline and time.monotonic() >= session.deadline:
                self._expired(route, session)
                return True
            if kind == GROUP and session.principal is None and not session.settings.allow_unknown_principal:
                self._unknown_principal(frame, route, correlation_id, session)
                return True
            return False
        if len(frame) - 4 > session.settings.max_receive:
            self._refuse(route, correlation_id, f"request of {len(frame) - 4} bytes before authentication "
                              f"is above sasl.server.max.receive.size={session.settings.max_receive}")
            return True
        if kind == SASL:
            self._request(frame, route, correlation_id, session)
            return True
        if session.state == INITIAL and kind == API_VERSIONS_LOCAL:
            return False
        during = "SASL handshake" if session.state == INITIAL else "SASL authentication"
        if session.state == EXCHANGE and kind == GROUP:
            # Kafka's authenticator answers a request during the exchange with its error
            # response (ILLEGAL_SASL_STATE), then closes; a group API's is built here.
            self._error_answer(frame, route, correlation_id, ErrorCode.illegal_sasl_state)
        self._refuse(route, correlation_id, f"unexpected {api_name(route.api_key)} request during {during} "
                          "(a SASL listener serves nothing before the client authenticated)")
        return True

    def _refuse(self, route: Route, correlation_id: int, what: str) -> None:
        """Kafka closes a connection that sends anything else before it authenticated."""
        session = self.session
        if session is not None and session.state != FAILED:
            session.state = FAILED
        self._gateway.bad_log.log(logging.WARNING, "closing connection from %s:%d on %s: %s [%s v%d, "
                                  "correlation_id=%d]", *self._outcome.where(), what,
                                  api_name(route.api_key), route.api_version, correlation_id)
        # As a bad frame (badinput.py): what came before is answered, then the connection closes.
        self._client.stop()

    def _expired(self, route: Route, session: SaslSession) -> None:
        log.info("closing connection from %s:%d on %s: its SASL session (%s, %d ms) expired without "
                 "re-authentication; %s v%d refused (Kafka closes an expired connection on its next request)",
                 *self._outcome.where(), session.principal or "unknown principal",
                 session.lifetime_ms, api_name(route.api_key), route.api_version)
        session.state = FAILED
        self._client.close()

    def _unknown_principal(self, frame: bytes, route: Route, correlation_id: int, session: SaslSession) -> None:
        if not self._error_answer(frame, route, correlation_id, ErrorCode.group_authorization_failed):
            self._refuse(route, correlation_id, f"{session.mechanism} gives no principal kcoord can read, and "
                              f"{api_name(route.api_key)} has no GROUP_AUTHORIZATION_FAILED answer")

    def _error_answer(self, frame: bytes, route: Route, correlation_id: int, error: ErrorCode) -> bool:
        """Answer a group API with ``error`` (its Kafka error shape); False if it has none."""
        make = route.error_response       # the API's row in the API table (routes.py)
        if make is None:
            return False
        parsed = self._client.parse(frame, route, correlation_id)
        if parsed is not None:
            response = make(route.api_version, ApiError(error), parsed[1])
            self._client.answer(response_frame(correlation_id, encode_body(response), route.response_header_version))
        return True

    # --- SaslHandshake / SaslAuthenticate ------------------------------------------------

    def _request(self, frame: bytes, route: Route, correlation_id: int, session: SaslSession) -> None:
        parsed = self._client.parse(frame, route, correlation_id)
        if parsed is None:
            return
        request = parsed[1]
        terminating = session.settings.termination
        if route.api_key == SASL_HANDSHAKE:
            if session.in_exchange or session.state in (EXCHANGE, FAILED):
                self._refuse(route, correlation_id, "a second SaslHandshake during SASL authentication")
                return
            mechanism = str(request.mechanism)
            session.reauth = session.state == AUTHENTICATED
            if terminating:
                self._termination.handshake(route, correlation_id, session, mechanism)
            else:
                self._relay.handshake(frame, route, correlation_id, session, mechanism)
            return
        # SaslAuthenticate
        if not session.in_exchange:
            if session.state == AUTHENTICATED:
                # Outside a re-authentication: the broker answers ILLEGAL_SASL_STATE, and so
                # does kcoord when it terminates.
                if terminating:
                    answer_not_enabled(self._client, frame, route, correlation_id)
                else:
                    self._relay.relay_unchanged(frame, route, correlation_id)
                return
            self._refuse(route, correlation_id, "SaslAuthenticate before SaslHandshake")
            return
        if terminating:
            self._termination.authenticate(route, correlation_id, session, bytes(request.auth_bytes))
        else:
            self._relay.authenticate(frame, route, correlation_id, session, bytes(request.auth_bytes))


    @property
    def principal(self) -> str | None:
        """The principal this connection authenticated as (None: not authenticated, or unknown)."""
        session = self.session
        return session.principal if session.state == AUTHENTICATED else None


def forward_link_sasl(gateway: Any, listener: Any, session: SaslSession | None) -> UpstreamSecurity | None:
    """kcoord's upstream credentials for a connection's forward link, or None (the link
    does not authenticate: PLAINTEXT upstream, SASL passthrough, no client identity).

    The link authenticates as kcoord only when kcoord established the client's identity
    (SASL terminated here, or an mTLS certificate) and kcoord authorizes what it forwards
    (a forward gate, security/forward_acl.py), or the operator chose authorizer=none. Else
    it stays unauthenticated and an upstream with SASL refuses it: fail closed, never a
    client running with kcoord's rights unchecked."""
    security = getattr(gateway, "upstream_security", None)
    if security is None or not security.sasl:
        return None
    if session is not None:
        if not session.settings.termination or session.state != AUTHENTICATED:
            return None
        opted_out = session.settings.allow_unknown_principal
    else:
        listener_security = getattr(listener, "security", None)
        if listener_security is None or not listener_security.mtls_principal:
            return None
        opted_out = False
    if getattr(gateway, "forward_gate", None) is None and not opted_out:
        return None
    return security


def forward_link_opener(security: UpstreamSecurity | None) \
        -> Callable[[asyncio.Protocol, str, int, float], Awaitable[None]] | None:
    """What forward.UpstreamLink awaits instead of a plain connect when its link must
    authenticate as kcoord (``forward_link_sasl``): ``opener(link, host, port, timeout)``."""
    if security is None:
        return None

    def opener(link: asyncio.Protocol, host: str, port: int, timeout: float) -> Awaitable[None]:
        return open_as_kcoord(link, host, port, security, timeout)
    return opener


def client_principal(session: SaslSession | None, listener: Any, transport: Any) -> str | None:
    """ClientInfo.principal: SASL's, else the TLS listener's client-certificate principal
    (`ListenerInfo.principal_of(transport)`, where the listener has one), else None
    (ClientInfo's default, ANONYMOUS)."""
    principal = session_principal(session)
    if principal is not None:
        return principal
    principal_of = getattr(listener, "principal_of", None)
    if principal_of is not None:
        found = principal_of(transport)
        if found:
            return str(found)
    return None


async def open_as_kcoord(link: asyncio.Protocol, host: str, port: int, security: UpstreamSecurity,
                         timeout: float) -> None:
    """Open a forward link to ``host:port`` authenticated as kcoord: TLS as ``security`` says,
    ApiVersions and the SASL exchange on an UpstreamClient (coordinator/upstream/client.py, the code
    kcoord's own links use), then the transport is handed to ``link`` (``connection_made``),
    before any client byte is written. Raises ConnectionError (an OSError, which the link
    reports as for a refused connect) naming the broker and the SASL failure."""
    from ..upstream.client import UpstreamClient, UpstreamError

    try:
        client = await UpstreamClient.connect([(host, port)], "kcoord-forward", timeout, security=security)
    except UpstreamError as e:
        raise ConnectionError(f"authenticating as kcoord ({security.describe()}): {e}") from None
    transport = client._transport
    if transport is None or client.closed:
        raise ConnectionError(f"{host}:{port} closed the connection after SASL authentication")
    transport.set_protocol(link)
    link.connection_made(transport)
