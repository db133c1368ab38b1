"""Client SASL on a connection (coordinator/gateway/sasl.py), over a fake transport and a fake
upstream link: an unauthenticated connection gets nothing but ApiVersions and the SASL
exchange; the principal is recorded only on the broker's success; failure closes; KIP-368
re-authentication and session expiry; mechanisms without a readable name; termination."""
from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import struct
import time
from collections import deque
from datetime import timedelta
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from coordinator.config import CoordinatorConfig
from coordinator.gateway import Gateway
from coordinator.gateway.connection import ClientConnection
from coordinator.gateway.forward import MergingPending, Pending
from coordinator.gateway.listeners import BOOTSTRAP, ListenerInfo
from coordinator.gateway.routes import build_routes
from coordinator.gateway.sasl import SaslSettings, enable_sasl
from coordinator.protocol import apis
from coordinator.protocol.api_versions import Features, api_versions_body
from coordinator.protocol.apis import response_class
from coordinator.protocol.codec import decode_response_frame, encode_response_frame
from coordinator.security import auth_metrics
from coordinator.security.sasl_server import scram_entry
from support.raw_client import encode_request, request

LISTENER = ListenerInfo(BOOTSTRAP, "127.0.0.1", 0, None, (("127.0.0.1", 1),))
HS, AUTH, HB, MD = apis.SASL_HANDSHAKE, apis.SASL_AUTHENTICATE, apis.HEARTBEAT, apis.METADATA


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.reading = True
        self.closed = self.aborted = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("10.1.1.1", 5555) if name == "peername" else default

    def write(self, data: Any) -> None:
        self.written.append(bytes(data))

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_closing(self) -> bool:
        return self.closed or self.aborted

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def get_write_buffer_size(self) -> int:
        return 0

    def frames(self) -> list[bytes]:
        data, out, pos = b"".join(self.written), [], 0
        while pos < len(data):
            (size,) = struct.unpack_from(">i", data, pos)
            out.append(data[pos:pos + 4 + size])
            pos += 4 + size
        return out


class FakeLink:
    """Stands for forward.UpstreamLink: records what is sent, answers on the test's word."""

    def __init__(self) -> None:
        self.waiting: deque[Pending] = deque()
        self.sent: list[bytes] = []
        self.paused = 0
        self.closed = False

    def send(self, frames: list[bytes]) -> None:
        self.sent.extend(frames)

    def pause_reading(self, reason: int = 1) -> None: ...

    def resume_reading(self, reason: int = 1) -> None: ...

    def close(self) -> None:
        self.closed = True

    def answer(self, connection: ClientConnection, api_key: int, version: int, **fields: Any) -> None:
        pending = self.waiting.popleft()
        frame = encode_response_frame(api_key, version, pending.correlation_id,
                                      response_class(api_key, version)(**fields))
        if isinstance(pending, MergingPending):
            frame = pending.merge(frame)
        pending.data = frame
        if pending.size:
            connection.answered(pending.size)
            pending.size = 0
        connection.held += len(frame)
        connection.flush()


class RecordingService:
    api_versions = {HB: (0, 4)}

    def __init__(self) -> None:
        self.clients: list[Any] = []

    def partition_for(self, group_id: str) -> int:
        return 0

    async def handle(self, api_key: int, api_version: int, req: Any, client: Any) -> Any:
        self.clients.append(client)
        return response_class(api_key, api_version)(error_code=ErrorCode.none, throttle_time=timedelta(0))


def make_gateway(settings: SaslSettings | None, upstream_auth: tuple[int, int] = (0, 2)) -> Gateway:
    gateway = Gateway(RecordingService(), "127.0.0.1:1", "127.0.0.1:0", "state", config=CoordinatorConfig())
    gateway.api_versions = {apis.API_VERSIONS: (0, 4), HB: (0, 4), MD: (12, 12)}
    gateway.routes = build_routes(gateway.api_versions, {HB})
    gateway.api_versions_bodies = {v: api_versions_body(v, gateway.api_versions, Features()) for v in range(5)}
    gateway.cluster.upstream_api_versions = {HS: (0, 1), AUTH: upstream_auth, MD: (0, 12)}
    if settings is not None:
        enable_sasl(gateway, settings)
    return gateway


