"""PKCS#12 keystores and truststores (security/keystores.py) on a listener (security/tls.py)
and on kcoord's upstream links (security/upstream.py): a good store loads and serves a TLS
handshake, a wrong password and a corrupt file fail naming the setting, JKS is refused with
the keytool command, passwords come from .file/.env, and reload re-reads a changed store."""
from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import threading
from pathlib import Path

import pytest

from coordinator.security.settings import resolve
from coordinator.security.tls import ListenerSecurity, ServerTls, ServerTlsConfig, TlsConfigError
from coordinator.security.upstream import UpstreamSecurity
from support.tls_certs import TestCA


def _pkcs12_listener(path: Path, **extra: str) -> dict[str, str]:
    return {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(path), **extra}


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> tuple[dict, dict | None]:
    """One TLS handshake over a socket pair: (the certificate the client saw, the client
    certificate the server saw, or None). A server-side failure is raised (with TLS 1.3 the
    client's side completes before the server has checked the client's certificate)."""
    a, b = socket.socketpair()
    seen: dict[str, object] = {}

    def serve() -> None:
        try:
            with server.wrap_socket(a, server_side=True) as s:
                seen["peer"] = s.getpeercert()
        except (ssl.SSLError, OSError) as e:
            seen["error"] = e

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client.wrap_socket(b, server_hostname="localhost") as c:
            cert = c.getpeercert()
    finally:
        thread.join(10)
    assert not thread.is_alive()
    if "error" in seen:
        raise seen["error"]  # type: ignore[misc]
    return cert, seen.get("peer") or None  # type: ignore[return-value]


def _subject_cn(cert: dict) -> str:
    return next(v for rdn in cert["subject"] for k, v in rdn if k == "commonName")


def test_pkcs12_keystore_serves_its_certificate(tmp_path: Path) -> None:
    ca = TestCA()
    store = tmp_path / "server.p12"
    ca.pkcs12_keystore(store, "localhost", password=b"s3cret")
    security = ListenerSecurity.from_settings("SSL", "SSL",
                                              _pkcs12_listener(store, **{"ssl.keystore.password": "s3cret"}))
    assert security.tls is not None
    client = ssl.create_default_context(cadata=ca.pem.decode())
    cert, _ = _handshake(security.tls.context, client)
    assert _subject_cn(cert) == "localhost"


def test_pkcs12_truststore_checks_client_certificates(tmp_path: Path) -> None:
    ca, other = TestCA(), TestCA("another CA")
    store, trust = tmp_path / "server.p12", ca.pkcs12_truststore(tmp_path / "trust.p12", b"tpw")
    ca.pkcs12_keystore(store, password=b"pw")
    settings = _pkcs12_listener(store, **{"ssl.keystore.password": "pw", "ssl.truststore.type": "PKCS12",
                                          "ssl.truststore.location": str(trust), "ssl.truststore.password": "tpw",
                                          "ssl.client.auth": "required"})
    tls = ListenerSecurity.from_settings("SSL", "SSL", settings).tls
    assert tls is not None
    for issuer, accepted in ((ca, True), (other, False)):
        key, cert, _ = issuer.client_files(tmp_path, "alice", stem=f"c{accepted}")
        client = ssl.create_default_context(cadata=ca.pem.decode())
        client.load_cert_chain(cert, key)
        if accepted:
            _, peer = _handshake(tls.context, client)
            assert peer is not None and _subject_cn(peer) == "alice"
        else:
            with pytest.raises(ssl.SSLCertVerificationError):
                _handshake(tls.context, client)


