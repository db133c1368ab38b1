"""SASL termination: kcoord authenticates clients itself (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).

For upstreams without SASL (the embedded broker, a lab cluster): `sasl.termination=true`
(docs/user/security-sasl.md). Credentials come from `sasl.credentials.file`, one user and mechanism
per line, holding SCRAM's salted keys, never a password:

    # user:mechanism:iterations:salt_b64:stored_key_b64:server_key_b64
    alice:SCRAM-SHA-512:4096:c2FsdA==:...:...

A user name may contain ':' (the line is split from the right). Lines are made by
`scram_entry()` or `python -m coordinator.security.sasl_server add-user ...`. PLAIN is checked
against the user's SCRAM entry (SCRAM-SHA-512 first, else SCRAM-SHA-256): the password is
salted and hashed with that entry's salt and iterations and compared with its stored key.

The server side follows Kafka's: `PlainSaslServer` and `ScramSaslServer` (RFC 5802 with
RFC 7677's SHA-256 and SHA-512), with the same failure messages, so a client sees what a
broker would tell it:
- PLAIN: "Authentication failed: Invalid username or password" (and Kafka's messages for an
  empty username or password, or an authzid that is not the username);
- SCRAM: Kafka wraps every SCRAM failure (unknown user at client-first, wrong proof at
  client-final) in "Authentication failed during authentication due to invalid credentials
  with SASL mechanism SCRAM-SHA-512" ("re-authentication" while re-authenticating).
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .sasl_inspect import (
    PLAIN,
    SCRAM_MECHANISMS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    InspectError,
    decode_saslname,
    encode_saslname,
    parse_plain,
    parse_scram_client_first,
)

SUPPORTED_MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)
_HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
MIN_ITERATIONS = 4096          # Kafka's ScramMechanism.minIterations
MAX_ITERATIONS = 1_000_000     # bound on the PBKDF2 cost a credential file can ask for
DEFAULT_ITERATIONS = 8192


class CredentialError(ValueError):
    """A credential file line kcoord refuses; the message names the file, line and problem."""


class AuthenticationFailed(Exception):
    """The client's credentials are refused. ``str()`` is what the client is told (Kafka's text)."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    mechanism: str
    iterations: int
    salt: bytes
    stored_key: bytes
    server_key: bytes

    def __repr__(self) -> str:
        return f"ScramCredential({self.mechanism}, iterations={self.iterations}, keys=[hidden])"


def _hmac(name: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, name).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_HASHES[mechanism], password.encode("utf-8"), salt, iterations)


def scram_credential(password: str, mechanism: str = SCRAM_SHA_512, iterations: int = DEFAULT_ITERATIONS,
                     salt: bytes | None = None) -> ScramCredential:
    """The salted keys of ``password`` (RFC 5802 §3): StoredKey = H(HMAC(SaltedPassword,
    "Client Key")), ServerKey = HMAC(SaltedPassword, "Server Key")."""
    if mechanism not in _HASHES:
        raise ValueError(f"mechanism {mechanism!r} is not one of {sorted(_HASHES)}")
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be {MIN_ITERATIONS}..{MAX_ITERATIONS}, not {iterations}")
    salt = salt if salt is not None else secrets.token_bytes(24)
    name = _HASHES[mechanism]
    salted = salted_password(mechanism, password, salt, iterations)
    client_key = _hmac(name, salted, b"Client Key")
    return ScramCredential(mechanism, iterations, salt, hashlib.new(name, client_key).digest(),
                           _hmac(name, salted, b"Server Key"))


def scram_entry(user: str, password: str, mechanism: str = SCRAM_SHA_512,
                iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None) -> str:
    """One credential-file line for ``user`` (no newline)."""
    if not user or "\n" in user or "\r" in user:
        raise ValueError("a user name must be non-empty and on one line")
    c = scram_credential(password, mechanism, iterations, salt)
    b64 = base64.b64encode
    return f"{user}:{c.mechanism}:{c.iterations}:{b64(c.salt).decode()}:{b64(c.stored_key).decode()}:" \
           f"{b64(c.server_key).decode()}"