def connect(gateway: Gateway, listener: ListenerInfo = LISTENER) -> tuple[ClientConnection, FakeTransport, FakeLink]:
    connection = ClientConnection(gateway, listener)
    transport = FakeTransport()
    connection.connection_made(transport)
    link = FakeLink()
    connection.link = link   # type: ignore[assignment]
    return connection, transport, link


def handshake(cid: int, mechanism: str) -> bytes:
    return encode_request(HS, 1, cid, request(HS, 1, mechanism=mechanism))


def authenticate(cid: int, auth_bytes: bytes, version: int = 2) -> bytes:
    return encode_request(AUTH, version, cid, request(AUTH, version, auth_bytes=auth_bytes))


def heartbeat(cid: int) -> bytes:
    return encode_request(HB, 4, cid, request(HB, 4, group_id="g", generation_id=1, member_id="m",
                                              group_instance_id=None))


def metadata(cid: int) -> bytes:
    return encode_request(MD, 12, cid, request(MD, 12, topics=None, allow_auto_topic_creation=False,
                                               include_topic_authorized_operations=False))


def versions(cid: int) -> bytes:
    return encode_request(apis.API_VERSIONS, 2, cid, request(apis.API_VERSIONS, 2))


def decoded(transport: FakeTransport, api_key: int, version: int, index: int = -1) -> Any:
    return decode_response_frame(api_key, version, transport.frames()[index])[1]


PASSTHROUGH = SaslSettings(default_on=True)


def count(mechanism: str, outcome: str) -> float:
    return auth_metrics.count(mechanism, outcome)


def scram_success(connection: ClientConnection, link: FakeLink, user: str = "alice", lifetime_ms: int = 0,
                  first_cid: int = 2) -> None:
    connection.data_received(handshake(first_cid, "SCRAM-SHA-512"))
    link.answer(connection, HS, 1, error_code=ErrorCode.none, mechanisms=("SCRAM-SHA-512",))
    connection.data_received(authenticate(first_cid + 1, f"n,,n={user},r=abc".encode()))
    link.answer(connection, AUTH, 2, error_code=ErrorCode.none, error_message=None,
                auth_bytes=b"r=abcdef,s=c2FsdA==,i=4096", session_lifetime=timedelta(0))
    if first_cid == 2:
        assert connection.sasl_principal is None      # not before the exchange completed
    connection.data_received(authenticate(first_cid + 2, b"c=biws,r=abcdef,p=cHJvb2Y="))
    link.answer(connection, AUTH, 2, error_code=ErrorCode.none, error_message=None, auth_bytes=b"v=c2ln",
                session_lifetime=timedelta(milliseconds=lifetime_ms))


# --- passthrough -------------------------------------------------------------------------------

async def test_sasl_is_advertised_with_handshake_v1_only_and_upstreams_authenticate_versions() -> None:
    gateway = make_gateway(PASSTHROUGH, upstream_auth=(0, 1))
    assert gateway.api_versions[HS] == (1, 1) and gateway.api_versions[AUTH] == (0, 1)
    connection, transport, link = connect(gateway)
    connection.data_received(encode_request(HS, 0, 1, request(HS, 0, mechanism="PLAIN")))
    assert transport.is_closing() and link.sent == []   # v0 (raw tokens) is not served


async def test_unauthenticated_connection_gets_no_group_api_and_nothing_forwarded() -> None:
    for early in (heartbeat(2), metadata(2)):
        gateway = make_gateway(PASSTHROUGH)
        connection, transport, link = connect(gateway)
        connection.data_received(versions(1) + early)
        assert [decode_response_frame(apis.API_VERSIONS, 2, f)[0] for f in transport.frames()] == [1]
        assert transport.is_closing() and link.sent == [] and gateway.service.clients == []


