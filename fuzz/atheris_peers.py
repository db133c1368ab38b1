"""In-process coverage-guided fuzzing with atheris of the bytes kcoord reads from its peers
rather than from its clients' requests: a broker's SCRAM answers to kcoord's own upstream
SASL (coordinator/security/sasl_client.py), a client certificate's subject DER for the mTLS
principal (coordinator/security/principal_mapping.py), and the membership metadata and
assignments other kcoord instances put in their upstream group (coordinator/cluster/protocol.py).

    .venv/bin/python fuzz/atheris_peers.py -runs=500000 -rss_limit_mb=2048

The first byte picks the reader; the rest is its input. The expected outcomes are a value or
the reader's own checked error; anything else is a crash.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import atheris  # noqa: E402

with atheris.instrument_imports():
    from coordinator.cluster.protocol import (  # noqa: E402
        MalformedMembershipData,
        decode_assignment,
        decode_metadata,
    )
    from coordinator.security.principal_mapping import DerError, subject_dn  # noqa: E402
    from coordinator.security.sasl_client import SaslError, Scram  # noqa: E402


def _scram(challenge: bytes, final: bytes) -> None:
    client = Scram("SCRAM-SHA-256", "alice", "pw", nonce="fuzznonce")
    client.initial()
    try:
        client.respond(challenge)
        client.respond(final)
    except SaslError:
        pass


def one(data: bytes) -> None:
    if not data:
        return
    kind, body = data[0] % 4, data[1:]
    if kind == 0:
        cut = len(body) // 2
        _scram(b"r=fuzznonce" + body[:cut], body[cut:])      # a server-first that passes the nonce check
    elif kind == 1:
        try:
            subject_dn(body)
        except DerError:
            pass
    else:
        try:
            (decode_metadata if kind == 2 else decode_assignment)(body)
        except MalformedMembershipData:
            pass


if __name__ == "__main__":
    atheris.Setup(sys.argv, lambda data: one(bytes(data)))
    atheris.Fuzz()
