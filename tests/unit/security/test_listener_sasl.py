"""Per-listener SASL settings (Kafka's `listener.name.<listener>.<setting>`, gateway/sasl.py),
the forward-link credentials of terminated connections (`forward_link_sasl`: fail closed), and
the cli's start checks for them (check_listeners, forward_gate_for)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from coordinator.cli import check_listeners, forward_gate_for
from coordinator.gateway.listeners import BOOTSTRAP, ListenerInfo
from coordinator.gateway.sasl import (
    AUTHENTICATED,
    SaslSession,
    SaslSettings,
    forward_link_opener,
    forward_link_sasl,
)
from coordinator.security.sasl_server import scram_entry
from coordinator.security.settings import SecurityConfigError
from coordinator.security.upstream import UpstreamSecurity
from unit.gateway.test_sasl_connection import AUTH, HS, authenticate, connect, decoded, handshake, make_gateway


@pytest.fixture
def credentials(tmp_path: Path) -> Path:
    path = tmp_path / "creds"
    path.write_text(scram_entry("tess", "tess-pw", "SCRAM-SHA-512", 4096) + "\n")
    return path


def mixed(credentials: Path, **extra: str) -> dict[str, str]:
    """INTERNAL terminates SASL, everything else passes it through."""
    return {"listener.name.internal.sasl.termination": "true",
            "listener.name.internal.sasl.credentials.file": str(credentials),
            "listener.name.internal.sasl.enabled.mechanisms": "PLAIN", **extra}


def test_listener_overrides_win_key_by_key(credentials: Path) -> None:
    settings = SaslSettings.from_settings(mixed(credentials, **{"connections.max.reauth.ms": "5000"}))
    assert settings.termination is False and set(settings.per_listener) == {"INTERNAL"}
    internal = settings.for_listener("internal")
    assert internal.termination and internal.mechanisms == ("PLAIN",) and internal.credentials is not None
    assert internal.reauth_ms == 5000                         # the plain name still applies to INTERNAL
    assert settings.for_listener("EXTERNAL") is settings and settings.for_listener(None) is settings
    assert settings.terminates_anywhere
    assert settings.passes_through(["INTERNAL", "EXTERNAL"]) and not settings.passes_through(["INTERNAL"])


def test_a_bad_override_names_the_listener() -> None:
    with pytest.raises(ValueError, match=r"listener INTERNAL \(listener.name.internal.\*\).*sasl.credentials.file"):
        SaslSettings.from_settings({"listener.name.internal.sasl.termination": "true"})


async def test_each_listener_answers_with_its_own_settings(credentials: Path) -> None:
    """The same gateway: INTERNAL answers SaslHandshake itself, EXTERNAL forwards it to the broker."""
    settings = replace(SaslSettings.from_settings(mixed(credentials)), default_on=True)
    settings = replace(settings, per_listener={k: replace(v, default_on=True, failed_delay_ms=0)
                                               for k, v in settings.per_listener.items()})
    gateway = make_gateway(settings)
    internal = ListenerInfo(BOOTSTRAP, "127.0.0.1", 0, None, (("127.0.0.1", 1),), listener="INTERNAL",
                            security_protocol="SASL_PLAINTEXT")
    external = replace(internal, listener="EXTERNAL")
    connection, transport, link = connect(gateway, internal)
    connection.data_received(handshake(1, "PLAIN") + authenticate(2, b"\x00tess\x00tess-pw"))
    assert decoded(transport, HS, 1, 0).mechanisms == ("PLAIN",)
    assert decoded(transport, AUTH, 2, 1).error_code == ErrorCode.none
    assert connection.sasl_principal == "User:tess" and link.sent == []
    connection, transport, link = connect(gateway, external)
    connection.data_received(handshake(1, "PLAIN"))
    assert transport.frames() == [] and len(link.sent) == 1     # passed through, the broker answers


class _Conn:
    """Just what forward_link_sasl reads."""

    def __init__(self, gateway: Any, session: SaslSession | None, listener: Any = None) -> None:
        self._gateway, self._sasl, self._listener = gateway, session, listener

    @property
    def forward_link_sasl(self) -> Any:
        return forward_link_sasl(self._gateway, self._listener, self._sasl)

    @property
    def forward_link_opener(self) -> Any:
        return forward_link_opener(self.forward_link_sasl)


class _Gateway:
    def __init__(self, security: UpstreamSecurity | None, gate: object | None) -> None:
        self.upstream_security, self.forward_gate = security, gate


SASL_UPSTREAM = UpstreamSecurity.from_settings({"upstream.security.protocol": "SASL_PLAINTEXT",
                                                "upstream.sasl.mechanism": "PLAIN", "upstream.sasl.username": "kc",
                                                "upstream.sasl.password": "pw"})


def _session(settings: SaslSettings, authenticated: bool = True) -> SaslSession:
    session = SaslSession(settings)
    if authenticated:
        session.state = AUTHENTICATED
    return session


def test_forward_links_authenticate_as_kcoord_only_when_kcoord_authorizes(credentials: Path) -> None:
    terminated = SaslSettings.from_settings({"sasl.termination": "true", "sasl.credentials.file": str(credentials)})
    gate = object()
    assert _Conn(_Gateway(SASL_UPSTREAM, gate), _session(terminated)).forward_link_sasl is SASL_UPSTREAM
    assert _Conn(_Gateway(SASL_UPSTREAM, gate), _session(terminated)).forward_link_opener is not None
    # Fail closed: no gate (and not authorizer=none), not yet authenticated, or passthrough.
    assert _Conn(_Gateway(SASL_UPSTREAM, None), _session(terminated)).forward_link_sasl is None
    assert _Conn(_Gateway(SASL_UPSTREAM, gate), _session(terminated, False)).forward_link_sasl is None
    assert _Conn(_Gateway(SASL_UPSTREAM, gate), _session(SaslSettings())).forward_link_sasl is None
    # authorizer=none is the operator's explicit choice (check_listeners warned).
    opted = replace(terminated, allow_unknown_principal=True)
    assert _Conn(_Gateway(SASL_UPSTREAM, None), _session(opted)).forward_link_sasl is SASL_UPSTREAM
    # An upstream without SASL: nothing to authenticate.
    plain = UpstreamSecurity.from_settings({"upstream.security.protocol": "SSL"})
    assert _Conn(_Gateway(plain, gate), _session(terminated)).forward_link_sasl is None
    assert _Conn(_Gateway(None, gate), _session(terminated)).forward_link_sasl is None


def test_mtls_clients_forward_links_authenticate_as_kcoord() -> None:
    class Security:
        mtls_principal = True

    listener = type("L", (), {"security": Security()})()
    assert _Conn(_Gateway(SASL_UPSTREAM, object()), None, listener).forward_link_sasl is SASL_UPSTREAM
    assert _Conn(_Gateway(SASL_UPSTREAM, None), None, listener).forward_link_sasl is None
    assert _Conn(_Gateway(SASL_UPSTREAM, object()), None, None).forward_link_sasl is None   # PLAINTEXT


LISTEN = ["INTERNAL://:9092", "EXTERNAL://:9093"]
MAP = {"listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT,EXTERNAL:SASL_PLAINTEXT"}


def test_forward_gate_follows_per_listener_termination(credentials: Path) -> None:
    authorizer = object()
    assert forward_gate_for(authorizer, {**MAP, "authorizer": "file"}, LISTEN) is None      # passthrough only
    gate = forward_gate_for(authorizer, {**MAP, **mixed(credentials), "authorizer": "file"}, LISTEN)
    assert gate is not None and gate.authorizer is authorizer
    with pytest.raises(SecurityConfigError, match="authorizer=probe"):
        forward_gate_for(authorizer, {**MAP, **mixed(credentials), "authorizer": "probe"}, LISTEN)


def test_overrides_for_an_unknown_listener_are_refused(credentials: Path) -> None:
    settings = {**MAP, "authorizer": "file", "listener.name.intrnal.sasl.termination": "true"}
    with pytest.raises(SecurityConfigError, match=r"listener.name.intrnal.sasl.\*: no listener is named 'intrnal'"):
        check_listeners(LISTEN, settings)
    assert check_listeners(LISTEN, {**MAP, **mixed(credentials), "authorizer": "file"}) == []
    plain = {"listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT", "authorizer": "file"}
    with pytest.raises(SecurityConfigError, match="listener INTERNAL is PLAINTEXT, which does not authenticate"):
        check_listeners(LISTEN, {**plain, **mixed(credentials)})
