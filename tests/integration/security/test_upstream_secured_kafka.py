"""kcoord's own upstream connections against a real, secured Apache Kafka 4.4.

One broker for the module (support.kafka_broker with ``sasl=True, tls=True, authorizer=True``:
SCRAM-SHA-512 users, StandardAuthorizer, admin a super user) with two more client listeners
added to its properties: SASLPLAIN (SASL_PLAINTEXT) and SSLONLY (SSL). The CLIENT listener
(SASL_SSL) also enables SCRAM-SHA-256 (with a 4 s session lifetime, KIP-368), PLAIN and
OAUTHBEARER (Kafka's unsecured JWS validator, its default).

What is shown: the state topic (kcoord's own upstream client) writes and loads through
SASL_SSL, SASL_PLAINTEXT and SSL; the gateway's raw link (UpstreamClient, ClusterView) reads metadata with every
mechanism; a wrong password fails quickly naming SASL authentication; an untrusted CA and a
certificate for another host are refused; the metadata link reconnects before its SASL
session expires; a forward link opens TLS to the broker.
"""
from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import ssl
import time
from pathlib import Path
from typing import Any

import pytest

from coordinator.gateway.cluster import ClusterView
from coordinator.protocol.apis import METADATA, request_class
from coordinator.runtime.state_topic import StateTopic
from coordinator.security.upstream import UpstreamSecurity
from coordinator.upstream.client import UpstreamAuthenticationError, UpstreamClient, UpstreamError
from support import kafka_broker, ports
from support.kafka_broker import ADMIN_PASSWORD, ADMIN_USER, KAFKA_44, SCRAM_MECHANISM

pytestmark = pytest.mark.timeout(240)

REAUTH_MS = 4000      # session lifetime of SCRAM-SHA-256 sessions on CLIENT (KIP-368 test)
UPSTREAM_LOGGER = "kcoord.upstream"   # coordinator/upstream/client.py logs each authentication at DEBUG
SHA256_USER, SHA256_PASSWORD = "bob", "bob-secret"


class SecuredKafka:
    def __init__(self, cluster: kafka_broker.KafkaCluster, sasl_plain_port: int, ssl_port: int) -> None:
        self.cluster = cluster
        self.sasl_ssl = ("127.0.0.1", cluster.port)
        self.sasl_plain = ("127.0.0.1", sasl_plain_port)
        self.ssl_only = ("127.0.0.1", ssl_port)
        self.ca = str(cluster.ca_path)

    def security(self, protocol: str = "SASL_SSL", **extra: str) -> UpstreamSecurity:
        settings = {"upstream.security.protocol": protocol}
        if protocol.startswith("SASL_"):
            settings.update({"upstream.sasl.mechanism": SCRAM_MECHANISM, "upstream.sasl.username": ADMIN_USER,
                             "upstream.sasl.password": ADMIN_PASSWORD})
        if protocol in ("SSL", "SASL_SSL"):
            settings["upstream.ssl.ca.location"] = self.ca
        settings.update({f"upstream.{k}": v for k, v in extra.items()})
        return UpstreamSecurity.from_settings({k: v for k, v in settings.items() if v is not None})

    def address(self, protocol: str) -> tuple[str, int]:
        return {"SASL_SSL": self.sasl_ssl, "SASL_PLAINTEXT": self.sasl_plain, "SSL": self.ssl_only}[protocol]


