"""In-process coverage-guided fuzzing of kcoord's request decoding with atheris.

    .venv/bin/python fuzz/atheris_protocol.py -runs=500000 -rss_limit_mb=2048 [-max_len=4096]

Each input is one framed request; the first two bytes pick a target from fuzz.targets and
a version. It goes through what the gateway does with a request it decodes: the header
parser, then the bounded walk and kio's native reader (coordinator.protocol.codec). The
expected outcomes are a decoded request, HeaderError or BodyError; anything else, and any
allocation past -rss_limit_mb (the 34 GB length bomb of issue 10 was one), is a crash.

atheris guides coverage through Python code only, so it reaches kio's Rust reader without
being guided inside it; the -rss_limit_mb and -malloc_limit_mb limits catch what it
allocates there.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import atheris  # noqa: E402

with atheris.instrument_imports():
    from coordinator.protocol.apis import kio_version_range, request_class, request_header_version  # noqa: E402
    from coordinator.protocol.checked import check_body  # noqa: E402
    from coordinator.protocol.codec import BodyError, decode_body  # noqa: E402
    from coordinator.protocol.framing import HeaderError, decode_request_header  # noqa: E402
    from fuzz.targets import TARGETS  # noqa: E402


def decode_one(data: bytes) -> object | None:
    """The gateway's decoding of one request body chosen by the first two bytes."""
    if len(data) < 2:
        return None
    target = TARGETS[data[0] % len(TARGETS)]
    low, high = kio_version_range(target.api_key)
    version = low + data[1] % (high - low + 1)
    frame = bytes(4) + data[2:]
    try:
        header_version = request_header_version(target.api_key, version)
        _, offset = decode_request_header(frame, header_version) if len(frame) >= 12 else (None, 4)
        return decode_body(request_class(target.api_key, version), frame, offset)
    except (HeaderError, BodyError):
        return None


def check_only(data: bytes) -> None:
    """The walk alone, on raw bytes (no header): it must never raise anything but Malformed."""
    from coordinator.protocol.checked import Malformed
    if len(data) < 2:
        return
    target = TARGETS[data[0] % len(TARGETS)]
    low, high = kio_version_range(target.api_key)
    try:
        check_body(request_class(target.api_key, low + data[1] % (high - low + 1)), data, 2)
    except Malformed:
        pass


def TestOneInput(data: bytes) -> None:  # noqa: N802 (atheris' name)
    decode_one(data)
    check_only(data)


def main() -> None:
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
