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
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode

from ..group.error_responses import ERROR_RESPONSES
from ..group.errors import ApiError
from ..protocol.api_versions import api_versions_body, sasl_versions
from ..protocol.apis import API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE, api_name, response_class
from ..protocol.codec import decode_response_frame, encode_body
from ..protocol.framing import response_frame
from ..security import auth_metrics
from ..security.sasl_inspect import (
    DEFAULT_PRINCIPAL_TEMPLATE,
    DEFAULT_SUB_CLAIM,
    FAILURE,
    MAYBE_DONE,
    SUCCESS,
    Inspector,
    check_template,
    principal_for,
)
from ..security.sasl_server import (
    SUPPORTED_MECHANISMS,
    AuthenticationFailed,
    CredentialStore,
    SaslServer,
    client_message,
    new_server,
)
from ..security.tls import listener_settings
from .forward import MergingPending
from .routes import API_VERSIONS_LOCAL, GROUP, SASL, Route, build_routes

if TYPE_CHECKING:
    from ..security.upstream import UpstreamSecurity
    from .forward import Pending

log = logging.getLogger("kcoord.gateway.sasl")

DEFAULT_MAX_RECEIVE = 524288          # Kafka's sasl.server.max.receive.size
DEFAULT_FAILED_DELAY_MS = 100         # Kafka's connection.failed.authentication.delay.ms
_TRUE = ("true", "yes", "1", "on")

# Connection states.
# The names SaslSettings reads, which `listener.name.<listener>.NAME` may give for one listener.
LISTENER_NAMES = ("sasl.termination", "sasl.enabled.mechanisms", "sasl.credentials.file", "sasl.principal.template",
                  "sasl.oauthbearer.sub.claim.name", "connections.max.reauth.ms",
                  "connection.failed.authentication.delay.ms", "sasl.server.max.receive.size")


def listeners_with_overrides(settings: Mapping[str, str]) -> set[str]:
    """The (lower-case) listener names some `listener.name.<listener>.<LISTENER_NAMES>` names."""
    found = set()
    for key in settings:
        if key.lower().startswith("listener.name."):
            listener, _, name = key[len("listener.name."):].partition(".")
            if name in LISTENER_NAMES:
                found.add(listener.lower())
    return found


INITIAL = 0          # nothing but ApiVersions yet
EXCHANGE = 1         # a SaslHandshake was sent; SaslAuthenticate rounds follow
AUTHENTICATED = 2
FAILED = 3


