"""SASL inspection (coordinator/security/sasl_inspect.py): the name read from each mechanism's
client token, malformed tokens refused with an error naming the problem (never a crash, never
the secret), and completion read from the broker's answers."""
from __future__ import annotations

import base64
import json
import random

import pytest

from coordinator.security.sasl_inspect import (
    FAILURE,
    MAYBE_DONE,
    PENDING,
    SUCCESS,
    InspectError,
    Inspector,
    check_template,
    decode_saslname,
    encode_saslname,
    jwt_claim,
    parse_oauthbearer_initial,
    parse_plain,
    parse_scram_client_first,
    principal_for,
)


def jwt(payload: object, header: object = None) -> str:
    def seg(obj: object) -> str:
        raw = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")
    return f"{seg(header or {'alg': 'none'})}.{seg(payload)}."


def oauth(token: str, authzid: str = "", extra: str = "") -> bytes:
    gs2 = f"n,a={authzid}," if authzid else "n,,"
    return f"{gs2}\x01{extra}auth=Bearer {token}\x01\x01".encode()


# --- PLAIN -----------------------------------------------------------------------------------

def test_plain_name_is_the_authzid_when_set_else_the_authcid() -> None:
    assert parse_plain(b"\x00alice\x00secret").name == "alice"
    assert parse_plain(b"admin\x00alice\x00secret").name == "admin"


def test_plain_repr_hides_the_password() -> None:
    assert "secret" not in repr(parse_plain(b"\x00alice\x00secret"))


@pytest.mark.parametrize("token, problem", [
    (b"alice\x00secret", "2 NUL-separated fields"),
    (b"a\x00b\x00c\x00d", "4 NUL-separated fields"),
    (b"\x00\x00secret", "empty authcid"),
    (b"\x00\xff\xfe\x00secret", "authcid is not UTF-8"),
    (b"", "1 NUL-separated fields"),
])
def test_malformed_plain_is_refused_naming_the_problem(token: bytes, problem: str) -> None:
    with pytest.raises(InspectError, match=problem) as e:
        parse_plain(token)
    assert "secret" not in str(e.value)


# --- SCRAM -----------------------------------------------------------------------------------

def test_scram_client_first_gives_the_decoded_saslname() -> None:
    first = parse_scram_client_first(b"n,,n=al=2Cice=3Dx,r=fyko+d2lbbFgONRv9qkxdawL")
    assert first.username == "al,ice=x" and first.nonce == "fyko+d2lbbFgONRv9qkxdawL"
    assert first.bare == "n=al=2Cice=3Dx,r=fyko+d2lbbFgONRv9qkxdawL" and first.gs2_header == "n,,"


def test_scram_extensions_and_authzid_and_token_auth() -> None:
    first = parse_scram_client_first(b"n,a=bob,n=tokenid,r=abc,tokenauth=true")
    assert first.authzid == "bob" and first.extensions == {"tokenauth": "true"} and first.token_auth


def test_saslname_round_trip() -> None:
    for name in ("plain", "a,b", "a=b", "=2C", ",=,="):
        assert decode_saslname(encode_saslname(name)) == name


@pytest.mark.parametrize("token, problem", [
    (b"n=alice,r=abc", "no gs2 header"),
    (b"x,,n=alice,r=abc", "gs2 flag"),
    (b"p=tls-unique,,n=alice,r=abc", "channel binding"),
    (b"n,b=x,n=alice,r=abc", "'a=<authzid>'"),
    (b"n,,r=abc,n=alice", "must continue 'n=<user>,r=<nonce>'"),
    (b"n,,n=,r=abc", "empty username"),
    (b"n,,n=alice,r=", "empty nonce"),
    (b"n,,n=al=41ice,r=abc", "'=' not followed by 2C or 3D"),
    (b"n,,n=alice,r=abc,junk", "not 'key=value'"),
    (b"n,,n=\xc3,r=abc", "not UTF-8"),
])
def test_malformed_scram_client_first_is_refused_naming_the_problem(token: bytes, problem: str) -> None:
    with pytest.raises(InspectError, match=problem):
        parse_scram_client_first(token)


# --- OAUTHBEARER -----------------------------------------------------------------------------

def test_oauthbearer_sub_claim_and_a_configured_claim() -> None:
    token = jwt({"sub": "svc-orders", "preferred_username": "orders"})
    initial = parse_oauthbearer_initial(oauth(token, extra="traceId=1\x01"))
    assert initial.token == token and initial.extensions == {"traceId": "1"}
    assert jwt_claim(initial.token) == "svc-orders"
    assert jwt_claim(initial.token, "preferred_username") == "orders"
    assert token not in repr(initial)


@pytest.mark.parametrize("token, problem", [
    (b"n,,auth=Bearer x", "no %x01 after its gs2 header"),
    (b"n,,auth=Bearer x\x01\x01", "gs2 header must be"),
    (b"n,,\x01auth=Bearer x\x01", "does not end with %x01%x01"),
    (b"q,,\x01auth=Bearer x\x01\x01", "gs2 header must be"),
    (b"n,,\x01host=x\x01\x01", "no auth= field"),
    (b"n,,\x01auth=Basic x\x01\x01", "not 'Bearer <token>'"),
    (b"n,,\x01auth=Bearer \x01\x01", "not 'Bearer <token>'"),
    (b"n,,\x01novalue\x01auth=Bearer t\x01\x01", "not 'key=value'"),
    (b"\x01", "%x01 answer to an error challenge"),
])
def test_malformed_oauthbearer_initial_response_is_refused(token: bytes, problem: str) -> None:
    with pytest.raises(InspectError, match=problem):
        parse_oauthbearer_initial(token)


