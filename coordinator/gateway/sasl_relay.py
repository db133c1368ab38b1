"""SASL passthrough (sasl.py's part): SaslHandshake and SaslAuthenticate go upstream on the
client's own link, byte for byte, so the broker authenticates; kcoord reads both sides.

Rules:
- the client's tokens are read by security/sasl_inspect.py, the broker's answers through
  forward.MergingPending (each answer is handed here before the client gets it, unchanged);
  an answer that does not decode closes the connection (forward.py);
- the principal is recorded only once the broker answered the exchange with success; a
  failure is counted and the connection closes once the answer is written (the broker's own
  failed-authentication delay applies);
- a mechanism whose end kcoord cannot see in its bytes (MAYBE_DONE) completes when the
  client sends another kind of request (SaslGate.intercept), or at once when the broker
  gave a session lifetime (Kafka sets it only on the answer that completes the exchange).
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from ..protocol.codec import decode_response_frame
from ..security import auth_metrics
from ..security.sasl_inspect import FAILURE, MAYBE_DONE, SUCCESS, Inspector
from .forward import MergingPending
from .routes import Route
from .sasl_session import AUTHENTICATED, EXCHANGE, FAILED, INITIAL, ExchangeOutcome, SaslClient, SaslSession

log = logging.getLogger("kcoord.gateway.sasl")


class SaslRelay:
    __slots__ = ("_client", "_outcome")

    def __init__(self, client: SaslClient, outcome: ExchangeOutcome) -> None:
        self._client = client
        self._outcome = outcome

    def handshake(self, frame: bytes, route: Route, correlation_id: int, session: SaslSession,
                  mechanism: str) -> None:
        session.mechanism = mechanism
        session.inspector = Inspector(mechanism, session.settings.sub_claim)
        session.maybe_done = False
        if session.state == INITIAL:
            session.state = EXCHANGE
        self._client.forward(frame, MergingPending(correlation_id, route, len(frame), self._merger(
            lambda answer: self._handshake_answered(session, answer), route)))

    def authenticate(self, frame: bytes, route: Route, correlation_id: int, session: SaslSession,
                     auth_bytes: bytes) -> None:
        inspector = session.inspector
        assert inspector is not None
        inspector.request(auth_bytes)
        session.maybe_done = False
        self._client.forward(frame, MergingPending(correlation_id, route, len(frame), self._merger(
            lambda answer: self._authenticate_answered(session, inspector, answer), route)))

    def relay_unchanged(self, frame: bytes, route: Route, correlation_id: int) -> None:
        """A SaslAuthenticate outside an exchange: the broker answers it (ILLEGAL_SASL_STATE)."""
        self._client.forward(frame, MergingPending(correlation_id, route, len(frame), _unchanged))

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
                 *self._outcome.where(), ErrorCode(error).name, session.mechanism)
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
            self._outcome.succeeded(session, inspector.name, lifetime_ms, inspector.unknown_reason)
        elif outcome == FAILURE:
            session.inspector = None
            self._outcome.failed(session, answer.error_message)
            self._client.close_when_answered()
        elif outcome == MAYBE_DONE:
            session.maybe_done = True
            session.lifetime_ms = lifetime_ms
            if lifetime_ms > 0:
                # Kafka sets SessionLifetimeMs only on the answer that completes the exchange.
                session.inspector = None
                self._outcome.succeeded(session, None, lifetime_ms, inspector.unknown_reason)

    # --- outcomes --------------------------------------------------------------------------


def _unchanged(frame: bytes) -> bytes:
    return frame
