"""SASL on kcoord's own raw-protocol upstream links (coordinator/upstream/client.py: metadata,
admin): the client side of PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER, and the Kafka exchange
that carries them (SaslHandshake v1, then SaslAuthenticate v0-v2, KIP-152).

The mechanisms are sans-IO: ``initial()`` is the client's first message, ``respond(challenge)``
the answer to each server message (None once the exchange is complete). ``authenticate``
runs them over any ``request(kio_request) -> kio_response`` coroutine.

- PLAIN (RFC 4616): ``authzid NUL authcid NUL password``, authzid empty (as Kafka's client).
- SCRAM (RFC 5802, RFC 7677 for SHA-256; SHA-512 as Kafka's KIP-84): client-first
  ``n,,n=<user>,r=<nonce>``, server-first ``r=,s=,i=``, client-final with the proof,
  server-final ``v=<signature>`` verified. Passwords are UTF-8 without SASLprep, as Kafka's
  ScramFormatter does. Implemented with hashlib/hmac: no maintained pure-Python SCRAM client
  library is a dependency already (aiokafka carries one inside its connection class, not
  usable on another transport), and the mechanism is some 60 lines.
- OAUTHBEARER (RFC 7628): the client initial response ``n,,^Aauth=Bearer <token>^A^A``. A
  server that refuses answers a JSON error as a challenge; the client answers ``^A`` and
  the broker then fails the exchange (SaslAuthenticate error), as RFC 7628 §3.2.3 says.

Every server message is decoded defensively: anything unexpected raises ``SaslProtocolError``
naming what was wrong; a broker refusal raises ``SaslAuthenticationError`` with the broker's
message. Nothing else escapes (the fuzz target fuzz/atheris_sasl.py holds it to that).

KIP-368: ``authenticate`` returns the session lifetime the broker gave (SaslAuthenticate v1+,
``SessionLifetimeMs``; 0 = none). The link re-authenticates by reconnecting before it ends
(coordinator/upstream/client.py, UpstreamClient.reauthentication_due).
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58
MAX_SERVER_MESSAGE = 64 * 1024   # bytes; SCRAM and OAUTHBEARER answers are a few hundred
# SCRAM iteration bounds: Kafka accepts 4096..16384 (ScramMechanism); a server asking for
# millions would make the client spin in PBKDF2 (a cheap denial of service), so cap it.
SCRAM_MIN_ITERATIONS = 4096
SCRAM_MAX_ITERATIONS = 1_000_000


class SaslError(Exception):
    """SASL with the upstream failed."""


class SaslProtocolError(SaslError):
    """The server answered something that is not what the mechanism expects."""


class SaslAuthenticationError(SaslError):
    """The broker refused the credentials (or the mechanism): SASL authentication failed."""


# --- mechanisms -------------------------------------------------------------------------


class Mechanism:
    name = ""
    done = False

    def initial(self) -> bytes:
        raise NotImplementedError

    def respond(self, challenge: bytes) -> bytes | None:
        """The next client message for the server's ``challenge``, or None when complete."""
        raise NotImplementedError


class Plain(Mechanism):
    name = "PLAIN"

    def __init__(self, username: str, password: str, authzid: str = "") -> None:
        self._message = f"{authzid}\0{username}\0{password}".encode()

    def initial(self) -> bytes:
        return self._message

    def respond(self, challenge: bytes) -> bytes | None:
        # Kafka's PlainSaslServer completes with an empty answer.
        if challenge:
            raise SaslProtocolError(f"PLAIN: the server sent {len(challenge)} unexpected bytes after the "
                                    f"client's only message")
        self.done = True
        return None


def _text(what: str, data: bytes) -> str:
    if not isinstance(data, bytes | bytearray):
        raise SaslProtocolError(f"{what}: not bytes but {type(data).__name__}")
    if len(data) > MAX_SERVER_MESSAGE:
        raise SaslProtocolError(f"{what}: {len(data)} bytes, more than {MAX_SERVER_MESSAGE}")
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as e:
        raise SaslProtocolError(f"{what} is not UTF-8 ({e.reason} at byte {e.start})") from None


