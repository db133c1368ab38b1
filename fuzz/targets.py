"""The table of what kcoord decodes from a client, for the fuzzers.

One row per API: how kcoord handles it (decoded and served here, inspected then
forwarded, or forwarded after the header only), which mutation classes reach it in a
live run, and how to build a valid body. The served group APIs are the rows of kcoord's API
table with every extension on (coordinator/protocol/api_table.py): a new served API is a
target by its row alone. A change that decodes other new bytes adds a row here;
`tests/fuzz` and `bench/bench_fuzz.py` then cover it.
"""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from coordinator.connect_apis import CONNECT_ROWS
from coordinator.private_apis import CLIENT_ASSIGNOR_ROWS
from coordinator.protocol import envelope
from coordinator.protocol.api_table import CORE_APIS, ApiTable, build_table
from coordinator.protocol.apis import (
    API_VERSIONS,
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_RECORDS,
    DELETE_TOPICS,
    DESCRIBE_CLUSTER,
    DESCRIBE_TOPIC_PARTITIONS,
    FIND_COORDINATOR,
    METADATA,
    PRODUCE,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    kio_version_range,
    request_class,
    request_header_version,
)
from coordinator.protocol.codec import encode_body
from coordinator.protocol.framing import RequestHeader
from coordinator.service.envelope import ENVELOPE_ROWS
from coordinator.service.streams_apis import STREAMS_ROWS

from .mutations import FORWARD_MUTATIONS, MUTATIONS, reframe
from .samples import sample

# Every API kcoord can serve: the core rows and the extensions' (each on by default).
SERVED_TABLE: ApiTable = build_table(CORE_APIS, CLIENT_ASSIGNOR_ROWS, CONNECT_ROWS, STREAMS_ROWS, ENVELOPE_ROWS)

SERVED = "served"        # decoded and answered by kcoord
INSPECTED = "inspected"  # decoded (in part) by kcoord's guard, then refused or forwarded
FORWARDED = "forwarded"  # header parsed, body forwarded byte for byte


@dataclass(frozen=True)
class Target:
    api_key: int
    handling: str
    # Builds a valid request body; default: a random sample of the kio class.
    body: Callable[[type, random.Random, str], Any] | None = None

    @property
    def live_mutations(self) -> tuple[str, ...]:
        # kcoord walks every body it forwards (Route.body_check), so a malformed forwarded
        # body stops at kcoord and may be mutated live. Inspected bodies name the state
        # topic; a mutation that renamed it would forward a random Produce or DeleteTopics
        # upstream, so only their framing and header are mutated live (in-process fuzzing
        # covers their bodies).
        return FORWARD_MUTATIONS if self.handling == INSPECTED else tuple(MUTATIONS)


def _no_topics(cls: type, rng: random.Random, state_topic: str) -> Any:
    """Metadata for no topics (a random sample would auto-create random topics upstream)."""
    fields = {"topics": ()}
    if "allow_auto_topic_creation" in cls.__dataclass_fields__:
        fields["allow_auto_topic_creation"] = False
    for name in ("include_cluster_authorized_operations", "include_topic_authorized_operations"):
        if name in cls.__dataclass_fields__:
            fields[name] = False
    return cls(**fields)


def _naming_state_topic(cls: type, rng: random.Random, state_topic: str) -> Any:
    """A sample whose every topic name is the state topic: the guard refuses it locally,
    so a live run never forwards a random Produce or DeleteTopics upstream."""
    return _rename(sample(cls, rng), state_topic)


def _rename(value: Any, state_topic: str) -> Any:
    import dataclasses
    if isinstance(value, tuple):
        return tuple(_rename(v, state_topic) for v in value)
    if not dataclasses.is_dataclass(value):
        return value
    changes = {}
    for field in dataclasses.fields(value):
        current = getattr(value, field.name)
        if field.name in ("name", "topic", "topic_name") and isinstance(current, str):
            changes[field.name] = state_topic
        elif field.name == "topic_names" and isinstance(current, tuple):
            changes[field.name] = tuple(state_topic for _ in current)
        elif isinstance(current, tuple) or dataclasses.is_dataclass(current):
            changes[field.name] = _rename(current, state_topic)
    return dataclasses.replace(value, **changes)


_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI", "AWS_MSK_IAM", "", "plain")


def _sasl_mechanism(cls: type, rng: random.Random, state_topic: str) -> Any:
    return cls(mechanism=rng.choice(_MECHANISMS))


