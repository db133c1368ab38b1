"""SASL termination (sasl.py's part, `sasl.termination=true`): kcoord answers SaslHandshake
and SaslAuthenticate itself against the credential file (security/sasl_server.py).

Rules, as Kafka's SaslServerAuthenticator:
- a mechanism not in `sasl.enabled.mechanisms` gets UNSUPPORTED_SASL_MECHANISM with the
  enabled list;
- re-authentication (KIP-368) may change neither the mechanism nor the user;
- a failed exchange is answered (SASL_AUTHENTICATION_FAILED with Kafka's message), reading
  stops, and the connection closes after `connection.failed.authentication.delay.ms`;
- SessionLifetimeMs is `connections.max.reauth.ms` on the answer that completes the exchange
  (SaslAuthenticate v1+), 0 otherwise.
SASL on a listener without it is answered ILLEGAL_SASL_STATE (`answer_not_enabled`), as
Kafka's KafkaApis does.
"""
from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from ..protocol.apis import SASL_AUTHENTICATE, SASL_HANDSHAKE, response_class
from ..protocol.codec import encode_body
from ..protocol.framing import response_frame
from ..security.sasl_server import AuthenticationFailed, client_message, new_server
from .routes import Route
from .sasl_session import EXCHANGE, INITIAL, ExchangeOutcome, SaslClient, SaslSession


def _authenticate_response(version: int, error: int, message: str | None, auth_bytes: bytes,
                           lifetime_ms: int = 0) -> bytes:
    cls = response_class(SASL_AUTHENTICATE, version)
    fields: dict[str, Any] = {"error_code": ErrorCode(error), "error_message": message, "auth_bytes": auth_bytes}
    if version >= 1:
        fields["session_lifetime"] = timedelta(milliseconds=lifetime_ms)
    return encode_body(cls(**fields))


def _handshake_response(version: int, error: int, mechanisms: tuple[str, ...]) -> bytes:
    return encode_body(response_class(SASL_HANDSHAKE, version)(error_code=ErrorCode(error), mechanisms=mechanisms))


class SaslTermination:
    __slots__ = ("_client", "_outcome", "_loop")

    def __init__(self, client: SaslClient, outcome: ExchangeOutcome, loop: asyncio.AbstractEventLoop) -> None:
        self._client = client
        self._outcome = outcome
        self._loop = loop

    def handshake(self, route: Route, correlation_id: int, session: SaslSession, mechanism: str) -> None:
        settings = session.settings
        enabled = settings.mechanisms
        if mechanism not in enabled:
            self._client.answer(response_frame(correlation_id, _handshake_response(
                route.api_version, ErrorCode.unsupported_sasl_mechanism.value, enabled), route.response_header_version))
            session.mechanism = mechanism
            self._outcome.failed(session, f"unsupported SASL mechanism {mechanism[:64]!r}")
            self._close_later(session)
            return
        if session.reauth and mechanism != session.mechanism:
            # Kafka: the mechanism cannot change on re-authentication.
            self._client.answer(response_frame(correlation_id, _handshake_response(
                route.api_version, ErrorCode.unsupported_sasl_mechanism.value, enabled), route.response_header_version))
            self._outcome.failed(session, f"re-authentication changes the mechanism from {session.mechanism} "
                                       f"to {mechanism[:64]}")
            self._close_later(session)
            return
        assert settings.credentials is not None
        session.mechanism = mechanism
        session.server = new_server(mechanism, settings.credentials)
        if session.state == INITIAL:
            session.state = EXCHANGE
        self._client.answer(response_frame(correlation_id, _handshake_response(route.api_version, 0, enabled),
                                           route.response_header_version))

    def authenticate(self, route: Route, correlation_id: int, session: SaslSession, auth_bytes: bytes) -> None:
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
            self._outcome.failed(session, message if str(e) == message else f"{message} ({e})")
            self._close_later(session)
            return
        lifetime = session.settings.reauth_ms if server.complete and version >= 1 else 0
        body = _authenticate_response(version, 0, None, challenge, lifetime)
        self._client.answer(response_frame(correlation_id, body, route.response_header_version))
        if server.complete:
            self._outcome.succeeded(session, server.username, lifetime)

    def _close_later(self, session: SaslSession) -> None:
        """After a failed authentication: the answer is written, then the connection closes
        after connection.failed.authentication.delay.ms (Kafka's throttle on guessing)."""
        delay = session.settings.failed_delay_ms
        transport = self._client.transport
        if transport is not None:
            transport.pause_reading()
        if delay <= 0:
            self._client.close_when_answered()
            return
        session.close_scheduled = True
        self._loop.call_later(delay / 1000, self._client.close)


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