async def test_requests_between_handshake_and_success_are_refused() -> None:
    gateway = make_gateway(PASSTHROUGH)
    connection, transport, link = connect(gateway)
    connection.data_received(handshake(1, "PLAIN"))
    link.answer(connection, HS, 1, error_code=ErrorCode.none, mechanisms=("PLAIN",))
    connection.data_received(heartbeat(2) + metadata(3))
    assert decoded(transport, HB, 4).error_code == ErrorCode.illegal_sasl_state   # as Kafka, then closed
    assert transport.is_closing() and gateway.service.clients == [] and len(link.sent) == 1


async def test_scram_success_records_the_principal_and_group_apis_see_it() -> None:
    before = count("SCRAM-SHA-512", "success")
    gateway = make_gateway(PASSTHROUGH)
    connection, transport, link = connect(gateway)
    connection.data_received(versions(1))
    scram_success(connection, link)
    assert connection.sasl_principal == "User:alice"
    assert count("SCRAM-SHA-512", "success") == before + 1
    connection.data_received(heartbeat(10) + metadata(11))
    assert gateway.service.clients[-1].principal == "User:alice"
    assert decoded(transport, HB, 4).error_code == ErrorCode.none
    assert decode_response_frame(HB, 4, transport.frames()[-1])[0] == 10
    assert len(link.sent) == 4 and not transport.is_closing()   # handshake, 2 auth rounds, Metadata
    # The client's tokens went upstream byte for byte.
    assert link.sent[0] == handshake(2, "SCRAM-SHA-512")


async def test_failure_records_no_principal_counts_and_closes_after_the_answer() -> None:
    before = count("PLAIN", "failure")
    gateway = make_gateway(PASSTHROUGH)
    connection, transport, link = connect(gateway)
    connection.data_received(handshake(1, "PLAIN"))
    link.answer(connection, HS, 1, error_code=ErrorCode.none, mechanisms=("PLAIN",))
    connection.data_received(authenticate(2, b"\x00alice\x00wrong"))
    message = "Authentication failed: Invalid username or password"
    link.answer(connection, AUTH, 2, error_code=ErrorCode.sasl_authentication_failed, error_message=message,
                auth_bytes=b"", session_lifetime=timedelta(0))
    answer = decoded(transport, AUTH, 2)
    assert answer.error_code == ErrorCode.sasl_authentication_failed and answer.error_message == message
    assert transport.closed and connection.sasl_principal is None
    assert count("PLAIN", "failure") == before + 1


async def test_unsupported_mechanism_answer_is_relayed_and_closes() -> None:
    gateway = make_gateway(PASSTHROUGH)
    connection, transport, link = connect(gateway)
    connection.data_received(handshake(1, "MADE-UP"))
    link.answer(connection, HS, 1, error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=("SCRAM-SHA-512",))
    assert decoded(transport, HS, 1).mechanisms == ("SCRAM-SHA-512",) and transport.closed


async def test_reauthentication_keeps_serving_and_expiry_closes_a_group_only_connection() -> None:
    gateway = make_gateway(PASSTHROUGH)
    connection, transport, link = connect(gateway)
    scram_success(connection, link, lifetime_ms=60_000)
    session = connection.sasl_session
    assert session is not None and session.deadline > time.monotonic() + 50
    relayed = decoded(transport, AUTH, 2)
    assert relayed.session_lifetime == timedelta(milliseconds=60_000)   # relayed unchanged
    first_deadline = session.deadline
    # KIP-368: a new handshake mid-connection; heartbeats keep being served meanwhile.
    connection.data_received(heartbeat(20))
    scram_success(connection, link, lifetime_ms=90_000, first_cid=21)
    connection.data_received(heartbeat(30))
    assert [c.principal for c in gateway.service.clients] == ["User:alice", "User:alice"]
    assert session.deadline > first_deadline and not transport.is_closing()
    # The session runs out without another re-authentication: the next request closes.
    session.deadline = time.monotonic() - 0.001
    connection.data_received(heartbeat(31))
    assert transport.closed and len(gateway.service.clients) == 2