def sasl_token(rng: random.Random) -> bytes:
    """A client's SaslAuthenticate bytes: PLAIN, SCRAM client-first/final, OAUTHBEARER initial
    response (with a JWS), or noise; gateway/sasl.py reads them (security/sasl_inspect.py)."""
    user = rng.choice(("alice", "al=2Cice", "=3D", "", "ü" * 3, "x" * 300))
    kind = rng.randrange(6)
    if kind == 0:
        return f"{rng.choice(('', user))}\x00{user}\x00{rng.choice(('pw', ''))}".encode()
    if kind == 1:
        extra = rng.choice(("", ",tokenauth=true", ",ext", ",a=b"))
        return f"{rng.choice(('n,,', 'y,,', 'n,a=bob,', 'p=x,,'))}n={user},r={rng.getrandbits(40):x}{extra}".encode()
    if kind == 2:
        return f"c=biws,r={rng.getrandbits(60):x},p={rng.choice(('AAAA', 'cHJvb2Y=', '!!'))}".encode()
    if kind == 3:
        import base64
        import json
        claims = rng.choice(({"sub": user}, {"sub": 7}, {}, [1], {"sub": {"x": 1}}))
        payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
        token = rng.choice((f"e30.{payload}.", f"e30.{payload}", "a.b.c", payload))
        return f"n,,\x01auth=Bearer {token}\x01\x01".encode()
    if kind == 4:
        return b"\x01"
    return bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 40)))


def _sasl_token(cls: type, rng: random.Random, state_topic: str) -> Any:
    return cls(auth_bytes=sasl_token(rng))


def _envelope(cls: type, rng: random.Random, state_topic: str) -> Any:
    """An Envelope carrying a valid config request of GROUP resources, so that mutations reach
    the inner request, principal and address (a random sample's RequestData is noise)."""
    inner_key = rng.choice(sorted(envelope.FORWARDABLE))
    low, high = kio_version_range(inner_key) or (0, 0)
    inner = _as_groups(inner_key, sample(request_class(inner_key, rng.randint(max(low, 1), high)), rng))
    return envelope.wrap(inner, rng.choice(("fuzz", None)), rng.choice(("User:a", "User:", ":", "Group:x:y")),
                         rng.choice(("127.0.0.1", "::1", "not-an-ip")))


def _as_groups(api_key: int, request: Any) -> Any:
    import dataclasses
    if api_key == envelope.LIST_CONFIG_RESOURCES:       # ListConfigResources
        return dataclasses.replace(request, resource_types=(32,))
    return dataclasses.replace(request, resources=tuple(dataclasses.replace(r, resource_type=32)
                                                        for r in request.resources))


# Row-served APIs whose valid body is not a random sample of their class.
_ROW_BODIES: dict[int, Callable[[type, random.Random, str], Any]] = {envelope.ENVELOPE: _envelope}

TARGETS: tuple[Target, ...] = (
    Target(API_VERSIONS, SERVED),
    Target(FIND_COORDINATOR, SERVED),
    # The served APIs, row by row (fuzz/atheris_private.py and fuzz/atheris_connect.py also
    # fuzz the private APIs' responses, which the member and worker libraries decode).
    *(Target(api_key, SERVED, _ROW_BODIES.get(api_key)) for api_key in SERVED_TABLE),
    Target(PRODUCE, INSPECTED, _naming_state_topic),
    Target(DELETE_RECORDS, INSPECTED, _naming_state_topic),
    Target(DELETE_TOPICS, INSPECTED, _naming_state_topic),
    Target(CREATE_PARTITIONS, INSPECTED, _naming_state_topic),
    Target(CREATE_TOPICS, INSPECTED, _naming_state_topic),
    Target(METADATA, FORWARDED, _no_topics),
    Target(DESCRIBE_CLUSTER, FORWARDED),
    Target(DESCRIBE_TOPIC_PARTITIONS, FORWARDED, _no_topics),
    # Client SASL (advertised only with SASL listeners): read by kcoord, then relayed upstream
    # (passthrough) or answered (termination).
    Target(SASL_HANDSHAKE, SERVED, _sasl_mechanism),
    Target(SASL_AUTHENTICATE, SERVED, _sasl_token),
)


def request_frame(target: Target, version: int, correlation_id: int, rng: random.Random,
                  state_topic: str) -> tuple[bytes, int]:
    """A valid framed request for ``target`` at ``version``: (frame, body offset)."""
    cls = request_class(target.api_key, version)
    body = (target.body or (lambda c, r, s: sample(c, r)))(cls, rng, state_topic)
    header = RequestHeader(target.api_key, version, correlation_id, "fuzz").encode(
        request_header_version(target.api_key, version))
    return reframe(header + encode_body(body)), 4 + len(header)