@dataclass(frozen=True, slots=True)
class SaslSettings:
    """Client SASL, from `--config` settings (Kafka's broker names where Kafka has one)."""

    termination: bool = False                     # sasl.termination
    mechanisms: tuple[str, ...] = SUPPORTED_MECHANISMS   # sasl.enabled.mechanisms (termination)
    credentials: CredentialStore | None = None    # sasl.credentials.file (termination)
    principal_template: str = DEFAULT_PRINCIPAL_TEMPLATE   # sasl.principal.template
    sub_claim: str = DEFAULT_SUB_CLAIM            # sasl.oauthbearer.sub.claim.name
    reauth_ms: int = 0                            # connections.max.reauth.ms (termination)
    failed_delay_ms: int = DEFAULT_FAILED_DELAY_MS    # connection.failed.authentication.delay.ms
    max_receive: int = DEFAULT_MAX_RECEIVE        # sasl.server.max.receive.size
    allow_unknown_principal: bool = False         # authorizer=none
    # True: every listener authenticates clients, whatever its security protocol (in-process
    # gateways, tests); False: the SASL_PLAINTEXT and SASL_SSL listeners only.
    default_on: bool = False
    # Kafka listener name (upper case) -> its settings, for listeners with their own
    # `listener.name.<listener>.*` SASL settings; the others use these.
    per_listener: Mapping[str, SaslSettings] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: Mapping[str, str], *, default_on: bool = False) -> SaslSettings:
        """From the resolved security settings (coordinator/security/settings.py), with the
        per-listener overrides. Raises ValueError naming the setting (and listener) at fault."""
        base = cls._one(settings, default_on=default_on)
        per: dict[str, SaslSettings] = {}
        for listener in sorted(listeners_with_overrides(settings)):
            try:
                per[listener.upper()] = cls._one(listener_settings(settings, listener), default_on=default_on)
            except ValueError as e:
                raise ValueError(f"listener {listener.upper()} (listener.name.{listener}.*): {e}") from None
        return replace(base, per_listener=per) if per else base

    def for_listener(self, listener: str | None) -> SaslSettings:
        """The settings of the Kafka listener ``listener`` (ListenerInfo.listener)."""
        return self.per_listener.get(listener.upper(), self) if listener and self.per_listener else self

    @property
    def terminates_anywhere(self) -> bool:
        return self.termination or any(s.termination for s in self.per_listener.values())

    def passes_through(self, sasl_listeners: list[str] | None = None) -> bool:
        """Whether some SASL listener passes SASL through. ``sasl_listeners``: the names of
        the SASL_* listeners; None: every listener with overrides, and the base."""
        if sasl_listeners is None:
            return not self.termination or any(not s.termination for s in self.per_listener.values())
        return any(not self.for_listener(name).termination for name in sasl_listeners)

    @classmethod
    def _one(cls, settings: Mapping[str, str], *, default_on: bool) -> SaslSettings:
        def number(name: str, default: int) -> int:
            raw = settings.get(name)
            if raw is None:
                return default
            try:
                value = int(raw)
            except ValueError:
                raise ValueError(f"--config {name}={raw!r} is not a number") from None
            if value < 0:
                raise ValueError(f"--config {name}={raw} must be >= 0")
            return value

        termination = settings.get("sasl.termination", "false").strip().lower() in _TRUE
        mechanisms = tuple(m.strip().upper() for m in settings.get("sasl.enabled.mechanisms", "").split(",")
                           if m.strip()) or SUPPORTED_MECHANISMS
        credentials = None
        if termination:
            unknown = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
            if unknown:
                raise ValueError(f"--config sasl.enabled.mechanisms: kcoord terminates only "
                                 f"{', '.join(SUPPORTED_MECHANISMS)}, not {', '.join(unknown)}")
            path = settings.get("sasl.credentials.file")
            if not path:
                raise ValueError("--config sasl.termination=true needs --config sasl.credentials.file=<path>")
            credentials = CredentialStore.load(path)
        template = check_template(settings.get("sasl.principal.template", DEFAULT_PRINCIPAL_TEMPLATE))
        max_receive = number("sasl.server.max.receive.size", DEFAULT_MAX_RECEIVE)
        return cls(termination=termination, mechanisms=mechanisms, credentials=credentials,
                   principal_template=template,
                   sub_claim=settings.get("sasl.oauthbearer.sub.claim.name", DEFAULT_SUB_CLAIM) or DEFAULT_SUB_CLAIM,
                   reauth_ms=number("connections.max.reauth.ms", 0),
                   failed_delay_ms=number("connection.failed.authentication.delay.ms", DEFAULT_FAILED_DELAY_MS),
                   max_receive=max_receive or DEFAULT_MAX_RECEIVE,
                   allow_unknown_principal=settings.get("authorizer", "").strip().lower() == "none",
                   default_on=default_on)

    def applies_to(self, listener: Any) -> bool:
        """Whether a connection on ``listener`` must authenticate: its `security_protocol`
        (SASL_PLAINTEXT, SASL_SSL) says, else `default_on`."""
        protocol = getattr(listener, "security_protocol", None)
        return self.default_on or (protocol is not None and str(protocol).upper().startswith("SASL_"))


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
    low, high = gateway.api_versions[API_VERSIONS]
    gateway.api_versions_bodies = {v: api_versions_body(v, gateway.api_versions, gateway.features)
                                   for v in range(low, high + 1)}