def _extra_listeners(original, sasl_plain_port: int, ssl_port: int):  # type: ignore[no-untyped-def]
    """kafka_broker._properties plus the SASLPLAIN and SSLONLY listeners and mechanisms."""
    def properties(node, nodes, **kw):  # type: ignore[no-untyped-def]
        props = original(node, nodes, **kw)
        ks, ca = kw["tls_files"]["keystore"], kw["tls_files"]["ca"]
        extra = f"SASLPLAIN://127.0.0.1:{sasl_plain_port},SSLONLY://127.0.0.1:{ssl_port}"
        props["listeners"] += "," + extra
        props["advertised.listeners"] += "," + extra
        props["listener.security.protocol.map"] += ",SASLPLAIN:SASL_PLAINTEXT,SSLONLY:SSL"
        scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        props["listener.name.client.sasl.enabled.mechanisms"] = f"{SCRAM_MECHANISM},SCRAM-SHA-256,PLAIN,OAUTHBEARER"
        props["listener.name.client.scram-sha-256.sasl.jaas.config"] = scram
        props["listener.name.client.scram-sha-256.connections.max.reauth.ms"] = str(REAUTH_MS)
        props["listener.name.client.plain.sasl.jaas.config"] = (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'user_{ADMIN_USER}="{ADMIN_PASSWORD}";')
        props["listener.name.client.oauthbearer.sasl.jaas.config"] = (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;")
        props[f"listener.name.saslplain.{SCRAM_MECHANISM.lower()}.sasl.jaas.config"] = scram
        props["listener.name.sslonly.ssl.keystore.type"] = "PEM"
        props["listener.name.sslonly.ssl.keystore.location"] = str(ks)
        props["listener.name.sslonly.ssl.truststore.type"] = "PEM"
        props["listener.name.sslonly.ssl.truststore.location"] = str(ca)
        return props
    return properties


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory):
    import shutil

    if shutil.which("java") is None:
        pytest.skip("java not on PATH: a JDK >= 17 runs the Apache Kafka broker")
    sasl_plain_port, ssl_port = ports.free_port(), ports.free_port()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kafka_broker, "_properties",
                      _extra_listeners(kafka_broker._properties, sasl_plain_port, ssl_port))
        cluster = kafka_broker.start_kafka(KAFKA_44, tmp_path_factory.mktemp("kafka-secured"),
                                           sasl=True, tls=True, authorizer=True)
    try:
        from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

        admin = AdminClient(cluster.client_config())
        upserts = [UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                                password.encode())
                   for user, password in ((SHA256_USER, SHA256_PASSWORD), (ADMIN_USER, ADMIN_PASSWORD))]
        for future in admin.alter_user_scram_credentials(upserts).values():
            future.result(30)
        yield SecuredKafka(cluster, sasl_plain_port, ssl_port)
    finally:
        cluster.stop()
        ports.release(sasl_plain_port)
        ports.release(ssl_port)


def _metadata_request() -> Any:
    return request_class(METADATA, 9)(topics=None, allow_auto_topic_creation=False,
                                      include_cluster_authorized_operations=False,
                                      include_topic_authorized_operations=False)


async def _metadata(address: tuple[str, int], security: UpstreamSecurity, timeout: float = 10.0) -> Any:
    client = await UpstreamClient.connect([address], "kcoord-test", timeout, security=security)
    try:
        return await client.request(_metadata_request(), timeout)
    finally:
        client.close()


async def _write_and_load(bootstrap: str, topic: str, security: UpstreamSecurity) -> None:
    state = StateTopic(bootstrap, topic, 2, security=security)
    await state.start()
    try:
        written = [(b"k%d" % i, b"v%d" % i) for i in range(5)]
        first = await state.append(0, written[:3], int(time.time() * 1000))
        await state.append(1, written[3:], int(time.time() * 1000))
        assert first == 0
        seen: list[tuple[int, int, bytes, bytes | None]] = []
        loaded: dict[int, int] = {}
        await asyncio.wait_for(state.load([0, 1], lambda p, o, k, v: seen.append((p, o, k, v)),
                                          lambda p, end: loaded.__setitem__(p, end)), 60)
        assert loaded == {0: 3, 1: 2}
        assert [(p, k, v) for p, _, k, v in sorted(seen)] == \
            [(0, b"k0", b"v0"), (0, b"k1", b"v1"), (0, b"k2", b"v2"), (1, b"k3", b"v3"), (1, b"k4", b"v4")]
    finally:
        await state.stop()


# --- the state topic (kcoord's own upstream client) ----------------------------------------


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SASL_PLAINTEXT", "SSL"])
async def test_state_topic_writes_and_loads(secured: SecuredKafka, names, protocol: str) -> None:
    host, port = secured.address(protocol)
    await _write_and_load(f"{host}:{port}", f"__kcoord_{names.topic()}", secured.security(protocol))


async def test_state_topic_with_wrong_password_fails_quickly(secured: SecuredKafka, names) -> None:
    security = secured.security(**{"sasl.password": "wrong"})
    state = StateTopic(f"{secured.sasl_ssl[0]}:{secured.sasl_ssl[1]}", f"__kcoord_{names.topic()}", 2,
                       security=security)
    started = time.monotonic()
    with pytest.raises(Exception) as refused:
        await asyncio.wait_for(state.start(), 60)
    assert not isinstance(refused.value, TimeoutError), "a wrong password must fail, not hang"
    # The refusal names the mechanism and the broker's reason.
    assert "SASL authentication failed" in str(refused.value) and "invalid credentials" in str(refused.value)
    assert time.monotonic() - started < 60
    await state.stop()


