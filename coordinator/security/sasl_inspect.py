"""SASL inspection: who a client authenticates as, read from the exchange it relays to the broker.

In passthrough (the default on SASL_* listeners, docs/user/security-sasl.md) the broker stays the
authenticator: SaslHandshake and SaslAuthenticate go upstream on the client's own link. kcoord
only reads the client's tokens to learn the name, and believes it only once the broker has
answered the exchange with success:

- PLAIN (RFC 4616): ``authzid NUL authcid NUL passwd``; the name is the authzid when set (the
  broker refuses one that differs from the authcid), else the authcid.
- SCRAM-SHA-256/512 (RFC 5802, RFC 7677): the client-first message ``gs2-header n=<saslname>,r=...``;
  ``=2C`` and ``=3D`` in the saslname stand for ``,`` and ``=``. A client-first message with the
  ``tokenauth=true`` extension authenticates with a delegation token: the broker's principal is
  the token's owner, which kcoord cannot learn (the name is then unknown).
- OAUTHBEARER (RFC 7628, KIP-255): the client's initial response
  ``gs2-header \\x01auth=Bearer <jwt>\\x01...\\x01\\x01``; the name is the JWT claim named by
  ``sasl.oauthbearer.sub.claim.name`` (default ``sub``), read without checking the signature:
  the broker validated the token and would have refused a forged one.
- Any other mechanism (GSSAPI, AWS_MSK_IAM, ...): the name cannot be learnt.

Completion is read from the broker's answers, per mechanism: PLAIN and OAUTHBEARER complete in
one round (an OAUTHBEARER answer carrying bytes is the server's error challenge, not success),
SCRAM in two (the second answer is the server-final ``v=`` message). A SaslAuthenticate answer
with a non-zero error code is a failure; the broker then closes the connection.

Parsing never raises anything but `InspectError`, whose message names the problem and never
quotes a password or a token.
"""
from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
OAUTHBEARER = "OAUTHBEARER"
SCRAM_MECHANISMS = frozenset({SCRAM_SHA_256, SCRAM_SHA_512})
INSPECTED_MECHANISMS = frozenset({PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER})

DEFAULT_PRINCIPAL_TEMPLATE = "User:{name}"
DEFAULT_SUB_CLAIM = "sub"
# A client's token is bounded by the SaslAuthenticate frame (Kafka: sasl.server.max.receive.size,
# 512 KiB before authentication); names longer than this are refused as malformed.
MAX_NAME_LENGTH = 1024


class InspectError(ValueError):
    """A client token kcoord cannot read; the message names what is wrong (never a secret)."""


# --- PLAIN ---------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PlainMessage:
    authzid: str
    authcid: str
    password: str

    def __repr__(self) -> str:   # never print the password
        return f"PlainMessage(authzid={self.authzid!r}, authcid={self.authcid!r}, password=[hidden])"

    @property
    def name(self) -> str:
        return self.authzid or self.authcid