def _attributes(what: str, text: str) -> list[tuple[str, str]]:
    """``a=value,b=value`` as pairs, in order; an attribute is one letter (RFC 5802 §5)."""
    pairs = []
    for part in text.split(","):
        if len(part) < 2 or part[1] != "=" or not part[0].isascii() or not part[0].isalpha():
            raise SaslProtocolError(f"{what}: {part[:40]!r} is not an attribute=value pair")
        pairs.append((part[0], part[2:]))
    return pairs


def _b64decode(what: str, value: str) -> bytes:
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise SaslProtocolError(f"{what} is not base64: {value[:40]!r}") from None


def _saslname(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


class Scram(Mechanism):
    """SCRAM-SHA-256 or SCRAM-SHA-512, without channel binding (gs2 header ``n,,``)."""

    HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}

    def __init__(self, name: str, username: str, password: str, *, nonce: str | None = None) -> None:
        if name not in self.HASHES:
            raise ValueError(f"not a SCRAM mechanism: {name}")
        self.name = name
        self._hash = self.HASHES[name]
        self._password = password.encode("utf-8")
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._first_bare = f"n={_saslname(username)},r={self._nonce}"
        self._server_signature: bytes | None = None
        self._step = 0

    def initial(self) -> bytes:
        self._step = 1
        return ("n,," + self._first_bare).encode("utf-8")

    def respond(self, challenge: bytes) -> bytes | None:
        if self._step == 1:
            self._step = 2
            return self._client_final(challenge)
        if self._step == 2:
            self._verify(challenge)
            self._step = 3
            self.done = True
            return None
        raise SaslProtocolError(f"{self.name}: the server sent a message after the exchange was complete")

    def _hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self._hash).digest()

    def _client_final(self, challenge: bytes) -> bytes:
        what = f"{self.name} server-first message"
        text = _text(what, challenge)
        attrs = _attributes(what, text)
        if attrs and attrs[0][0] == "m":
            raise SaslProtocolError(f"{what}: mandatory extension m= is not supported")
        if attrs and attrs[0][0] == "e":
            raise SaslAuthenticationError(f"{self.name}: the server refused: {attrs[0][1][:200]}")
        if len(attrs) < 3 or [a for a, _ in attrs[:3]] != ["r", "s", "i"]:
            raise SaslProtocolError(f"{what}: expected r=,s=,i= first, got {text[:80]!r}")
        nonce, salt_b64, iterations_text = attrs[0][1], attrs[1][1], attrs[2][1]
        if not nonce.startswith(self._nonce) or len(nonce) <= len(self._nonce):
            raise SaslProtocolError(f"{what}: the nonce does not extend the client's nonce")
        if not all(0x21 <= ord(c) <= 0x7E and c != "," for c in nonce):
            raise SaslProtocolError(f"{what}: the nonce has characters outside printable ASCII")
        salt = _b64decode(f"{what}: salt", salt_b64)
        if not salt:
            raise SaslProtocolError(f"{what}: the salt is empty")
        if not iterations_text.isdigit() or not iterations_text.isascii() or len(iterations_text) > 9:
            raise SaslProtocolError(f"{what}: iteration count {iterations_text[:20]!r} is not a number")
        iterations = int(iterations_text)
        if not SCRAM_MIN_ITERATIONS <= iterations <= SCRAM_MAX_ITERATIONS:
            raise SaslProtocolError(f"{what}: iteration count {iterations} outside "
                                    f"{SCRAM_MIN_ITERATIONS}..{SCRAM_MAX_ITERATIONS}")
        salted = hashlib.pbkdf2_hmac(self._hash, self._password, salt, iterations)
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        final_bare = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{text},{final_bare}".encode()
        client_signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, client_signature))
        server_key = self._hmac(salted, b"Server Key")
        self._server_signature = self._hmac(server_key, auth_message)
        return f"{final_bare},p={base64.b64encode(proof).decode()}".encode()

    def _verify(self, challenge: bytes) -> None:
        what = f"{self.name} server-final message"
        text = _text(what, challenge)
        attrs = _attributes(what, text)
        key, value = attrs[0]
        if key == "e":
            raise SaslAuthenticationError(f"{self.name}: the server refused: {value[:200]}")
        if key != "v":
            raise SaslProtocolError(f"{what}: expected v= or e=, got {text[:80]!r}")
        signature = _b64decode(f"{what}: server signature", value)
        assert self._server_signature is not None
        if not hmac.compare_digest(signature, self._server_signature):
            raise SaslProtocolError(f"{what}: the server signature does not match: the server does not "
                                    f"know the password (not the broker it claims to be?)")