# --- the gateway's raw metadata/admin link ---------------------------------------------------


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SASL_PLAINTEXT", "SSL"])
async def test_upstream_client_reads_metadata(secured: SecuredKafka, protocol: str) -> None:
    response = await _metadata(secured.address(protocol), secured.security(protocol))
    brokers = {int(b.node_id): (b.host, int(b.port)) for b in response.brokers}
    # The broker advertises the listener the link came in on.
    assert brokers == {1: secured.address(protocol)}


def _unsecured_jws(subject: str) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")
    now = int(time.time())
    return f"{part({'alg': 'none'})}.{part({'sub': subject, 'iat': now, 'exp': now + 3600})}."


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"])
async def test_every_mechanism_reads_metadata(secured: SecuredKafka, mechanism: str, tmp_path: Path) -> None:
    if mechanism == "OAUTHBEARER":
        token = tmp_path / "token"
        token.write_text(_unsecured_jws(ADMIN_USER) + "\n")
        security = secured.security(**{"sasl.mechanism": mechanism, "sasl.username": None,
                                       "sasl.password": None, "sasl.oauthbearer.token.file": str(token)})
    elif mechanism == "SCRAM-SHA-256":
        security = secured.security(**{"sasl.mechanism": mechanism, "sasl.username": SHA256_USER,
                                       "sasl.password": SHA256_PASSWORD})
    else:
        security = secured.security(**{"sasl.mechanism": mechanism})
    response = await _metadata(secured.sasl_ssl, security)
    assert [int(b.node_id) for b in response.brokers] == [1]


async def test_oauthbearer_token_the_broker_refuses(secured: SecuredKafka) -> None:
    now = int(time.time())
    expired = ".".join(base64.urlsafe_b64encode(json.dumps(v).encode()).decode().rstrip("=")
                       for v in ({"alg": "none"}, {"sub": ADMIN_USER, "iat": now - 7200, "exp": now - 3600})) + "."
    security = secured.security(**{"sasl.mechanism": "OAUTHBEARER", "sasl.username": None, "sasl.password": None,
                                   "sasl.oauthbearer.token": expired})
    with pytest.raises(UpstreamAuthenticationError, match="SASL authentication failed"):
        await _metadata(secured.sasl_ssl, security)


async def test_wrong_password_fails_quickly_naming_sasl(secured: SecuredKafka) -> None:
    started = time.monotonic()
    with pytest.raises(UpstreamAuthenticationError) as refused:
        await asyncio.wait_for(_metadata(secured.sasl_ssl, secured.security(**{"sasl.password": "wrong"})), 30)
    assert "SASL authentication failed" in str(refused.value)
    assert "127.0.0.1" in str(refused.value)
    assert time.monotonic() - started < 30


async def test_unknown_mechanism_on_the_listener_is_named(secured: SecuredKafka) -> None:
    security = secured.security("SASL_PLAINTEXT", **{"sasl.mechanism": "PLAIN"})
    with pytest.raises(UpstreamAuthenticationError, match="does not enable mechanism PLAIN.*SCRAM-SHA-512"):
        await _metadata(secured.sasl_plain, security)


async def test_untrusted_ca_is_refused(secured: SecuredKafka, tmp_path: Path) -> None:
    from support.kafka_tls import write_ca_and_server_pem

    other = write_ca_and_server_pem(tmp_path / "other")
    security = secured.security(**{"ssl.ca.location": str(other["ca"])})
    with pytest.raises(UpstreamError, match="127.0.0.1:[0-9]+: TLS certificate verification failed: "
                                           "certificate signature failure"):
        await _metadata(secured.sasl_ssl, security)
    # And the state topic's own links refuse it too, within a bound.
    state = StateTopic(f"{secured.sasl_ssl[0]}:{secured.sasl_ssl[1]}", "__kcoord_untrusted", 1, security=security)
    with pytest.raises(Exception) as refused:
        await asyncio.wait_for(state.start(), 60)
    assert not isinstance(refused.value, TimeoutError)
    assert "CERTIFICATE_VERIFY_FAILED" in str(refused.value)
    await state.stop()


# --- hostname verification against a TLS server whose certificate names another host -------