async def test_mechanisms_without_a_readable_name_get_group_authorization_failed() -> None:
    for allow in (False, True):
        gateway = make_gateway(SaslSettings(default_on=True, allow_unknown_principal=allow))
        connection, transport, link = connect(gateway)
        connection.data_received(handshake(1, "GSSAPI"))
        link.answer(connection, HS, 1, error_code=ErrorCode.none, mechanisms=("GSSAPI",))
        connection.data_received(authenticate(2, b"\x60\x82kerberos"))
        link.answer(connection, AUTH, 2, error_code=ErrorCode.none, error_message=None, auth_bytes=b"tok",
                    session_lifetime=timedelta(0))
        connection.data_received(authenticate(3, b""))
        link.answer(connection, AUTH, 2, error_code=ErrorCode.none, error_message=None, auth_bytes=b"",
                    session_lifetime=timedelta(0))
        connection.data_received(heartbeat(4))
        assert connection.sasl_session is not None and connection.sasl_session.state == 2   # authenticated
        assert connection.sasl_principal is None
        expected = ErrorCode.none if allow else ErrorCode.group_authorization_failed
        assert decoded(transport, HB, 4).error_code == expected and not transport.is_closing()
        assert len(gateway.service.clients) == (1 if allow else 0)


async def test_oauthbearer_principal_from_the_configured_claim_and_template() -> None:
    settings = SaslSettings(default_on=True, sub_claim="azp", principal_template="User:{mechanism}:{name}")
    gateway = make_gateway(settings)
    connection, transport, link = connect(gateway)
    payload = base64.urlsafe_b64encode(b'{"sub":"x","azp":"orders-app"}').decode().rstrip("=")
    connection.data_received(handshake(1, "OAUTHBEARER"))
    link.answer(connection, HS, 1, error_code=ErrorCode.none, mechanisms=("OAUTHBEARER",))
    connection.data_received(authenticate(2, f"n,,\x01auth=Bearer e30.{payload}.\x01\x01".encode()))
    link.answer(connection, AUTH, 2, error_code=ErrorCode.none, error_message=None, auth_bytes=b"",
                session_lifetime=timedelta(0))
    assert connection.sasl_principal == "User:OAUTHBEARER:orders-app"


async def test_oversized_request_before_authentication_closes() -> None:
    gateway = make_gateway(SaslSettings(default_on=True, max_receive=64))
    connection, transport, link = connect(gateway)
    connection.data_received(handshake(1, "PLAIN"))
    link.answer(connection, HS, 1, error_code=ErrorCode.none, mechanisms=("PLAIN",))
    connection.data_received(authenticate(2, b"\x00alice\x00" + b"p" * 100))
    assert transport.is_closing() and len(link.sent) == 1


async def test_sasl_on_a_listener_without_it_answers_illegal_sasl_state() -> None:
    gateway = make_gateway(SaslSettings())          # SASL listeners only; LISTENER is PLAINTEXT
    connection, transport, link = connect(gateway)
    assert connection.sasl_session is None
    connection.data_received(handshake(1, "PLAIN") + heartbeat(2))
    assert decoded(transport, HS, 1, 0).error_code == ErrorCode.illegal_sasl_state
    assert decoded(transport, HB, 4).error_code == ErrorCode.none and link.sent == []


# --- termination -------------------------------------------------------------------------------

