"""TLS listeners of an in-process Gateway in front of a real Tansu (issue 13): the mTLS
principal each request carries to the service, refusals, per-listener broker addresses,
certificate reload seen by a new connection, and the listener metrics."""
from __future__ import annotations

import asyncio
import os
import socket
import ssl
import threading
from collections.abc import Callable, Coroutine, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kio.schema.errors import ErrorCode
from prometheus_client import REGISTRY

from coordinator.gateway import Gateway
from coordinator.protocol import apis
from coordinator.protocol.apis import response_class
from support import ports
from support.raw_client import assert_closed, call, encode_request, request
from support.tansu import TansuBroker
from support.tls_certs import TestCA
from support.wait import wait_until

T = TypeVar("T")
HEARTBEAT = request(apis.HEARTBEAT, 4, group_id="g-tls", generation_id=1, member_id="m", group_instance_id=None)
METADATA = request(apis.METADATA, 12, topics=(), allow_auto_topic_creation=False,
                   include_topic_authorized_operations=False)


class LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="tls-gateway-loop", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable[[], T]) -> T:
        async def wrapper() -> T:
            return fn()
        return self.run(wrapper())

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class RecordingService:
    """Serves Heartbeat only (REBALANCE_IN_PROGRESS) and records who asked."""

    api_versions = {apis.HEARTBEAT: (0, 4)}

    def __init__(self) -> None:
        self.clients: list[Any] = []

    def partition_for(self, group_id: str) -> int:
        return 0

    async def handle(self, api_key: int, api_version: int, req: Any, client: Any) -> Any:
        self.clients.append(client)
        return response_class(api_key, api_version)(error_code=ErrorCode.rebalance_in_progress,
                                                    throttle_time=timedelta(0))


@pytest.fixture
def loop_thread() -> Iterator[LoopThread]:
    thread = LoopThread()
    yield thread
    thread.stop()


@pytest.fixture
def ca() -> TestCA:
    return TestCA()


def start(loop: LoopThread, tansu: TansuBroker, listen: list[str], security: dict[str, str],
          service: Any = None) -> Gateway:
    async def make() -> Gateway:
        gateway = Gateway(service or RecordingService(), tansu.bootstrap, listen, "__kcoord_tls_state",
                          advertised_host="localhost", security=security)
        await gateway.start()
        return gateway
    return loop.run(make())


def block() -> int:
    return ports.free_block(ports.pool(), 4)


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def tls_socket(port: int, ca_path: Path, cert: tuple[Path, Path] | None = None) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=str(ca_path))   # hostname verification on
    if cert is not None:
        ctx.load_cert_chain(str(cert[1]), str(cert[0]))
    raw = socket.create_connection(("localhost", port), timeout=15)
    return ctx.wrap_socket(raw, server_hostname="localhost")


def refused_without_answer(port: int, ca_path: Path) -> str:
    """A Heartbeat sent without a client certificate gets no answer: how it was refused."""
    try:
        with tls_socket(port, ca_path) as sock:
            sock.sendall(encode_request(apis.HEARTBEAT, 4, 1, HEARTBEAT))
            data = sock.recv(65536)
    except ssl.SSLError as e:          # the server's alert (TLS 1.3: on the first read)
        return f"alert: {e.reason}"
    except ConnectionResetError:
        return "reset"
    assert data == b"", f"answered {len(data)} bytes without a client certificate"
    return "closed"