def test_wrong_password_names_the_setting(tmp_path: Path) -> None:
    store = tmp_path / "server.p12"
    TestCA().pkcs12_keystore(store, password=b"right")
    with pytest.raises(TlsConfigError, match=r"ssl\.keystore\.password does not open the store") as e:
        ListenerSecurity.from_settings("EXTERNAL", "SSL", _pkcs12_listener(store, **{"ssl.keystore.password": "no"}))
    assert str(store) in str(e.value) and "listener EXTERNAL" in str(e.value)
    with pytest.raises(TlsConfigError, match=r"password-protected; set ssl\.keystore\.password"):
        ListenerSecurity.from_settings("EXTERNAL", "SSL", _pkcs12_listener(store))
    # keytool's PKCS12 has one password; ssl.key.password is tried when the store's fails.
    tls = ListenerSecurity.from_settings("SSL", "SSL", _pkcs12_listener(
        store, **{"ssl.keystore.password": "no", "ssl.key.password": "right"})).tls
    assert tls is not None


def test_truststore_wrong_password_names_its_setting(tmp_path: Path) -> None:
    ca = TestCA()
    store, trust = tmp_path / "server.p12", ca.pkcs12_truststore(tmp_path / "trust.p12", b"tpw")
    ca.pkcs12_keystore(store, password=None)
    with pytest.raises(TlsConfigError, match=r"ssl\.truststore\.location .*ssl\.truststore\.password does not open"):
        ListenerSecurity.from_settings("SSL", "SSL", _pkcs12_listener(
            store, **{"ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(trust),
                      "ssl.truststore.password": "bad", "ssl.client.auth": "required"}))


def test_corrupt_and_misfiled_stores_name_the_setting(tmp_path: Path) -> None:
    ca = TestCA()
    good = tmp_path / "server.p12"
    ca.pkcs12_keystore(good, password=b"pw")
    corrupt = tmp_path / "corrupt.p12"
    corrupt.write_bytes(good.read_bytes()[:200])
    with pytest.raises(TlsConfigError, match=r"ssl\.keystore\.location .*corrupt\.p12: not a readable PKCS#12"):
        ListenerSecurity.from_settings("SSL", "SSL", _pkcs12_listener(corrupt, **{"ssl.keystore.password": "pw"}))
    pem = tmp_path / "server.pem"
    ca.keystore(pem)
    with pytest.raises(TlsConfigError, match="a PEM file needs the type PEM"):
        ListenerSecurity.from_settings("SSL", "SSL", _pkcs12_listener(pem, **{"ssl.keystore.password": "pw"}))
    trust = ca.pkcs12_truststore(tmp_path / "trust.p12", b"pw")
    with pytest.raises(TlsConfigError, match="no private key"):
        ListenerSecurity.from_settings("SSL", "SSL", _pkcs12_listener(trust, **{"ssl.keystore.password": "pw"}))
    with pytest.raises(TlsConfigError, match="cannot read the file"):
        ListenerSecurity.from_settings("SSL", "SSL", _pkcs12_listener(tmp_path / "missing.p12"))


def test_jks_is_refused_with_the_conversion_command(tmp_path: Path) -> None:
    with pytest.raises(TlsConfigError, match=r"ssl\.keystore\.type.*keytool -importkeystore -srckeystore "
                                             r"/etc/kafka/server\.jks .*-deststoretype PKCS12"):
        ListenerSecurity.from_settings("SSL", "SSL", {"ssl.keystore.type": "JKS",
                                                      "ssl.keystore.location": "/etc/kafka/server.jks"})
    with pytest.raises(TlsConfigError, match=r"ssl\.truststore\.type"):
        ListenerSecurity.from_settings("SSL", "SSL", {"ssl.keystore.location": "x.pem", "ssl.truststore.type": "jks"})
    with pytest.raises(TlsConfigError, match="a PEM store has no password"):
        ListenerSecurity.from_settings("SSL", "SSL", {"ssl.keystore.location": "x.pem", "ssl.keystore.password": "p"})