def _ca_and_server_for(directory: Path, names: list[str]) -> dict[str, Path]:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=1)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mismatch CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    (directory / "ca.pem").write_bytes(ca.public_bytes(pem))
    (directory / "server.pem").write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        + cert.public_bytes(pem))
    return {"ca": directory / "ca.pem", "server": directory / "server.pem"}


@contextlib.asynccontextmanager
async def _tls_server(certificate: Path):  # type: ignore[no-untyped-def]
    """A TLS server on 127.0.0.1 that answers nothing (the handshake is what is tested)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certificate)
    handshakes: list[bool] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handshakes.append(True)
        with contextlib.suppress(Exception):
            await reader.read(100)
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=context)
    try:
        yield server.sockets[0].getsockname()[1], handshakes
    finally:
        server.close()
        await server.wait_closed()


async def test_certificate_for_another_host_is_refused(tmp_path: Path) -> None:
    files = _ca_and_server_for(tmp_path, ["broker.elsewhere.example"])
    security = UpstreamSecurity.from_settings({"upstream.security.protocol": "SSL",
                                               "upstream.ssl.ca.location": str(files["ca"])})
    async with _tls_server(files["server"]) as (port, handshakes):
        with pytest.raises(UpstreamError, match="TLS certificate verification failed: IP address mismatch"):
            await UpstreamClient.connect([("127.0.0.1", port)], "kcoord-test", 5, security=security)
        assert not handshakes, "the server never saw a completed handshake"
        # The same CA with hostname verification off (ssl.endpoint.identification.algorithm=none)
        # connects: what failed above is the name, not the chain.
        lax = UpstreamSecurity.from_settings({"upstream.security.protocol": "SSL",
                                              "upstream.ssl.ca.location": str(files["ca"]),
                                              "upstream.ssl.endpoint.identification.algorithm": "none"})
        client = await UpstreamClient.connect([("127.0.0.1", port)], "kcoord-test", 5, security=lax)
        assert not client.closed
        client.close()


# --- KIP-368: the metadata link reconnects before its SASL session ends ---------------------


async def test_cluster_view_reconnects_before_the_session_expires(secured: SecuredKafka) -> None:
    security = secured.security(**{"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": SHA256_USER,
                                   "sasl.password": SHA256_PASSWORD})
    cluster = ClusterView([secured.sasl_ssl], "__kcoord_reauth", refresh_interval=0.2, security=security)
    await cluster.start()
    try:
        first = cluster._client
        assert first is not None and first.session_lifetime_ms == REAUTH_MS
        links = [first]
        deadline = time.monotonic() + 4 * REAUTH_MS / 1000
        failed = False
        # Two reconnects (each before 95% of a lifetime), the upstream never looking down.
        while len(links) < 3:
            assert time.monotonic() < deadline, f"{len(links)} links in {4 * REAUTH_MS} ms"
            await asyncio.sleep(0.05)      # polling the condition; the refresh loop runs meanwhile
            if cluster._client is not None and cluster._client is not links[-1]:
                links.append(cluster._client)
            failed = failed or not cluster.upstream_up
        assert not failed, "a refresh failed across the re-authentications"
        assert 1 in cluster.brokers
        assert first.closed and first.lost is None, "the old link was retired by kcoord, not dropped by the broker"
    finally:
        await asyncio.wait_for(cluster.close(), 20)


# --- forward links: TLS to the broker -------------------------------------------------------


async def test_forward_link_opens_tls_to_the_broker(secured: SecuredKafka) -> None:
    from coordinator.config import CoordinatorConfig
    from coordinator.gateway.forward import Pending, UpstreamLink
    from coordinator.gateway.limits import Limits
    from coordinator.gateway.routes import FORWARD, Route
    from coordinator.protocol.apis import API_VERSIONS
    from support.raw_client import encode_request, request

    class Client:
        held = 0
        held_soft_limit = 1 << 20
        listener_name = "bootstrap"

        def __init__(self) -> None:
            self.failures: list[str] = []
            self.flushed = asyncio.Event()

        def answered(self, size: int) -> None:
            pass

        def flush(self) -> None:
            self.flushed.set()

        def head_is_local(self) -> bool:
            return False

        def upstream_failed(self, reason: str) -> None:
            self.failures.append(reason)
            self.flushed.set()

        def pause_reading(self) -> None:
            pass

        def resume_reading(self) -> None:
            pass

    class Gateway:
        limits = Limits(CoordinatorConfig(state_topic="s"))
        state_topic = "s"
        cluster = None
        upstream_ssl = secured.security("SSL").ssl_context()

        def address_of(self, node_id: int, host: str, port: int) -> tuple[str, int]:
            return host, port

    client = Client()
    link = UpstreamLink(client, Gateway())  # type: ignore[arg-type]
    pending = Pending(7, Route(FORWARD, API_VERSIONS, 0, 1, 0, False, None))
    link.waiting.append(pending)
    link.send([encode_request(API_VERSIONS, 0, 7, request(API_VERSIONS, 0))])
    link.open([secured.ssl_only])
    await asyncio.wait_for(client.flushed.wait(), 20)
    link.close()
    assert not client.failures
    assert pending.data is not None and pending.data[4:8] == (7).to_bytes(4, "big")
    assert pending.data[8:10] == b"\x00\x00", "ApiVersions answered without error through TLS"

    # A forward link with a CA that does not match fails the client, naming the TLS failure.
    class Untrusted(Gateway):
        upstream_ssl = ssl.create_default_context()   # the system store: not the test CA

    client = Client()
    link = UpstreamLink(client, Untrusted())  # type: ignore[arg-type]
    link.open([secured.ssl_only])
    await asyncio.wait_for(client.flushed.wait(), 20)
    assert client.failures and "TLS certificate verification failed" in client.failures[0]


# --- the state topic with OAUTHBEARER (the provider hook) and across KIP-368 expiries -------

PROVIDED: list[str] = []


def token_provider() -> str:
    """The hook `upstream.sasl.oauthbearer.token.provider` names in the test below."""
    token = _unsecured_jws(ADMIN_USER)
    PROVIDED.append(token)
    return token


async def test_state_topic_through_the_oauthbearer_provider_hook(secured: SecuredKafka, names) -> None:
    PROVIDED.clear()
    security = secured.security(**{"sasl.mechanism": "OAUTHBEARER", "sasl.username": None, "sasl.password": None,
                                   "sasl.oauthbearer.token.provider": f"{__name__}:token_provider"})
    await _write_and_load(f"{secured.sasl_ssl[0]}:{secured.sasl_ssl[1]}", f"__kcoord_{names.topic()}", security)
    assert PROVIDED, "the state topic asked the provider for its tokens"


async def test_state_topic_writes_across_session_expiries(secured: SecuredKafka, names, caplog) -> None:
    """The state-topic writer (lean_writer.py, through upstream/client.py) across KIP-368
    session expiries: its connection authenticates again (SCRAM-SHA-256, 4 s sessions here)
    while writes keep succeeding across two and a half lifetimes, and every one loads back."""
    # admin has SCRAM-SHA-256 credentials too (the fixture): a super user, no ACLs needed.
    security = secured.security(**{"sasl.mechanism": "SCRAM-SHA-256"})
    state = StateTopic(f"{secured.sasl_ssl[0]}:{secured.sasl_ssl[1]}", f"__kcoord_{names.topic()}", 1,
                       security=security)
    await state.start()
    caplog.set_level(logging.DEBUG, logger=UPSTREAM_LOGGER)
    caplog.clear()

    def authentications() -> int:
        return sum("authenticated with" in r.getMessage() for r in caplog.records if r.name == UPSTREAM_LOGGER)
    try:
        end = time.monotonic() + 2.5 * REAUTH_MS / 1000
        offsets = [await asyncio.wait_for(state.append(0, [(b"k", b"v0")], int(time.time() * 1000)), 30)]
        first = authentications()      # the writer's link is open and authenticated by now
        while time.monotonic() < end:
            offsets.append(await asyncio.wait_for(
                state.append(0, [(b"k", b"v%d" % len(offsets))], int(time.time() * 1000)), 30))
            await asyncio.sleep(0.25)    # spaces the writes over the lifetimes; no condition is awaited
        assert offsets == list(range(len(offsets))) and len(offsets) >= 8
        # The writer's connection authenticated again within the session lifetimes.
        assert authentications() > first, "no new authentication while writing across 2.5 session lifetimes"
        seen: list[bytes | None] = []
        await asyncio.wait_for(state.load([0], lambda p, o, k, v: seen.append(v), lambda p, end: None), 60)
        assert seen == [b"v%d" % i for i in range(len(offsets))]
    finally:
        await state.stop()