def terminating(tmp_path, **kwargs: Any) -> SaslSettings:
    path = tmp_path / "creds"
    path.write_text(scram_entry("alice", "alice-pw", "SCRAM-SHA-512", 4096) + "\n"
                    + scram_entry("bob", "bob-pw", "SCRAM-SHA-256", 4096) + "\n")
    return SaslSettings.from_settings({"sasl.termination": "true", "sasl.credentials.file": str(path),
                                       "connection.failed.authentication.delay.ms": "0", **kwargs},
                                      default_on=True)


async def test_termination_plain_success_and_wrong_password(tmp_path) -> None:
    gateway = make_gateway(terminating(tmp_path))
    assert gateway.api_versions[AUTH] == (0, 2)      # kcoord's own versions
    ok, ok_transport, ok_link = connect(gateway)
    ok.data_received(handshake(1, "PLAIN") + authenticate(2, b"\x00alice\x00alice-pw") + heartbeat(3))
    assert decoded(ok_transport, HS, 1, 0).mechanisms == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    assert decoded(ok_transport, AUTH, 2, 1).error_code == ErrorCode.none
    assert ok.sasl_principal == "User:alice" and gateway.service.clients[-1].principal == "User:alice"
    assert ok_link.sent == []                        # nothing of the exchange goes upstream
    bad, bad_transport, _ = connect(gateway)
    bad.data_received(handshake(1, "PLAIN") + authenticate(2, b"\x00alice\x00nope") + heartbeat(3))
    answer = decoded(bad_transport, AUTH, 2)
    assert answer.error_code == ErrorCode.sasl_authentication_failed
    assert answer.error_message == "Authentication failed: Invalid username or password"
    assert bad_transport.closed and bad.sasl_principal is None and len(gateway.service.clients) == 1


async def test_termination_scram_exchange_and_wrong_password_message(tmp_path) -> None:
    gateway = make_gateway(terminating(tmp_path))
    for password, ok in (("bob-pw", True), ("wrong", False)):
        connection, transport, _ = connect(gateway)
        nonce = "cnonce123"
        bare = f"n=bob,r={nonce}"
        connection.data_received(handshake(1, "SCRAM-SHA-256") + authenticate(2, f"n,,{bare}".encode()))
        server_first = decoded(transport, AUTH, 2).auth_bytes.decode()
        attrs = dict(item.split("=", 1) for item in server_first.split(","))
        salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
        client_key = hmac.new(salted, b"Client Key", "sha256").digest()
        without_proof = f"c=biws,r={attrs['r']}"
        sig = hmac.new(hashlib.sha256(client_key).digest(), f"{bare},{server_first},{without_proof}".encode(),
                       "sha256").digest()
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, sig))).decode()
        connection.data_received(authenticate(3, f"{without_proof},p={proof}".encode()))
        final = decoded(transport, AUTH, 2)
        if ok:
            assert final.error_code == ErrorCode.none and final.auth_bytes.startswith(b"v=")
            assert connection.sasl_principal == "User:bob"
        else:
            assert final.error_code == ErrorCode.sasl_authentication_failed
            assert final.error_message == ("Authentication failed during authentication due to invalid "
                                           "credentials with SASL mechanism SCRAM-SHA-256")
            assert transport.closed


async def test_termination_unsupported_mechanism(tmp_path) -> None:
    gateway = make_gateway(terminating(tmp_path, **{"sasl.enabled.mechanisms": "SCRAM-SHA-512"}))
    connection, transport, _ = connect(gateway)
    connection.data_received(handshake(1, "PLAIN"))
    answer = decoded(transport, HS, 1)
    assert answer.error_code == ErrorCode.unsupported_sasl_mechanism and answer.mechanisms == ("SCRAM-SHA-512",)
    assert transport.closed


