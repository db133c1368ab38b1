"""The SASL state of one client connection (sasl.py's part) and how an exchange ends.

Rules:
- a session moves INITIAL -> EXCHANGE (a SaslHandshake) -> AUTHENTICATED or FAILED; a
  SaslHandshake after authentication re-authenticates (KIP-368) and keeps AUTHENTICATED;
- the principal is recorded only when the exchange ended in success (kcoord's own verdict
  when it terminates, the broker's answer in passthrough); a changed principal tells the
  connection, whose cached ClientInfo is then stale;
- every ending is counted (`kcoord_client_auth_total` by mechanism and outcome)
  and logged naming the peer and listener; failures through the rate-limited bad-input log.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Protocol

from ..security import auth_metrics
from ..security.sasl_inspect import Inspector, principal_for
from ..security.sasl_server import SaslServer

if TYPE_CHECKING:
    from .forward import Pending
    from .ratelog import RateLimitedLog
    from .routes import Route
    from .sasl_settings import SaslSettings

log = logging.getLogger("kcoord.gateway.sasl")

INITIAL = 0          # nothing but ApiVersions yet
EXCHANGE = 1         # a SaslHandshake was sent; SaslAuthenticate rounds follow
AUTHENTICATED = 2
FAILED = 3


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


def session_principal(session: SaslSession | None) -> str | None:
    """The principal a connection authenticated as (None: not authenticated, or unknown)."""
    return session.principal if session is not None and session.state == AUTHENTICATED else None


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


class ExchangeOutcome:
    """Records how a connection's SASL exchange ended, on its session."""

    __slots__ = ("_client", "_bad_log")

    def __init__(self, client: SaslClient, bad_log: RateLimitedLog) -> None:
        self._client = client
        self._bad_log = bad_log

    def succeeded(self, session: SaslSession, name: str | None, lifetime_ms: int | None = None,
                  why_unknown: str = "") -> None:
        """The exchange ended in success: the session is AUTHENTICATED as ``name``'s principal."""
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
                     *self.where(), mechanism,
                     " (re-authentication)" if session.reauth else "", why_unknown or "not readable")
        else:
            log.info("client %s:%d on %s authenticated as %s with %s%s%s", *self.where(),
                     principal, mechanism, " (re-authentication)" if session.reauth else "",
                     f", session lifetime {lifetime_ms} ms" if lifetime_ms else "")
        session.reauth = False

    def failed(self, session: SaslSession, message: str | None) -> None:
        """The exchange failed: counted and logged (rate-limited); closing is the caller's."""
        auth_metrics.record(session.mechanism, auth_metrics.FAILURE)
        session.state = FAILED
        session.inspector = None
        session.server = None
        self._bad_log.log(logging.WARNING, "client %s:%d on %s failed SASL %s%s: %s", *self.where(),
                                  session.mechanism,
                                  " re-authentication" if session.reauth else "", message or "no message")

    # --- termination -----------------------------------------------------------------------

    def where(self) -> tuple[str, int, str]:
        """The peer and listener, for log lines."""
        client = self._client
        peer = client.peer
        return peer[0], peer[1], client.listener.name