class CredentialStore:
    """user -> mechanism -> ScramCredential, read from a credential file (reloaded by the caller)."""

    def __init__(self, entries: dict[str, dict[str, ScramCredential]] | None = None) -> None:
        self._entries = entries or {}

    @classmethod
    def parse(cls, lines: Iterable[str], where: str = "credentials") -> CredentialStore:
        entries: dict[str, dict[str, ScramCredential]] = {}
        for number, raw in enumerate(lines, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            fields = line.rsplit(":", 5)
            if len(fields) != 6 or not fields[0]:
                raise CredentialError(f"{where}:{number}: expected user:mechanism:iterations:salt:stored_key:"
                                      f"server_key, got {len(fields)} fields")
            user, mechanism, iterations, salt, stored, server = fields
            if mechanism not in _HASHES:
                raise CredentialError(f"{where}:{number}: mechanism {mechanism!r} is not one of {sorted(_HASHES)}")
            try:
                count = int(iterations)
            except ValueError:
                raise CredentialError(f"{where}:{number}: iterations {iterations!r} is not a number") from None
            if not MIN_ITERATIONS <= count <= MAX_ITERATIONS:
                raise CredentialError(f"{where}:{number}: iterations {count} outside {MIN_ITERATIONS}.."
                                      f"{MAX_ITERATIONS} (Kafka's SCRAM minimum is {MIN_ITERATIONS})")
            size = hashlib.new(_HASHES[mechanism]).digest_size
            try:
                salt_b, stored_b, server_b = (base64.b64decode(v, validate=True) for v in (salt, stored, server))
            except (binascii.Error, ValueError):
                raise CredentialError(f"{where}:{number}: salt, stored key or server key is not base64") from None
            if not salt_b or len(stored_b) != size or len(server_b) != size:
                raise CredentialError(f"{where}:{number}: {mechanism} keys must be {size} bytes and the salt "
                                      "non-empty")
            by_mech = entries.setdefault(user, {})
            if mechanism in by_mech:
                raise CredentialError(f"{where}:{number}: user {user!r} has a second {mechanism} entry")
            by_mech[mechanism] = ScramCredential(mechanism, count, salt_b, stored_b, server_b)
        return cls(entries)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> CredentialStore:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise CredentialError(f"sasl.credentials.file={path}: cannot read: {e.strerror}") from None
        except UnicodeDecodeError:
            raise CredentialError(f"sasl.credentials.file={path}: not UTF-8") from None
        return cls.parse(text.splitlines(), str(path))

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._entries.get(user, {}).get(mechanism)

    def users(self) -> list[str]:
        return sorted(self._entries)

    def check_password(self, user: str, password: str) -> bool:
        """PLAIN: the password against the user's SCRAM entry (SHA-512 first)."""
        for mechanism in (SCRAM_SHA_512, SCRAM_SHA_256):
            c = self.get(user, mechanism)
            if c is not None:
                expected = scram_credential(password, mechanism, c.iterations, c.salt).stored_key
                return hmac.compare_digest(expected, c.stored_key)
        return False


# --- servers -------------------------------------------------------------------------------

class SaslServer:
    """One exchange. ``evaluate(client bytes)`` returns the bytes to answer; raises
    AuthenticationFailed. ``complete`` is True once it succeeded; ``username`` is then set."""

    mechanism = ""
    complete = False
    username: str | None = None

    def evaluate(self, response: bytes) -> bytes:
        raise NotImplementedError


class PlainServer(SaslServer):
    """Kafka's PlainSaslServer: one round, its messages."""

    mechanism = PLAIN

    def __init__(self, store: CredentialStore) -> None:
        self._store = store

    def evaluate(self, response: bytes) -> bytes:
        if self.complete:
            raise AuthenticationFailed("Authentication failed: PLAIN exchange already completed")
        try:
            message = parse_plain(response)
        except InspectError as e:
            text = str(e)
            if "empty authcid" in text:
                raise AuthenticationFailed("Authentication failed: username not specified") from None
            # Kafka: "Invalid SASL/PLAIN response: expected 3 tokens, got N" is a SaslException,
            # which reaches the client as the generic invalid-credentials message.
            raise _InvalidCredentials(text) from None
        if not message.password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        if message.authzid and message.authzid != message.authcid:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        if not self._store.check_password(message.authcid, message.password):
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        self.username = message.authcid
        self.complete = True
        return b""


class _InvalidCredentials(AuthenticationFailed):
    """A SaslException in Kafka: the client gets the generic message (never the detail)."""


class ScramServer(SaslServer):
    """RFC 5802 server, two rounds: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: str, store: CredentialStore, nonce: str | None = None) -> None:
        if mechanism not in SCRAM_MECHANISMS:
            raise ValueError(f"{mechanism} is not a SCRAM mechanism")
        self.mechanism = mechanism
        self._hash = _HASHES[mechanism]
        self._store = store
        self._server_nonce = nonce
        self._state = 0
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._gs2 = ""
        self._nonce = ""

    def evaluate(self, response: bytes) -> bytes:
        if self._state == 0:
            return self._first(response)
        if self._state == 1:
            return self._final(response)
        raise _InvalidCredentials("SCRAM exchange already finished")

    def _first(self, response: bytes) -> bytes:
        try:
            first = parse_scram_client_first(response)
        except InspectError as e:
            raise _InvalidCredentials(str(e)) from None
        if first.token_auth:
            raise _InvalidCredentials("delegation tokens are not supported by kcoord's SASL termination")
        credential = self._store.get(first.username, self.mechanism)
        if credential is None:
            raise _InvalidCredentials("Authentication failed: Invalid user credentials")
        if first.authzid and first.authzid != first.username:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        self._credential = credential
        self.username = first.username
        self._gs2 = first.gs2_header
        self._client_first_bare = first.bare
        self._nonce = first.nonce + (self._server_nonce or secrets.token_urlsafe(24))
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._state = 1
        return self._server_first.encode()

    def _final(self, response: bytes) -> bytes:
        self._state = 2
        credential = self._credential
        assert credential is not None
        try:
            text = bytes(response).decode("utf-8")
        except UnicodeDecodeError:
            raise _InvalidCredentials("SCRAM client-final message is not UTF-8") from None
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise _InvalidCredentials("SCRAM client-final message has no proof")
        fields = without_proof.split(",")
        if len(fields) < 2 or not fields[0].startswith("c=") or not fields[1].startswith("r="):
            raise _InvalidCredentials("SCRAM client-final message must start 'c=...,r=...'")
        try:
            binding = base64.b64decode(fields[0][2:], validate=True)
            proof = base64.b64decode(proof_b64, validate=True)
        except (binascii.Error, ValueError):
            raise _InvalidCredentials("SCRAM client-final message has bad base64") from None
        if binding != self._gs2.encode():
            raise _InvalidCredentials("SCRAM channel binding does not match the gs2 header")
        if fields[1][2:] != self._nonce:
            raise _InvalidCredentials("SCRAM nonce does not match")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        client_signature = _hmac(self._hash, credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise _InvalidCredentials("SCRAM proof has the wrong length")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), credential.stored_key):
            raise _InvalidCredentials("Invalid client credentials")
        server_signature = _hmac(self._hash, credential.server_key, auth_message)
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)


def new_server(mechanism: str, store: CredentialStore, *, nonce: str | None = None) -> SaslServer:
    if mechanism == PLAIN:
        return PlainServer(store)
    return ScramServer(mechanism, store, nonce)


def client_message(error: AuthenticationFailed, mechanism: str, reauthenticating: bool = False) -> str:
    """What the client is told, as Kafka's SaslServerAuthenticator words it."""
    if isinstance(error, _InvalidCredentials):
        during = "re-authentication" if reauthenticating else "authentication"
        return f"Authentication failed during {during} due to invalid credentials with SASL mechanism {mechanism}"
    return str(error)


# --- the helper command ---------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    """``python -m coordinator.security.sasl_server add-user --file F --user U [--mechanism M]``:
    appends the user's SCRAM line; the password is read from $KCOORD_SASL_PASSWORD or stdin."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m coordinator.security.sasl_server")
    sub = parser.add_subparsers(dest="command", required=True)
    add = sub.add_parser("add-user", help="append a SCRAM credential line to a credential file")
    add.add_argument("--file", required=True)
    add.add_argument("--user", required=True)
    add.add_argument("--mechanism", action="append", choices=sorted(_HASHES),
                     help="repeatable; default SCRAM-SHA-512 and SCRAM-SHA-256")
    add.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS)
    args = parser.parse_args(argv)
    password = os.environ.get("KCOORD_SASL_PASSWORD")
    if password is None:
        password = sys.stdin.readline().rstrip("\n")
    if not password:
        print("no password (set KCOORD_SASL_PASSWORD or give it on stdin)", file=sys.stderr)
        return 2
    mechanisms = args.mechanism or [SCRAM_SHA_512, SCRAM_SHA_256]
    lines = [scram_entry(args.user, password, m, args.iterations) for m in mechanisms]
    path = Path(args.file)
    existing = CredentialStore.load(path) if path.exists() else CredentialStore()
    for m in mechanisms:
        if existing.get(args.user, m) is not None:
            print(f"{path}: {args.user} already has a {m} entry", file=sys.stderr)
            return 1
    with open(path, "a", encoding="utf-8") as out:
        os.chmod(path, 0o600)
        out.write("".join(line + "\n" for line in lines))
    print(f"{path}: added {args.user} ({', '.join(mechanisms)})")
    return 0


__all__ = ["AuthenticationFailed", "CredentialError", "CredentialStore", "PlainServer", "SaslServer",
           "ScramCredential", "ScramServer", "SUPPORTED_MECHANISMS", "client_message", "decode_saslname",
           "encode_saslname", "new_server", "scram_credential", "scram_entry"]

if __name__ == "__main__":
    raise SystemExit(main())