async def test_termination_session_lifetime_reauth_and_principal_change(tmp_path) -> None:
    gateway = make_gateway(terminating(tmp_path, **{"connections.max.reauth.ms": "30000"}))
    connection, transport, _ = connect(gateway)
    connection.data_received(handshake(1, "PLAIN") + authenticate(2, b"\x00alice\x00alice-pw"))
    assert decoded(transport, AUTH, 2).session_lifetime == timedelta(seconds=30)
    connection.data_received(handshake(3, "PLAIN") + authenticate(4, b"\x00alice\x00alice-pw") + heartbeat(5))
    assert decoded(transport, HB, 4).error_code == ErrorCode.none
    connection.data_received(handshake(6, "PLAIN") + authenticate(7, b"\x00bob\x00bob-pw"))
    answer = decoded(transport, AUTH, 2)
    assert answer.error_code == ErrorCode.sasl_authentication_failed
    assert "Cannot change principals during re-authentication from User:alice: bob" == answer.error_message
    assert transport.closed


async def test_termination_closes_after_the_failed_authentication_delay(tmp_path) -> None:
    gateway = make_gateway(terminating(tmp_path, **{"connection.failed.authentication.delay.ms": "30"}))
    connection, transport, _ = connect(gateway)
    connection.data_received(handshake(1, "PLAIN") + authenticate(2, b"\x00alice\x00nope") + heartbeat(3))
    assert decoded(transport, AUTH, 2).error_code == ErrorCode.sasl_authentication_failed
    assert not transport.closed and not transport.reading      # answered, read no more, not yet closed
    assert len(transport.frames()) == 2 and gateway.service.clients == []   # the heartbeat: dropped
    deadline = time.monotonic() + 5
    while not transport.closed:
        assert time.monotonic() < deadline, "not closed after the delay"
        await asyncio.sleep(0.01)


def test_settings_errors_name_the_setting(tmp_path) -> None:
    with pytest.raises(ValueError, match="sasl.credentials.file"):
        SaslSettings.from_settings({"sasl.termination": "true"})
    with pytest.raises(ValueError, match="sasl.enabled.mechanisms.*GSSAPI"):
        terminating(tmp_path, **{"sasl.enabled.mechanisms": "PLAIN,GSSAPI"})
    with pytest.raises(ValueError, match="connections.max.reauth.ms"):
        SaslSettings.from_settings({"connections.max.reauth.ms": "soon"})
    with pytest.raises(ValueError, match="sasl.principal.template"):
        SaslSettings.from_settings({"sasl.principal.template": "alice"})
    assert SaslSettings.from_settings({"authorizer": "none"}).allow_unknown_principal


def test_passthrough_needs_an_upstream_with_sasl() -> None:
    gateway = make_gateway(None)
    gateway.cluster.upstream_api_versions = {MD: (0, 12)}     # Tansu-like: no SASL APIs
    with pytest.raises(ValueError, match="sasl.termination=true"):
        enable_sasl(gateway, PASSTHROUGH)
    assert HS not in gateway.api_versions and not hasattr(gateway, "sasl")


class CertListener:
    """A SASL_SSL listener whose client presented a certificate (listeners.py principal_of)."""

    name = "bootstrap"
    security_protocol = "SASL_SSL"
    upstream = (("127.0.0.1", 1),)

    def principal_of(self, transport: Any) -> str | None:
        return "User:CN=from-cert"


async def test_sasl_principal_wins_over_the_certificate_and_the_certificate_over_anonymous() -> None:
    gateway = make_gateway(SaslSettings())              # SASL on SASL_* listeners only
    connection, transport, link = connect(gateway, CertListener())   # type: ignore[arg-type]
    scram_success(connection, link)
    connection.data_received(heartbeat(10))
    assert gateway.service.clients[-1].principal == "User:alice"
    plain = make_gateway(None)                          # no client SASL: the certificate's
    connection, transport, link = connect(plain, CertListener())     # type: ignore[arg-type]
    connection.data_received(heartbeat(1))
    assert plain.service.clients[-1].principal == "User:CN=from-cert"
    connection, transport, link = connect(plain)        # neither: ANONYMOUS
    connection.data_received(heartbeat(1))
    assert plain.service.clients[-1].principal == "User:ANONYMOUS"