@pytest.mark.skipif(shutil.which("keytool") is None, reason="keytool (a JDK) not on PATH")
def test_a_real_jks_file_named_pkcs12_is_recognised(tmp_path: Path) -> None:
    jks = tmp_path / "server.jks"
    subprocess.run(["keytool", "-genkeypair", "-alias", "k", "-keyalg", "EC", "-dname", "CN=localhost",
                    "-keystore", str(jks), "-storetype", "JKS", "-storepass", "changeit", "-keypass", "changeit"],
                   check=True, capture_output=True)
    with pytest.raises(TlsConfigError, match=r"is a JKS keystore.*keytool -importkeystore"):
        ListenerSecurity.from_settings("SSL", "SSL", _pkcs12_listener(jks, **{"ssl.keystore.password": "changeit"}))


@pytest.mark.skipif(shutil.which("keytool") is None, reason="keytool (a JDK) not on PATH")
def test_a_keytool_made_pkcs12_truststore_loads(tmp_path: Path) -> None:
    ca = TestCA()
    ca_pem, trust, store = ca.write_ca(tmp_path / "ca.pem"), tmp_path / "trust.p12", tmp_path / "server.p12"
    subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", str(ca_pem), "-keystore",
                    str(trust), "-storetype", "PKCS12", "-storepass", "changeit"], check=True, capture_output=True)
    ca.pkcs12_keystore(store, password=b"pw")
    tls = ListenerSecurity.from_settings("SSL", "SSL", _pkcs12_listener(
        store, **{"ssl.keystore.password": "pw", "ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(trust),
                  "ssl.truststore.password": "changeit", "ssl.client.auth": "required"})).tls
    assert tls is not None and tls.context.cert_store_stats()["x509_ca"] == 1


def test_passwords_from_file_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "server.p12"
    TestCA().pkcs12_keystore(store, password=b"from-file")
    (tmp_path / "pw").write_text("from-file\n")
    settings = resolve([("listener.name.external.ssl.keystore.type", "PKCS12"),
                        ("listener.name.external.ssl.keystore.location", str(store)),
                        ("listener.name.external.ssl.keystore.password.file", str(tmp_path / "pw"))])
    assert ListenerSecurity.from_settings("EXTERNAL", "SSL", settings).tls is not None
    monkeypatch.setenv("KCOORD_TEST_KS_PW", "from-file")
    settings = resolve([("ssl.keystore.type", "PKCS12"), ("ssl.keystore.location", str(store)),
                        ("ssl.keystore.password.env", "KCOORD_TEST_KS_PW")])
    assert ListenerSecurity.from_settings("SSL", "SSL", settings).tls is not None


def test_reload_reads_a_replaced_pkcs12_store(tmp_path: Path) -> None:
    ca = TestCA()
    store = tmp_path / "server.p12"
    ca.pkcs12_keystore(store, "localhost", password=b"pw")
    tls = ServerTls(ServerTlsConfig("SSL", store, keystore_type="PKCS12", keystore_password="pw"))
    first = tls.context
    ca.pkcs12_keystore(tmp_path / "next.p12", "127.0.0.1", sans=("127.0.0.1",), password=b"pw")
    os.replace(tmp_path / "next.p12", store)
    assert tls.poll() is True and tls.context is not first
    cert, _ = _handshake(tls.context, _no_hostname_client(ca))
    assert _subject_cn(cert) == "127.0.0.1"
    store.write_bytes(b"garbage")                       # a broken store keeps the previous context
    second = tls.context
    assert tls.poll() is False and tls.context is second and tls.reload_failures == 1


def _no_hostname_client(ca: TestCA) -> ssl.SSLContext:
    client = ssl.create_default_context(cadata=ca.pem.decode())
    client.check_hostname = False
    return client