@pytest.mark.parametrize("token, problem", [
    ("abc", "1 dot-separated parts"),
    ("a.b.c.d", "4 dot-separated parts"),
    ("e30.!!!.", "payload is not base64url"),
    (f"e30.{base64.urlsafe_b64encode(b'not json').decode()}.", "payload is not JSON"),
    (jwt([1, 2]), "not a JSON object"),
    (jwt({"iss": "x"}), "no 'sub' claim"),
    (jwt({"sub": 7}), "not a non-empty string"),
    (jwt({"sub": "  "}), "not a non-empty string"),
    (jwt({"sub": "x" * 5000}), "longer than"),
])
def test_malformed_jwt_is_refused_naming_the_problem(token: str, problem: str) -> None:
    with pytest.raises(InspectError, match=problem):
        jwt_claim(token)


def test_deeply_nested_jwt_payload_does_not_crash() -> None:
    payload = base64.urlsafe_b64encode(b"[" * 100_000 + b"]" * 100_000).decode().rstrip("=")
    with pytest.raises(InspectError):
        jwt_claim(f"e30.{payload}.")


def test_random_bytes_never_raise_anything_but_inspect_error() -> None:
    rng = random.Random(13)
    parsers = (parse_plain, parse_scram_client_first, parse_oauthbearer_initial)
    for _ in range(3000):
        data = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 40)))
        if rng.random() < 0.5:   # likelier to get past the first checks
            data = rng.choice([b"n,,n=", b"n,,\x01auth=Bearer ", b"\x00u\x00"]) + data
        for parse in parsers:
            try:
                parse(data)
            except InspectError:
                pass


# --- principals ------------------------------------------------------------------------------

def test_principal_template() -> None:
    assert principal_for("alice", "PLAIN") == "User:alice"
    assert principal_for("alice", "SCRAM-SHA-512", check_template("User:{mechanism}/{name}")) == \
        "User:SCRAM-SHA-512/alice"
    for bad in ("alice", "User:{who}", "User:{name", "{name}"):
        with pytest.raises(ValueError, match="sasl.principal.template"):
            check_template(bad)


# --- completion ------------------------------------------------------------------------------

def test_plain_completes_on_the_first_answer_and_fails_on_an_error() -> None:
    ok = Inspector("PLAIN")
    ok.request(b"\x00alice\x00pw")
    assert ok.response(0, b"") == SUCCESS and ok.name == "alice"
    bad = Inspector("PLAIN")
    bad.request(b"\x00alice\x00wrong")
    assert bad.response(58, b"") == FAILURE


def test_scram_completes_only_on_the_server_final_message() -> None:
    inspector = Inspector("SCRAM-SHA-512")
    inspector.request(b"n,,n=alice,r=abc")
    assert inspector.response(0, b"r=abcdef,s=c2FsdA==,i=4096") == PENDING
    inspector.request(b"c=biws,r=abcdef,p=cHJvb2Y=")
    assert inspector.response(0, b"v=c2lnbmF0dXJl") == SUCCESS and inspector.name == "alice"
    wrong = Inspector("SCRAM-SHA-256")
    wrong.request(b"n,,n=alice,r=abc")
    assert wrong.response(0, b"r=abcdef,s=c2FsdA==,i=4096") == PENDING
    wrong.request(b"c=biws,r=abcdef,p=cHJvb2Y=")
    assert wrong.response(58, b"") == FAILURE
    odd = Inspector("SCRAM-SHA-256")
    odd.request(b"n,,n=alice,r=abc")
    odd.response(0, b"r=x")
    odd.request(b"c=biws")
    assert odd.response(0, b"e=invalid-proof") == FAILURE


def test_scram_with_a_delegation_token_has_no_name() -> None:
    inspector = Inspector("SCRAM-SHA-256")
    inspector.request(b"n,,n=tokenid,r=abc,tokenauth=true")
    inspector.response(0, b"r=abcd,s=c2FsdA==,i=4096")
    inspector.request(b"c=biws,r=abcd,p=cHJvb2Y=")
    assert inspector.response(0, b"v=eA==") == SUCCESS
    assert inspector.name is None and "delegation token" in inspector.unknown_reason


def test_oauthbearer_error_challenge_is_not_success() -> None:
    ok = Inspector("OAUTHBEARER")
    ok.request(oauth(jwt({"sub": "svc"})))
    assert ok.response(0, b"") == SUCCESS and ok.name == "svc"
    challenged = Inspector("OAUTHBEARER", "client_id")
    challenged.request(oauth(jwt({"sub": "svc", "client_id": "app-7"})))
    assert challenged.name == "app-7"
    assert challenged.response(0, b'{"status":"invalid_token"}') == PENDING
    challenged.request(b"\x01")
    assert challenged.response(58, b"") == FAILURE


def test_a_malformed_token_accepted_by_the_broker_leaves_the_name_unknown() -> None:
    inspector = Inspector("PLAIN")
    inspector.request(b"no-nul-here")
    assert inspector.response(0, b"") == SUCCESS
    assert inspector.name is None and "NUL-separated" in inspector.unknown_reason


def test_mechanisms_kcoord_cannot_read() -> None:
    for mechanism in ("GSSAPI", "AWS_MSK_IAM"):
        inspector = Inspector(mechanism)
        inspector.request(b"\x60\x82opaque")
        assert inspector.response(0, b"challenge") == MAYBE_DONE and inspector.name is None
        assert mechanism in inspector.unknown_reason
        assert inspector.response(58, b"") == FAILURE