class OAuthBearer(Mechanism):
    name = "OAUTHBEARER"

    def __init__(self, token: str, extensions: dict[str, str] | None = None) -> None:
        if not token or any(c in token for c in "\x01\r\n "):
            raise ValueError("OAUTHBEARER: the token is empty or has spaces/control characters")
        ext = "".join(f"\x01{k}={v}" for k, v in sorted((extensions or {}).items()))
        self._message = f"n,,\x01auth=Bearer {token}{ext}\x01\x01".encode()
        self._failed: str | None = None

    def initial(self) -> bytes:
        return self._message

    def respond(self, challenge: bytes) -> bytes | None:
        if self._failed is not None:
            raise SaslProtocolError("OAUTHBEARER: the server sent another message after its error")
        if not challenge:
            self.done = True
            return None
        # RFC 7628 §3.2.2: an error is a JSON object; the client answers %x01 and the server
        # then fails the exchange (Kafka: SaslAuthenticate with an error).
        text = _text("OAUTHBEARER server error message", challenge)
        try:
            error = json.loads(text)
        except ValueError:
            raise SaslProtocolError(f"OAUTHBEARER: the server's message is not JSON: {text[:80]!r}") from None
        status = error.get("status") if isinstance(error, dict) else None
        self._failed = str(status)[:100] if status is not None else text[:100]
        return b"\x01"

    @property
    def server_error(self) -> str | None:
        return self._failed


# --- the Kafka exchange -----------------------------------------------------------------

Request = Callable[[Any], Awaitable[Any]]


async def authenticate(request: Request, mechanism: Mechanism, *, authenticate_version: int = 1,
                       max_steps: int = 8) -> int:
    """SaslHandshake v1 then SaslAuthenticate at ``authenticate_version`` until ``mechanism``
    is done. Returns the session lifetime in ms (0: none, or v0). Raises SaslError."""
    from ..protocol.apis import request_class

    handshake = await request(request_class(SASL_HANDSHAKE, 1)(mechanism=mechanism.name))
    code = int(handshake.error_code)
    enabled = ", ".join(str(m) for m in (handshake.mechanisms or ()))
    if code == UNSUPPORTED_SASL_MECHANISM:
        raise SaslAuthenticationError(f"SASL authentication failed: the upstream does not enable mechanism "
                                      f"{mechanism.name} (it enables: {enabled or 'none'})")
    if code != 0:
        raise SaslAuthenticationError(f"SASL authentication failed: SaslHandshake({mechanism.name}) answered "
                                      f"error {code}")
    cls = request_class(SASL_AUTHENTICATE, authenticate_version)
    message: bytes | None = mechanism.initial()
    lifetime_ms = 0
    steps = 0
    while message is not None:
        steps += 1
        if steps > max_steps:
            raise SaslProtocolError(f"{mechanism.name}: not complete after {max_steps} round trips")
        response = await request(cls(auth_bytes=message))
        code = int(response.error_code)
        if code != 0:
            detail = response.error_message or f"error {code}"
            server = getattr(mechanism, "server_error", None)
            raise SaslAuthenticationError(f"SASL authentication failed ({mechanism.name}): {detail}"
                                          + (f" (server status {server})" if server else ""))
        lifetime = getattr(response, "session_lifetime", None)
        if lifetime is not None:
            lifetime_ms = max(0, int(lifetime.total_seconds() * 1000))
        message = mechanism.respond(bytes(response.auth_bytes or b""))
        if message is not None and mechanism.done:
            raise SaslProtocolError(f"{mechanism.name}: mechanism complete but has more to send")
    if not mechanism.done:
        raise SaslProtocolError(f"{mechanism.name}: the exchange ended before the mechanism completed")
    return lifetime_ms