class SaslSession:
    """The SASL state of one client connection."""

    __slots__ = ("settings", "state", "mechanism", "inspector", "server", "reauth", "principal", "name",
                 "deadline", "maybe_done", "lifetime_ms", "close_scheduled", "listener_known")

    def __init__(self, settings: SaslSettings) -> None:
        self.settings = settings
        # False until the listener's own settings replaced the gateway's (SaslGate.intercept).
        self.listener_known = not settings.per_listener
        self.state = INITIAL
        self.mechanism: str | None = None
        self.inspector: Inspector | None = None     # passthrough: the exchange in progress
        self.server: SaslServer | None = None       # termination: the exchange in progress
        self.reauth = False                         # the exchange in progress re-authenticates
        self.principal: str | None = None           # None: unknown (or not authenticated)
        self.name: str | None = None
        self.deadline = 0.0                         # monotonic end of the session; 0 = none
        self.maybe_done = False
        self.lifetime_ms = 0
        self.close_scheduled = False                # failed: closes after the failed-auth delay

    @property
    def in_exchange(self) -> bool:
        return self.inspector is not None or self.server is not None


def _authenticate_response(version: int, error: int, message: str | None, auth_bytes: bytes,
                           lifetime_ms: int = 0) -> bytes:
    cls = response_class(SASL_AUTHENTICATE, version)
    fields: dict[str, Any] = {"error_code": ErrorCode(error), "error_message": message, "auth_bytes": auth_bytes}
    if version >= 1:
        fields["session_lifetime"] = timedelta(milliseconds=lifetime_ms)
    return encode_body(cls(**fields))


def _handshake_response(version: int, error: int, mechanisms: tuple[str, ...]) -> bytes:
    return encode_body(response_class(SASL_HANDSHAKE, version)(error_code=ErrorCode(error), mechanisms=mechanisms))


class SaslClient(Protocol):
    """What a connection's SASL gate uses of its connection."""

    @property
    def peer(self) -> tuple[str, int]: ...

    @property
    def listener(self) -> Any:
        """Its ListenerInfo (listeners.py)."""

    @property
    def transport(self) -> asyncio.Transport | None: ...

    def parse(self, frame: bytes, route: Route, correlation_id: int) -> tuple[str | None, Any] | None:
        """(client id, request) of a request served here; None after refusing it as bad input."""

    def answer(self, data: bytes) -> None: ...

    def forward(self, frame: bytes, pending: Pending | None) -> None: ...

    def stop(self) -> None:
        """Read nothing more; answer what came before, then close."""

    def close_when_answered(self) -> None:
        """Close once every answer queued so far is written."""

    def close(self) -> None: ...

    def principal_changed(self) -> None:
        """The principal changed: the ClientInfo the connection keeps is stale."""


