"""Listener TLS settings (security/tls.py), listener syntax (gateway/listeners.py) and the
fail-closed start rule (cli.check_listeners)."""
from __future__ import annotations

import logging
import os
import ssl
from pathlib import Path

import pytest

from coordinator.cli import FailClosed, check_listeners
from coordinator.gateway.listeners import (
    ListenerInfo,
    ListenerSpec,
    parse_advertised_hosts,
    parse_listener_specs,
    parse_protocol_map,
)
from coordinator.security.tls import (
    ListenerSecurity,
    ServerTls,
    ServerTlsConfig,
    TlsConfigError,
    check_server_ssl_names,
    listener_settings,
)
from support.tls_certs import TestCA


@pytest.fixture
def keystore(tmp_path: Path) -> Path:
    TestCA().keystore(tmp_path / "server.pem")
    return tmp_path / "server.pem"


# --- listener syntax --------------------------------------------------------------------


def test_listener_specs_in_kafkas_syntax() -> None:
    assert parse_listener_specs("127.0.0.1:9092") == (ListenerSpec("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092),)
    assert parse_listener_specs(["SSL://:9093", "sasl_ssl://0.0.0.0:9094"]) == (
        ListenerSpec("SSL", "SSL", "0.0.0.0", 9093), ListenerSpec("SASL_SSL", "SASL_SSL", "0.0.0.0", 9094))
    mapping = parse_protocol_map("INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL")
    assert parse_listener_specs("INTERNAL://:9092,EXTERNAL://[::1]:9093", mapping) == (
        ListenerSpec("INTERNAL", "PLAINTEXT", "0.0.0.0", 9092), ListenerSpec("EXTERNAL", "SASL_SSL", "::1", 9093))
    assert parse_listener_specs(("127.0.0.1", 0)) == (ListenerSpec("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 0),)


@pytest.mark.parametrize(("value", "mapping", "error"), [
    ("BOGUS://:9092", None, "neither a security protocol"),
    ("SSL://:9092,SSL://:9093", None, "given twice"),
    ("SSL://nohostport", None, "not host:port"),
])
def test_bad_listeners(value: str, mapping: str | None, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_listener_specs(value, parse_protocol_map(mapping))


def test_bad_protocol_map() -> None:
    with pytest.raises(ValueError, match="NAME:PROTOCOL"):
        parse_protocol_map("INTERNAL:TLS")


def test_advertised_hosts() -> None:
    assert parse_advertised_hosts("kc.example") == ("kc.example", {})
    assert parse_advertised_hosts("internal=kc.svc,EXTERNAL=kc.example") == (
        None, {"INTERNAL": "kc.svc", "EXTERNAL": "kc.example"})


def test_plaintext_listener_has_no_principal() -> None:
    info = ListenerInfo("bootstrap", "h", 1, None, ())
    assert info.security_protocol == "PLAINTEXT" and info.principal_of(object()) is None


# --- TLS settings -----------------------------------------------------------------------


def test_per_listener_settings_win_key_by_key() -> None:
    settings = {"ssl.keystore.location": "a.pem", "ssl.client.auth": "none",
                "listener.name.external.ssl.client.auth": "required", "listener.name.internal.ssl.client.auth": "x"}
    assert listener_settings(settings, "EXTERNAL") == {"ssl.keystore.location": "a.pem", "ssl.client.auth": "required"}


@pytest.mark.parametrize(("settings", "error"), [
    ({"ssl.keystore.locaton": "x"}, "unknown listener TLS setting"),
    ({"ssl.keystore.key": "x"}, "inline PEM is not read"),
    ({"listener.name.nope.ssl.keystore.location": "x"}, "no listener is named 'nope'"),
])
def test_misspelt_or_unsupported_names_are_refused(settings: dict[str, str], error: str) -> None:
    with pytest.raises(TlsConfigError, match=error):
        check_server_ssl_names(settings, ["SSL"])


def test_keystore_required_and_pem_only(keystore: Path) -> None:
    with pytest.raises(TlsConfigError, match="ssl.keystore.location"):
        ListenerSecurity.from_settings("SSL", "SSL", {})
    with pytest.raises(TlsConfigError, match="keytool -importkeystore"):
        ListenerSecurity.from_settings("SSL", "SSL", {"ssl.keystore.location": str(keystore),
                                                      "ssl.keystore.type": "JKS"})
    security = ListenerSecurity.from_settings("SSL", "SSL", {"ssl.keystore.location": str(keystore)})
    assert security.tls is not None and security.tls.context.verify_mode == ssl.CERT_NONE
    assert ListenerSecurity.from_settings("P", "PLAINTEXT", {}).tls is None


def test_encrypted_key_needs_its_password(tmp_path: Path) -> None:
    path = tmp_path / "enc.pem"
    TestCA().keystore(path, password=b"pw")
    ServerTls(ServerTlsConfig("SSL", path, key_password="pw"))
    with pytest.raises(TlsConfigError, match=str(path)):
        ServerTls(ServerTlsConfig("SSL", path, key_password="wrong"))


def test_client_auth_and_protocols(keystore: Path, tmp_path: Path) -> None:
    ca = TestCA().write_ca(tmp_path / "ca.pem")
    settings = {"ssl.keystore.location": str(keystore), "ssl.truststore.location": str(ca),
                "ssl.client.auth": "requested", "ssl.enabled.protocols": "TLSv1.3"}
    tls = ListenerSecurity.from_settings("SSL", "SSL", settings).tls
    assert tls is not None
    assert tls.context.verify_mode == ssl.CERT_OPTIONAL
    assert tls.context.minimum_version == ssl.TLSVersion.TLSv1_3
    with pytest.raises(TlsConfigError, match="ssl.client.auth"):
        ListenerSecurity.from_settings("SSL", "SSL", {**settings, "ssl.client.auth": "always"})
    with pytest.raises(TlsConfigError, match="TLSv1.1"):
        ListenerSecurity.from_settings("SSL", "SSL", {**settings, "ssl.enabled.protocols": "TLSv1.1"})
    with pytest.raises(TlsConfigError, match="ssl.cipher.suites"):
        ListenerSecurity.from_settings("SSL", "SSL", {**settings, "ssl.cipher.suites": "NOT-A-CIPHER"})
    with pytest.raises(TlsConfigError, match="mapping.rules"):
        ListenerSecurity.from_settings("SSL", "SSL", {**settings, "ssl.principal.mapping.rules": "default"})


def test_reload_swaps_on_change_and_keeps_the_old_context_on_a_broken_file(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ca = TestCA()
    path = tmp_path / "server.pem"
    ca.keystore(path)
    tls = ServerTls(ServerTlsConfig("SSL", path))
    first = tls.context
    assert tls.poll() is False and tls.context is first          # unchanged files: nothing read
    ca.keystore(tmp_path / "next.pem")
    os.replace(tmp_path / "next.pem", path)
    assert tls.poll() is True and tls.context is not first
    second = tls.context
    path.write_text("garbage")
    with caplog.at_level(logging.ERROR, "kcoord.security.tls"):
        assert tls.poll() is False
        assert tls.poll() is False                               # logged once per change
    assert tls.context is second and tls.reload_failures == 1
    [record] = [r for r in caplog.records if "TLS reload failed" in r.getMessage()]
    assert str(path) in record.getMessage()


# --- fail closed --------------------------------------------------------------------------


@pytest.mark.parametrize(("listen", "extra", "listener"), [
    ("SASL_SSL://:9092", {}, "SASL_SSL"),
    ("SASL_PLAINTEXT://:9092", {}, "SASL_PLAINTEXT"),
    ("SSL://:9092", {"ssl.client.auth": "required"}, "SSL"),
    ("INTERNAL://:9092,EXTERNAL://:9093", {"listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SSL",
                                           "listener.name.external.ssl.client.auth": "required"}, "EXTERNAL"),
])
def test_fail_closed_without_an_authorizer(keystore: Path, listen: str, extra: dict[str, str],
                                           listener: str) -> None:
    settings = {"ssl.keystore.location": str(keystore), **extra}
    with pytest.raises(FailClosed, match=f"listener {listener} .*authorizer"):
        check_listeners([listen], settings)
    warnings = check_listeners([listen], {**settings, "authorizer": "none"})
    assert any(listener in w and "authorizer=none" in w for w in warnings)
    assert check_listeners([listen], {**settings, "authorizer": "upstream"}) == []


def test_ssl_without_client_auth_starts_without_an_authorizer(keystore: Path) -> None:
    assert check_listeners(["SSL://:9092", "127.0.0.1:9093"],
                           {"ssl.keystore.location": str(keystore), "ssl.client.auth": "none"}) == []


def test_requested_client_auth_authenticates_so_it_needs_an_authorizer(keystore: Path) -> None:
    """A client that presents a certificate gets its principal: the listener authenticates."""
    with pytest.raises(FailClosed, match="ssl.client.auth=requested"):
        check_listeners(["SSL://:9092"], {"ssl.keystore.location": str(keystore), "ssl.client.auth": "requested"})
