"""In-process coverage-guided fuzzing of client SASL with atheris: what kcoord reads from a
client's SaslAuthenticate bytes (coordinator/security/sasl_inspect.py) and what its SASL
termination server does with them (coordinator/security/sasl_server.py).

    .venv/bin/python fuzz/atheris_sasl.py -runs=500000 -rss_limit_mb=2048

The first byte of each input picks the mechanism; the rest is the client's token, fed to the
inspector (one round, then a broker answer) and to a fresh server (PLAIN, or SCRAM's two
rounds with the input split in two). The expected outcomes are a name, InspectError, or
AuthenticationFailed; anything else is a crash.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import atheris  # noqa: E402

with atheris.instrument_imports():
    from coordinator.security.sasl_inspect import (  # noqa: E402
        InspectError,
        Inspector,
        jwt_claim,
        parse_oauthbearer_initial,
        parse_plain,
        parse_scram_client_first,
    )
    from coordinator.security.sasl_server import (  # noqa: E402
        AuthenticationFailed,
        CredentialStore,
        new_server,
        scram_entry,
    )

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")
# Minimum iterations: the fuzzer runs PBKDF2 for every SCRAM input that names a known user.
STORE = CredentialStore.parse([scram_entry("alice", "pw", m, 4096, b"salt") for m in ("SCRAM-SHA-256",
                                                                                         "SCRAM-SHA-512")])


def one(data: bytes) -> None:
    if not data:
        return
    mechanism = MECHANISMS[data[0] % len(MECHANISMS)]
    token = data[1:]
    for parse in (parse_plain, parse_scram_client_first, parse_oauthbearer_initial):
        try:
            parse(token)
        except InspectError:
            pass
    try:
        jwt_claim(token.decode("utf-8", "replace"))
    except InspectError:
        pass
    inspector = Inspector(mechanism)
    inspector.request(token)
    inspector.response(data[0] & 1, token[:8])
    if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        server = new_server(mechanism, STORE, nonce="n")
        half = len(token) // 2
        try:
            server.evaluate(token[:half] if mechanism != "PLAIN" else token)
            if mechanism != "PLAIN":
                server.evaluate(token[half:])
        except AuthenticationFailed:
            pass


def TestOneInput(data: bytes) -> None:  # noqa: N802 (atheris' name)
    one(data)


def main() -> None:
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
