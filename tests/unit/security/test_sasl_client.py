"""The SASL client mechanisms and the Kafka exchange (coordinator/security/sasl_client.py):
RFC 7677's SCRAM-SHA-256 example, SCRAM-SHA-512 against an independent server computation,
malformed server messages refused with errors that name what was wrong."""
from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from coordinator.security.sasl_client import (
    OAuthBearer,
    Plain,
    SaslAuthenticationError,
    SaslError,
    SaslProtocolError,
    Scram,
    authenticate,
)

# RFC 7677 §3: user "user", password "pencil".
RFC7677 = {
    "client_nonce": "rOprNGfwEbeRWgbNEkqO",
    "client_first": b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
    "server_first": b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
    "client_final": b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
    "server_final": b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
}


def rfc_scram() -> Scram:
    return Scram("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677["client_nonce"])


def test_scram_sha256_matches_rfc7677() -> None:
    scram = rfc_scram()
    assert scram.initial() == RFC7677["client_first"]
    assert scram.respond(RFC7677["server_first"]) == RFC7677["client_final"]
    assert not scram.done
    assert scram.respond(RFC7677["server_final"]) is None
    assert scram.done


def test_scram_refuses_a_server_signature_that_does_not_match() -> None:
    scram = rfc_scram()
    scram.initial()
    scram.respond(RFC7677["server_first"])
    forged = b"v=" + base64.b64encode(b"\x00" * 32)
    with pytest.raises(SaslProtocolError, match="server signature does not match"):
        scram.respond(forged)
    assert not scram.done


def server_sha512(client_first: bytes, password: str, salt: bytes, iterations: int, server_nonce: str):
    """An independent SCRAM-SHA-512 server side: server-first, then check the proof."""
    bare = client_first.decode()[3:]
    nonce = dict(p.split("=", 1) for p in bare.split(","))["r"] + server_nonce
    first = f"r={nonce},s={base64.b64encode(salt).decode()},i={iterations}"
    salted = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", "sha512").digest()
    stored = hashlib.sha512(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", "sha512").digest()

    def final(client_final: bytes) -> bytes:
        text = client_final.decode()
        without_proof, proof = text.rsplit(",p=", 1)
        auth = f"{bare},{first},{without_proof}".encode()
        signature = hmac.new(stored, auth, "sha512").digest()
        recovered = bytes(a ^ b for a, b in zip(base64.b64decode(proof), signature))
        assert hashlib.sha512(recovered).digest() == stored, "the client's proof does not verify"
        return b"v=" + base64.b64encode(hmac.new(server_key, auth, "sha512").digest())

    return first.encode(), final


def test_scram_sha512_against_an_independent_server() -> None:
    scram = Scram("SCRAM-SHA-512", "ali,ce=", "sécret")
    first = scram.initial()
    assert first.startswith(b"n,,n=ali=2Cce=3D,r=")     # RFC 5802 saslname escaping
    server_first, final = server_sha512(first, "sécret", b"salty", 4096, "srv")
    assert scram.respond(final(scram.respond(server_first))) is None and scram.done


@pytest.mark.parametrize("message, error", [
    (b"\xff\xfe", "not UTF-8"),
    (b"", "is not an attribute=value pair"),
    (b"garbage", "is not an attribute=value pair"),
    (b"m=ext,r=x,s=c2FsdA==,i=4096", "mandatory extension"),
    (b"s=c2FsdA==,r=rOprNGfwEbeRWgbNEkqOx,i=4096", "expected r=,s=,i= first"),
    (b"r=someoneelse,s=c2FsdA==,i=4096", "does not extend the client's nonce"),
    (b"r=rOprNGfwEbeRWgbNEkqO,s=c2FsdA==,i=4096", "does not extend the client's nonce"),
    (b"r=rOprNGfwEbeRWgbNEkqOx,s=not*base64,i=4096", "salt is not base64"),
    (b"r=rOprNGfwEbeRWgbNEkqOx,s=,i=4096", "salt is empty"),
    (b"r=rOprNGfwEbeRWgbNEkqOx,s=c2FsdA==,i=-1", "is not a number"),
    (b"r=rOprNGfwEbeRWgbNEkqOx,s=c2FsdA==,i=\xd9\xa4", "is not a number"),     # an Arabic-Indic digit
    (b"r=rOprNGfwEbeRWgbNEkqOx,s=c2FsdA==,i=999999999", "outside 4096..1000000"),
    (b"r=rOprNGfwEbeRWgbNEkqOx,s=c2FsdA==,i=1", "outside 4096"),
    (b"r=rOprNGfwEbeRWgbNEkqO\x7f,s=c2FsdA==,i=4096", "outside printable ASCII"),
    (b"r=rOprNGfwEbeRWgbNEkqOx,s=c2FsdA==", "expected r=,s=,i= first"),
    (b"x" * 70000, "more than 65536"),
])
def test_malformed_server_first_is_refused_naming_the_fault(message: bytes, error: str) -> None:
    scram = rfc_scram()
    scram.initial()
    with pytest.raises(SaslProtocolError, match=error) as refused:
        scram.respond(message)
    assert "SCRAM-SHA-256 server-first message" in str(refused.value)


def test_server_first_error_attribute_is_an_authentication_failure() -> None:
    scram = rfc_scram()
    scram.initial()
    with pytest.raises(SaslAuthenticationError, match="the server refused: unknown-user"):
        scram.respond(b"e=unknown-user")


@pytest.mark.parametrize("message, error, kind", [
    (b"e=invalid-proof", "the server refused: invalid-proof", SaslAuthenticationError),
    (b"x=1", "expected v= or e=", SaslProtocolError),
    (b"v=###", "server signature is not base64", SaslProtocolError),
    (b"v=", "does not match", SaslProtocolError),
    (b"\x80", "not UTF-8", SaslProtocolError),
])
def test_malformed_server_final_is_refused(message: bytes, error: str, kind: type[SaslError]) -> None:
    scram = rfc_scram()
    scram.initial()
    scram.respond(RFC7677["server_first"])
    with pytest.raises(kind, match=error):
        scram.respond(message)


def test_scram_message_after_completion_is_refused() -> None:
    scram = rfc_scram()
    scram.initial()
    scram.respond(RFC7677["server_first"])
    scram.respond(RFC7677["server_final"])
    with pytest.raises(SaslProtocolError, match="after the exchange was complete"):
        scram.respond(b"v=x")


def test_plain_message_and_completion() -> None:
    plain = Plain("admin", "pw")
    assert plain.initial() == b"\0admin\0pw"
    assert plain.respond(b"") is None and plain.done
    with pytest.raises(SaslProtocolError, match="unexpected bytes"):
        Plain("a", "b").respond(b"?")


def test_oauthbearer_initial_response_and_server_error() -> None:
    bearer = OAuthBearer("aaa.bbb.", {"traceId": "1"})
    assert bearer.initial() == b"n,,\x01auth=Bearer aaa.bbb.\x01traceId=1\x01\x01"
    assert bearer.respond(b"") is None and bearer.done
    refused = OAuthBearer("aaa.bbb.")
    assert refused.respond(b'{"status":"invalid_token"}') == b"\x01"
    assert refused.server_error == "invalid_token"
    with pytest.raises(SaslProtocolError, match="not JSON"):
        OAuthBearer("t").respond(b"{nope")
    with pytest.raises(ValueError, match="spaces/control"):
        OAuthBearer("has space")


# --- the Kafka exchange over a fake broker ------------------------------------------------


class FakeBroker:
    """Answers SaslHandshake / SaslAuthenticate from a script of (error, bytes, lifetime)."""

    def __init__(self, handshake_error: int = 0, answers: list[tuple[int, bytes, int]] | None = None) -> None:
        self.handshake_error = handshake_error
        self.answers = list(answers or [])
        self.sent: list[Any] = []

    async def __call__(self, request: Any) -> Any:
        self.sent.append(request)
        if int(request.__api_key__) == 17:
            return SimpleNamespace(error_code=self.handshake_error, mechanisms=("SCRAM-SHA-512",))
        error, data, lifetime = self.answers.pop(0)
        return SimpleNamespace(error_code=error, error_message="Authentication failed: Invalid username or password"
                               if error else None, auth_bytes=data, session_lifetime=timedelta(milliseconds=lifetime))


async def test_exchange_returns_the_session_lifetime() -> None:
    broker = FakeBroker(answers=[(0, RFC7677["server_first"], 0), (0, RFC7677["server_final"], 3_600_000)])
    assert await authenticate(broker, rfc_scram(), authenticate_version=2) == 3_600_000
    assert [int(r.__api_key__) for r in broker.sent] == [17, 36, 36]
    assert broker.sent[0].mechanism == "SCRAM-SHA-256" and int(broker.sent[0].__version__) == 1


async def test_exchange_names_an_unsupported_mechanism() -> None:
    with pytest.raises(SaslAuthenticationError, match="does not enable mechanism PLAIN .*SCRAM-SHA-512"):
        await authenticate(FakeBroker(handshake_error=33), Plain("a", "b"))


async def test_exchange_names_a_refused_password() -> None:
    with pytest.raises(SaslAuthenticationError, match=r"SASL authentication failed \(PLAIN\): Authentication "
                                                      r"failed: Invalid username"):
        await authenticate(FakeBroker(answers=[(58, b"", 0)]), Plain("a", "b"))


async def test_exchange_refuses_a_server_that_never_ends() -> None:
    endless = FakeBroker(answers=[(0, b'{"status":"x"}', 0)] * 20)
    with pytest.raises(SaslProtocolError, match="another message after its error"):
        await authenticate(endless, OAuthBearer("t"))
