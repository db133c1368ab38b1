"""In-process coverage-guided fuzzing of kcoord's private client-assignor messages (issue 17).

    .venv/bin/python fuzz/atheris_private.py -runs=500000 -rss_limit_mb=2048 [-max_len=4096]

kio has no schema for the private keys 32700-32702 (coordinator/protocol/private_messages.py
defines them in kio's shape), so they are fuzzed here rather than through fuzz/targets.py,
whose rows are kio's APIs. The first byte picks a message (the three requests, and the
three responses, which the member library in members/ decodes); the rest is its body. It
goes through coordinator.protocol.codec.decode_body, the gateway's decoder: the bounded
walk, then kio's native reader. The expected outcomes are a decoded message or BodyError;
anything else, and any allocation past -rss_limit_mb, is a crash. A decoded message must
also encode again (the walk accepted only what kio can write back).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fuzz.instrumented import atheris, instrumented  # noqa: E402

# Without atheris decode_one is also driven by tests/unit/protocol/test_private_fuzz.py.
with instrumented():
    from coordinator.protocol.codec import BodyError, decode_body, encode_body
    from coordinator.protocol.private_messages import REQUESTS, RESPONSES

MESSAGES: tuple[type, ...] = tuple(REQUESTS[k] for k in sorted(REQUESTS)) + tuple(
    RESPONSES[k] for k in sorted(RESPONSES))


def decode_one(data: bytes) -> object | None:
    if not data:
        return None
    cls = MESSAGES[data[0] % len(MESSAGES)]
    try:
        value = decode_body(cls, data, 1)
    except BodyError:
        return None
    encode_body(value)
    return value


def TestOneInput(data: bytes) -> None:  # noqa: N802 (atheris' name)
    decode_one(data)


def main() -> None:
    assert atheris is not None, "pip install atheris"
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