def test_mtls_principal_reaches_the_service_and_a_client_without_certificate_is_refused(
        loop_thread: LoopThread, tansu: TansuBroker, ca: TestCA, tmp_path: Path) -> None:
    ca_path = ca.write_ca(tmp_path / "ca.pem")
    ca.keystore(tmp_path / "server.pem")
    port = block()
    service = RecordingService()
    gateway = start(loop_thread, tansu, [f"SSL://127.0.0.1:{port}"], {
        "ssl.keystore.location": str(tmp_path / "server.pem"), "ssl.truststore.location": str(ca_path),
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=(.*?)(,.*)?$/$1@$2/L,DEFAULT"}, service)
    try:
        from cryptography import x509
        from cryptography.x509.oid import NameOID as N
        subject = x509.Name([x509.NameAttribute(N.ORGANIZATION_NAME, "Acme"),
                             x509.NameAttribute(N.ORGANIZATIONAL_UNIT_NAME, "Billing"),
                             x509.NameAttribute(N.COMMON_NAME, "Alice")])
        key, cert, _ = ca.client_files(tmp_path, subject)
        with tls_socket(port, ca_path, (key, cert)) as sock:
            response = call(sock, apis.HEARTBEAT, 4, HEARTBEAT)
        assert response.error_code == ErrorCode.rebalance_in_progress
        [client] = service.clients
        # "CN=Alice,OU=Billing,O=Acme" through the rule: alice@billing.
        assert client.principal == "User:alice@billing"
        assert client.listener == "bootstrap"

        # Kafka's DEFAULT rule: the whole RFC 2253 subject.
        key2, cert2, _ = ca.client_files(tmp_path, x509.Name([x509.NameAttribute(N.COMMON_NAME, "svc")]), "svc")
        with tls_socket(port, ca_path, (key2, cert2)) as sock:
            call(sock, apis.HEARTBEAT, 4, HEARTBEAT)
        assert service.clients[-1].principal == "User:CN=svc"

        failures = metric("kcoord_tls_handshake_failures_total", listener="SSL")
        # No client certificate: the handshake fails (TLS 1.3: the client hears it on its
        # first read), and the request is never served.
        served = len(service.clients)
        assert refused_without_answer(port, ca_path)
        wait_until(lambda: metric("kcoord_tls_handshake_failures_total", listener="SSL") > failures, 10,
                   message="the refused handshake counted")
        assert len(service.clients) == served
    finally:
        loop_thread.run(gateway.close())


def test_unmapped_certificate_is_refused(loop_thread: LoopThread, tansu: TansuBroker, ca: TestCA,
                                         tmp_path: Path) -> None:
    ca_path = ca.write_ca(tmp_path / "ca.pem")
    ca.keystore(tmp_path / "server.pem")
    port = block()
    service = RecordingService()
    gateway = start(loop_thread, tansu, [f"SSL://127.0.0.1:{port}"], {
        "ssl.keystore.location": str(tmp_path / "server.pem"), "ssl.truststore.location": str(ca_path),
        "ssl.client.auth": "required", "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=Staff$/$1/"}, service)
    try:
        key, cert, _ = ca.client_files(tmp_path, "nobody")
        with tls_socket(port, ca_path, (key, cert)) as sock:
            sock.sendall(b"\x00\x00\x00\x00")
            assert_closed(sock)
        assert service.clients == []
    finally:
        loop_thread.run(gateway.close())


def test_plaintext_and_ssl_listeners_name_their_own_addresses(loop_thread: LoopThread, tansu: TansuBroker,
                                                              ca: TestCA, tmp_path: Path) -> None:
    ca_path = ca.write_ca(tmp_path / "ca.pem")
    ca.keystore(tmp_path / "server.pem")
    internal, external = block(), block()
    gateway = start(loop_thread, tansu, [f"INTERNAL://127.0.0.1:{internal}", f"EXTERNAL://127.0.0.1:{external}"], {
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SSL",
        "listener.name.external.ssl.keystore.location": str(tmp_path / "server.pem")})
    try:
        names = [(i.name, i.listener, i.security_protocol) for i in gateway.listeners]
        assert names[0] == ("INTERNAL/bootstrap", "INTERNAL", "PLAINTEXT")
        assert ("EXTERNAL/bootstrap", "EXTERNAL", "SSL") in names
        plain = call(("127.0.0.1", internal), apis.METADATA, 12, METADATA)
        with tls_socket(external, ca_path) as sock:
            secure = call(sock, apis.METADATA, 12, METADATA)
        assert {b.port for b in plain.brokers} == {internal + 1}
        assert {b.port for b in secure.brokers} == {external + 1}
        assert {b.host for b in secure.brokers} == {"localhost"}
        # The per-broker port of the SSL listener is TLS too; the PLAINTEXT one is not.
        with tls_socket(external + 1, ca_path) as sock:
            assert call(sock, apis.METADATA, 12, METADATA).brokers
        assert call(("127.0.0.1", internal + 1), apis.METADATA, 12, METADATA).brokers
        # FindCoordinator(GROUP), answered by kcoord, names each listener's own port.
        find = request(apis.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=("g",))
        with tls_socket(external, ca_path) as sock:
            [coordinator] = call(sock, apis.FIND_COORDINATOR, 4, find).coordinators
        [plain_coordinator] = call(("127.0.0.1", internal), apis.FIND_COORDINATOR, 4, find).coordinators
        if coordinator.error_code == 0:
            assert (coordinator.port, plain_coordinator.port) == (external + 1, internal + 1)
        # Connections by listener and protocol.
        with tls_socket(external, ca_path) as sock:
            call(sock, apis.METADATA, 12, METADATA)
            assert metric("kcoord_gateway_connections", listener="EXTERNAL", protocol="SSL") >= 1
        wait_until(lambda: metric("kcoord_gateway_connections", listener="EXTERNAL", protocol="SSL") == 0, 10,
                   message="the SSL connection gauge back to 0")
    finally:
        loop_thread.run(gateway.close())


def _serial_seen(port: int, ca_path: Path) -> int:
    from cryptography import x509
    with tls_socket(port, ca_path) as sock:
        der = sock.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_certificates_reload_without_restart(loop_thread: LoopThread, tansu: TansuBroker, ca: TestCA,
                                             tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ca_path = ca.write_ca(tmp_path / "ca.pem")
    keystore = tmp_path / "server.pem"
    first = ca.keystore(keystore, password=b"s3cret")
    port = block()
    gateway = start(loop_thread, tansu, [f"SSL://127.0.0.1:{port}"], {
        "ssl.keystore.location": str(keystore), "ssl.key.password": "s3cret", "ssl.reload.interval.ms": "100"})
    try:
        assert _serial_seen(port, ca_path) == first.serial
        # A new certificate, written atomically (rename), as cert-manager and friends do.
        second = ca.keystore(tmp_path / "next.pem", password=b"s3cret")
        os.replace(tmp_path / "next.pem", keystore)
        wait_until(lambda: _serial_seen(port, ca_path) == second.serial, 15,
                   message="a new connection sees the new certificate")
        reloads = metric("kcoord_tls_reloads_total", listener="SSL", outcome="ok")
        assert reloads >= 1
        # A broken file: the old context stays, one ERROR names the file.
        (tmp_path / "broken.pem").write_text("-----BEGIN CERTIFICATE-----\nnot base64\n")
        os.replace(tmp_path / "broken.pem", keystore)
        wait_until(lambda: metric("kcoord_tls_reloads_total", listener="SSL", outcome="failed") >= 1, 15,
                   message="the failed reload counted")
        assert _serial_seen(port, ca_path) == second.serial
        errors = [r.getMessage() for r in caplog.records if "TLS reload failed" in r.getMessage()]
        assert errors and str(keystore) in errors[0]
    finally:
        loop_thread.run(gateway.close())


def test_plaintext_client_on_the_ssl_listener_counts_a_handshake_failure(
        loop_thread: LoopThread, tansu: TansuBroker, ca: TestCA, tmp_path: Path) -> None:
    ca.keystore(tmp_path / "server.pem")
    port = block()
    gateway = start(loop_thread, tansu, [f"SSL://127.0.0.1:{port}"],
                    {"ssl.keystore.location": str(tmp_path / "server.pem")})
    try:
        before = metric("kcoord_tls_handshake_failures_total", listener="SSL")
        with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
            with pytest.raises(AssertionError):
                call(sock, apis.METADATA, 12, METADATA)     # a Kafka request is no ClientHello
        wait_until(lambda: metric("kcoord_tls_handshake_failures_total", listener="SSL") > before, 10,
                   message="the failed handshake counted")
    finally:
        loop_thread.run(gateway.close())
