"""SASL frames from the fuzzer (fuzz/targets.py SaslHandshake/SaslAuthenticate rows, then
fuzz/mutations.py) through a connection on a SASL listener, in passthrough (upstream answers
made up, some garbled) and in termination: kcoord answers or closes, never raises, and never
records a principal the exchange did not earn."""
from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from coordinator.gateway.forward import MergingPending
from coordinator.gateway.sasl import SaslSettings
from coordinator.protocol import apis
from coordinator.protocol.apis import response_class
from coordinator.protocol.codec import BodyError, encode_response_frame
from coordinator.protocol.framing import HeaderError
from coordinator.security.sasl_server import scram_entry
from fuzz.mutations import MUTATIONS
from fuzz.targets import TARGETS, request_frame

from .test_sasl_connection import connect, make_gateway

SASL_TARGETS = [t for t in TARGETS if t.api_key in (apis.SASL_HANDSHAKE, apis.SASL_AUTHENTICATE)]
ROUNDS = 400


def test_the_fuzzer_has_sasl_targets() -> None:
    assert {t.api_key for t in SASL_TARGETS} == {apis.SASL_HANDSHAKE, apis.SASL_AUTHENTICATE}


def frames(rng: random.Random, gateway) -> bytes:   # type: ignore[no-untyped-def]
    out = []
    for i in range(rng.randint(1, 5)):
        target = rng.choice(SASL_TARGETS)
        low, high = gateway.api_versions[target.api_key]
        frame, body = request_frame(target, rng.randint(low, high), i + 1, rng, "state")
        name = rng.choice(list(MUTATIONS)) if rng.random() < 0.5 else "valid"
        out.append(MUTATIONS[name](frame, body, rng))
    return b"".join(out)


def upstream_answer(rng: random.Random, pending: MergingPending) -> bytes:
    route = pending.route
    cls = response_class(route.api_key, route.api_version)
    if route.api_key == apis.SASL_HANDSHAKE:
        body = cls(error_code=ErrorCode(rng.choice((0, 0, 33))), mechanisms=("PLAIN",))
    else:
        fields = dict(error_code=ErrorCode(rng.choice((0, 0, 58))), error_message=None,
                      auth_bytes=rng.choice((b"", b"v=x", b"r=abc,s=c2FsdA==,i=4096", b'{"status":"x"}')))
        if route.api_version >= 1:
            fields["session_lifetime"] = timedelta(milliseconds=rng.choice((0, 1000)))
        body = cls(**fields)
    frame = encode_response_frame(route.api_key, route.api_version, pending.correlation_id, body)
    if rng.random() < 0.1:
        frame = frame[:rng.randint(8, len(frame))]   # upstream garbles its answer
    return frame


async def test_passthrough_survives_fuzzed_sasl_frames() -> None:
    rng = random.Random(1313)
    gateway = make_gateway(SaslSettings(default_on=True))
    for _ in range(ROUNDS):
        connection, transport, link = connect(gateway)
        connection.data_received(frames(rng, gateway))
        while link.waiting and not transport.is_closing():
            pending = link.waiting.popleft()
            assert isinstance(pending, MergingPending)
            try:
                pending.data = pending.merge(upstream_answer(rng, pending))
            except (BodyError, HeaderError, ValueError):
                connection.upstream_failed("garbled")   # what forward.py does
                break
            if pending.size:
                connection.answered(pending.size)
                pending.size = 0
            connection.flush()
        principal = connection.sasl_principal
        assert principal is None or principal.startswith("User:")
        assert gateway.service.clients == []   # no group API was ever sent
        connection.connection_lost(None)


async def test_termination_survives_fuzzed_sasl_frames(tmp_path: Path) -> None:
    creds = tmp_path / "creds"
    creds.write_text(scram_entry("alice", "pw", "SCRAM-SHA-256", 4096) + "\n")
    gateway = make_gateway(SaslSettings.from_settings({"sasl.termination": "true",
                                                       "sasl.credentials.file": str(creds),
                                                       "connection.failed.authentication.delay.ms": "0"},
                                                      default_on=True))
    rng = random.Random(1717)
    for _ in range(ROUNDS):
        connection, transport, link = connect(gateway)
        connection.data_received(frames(rng, gateway))
        # Nothing of a terminated exchange goes upstream, and no random token authenticates.
        assert link.sent == [] and connection.sasl_principal is None
        connection.connection_lost(None)


@pytest.mark.parametrize("seed", [1, 2])
def test_sasl_tokens_sampler_varies(seed: int) -> None:
    from fuzz.targets import sasl_token
    rng = random.Random(seed)
    tokens = {sasl_token(rng) for _ in range(200)}
    assert len(tokens) > 50 and any(t.startswith(b"n,,n=") for t in tokens)
