"""SASL termination's server side (coordinator/security/sasl_server.py): SCRAM against the
RFC 7677 vector and a full SHA-512 exchange with an independent client, PLAIN against the
SCRAM entries, Kafka's failure messages, and the credential file."""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
import stat
from pathlib import Path

import pytest

from coordinator.security.sasl_server import (
    AuthenticationFailed,
    CredentialError,
    CredentialStore,
    PlainServer,
    ScramServer,
    client_message,
    main,
    scram_credential,
    scram_entry,
)

# RFC 7677 §3: SCRAM-SHA-256, user "user", password "pencil".
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def store_of(*lines: str) -> CredentialStore:
    return CredentialStore.parse(lines)


def rfc_store() -> CredentialStore:
    return store_of(scram_entry("user", "pencil", "SCRAM-SHA-256", 4096, RFC_SALT))


def test_rfc7677_vector() -> None:
    server = ScramServer("SCRAM-SHA-256", rfc_store(), nonce=RFC_SERVER_NONCE)
    assert server.evaluate(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST and not server.complete
    assert server.evaluate(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.complete and server.username == "user"


def test_rfc7677_vector_with_a_wrong_proof_fails_with_kafkas_message() -> None:
    server = ScramServer("SCRAM-SHA-256", rfc_store(), nonce=RFC_SERVER_NONCE)
    server.evaluate(RFC_CLIENT_FIRST)
    tampered = RFC_CLIENT_FINAL[:-6] + b"AAAAA="
    with pytest.raises(AuthenticationFailed) as e:
        server.evaluate(tampered)
    assert not server.complete
    assert client_message(e.value, "SCRAM-SHA-256") == ("Authentication failed during authentication due to "
                                                         "invalid credentials with SASL mechanism SCRAM-SHA-256")
    assert client_message(e.value, "SCRAM-SHA-256", reauthenticating=True).startswith(
        "Authentication failed during re-authentication")


class ScramClient:
    """An independent RFC 5802 client (not kcoord's code) for the SHA-512 round trip."""

    def __init__(self, mechanism: str, user: str, password: str) -> None:
        self.hash = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
        self.user, self.password = user, password
        self.nonce = base64.b64encode(os.urandom(18)).decode()
        self.bare = f"n={user.replace('=', '=3D').replace(',', '=2C')},r={self.nonce}"

    def first(self) -> bytes:
        return f"n,,{self.bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        attrs = dict(item.split("=", 1) for item in server_first.decode().split(","))
        salted = hashlib.pbkdf2_hmac(self.hash, self.password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
        client_key = hmac.new(salted, b"Client Key", self.hash).digest()
        stored = hashlib.new(self.hash, client_key).digest()
        without_proof = f"c=biws,r={attrs['r']}"
        auth = f"{self.bare},{server_first.decode()},{without_proof}".encode()
        signature = hmac.new(stored, auth, self.hash).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        server_key = hmac.new(salted, b"Server Key", self.hash).digest()
        self.expected_final = b"v=" + base64.b64encode(hmac.new(server_key, auth, self.hash).digest())
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_round_trip_with_an_independent_client(mechanism: str) -> None:
    store = store_of(scram_entry("al,ice", "s3cret", mechanism, 4096))
    client = ScramClient(mechanism, "al,ice", "s3cret")
    server = ScramServer(mechanism, store)
    final = server.evaluate(client.final(server.evaluate(client.first())))
    assert final == client.expected_final and server.complete and server.username == "al,ice"


def test_scram_unknown_user_fails_at_client_first_as_kafka() -> None:
    server = ScramServer("SCRAM-SHA-512", store_of(scram_entry("alice", "pw", "SCRAM-SHA-512", 4096)))
    with pytest.raises(AuthenticationFailed) as e:
        server.evaluate(b"n,,n=mallory,r=abc")
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in client_message(e.value, "SCRAM-SHA-512")


def test_scram_entry_of_the_other_mechanism_does_not_count() -> None:
    server = ScramServer("SCRAM-SHA-512", store_of(scram_entry("alice", "pw", "SCRAM-SHA-256", 4096)))
    with pytest.raises(AuthenticationFailed):
        server.evaluate(b"n,,n=alice,r=abc")


@pytest.mark.parametrize("final, why", [
    (b"c=biws,r=WRONGNONCE,p=AAAA", "nonce"),
    (b"c=eSws,r={nonce},p=AAAA", "channel binding"),
    (b"c=biws,r={nonce}", "no proof"),
    (b"c=biws,r={nonce},p=!!!", "base64"),
    (b"r={nonce},c=biws,p=AAAA", "must start"),
    (b"\xff\xfe", "UTF-8"),
])
def test_malformed_client_final_fails_cleanly(final: bytes, why: str) -> None:
    server = ScramServer("SCRAM-SHA-256", rfc_store(), nonce=RFC_SERVER_NONCE)
    server.evaluate(RFC_CLIENT_FIRST)
    nonce = "rOprNGfwEbeRWgbNEkqO" + RFC_SERVER_NONCE
    with pytest.raises(AuthenticationFailed, match=why):
        server.evaluate(final.replace(b"{nonce}", nonce.encode()))
    with pytest.raises(AuthenticationFailed):   # and the exchange is over
        server.evaluate(RFC_CLIENT_FINAL)


def test_scram_refuses_a_delegation_token_and_a_foreign_authzid() -> None:
    server = ScramServer("SCRAM-SHA-256", rfc_store())
    with pytest.raises(AuthenticationFailed, match="delegation tokens"):
        server.evaluate(b"n,,n=user,r=abc,tokenauth=true")
    other = ScramServer("SCRAM-SHA-256", rfc_store())
    with pytest.raises(AuthenticationFailed) as e:
        other.evaluate(b"n,a=admin,n=user,r=abc")
    assert client_message(e.value, "SCRAM-SHA-256") == ("Authentication failed: Client requested an authorization "
                                                         "id that is different from username")


def test_plain_checks_the_password_against_the_scram_entry() -> None:
    store = store_of(scram_entry("alice", "pw", "SCRAM-SHA-256", 4096),
                     scram_entry("bob", "bpw", "SCRAM-SHA-512", 4096))
    for user, password in (("alice", "pw"), ("bob", "bpw")):
        server = PlainServer(store)
        assert server.evaluate(f"\x00{user}\x00{password}".encode()) == b"" and server.complete
        assert server.username == user


@pytest.mark.parametrize("token, message", [
    (b"\x00alice\x00wrong", "Authentication failed: Invalid username or password"),
    (b"\x00nobody\x00pw", "Authentication failed: Invalid username or password"),
    (b"\x00alice\x00", "Authentication failed: password not specified"),
    (b"\x00\x00pw", "Authentication failed: username not specified"),
    (b"bob\x00alice\x00pw", "Authentication failed: Client requested an authorization id that is different from "
                            "username"),
    (b"garbage", "Authentication failed during authentication due to invalid credentials with SASL mechanism PLAIN"),
])
def test_plain_failures_use_kafkas_messages(token: bytes, message: str) -> None:
    server = PlainServer(store_of(scram_entry("alice", "pw", "SCRAM-SHA-512", 4096)))
    with pytest.raises(AuthenticationFailed) as e:
        server.evaluate(token)
    assert client_message(e.value, "PLAIN") == message and not server.complete


def test_credentials_never_appear_in_reprs() -> None:
    credential = scram_credential("pw", "SCRAM-SHA-512", 4096)
    assert base64.b64encode(credential.stored_key).decode() not in repr(credential)


@pytest.mark.parametrize("line, problem", [
    ("alice:SCRAM-SHA-512:4096:c2FsdA==", "expected user:mechanism"),
    ("alice:SCRAM-SHA-1:4096:c2FsdA==:AA==:AA==", "mechanism 'SCRAM-SHA-1'"),
    ("alice:SCRAM-SHA-512:many:c2FsdA==:AA==:AA==", "not a number"),
    ("alice:SCRAM-SHA-512:100:c2FsdA==:AA==:AA==", "iterations 100 outside"),
    ("alice:SCRAM-SHA-512:4096:!!:AA==:AA==", "not base64"),
    ("alice:SCRAM-SHA-512:4096:c2FsdA==:AA==:AA==", "keys must be 64 bytes"),
])
def test_bad_credential_lines_name_file_line_and_problem(line: str, problem: str) -> None:
    with pytest.raises(CredentialError, match=f"creds:2: .*{problem}"):
        CredentialStore.parse(["# comment", line], "creds")


def test_user_names_with_colons_and_duplicate_entries() -> None:
    line = scram_entry("svc:orders", "pw", "SCRAM-SHA-256", 4096)
    store = store_of(line, "", "  # note")
    assert store.users() == ["svc:orders"] and store.check_password("svc:orders", "pw")
    with pytest.raises(CredentialError, match="second SCRAM-SHA-256 entry"):
        store_of(line, line)


def test_add_user_command_writes_a_private_file_that_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "creds"
    monkeypatch.setenv("KCOORD_SASL_PASSWORD", "alice-pw")
    assert main(["add-user", "--file", str(path), "--user", "alice", "--iterations", "4096"]) == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and "alice-pw" not in path.read_text()
    store = CredentialStore.load(path)
    assert store.get("alice", "SCRAM-SHA-512") is not None and store.get("alice", "SCRAM-SHA-256") is not None
    assert store.check_password("alice", "alice-pw") and not store.check_password("alice", "nope")
    assert main(["add-user", "--file", str(path), "--user", "alice"]) == 1   # not twice
    assert "already has" in capsys.readouterr().err


def test_unreadable_credential_file() -> None:
    with pytest.raises(CredentialError, match="sasl.credentials.file=/nonexistent/creds: cannot read"):
        CredentialStore.load("/nonexistent/creds")