def _utf8(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InspectError(f"{what} is not UTF-8 (byte {e.start})") from None


def parse_plain(auth_bytes: bytes) -> PlainMessage:
    """``authzid NUL authcid NUL passwd`` (RFC 4616)."""
    parts = bytes(auth_bytes).split(b"\x00")
    if len(parts) != 3:
        raise InspectError(f"SASL/PLAIN message has {len(parts)} NUL-separated fields, expected 3 "
                           "(authzid, authcid, password)")
    authzid, authcid, password = (_utf8(p, f"SASL/PLAIN {w}") for p, w in zip(parts, ("authzid", "authcid",
                                                                                         "password")))
    if not authcid:
        raise InspectError("SASL/PLAIN message has an empty authcid (username)")
    if len(authcid) > MAX_NAME_LENGTH or len(authzid) > MAX_NAME_LENGTH:
        raise InspectError(f"SASL/PLAIN username longer than {MAX_NAME_LENGTH} characters")
    return PlainMessage(authzid, authcid, password)


# --- SCRAM ---------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ScramClientFirst:
    gs2_header: str                 # "n,," / "n,a=authzid," / "y,,"
    authzid: str
    username: str                   # the saslname decoded
    nonce: str
    extensions: dict[str, str]      # Kafka's SCRAM extensions (KIP-86, KIP-48 tokenauth)
    bare: str                       # client-first-message-bare (for the AuthMessage)

    @property
    def token_auth(self) -> bool:
        return self.extensions.get("tokenauth", "").lower() == "true"


def decode_saslname(value: str) -> str:
    """RFC 5802 saslname: ``=2C`` is ``,`` and ``=3D`` is ``=``; any other ``=`` is an error."""
    if "=" not in value:
        return value
    out = []
    i = 0
    while i < len(value):
        c = value[i]
        if c == "=":
            code = value[i + 1:i + 3]
            if code == "2C":
                out.append(",")
            elif code == "3D":
                out.append("=")
            else:
                raise InspectError(f"SCRAM saslname has '=' not followed by 2C or 3D (at {i})")
            i += 3
        else:
            out.append(c)
            i += 1
    return "".join(out)


def encode_saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def parse_scram_client_first(auth_bytes: bytes) -> ScramClientFirst:
    text = _utf8(bytes(auth_bytes), "SCRAM client-first message")
    # gs2-header: cbind-flag "," [authzid] ","
    first = text.find(",")
    second = text.find(",", first + 1) if first >= 0 else -1
    if first < 0 or second < 0:
        raise InspectError("SCRAM client-first message has no gs2 header (expected 'n,,' or 'n,a=<authzid>,')")
    flag, authz = text[:first], text[first + 1:second]
    if flag.startswith("p="):
        raise InspectError("SCRAM client-first message asks for channel binding (p=), which Kafka does not support")
    if flag not in ("n", "y"):
        raise InspectError(f"SCRAM client-first message has gs2 flag {flag[:8]!r}, expected 'n' or 'y'")
    authzid = ""
    if authz:
        if not authz.startswith("a="):
            raise InspectError("SCRAM gs2 header's second field must be empty or 'a=<authzid>'")
        authzid = decode_saslname(authz[2:])
    gs2 = text[:second + 1]
    bare = text[second + 1:]
    fields = bare.split(",")
    if len(fields) < 2 or not fields[0].startswith("n=") or not fields[1].startswith("r="):
        raise InspectError("SCRAM client-first message must continue 'n=<user>,r=<nonce>'")
    username = decode_saslname(fields[0][2:])
    if not username:
        raise InspectError("SCRAM client-first message has an empty username")
    if len(username) > MAX_NAME_LENGTH:
        raise InspectError(f"SCRAM username longer than {MAX_NAME_LENGTH} characters")
    nonce = fields[1][2:]
    if not nonce:
        raise InspectError("SCRAM client-first message has an empty nonce")
    extensions: dict[str, str] = {}
    for item in fields[2:]:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InspectError("SCRAM client-first message has an extension that is not 'key=value'")
        extensions[key] = value
    return ScramClientFirst(gs2, authzid, username, nonce, extensions, bare)


# --- OAUTHBEARER ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class OAuthBearerInitial:
    authzid: str
    token: str
    extensions: dict[str, str]

    def __repr__(self) -> str:
        return f"OAuthBearerInitial(authzid={self.authzid!r}, token=[hidden], extensions={sorted(self.extensions)})"


def parse_oauthbearer_initial(auth_bytes: bytes) -> OAuthBearerInitial:
    """RFC 7628 §3.1: ``gs2-header %x01 key=value %x01 ... %x01 %x01`` with ``auth=Bearer <token>``."""
    text = _utf8(bytes(auth_bytes), "OAUTHBEARER initial response")
    if text == "\x01":
        raise InspectError("OAUTHBEARER message is the client's %x01 answer to an error challenge, "
                           "not an initial response")
    header, sep, rest = text.partition("\x01")
    if not sep:
        raise InspectError("OAUTHBEARER initial response has no %x01 after its gs2 header")
    if not rest.endswith("\x01\x01") and rest != "\x01":
        raise InspectError("OAUTHBEARER initial response does not end with %x01%x01")
    parts = header.split(",")
    if len(parts) != 3 or parts[0] not in ("n", "y") or parts[2] != "":
        raise InspectError("OAUTHBEARER gs2 header must be 'n,,' or 'n,a=<authzid>,'")
    authzid = ""
    if parts[1]:
        if not parts[1].startswith("a="):
            raise InspectError("OAUTHBEARER gs2 header's second field must be empty or 'a=<authzid>'")
        authzid = decode_saslname(parts[1][2:])
    values: dict[str, str] = {}
    for item in rest[:-2].split("\x01") if rest != "\x01" else ():
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise InspectError("OAUTHBEARER initial response has a field that is not 'key=value'")
        values[key] = value
    auth = values.pop("auth", None)
    if auth is None:
        raise InspectError("OAUTHBEARER initial response has no auth= field")
    scheme, _, token = auth.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise InspectError("OAUTHBEARER auth= field is not 'Bearer <token>'")
    return OAuthBearerInitial(authzid, token.strip(), values)


def _b64url(segment: str, what: str) -> bytes:
    try:
        return base64.b64decode(segment + "=" * (-len(segment) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise InspectError(f"OAUTHBEARER token's {what} is not base64url") from None


def jwt_claim(token: str, claim: str = DEFAULT_SUB_CLAIM) -> str:
    """The string claim ``claim`` of a JWS compact token's payload. No signature check: in
    passthrough the broker validated the token (and refuses a forged one)."""
    parts = token.split(".")
    if len(parts) != 3:
        raise InspectError(f"OAUTHBEARER token has {len(parts)} dot-separated parts, expected 3 (a JWS)")
    raw = _b64url(parts[1], "payload")
    try:
        payload = json.loads(raw)
    except (ValueError, RecursionError):
        raise InspectError("OAUTHBEARER token's payload is not JSON") from None
    if not isinstance(payload, dict):
        raise InspectError("OAUTHBEARER token's payload is not a JSON object")
    value = payload.get(claim)
    if value is None:
        raise InspectError(f"OAUTHBEARER token has no {claim!r} claim")
    if not isinstance(value, str) or not value.strip():
        raise InspectError(f"OAUTHBEARER token's {claim!r} claim is not a non-empty string")
    if len(value) > MAX_NAME_LENGTH:
        raise InspectError(f"OAUTHBEARER token's {claim!r} claim is longer than {MAX_NAME_LENGTH} characters")
    return value.strip()


# --- principal mapping ---------------------------------------------------------------------

def check_template(template: str) -> str:
    """A principal template must place ``{name}`` exactly once and nothing else."""
    try:
        sample = template.format(name="x", mechanism="PLAIN")
    except (KeyError, IndexError, ValueError) as e:
        raise ValueError(f"sasl.principal.template={template!r}: {e!r}; use {{name}} (and optionally "
                         "{mechanism}), e.g. User:{name}") from None
    if "{name}" not in template:
        raise ValueError(f"sasl.principal.template={template!r} has no {{name}}")
    if ":" not in sample:
        raise ValueError(f"sasl.principal.template={template!r} must give 'Type:name' (Kafka's principal form)")
    return template


def principal_for(name: str, mechanism: str, template: str = DEFAULT_PRINCIPAL_TEMPLATE) -> str:
    return template.format(name=name, mechanism=mechanism)


# --- one exchange --------------------------------------------------------------------------

PENDING = 0        # the broker answered a round; more rounds follow
SUCCESS = 1        # the exchange completed; the broker accepted the client
FAILURE = 2        # the broker refused (or answered what no success looks like)
MAYBE_DONE = 3     # a mechanism kcoord does not inspect answered a round without error


class Inspector:
    """One SASL exchange, between a SaslHandshake and the answer that ends it. Feed it each
    SaslAuthenticate request's bytes (``request``) and each answer (``response``, in order).

    ``name`` is the authenticated name once ``response`` returned SUCCESS, None if it cannot
    be known (``unknown_reason`` says why)."""

    __slots__ = ("mechanism", "sub_claim", "rounds", "answers", "name", "unknown_reason", "challenge")

    def __init__(self, mechanism: str, sub_claim: str = DEFAULT_SUB_CLAIM) -> None:
        self.mechanism = mechanism
        self.sub_claim = sub_claim
        self.rounds = 0          # SaslAuthenticate requests seen
        self.answers = 0         # their answers seen
        self.name: str | None = None
        self.unknown_reason = "" if mechanism in INSPECTED_MECHANISMS else \
            f"mechanism {mechanism} does not carry a name kcoord can read"
        self.challenge = False   # OAUTHBEARER: the server answered with an error challenge

    def request(self, auth_bytes: bytes) -> None:
        self.rounds += 1
        if self.rounds != 1 or self.mechanism not in INSPECTED_MECHANISMS:
            return
        try:
            if self.mechanism == PLAIN:
                self.name = parse_plain(auth_bytes).name
            elif self.mechanism in SCRAM_MECHANISMS:
                first = parse_scram_client_first(auth_bytes)
                if first.token_auth:
                    self.unknown_reason = ("SCRAM with a delegation token (tokenauth=true): the principal is the "
                                           "token's owner, which only the broker knows")
                else:
                    self.name = first.username
            else:
                self.name = jwt_claim(parse_oauthbearer_initial(auth_bytes).token, self.sub_claim)
        except InspectError as e:
            self.name = None
            self.unknown_reason = str(e)

    def response(self, error_code: int, auth_bytes: bytes) -> int:
        self.answers += 1
        if error_code != 0:
            return FAILURE
        mechanism = self.mechanism
        if mechanism == PLAIN:
            return SUCCESS
        if mechanism in SCRAM_MECHANISMS:
            if self.answers == 1:
                return PENDING
            if self.answers == 2 and bytes(auth_bytes[:2]) == b"v=":
                return SUCCESS
            return FAILURE   # "e=..." server-final, or a third round SCRAM does not have
        if mechanism == OAUTHBEARER:
            if self.answers == 1 and not auth_bytes:
                return SUCCESS
            self.challenge = True
            return PENDING   # the error challenge; the broker fails the client's %x01 answer
        return MAYBE_DONE