def test_the_plaintext_key_never_reaches_the_temp_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without memfd the key goes through a 0600 temp file, re-encrypted, and removed."""
    import coordinator.security.keystores as keystores

    store = tmp_path / "server.p12"
    TestCA().pkcs12_keystore(store, password=b"pw")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(keystores.tempfile, "tempdir", str(scratch))
    monkeypatch.delattr(keystores.os, "memfd_create")
    seen: list[tuple[int, bytes]] = []
    real = ssl.SSLContext.load_cert_chain

    def spy(self: ssl.SSLContext, certfile: str, keyfile: str | None = None, password: object = None) -> None:
        seen.append((os.stat(certfile).st_mode & 0o777, Path(certfile).read_bytes()))
        real(self, certfile, keyfile, password)  # type: ignore[arg-type]

    monkeypatch.setattr(ssl.SSLContext, "load_cert_chain", spy)
    ListenerSecurity.from_settings("SSL", "SSL", _pkcs12_listener(store, **{"ssl.keystore.password": "pw"}))
    [(mode, blob)] = seen
    assert mode == 0o600 and b"ENCRYPTED PRIVATE KEY" in blob and b"BEGIN PRIVATE KEY" not in blob
    assert list(scratch.iterdir()) == []


# --- upstream (librdkafka's names) ----------------------------------------------------------


def test_upstream_pkcs12_client_keystore(tmp_path: Path) -> None:
    ca = TestCA()
    client_store, server_store = tmp_path / "client.p12", tmp_path / "server.p12"
    ca.pkcs12_keystore(client_store, "kcoord", server=False, password=b"cpw")
    ca.pkcs12_keystore(server_store, password=b"spw")
    ca_pem = ca.write_ca(tmp_path / "ca.pem")
    base = {"upstream.security.protocol": "SSL", "upstream.ssl.ca.location": str(ca_pem),
            "upstream.ssl.keystore.location": str(client_store)}
    security = UpstreamSecurity.from_settings({**base, "upstream.ssl.keystore.password": "cpw"})
    assert "client certificate" in security.describe()
    server = ListenerSecurity.from_settings("SSL", "SSL", _pkcs12_listener(
        server_store, **{"ssl.keystore.password": "spw", "ssl.truststore.location": str(ca_pem),
                         "ssl.client.auth": "required"})).tls
    assert server is not None
    context = security.ssl_context()
    assert context is not None
    _, peer = _handshake(server.context, context)
    assert peer is not None and _subject_cn(peer) == "kcoord"
    assert security.confluent_config()["ssl.keystore.location"] == str(client_store)   # librdkafka reads it too
    from coordinator.security.settings import SecurityConfigError
    with pytest.raises(SecurityConfigError, match=r"upstream\.ssl\.keystore\.password does not open"):
        UpstreamSecurity.from_settings({**base, "upstream.ssl.keystore.password": "wrong"})
    with pytest.raises(SecurityConfigError, match=r"upstream\.ssl\.keystore\.location: given with"):
        UpstreamSecurity.from_settings({**base, "upstream.ssl.certificate.location": str(ca_pem)})


def test_damaged_stores_only_ever_raise_the_named_error(tmp_path: Path) -> None:
    """Hostile input: truncations and byte flips of a real store, and random bytes, raise
    TlsConfigError naming the setting, nothing else (and never hang)."""
    import random

    ca = TestCA()
    good = tmp_path / "good.p12"
    ca.pkcs12_keystore(good, password=b"pw")
    data = good.read_bytes()
    rng = random.Random(13)
    samples = [data[:n] for n in range(0, len(data), max(1, len(data) // 40))]
    for _ in range(150):
        flipped = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
        samples.append(bytes(flipped))
    samples += [rng.randbytes(rng.randint(1, 600)) for _ in range(50)]
    bad = tmp_path / "bad.p12"
    outcomes = {"loaded": 0, "refused": 0}
    for sample in samples:
        bad.write_bytes(sample)
        try:
            ListenerSecurity.from_settings("SSL", "SSL", _pkcs12_listener(bad, **{"ssl.keystore.password": "pw"}))
            outcomes["loaded"] += 1          # a flip in padding or an unchecked field
        except TlsConfigError as e:
            assert "ssl.keystore.location" in str(e), e
            outcomes["refused"] += 1
    assert outcomes["refused"] > len(samples) // 2, outcomes
