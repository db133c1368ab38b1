"""In-process coverage-guided fuzzing of the connect group's wire messages and records (issue 18).

    .venv/bin/python fuzz/atheris_connect.py -runs=500000 -rss_limit_mb=2048 [-max_len=4096]

kio has no schema for the private keys 32703-32706 (coordinator/protocol/connect_messages.py
defines them in kio's shape), and records/ decodes types 1000-1004 with its own bounded
readers (records/connect_records.py), so both are fuzzed here. The first byte picks a
target: one of the eight messages (through coordinator.protocol.codec.decode_body, the
gateway's decoder: the bounded walk, then kio's reader), or one of the five record values.
Expected outcomes: a decoded message or BodyError; a decoded record value or FieldError
(codec.py turns it into RecordDecodeError). Anything else, and any allocation past
-rss_limit_mb, is a crash. What decodes must encode again, and a record value's encoding must
be stable (encode, decode, encode gives the same bytes).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fuzz.instrumented import atheris, instrumented  # noqa: E402

# Without atheris decode_one is also driven by tests/unit/connect/test_connect_wire.py.
with instrumented():
    from coordinator.protocol.codec import BodyError, decode_body, encode_body
    from coordinator.protocol.connect_messages import REQUESTS, RESPONSES
    from records import connect_records as cr
    from records._wire import FieldError

MESSAGES: tuple[type, ...] = tuple(REQUESTS[k] for k in sorted(REQUESTS)) + tuple(
    RESPONSES[k] for k in sorted(RESPONSES))
RECORD_TYPES: tuple[int, ...] = tuple(sorted(cr.VALUE_DECODERS))


def decode_one(data: bytes) -> object | None:
    if not data:
        return None
    pick = data[0] % (len(MESSAGES) + len(RECORD_TYPES))
    if pick < len(MESSAGES):
        cls = MESSAGES[pick]
        try:
            value = decode_body(cls, data, 1)
        except BodyError:
            return None
        encode_body(value)
        return value
    rtype = RECORD_TYPES[pick - len(MESSAGES)]
    body = b"\x00\x00" + data[1:]          # version 0, the only one
    try:
        record = cr.VALUE_DECODERS[rtype][0](body)
    except FieldError:                      # TrailingBytes included: codec.py decodes the prefix
        return None
    # Byte identity only holds for canonical input (a varint may carry redundant bytes, unknown
    # tags are written sorted by tag); once encoded, the encoding must be stable.
    encode, decode = cr.VALUE_ENCODERS[type(record)][0], cr.VALUE_DECODERS[rtype][0]
    once = encode(record, 0)
    assert encode(decode(once), 0) == once, "a record value's encoding must be stable"
    return record


def TestOneInput(data: bytes) -> None:  # noqa: N802 (atheris' name)
    decode_one(data)


def main() -> None:
    assert atheris is not None, "pip install atheris"
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