class SaslGate:
    """The SASL side of one client connection on a SASL listener: every request passes
    `intercept` first. It holds the connection's SaslSession."""

    __slots__ = ("session", "_client", "_gateway", "_loop")

    def __init__(self, client: SaslClient, gateway: Any, session: SaslSession,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.session = session
        self._client = client
        self._gateway = gateway
        self._loop = loop

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
            self._succeeded(session, None, None,
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
                                  "correlation_id=%d]", *self._where(), what,
                                  api_name(route.api_key), route.api_version, correlation_id)
        # As a bad frame (badinput.py): what came before is answered, then the connection closes.
        self._client.stop()

    def _expired(self, route: Route, session: SaslSession) -> None:
        log.info("closing connection from %s:%d on %s: its SASL session (%s, %d ms) expired without "
                 "re-authentication; %s v%d refused (Kafka closes an expired connection on its next request)",
                 *self._where(), session.principal or "unknown principal",
                 session.lifetime_ms, api_name(route.api_key), route.api_version)
        session.state = FAILED
        self._client.close()

    def _unknown_principal(self, frame: bytes, route: Route, correlation_id: int, session: SaslSession) -> None:
        if not self._error_answer(frame, route, correlation_id, ErrorCode.group_authorization_failed):
            self._refuse(route, correlation_id, f"{session.mechanism} gives no principal kcoord can read, and "
                              f"{api_name(route.api_key)} has no GROUP_AUTHORIZATION_FAILED answer")

    def _error_answer(self, frame: bytes, route: Route, correlation_id: int, error: ErrorCode) -> bool:
        """Answer a group API with ``error`` (its Kafka error shape); False if it has none."""
        make = ERROR_RESPONSES.get(route.api_key)
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
                self._local_handshake(route, correlation_id, session, mechanism)
                return
            session.mechanism = mechanism
            session.inspector = Inspector(mechanism, session.settings.sub_claim)
            session.maybe_done = False
            if session.state == INITIAL:
                session.state = EXCHANGE
            self._client.forward(frame, MergingPending(correlation_id, route, len(frame), self._merger(
                lambda answer: self._handshake_answered(session, answer), route)))
            return
        # SaslAuthenticate
        if not session.in_exchange:
            if session.state == AUTHENTICATED:
                # Outside a re-authentication: the broker answers ILLEGAL_SASL_STATE, and so
                # does kcoord when it terminates.
                if terminating:
                    answer_not_enabled(self._client, frame, route, correlation_id)
                else:
                    self._client.forward(frame, MergingPending(correlation_id, route, len(frame), _unchanged))
                return
            self._refuse(route, correlation_id, "SaslAuthenticate before SaslHandshake")
            return
        if terminating:
            self._local_authenticate(route, correlation_id, session, bytes(request.auth_bytes))
            return
        inspector = session.inspector
        assert inspector is not None
        inspector.request(bytes(request.auth_bytes))
        session.maybe_done = False
        self._client.forward(frame, MergingPending(correlation_id, route, len(frame), self._merger(
            lambda answer: self._authenticate_answered(session, inspector, answer), route)))

    def _merger(self, on_answer: Callable[[Any], None], route: Route) -> Callable[[bytes], bytes]:
        """forward.MergingPending's hook: read the broker's answer, pass it on unchanged. An
        answer that does not decode raises (forward.py then closes the connection)."""
        api_key, version = route.api_key, route.api_version

        def merge(frame: bytes) -> bytes:
            _, answer = decode_response_frame(api_key, version, frame)
            on_answer(answer)
            return frame
        return merge

    def _handshake_answered(self, session: SaslSession, answer: Any) -> None:
        error = int(answer.error_code)
        if error == 0:
            return
        # UNSUPPORTED_SASL_MECHANISM (the broker closes the connection next), or
        # ILLEGAL_SASL_STATE to a re-authentication the broker does not allow.
        session.inspector = None
        if session.reauth and session.state == AUTHENTICATED:
            return
        auth_metrics.record(session.mechanism, auth_metrics.FAILURE)
        log.info("client %s:%d on %s: SASL handshake refused by the broker (%s, mechanism %s)",
                 *self._where(), ErrorCode(error).name, session.mechanism)
        session.state = FAILED
        self._client.close_when_answered()   # the answer is written, then the connection closes

    def _authenticate_answered(self, session: SaslSession, inspector: Inspector, answer: Any) -> None:
        if session.inspector is not inspector:
            return
        error = int(answer.error_code)
        lifetime = getattr(answer, "session_lifetime", None)
        lifetime_ms = int(lifetime.total_seconds() * 1000) if lifetime is not None else 0
        outcome = inspector.response(error, bytes(answer.auth_bytes))
        if outcome == SUCCESS:
            session.inspector = None
            self._succeeded(session, inspector.name, lifetime_ms, inspector.unknown_reason)
        elif outcome == FAILURE:
            session.inspector = None
            self._failed(session, answer.error_message)
            self._client.close_when_answered()
        elif outcome == MAYBE_DONE:
            session.maybe_done = True
            session.lifetime_ms = lifetime_ms
            if lifetime_ms > 0:
                # Kafka sets SessionLifetimeMs only on the answer that completes the exchange.
                session.inspector = None
                self._succeeded(session, None, lifetime_ms, inspector.unknown_reason)

    # --- outcomes --------------------------------------------------------------------------

    def _succeeded(self, session: SaslSession, name: str | None, lifetime_ms: int | None = None,
                        why_unknown: str = "") -> None:
        mechanism = session.mechanism or "?"
        if lifetime_ms is None:
            lifetime_ms = session.lifetime_ms
        session.inspector = None
        session.server = None
        session.maybe_done = False
        previous = session.principal
        principal = principal_for(name, mechanism, session.settings.principal_template) if name else None
        session.state = AUTHENTICATED
        session.name = name
        session.principal = principal
        session.lifetime_ms = lifetime_ms
        session.deadline = time.monotonic() + lifetime_ms / 1000 if lifetime_ms > 0 else 0.0
        if principal != previous:
            self._client.principal_changed()     # ClientInfo is rebuilt with the new principal
        auth_metrics.record(mechanism, auth_metrics.SUCCESS)
        if principal is None:
            log.info("client %s:%d on %s authenticated with %s%s; principal unknown to kcoord (%s): group APIs "
                     "answer GROUP_AUTHORIZATION_FAILED unless authorizer=none",
                     *self._where(), mechanism,
                     " (re-authentication)" if session.reauth else "", why_unknown or "not readable")
        else:
            log.info("client %s:%d on %s authenticated as %s with %s%s%s", *self._where(),
                     principal, mechanism, " (re-authentication)" if session.reauth else "",
                     f", session lifetime {lifetime_ms} ms" if lifetime_ms else "")
        session.reauth = False

    def _failed(self, session: SaslSession, message: str | None) -> None:
        auth_metrics.record(session.mechanism, auth_metrics.FAILURE)
        session.state = FAILED
        session.inspector = None
        session.server = None
        self._gateway.bad_log.log(logging.WARNING, "client %s:%d on %s failed SASL %s%s: %s", *self._where(),
                                  session.mechanism,
                                  " re-authentication" if session.reauth else "", message or "no message")

    # --- termination -----------------------------------------------------------------------

    def _local_handshake(self, route: Route, correlation_id: int, session: SaslSession, mechanism: str) -> None:
        settings = session.settings
        enabled = settings.mechanisms
        if mechanism not in enabled:
            self._client.answer(response_frame(correlation_id, _handshake_response(
                route.api_version, ErrorCode.unsupported_sasl_mechanism.value, enabled), route.response_header_version))
            session.mechanism = mechanism
            self._failed(session, f"unsupported SASL mechanism {mechanism[:64]!r}")
            self._close_later()
            return
        if session.reauth and mechanism != session.mechanism:
            # Kafka: the mechanism cannot change on re-authentication.
            self._client.answer(response_frame(correlation_id, _handshake_response(
                route.api_version, ErrorCode.unsupported_sasl_mechanism.value, enabled), route.response_header_version))
            self._failed(session, f"re-authentication changes the mechanism from {session.mechanism} "
                                       f"to {mechanism[:64]}")
            self._close_later()
            return
        assert settings.credentials is not None
        session.mechanism = mechanism
        session.server = new_server(mechanism, settings.credentials)
        if session.state == INITIAL:
            session.state = EXCHANGE
        self._client.answer(response_frame(correlation_id, _handshake_response(route.api_version, 0, enabled),
                                           route.response_header_version))

    def _local_authenticate(self, route: Route, correlation_id: int, session: SaslSession,
                                 auth_bytes: bytes) -> None:
        server = session.server
        assert server is not None and session.mechanism is not None
        version = route.api_version
        try:
            challenge = server.evaluate(auth_bytes)
            if server.complete and session.reauth and session.name is not None and server.username != session.name:
                raise AuthenticationFailed(f"Cannot change principals during re-authentication from "
                                           f"{session.principal}: {server.username}")
        except AuthenticationFailed as e:
            message = client_message(e, session.mechanism, session.reauth)
            self._client.answer(response_frame(correlation_id, _authenticate_response(
                version, ErrorCode.sasl_authentication_failed.value, message, b""), route.response_header_version))
            self._failed(session, message if str(e) == message else f"{message} ({e})")
            self._close_later()
            return
        lifetime = session.settings.reauth_ms if server.complete and version >= 1 else 0
        body = _authenticate_response(version, 0, None, challenge, lifetime)
        self._client.answer(response_frame(correlation_id, body, route.response_header_version))
        if server.complete:
            self._succeeded(session, server.username, lifetime)

    def _close_later(self) -> None:
        """After a failed authentication: the answer is written, then the connection closes
        after connection.failed.authentication.delay.ms (Kafka's throttle on guessing)."""
        session = self.session
        delay = session.settings.failed_delay_ms if session is not None else 0
        transport = self._client.transport
        if transport is not None:
            transport.pause_reading()
        if delay <= 0 or session is None:
            self._client.close_when_answered()
            return
        session.close_scheduled = True
        self._loop.call_later(delay / 1000, self._client.close)

    def _where(self) -> tuple[str, int, str]:
        """The peer and listener, for log lines."""
        client = self._client
        peer = client.peer
        return peer[0], peer[1], client.listener.name

    @property
    def principal(self) -> str | None:
        """The principal this connection authenticated as (None: not authenticated, or unknown)."""
        session = self.session
        return session.principal if session.state == AUTHENTICATED else None


def answer_not_enabled(client: Any, frame: bytes, route: Route, correlation_id: int) -> None:
    """SASL on a listener without SASL: Kafka's KafkaApis answers ILLEGAL_SASL_STATE."""
    if client.parse(frame, route, correlation_id) is None:
        return
    if route.api_key == SASL_HANDSHAKE:
        body = _handshake_response(route.api_version, ErrorCode.illegal_sasl_state.value, ())
    else:
        body = _authenticate_response(route.api_version, ErrorCode.illegal_sasl_state.value,
                                      "SaslAuthenticate request received after successful authentication", b"")
    client.answer(response_frame(correlation_id, body, route.response_header_version))


def session_principal(session: SaslSession | None) -> str | None:
    """The principal a connection authenticated as (None: not authenticated, or unknown)."""
    return session.principal if session is not None and session.state == AUTHENTICATED else None


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


def _unchanged(frame: bytes) -> bytes:
    return frame


async def open_as_kcoord(link: asyncio.Protocol, host: str, port: int, security: UpstreamSecurity,
                         timeout: float) -> None:
    """Open a forward link to ``host:port`` authenticated as kcoord: TLS as ``security`` says,
    ApiVersions and the SASL exchange on an UpstreamClient (upstream_client.py, the code
    kcoord's own links use), then the transport is handed to ``link`` (``connection_made``),
    before any client byte is written. Raises ConnectionError (an OSError, which the link
    reports as for a refused connect) naming the broker and the SASL failure."""
    from .upstream_client import UpstreamClient, UpstreamError

    try:
        client = await UpstreamClient.connect([(host, port)], "kcoord-forward", timeout, security=security)
    except UpstreamError as e:
        raise ConnectionError(f"authenticating as kcoord ({security.describe()}): {e}") from None
    transport = client._transport
    if transport is None or client.closed:
        raise ConnectionError(f"{host}:{port} closed the connection after SASL authentication")
    transport.set_protocol(link)
    link.connection_made(transport)
