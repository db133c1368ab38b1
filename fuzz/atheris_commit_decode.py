"""In-process coverage-guided fuzzing of the OffsetCommit fast decoder
(coordinator/gateway/commit_decode.py) against the general path, with atheris.

    .venv/bin/python fuzz/atheris_commit_decode.py -runs=200000 -rss_limit_mb=2048 -artifact_prefix=/tmp/

The first input byte picks the version (v8-v10) and the shape:
- memo (bit 0x40 set, half the inputs): a run of frames through one connection's
  `CommitDecoder`s (fuzz/commit_decode.run_connection: heads kept, varied and as long as
  the memo's bound; tails valid or with extreme values and lying counts, lengths and tagged
  fields; frames cut, patched, mutated, sent with another header version or to another
  version's decoder; v2-v10 frames with fields at extremes), every answer checked against
  the stateless `decode`, the memo bounded and made only from frames decoded in full;
- values: a valid request built from fuzzed values (names, epochs, offsets, metadata of any
  length, null or not, and counts), so the decoder sees every value it must give back as kio
  does, then a few bytes of it overwritten by fuzzed ones;
- bytes: a request header, then fuzzed bytes as the body.
`fuzz/commit_decode.check` asserts the rule: None, or exactly the general path's values, and
never a request where the general path refuses the bytes.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import atheris  # noqa: E402

with atheris.instrument_imports():
    from kio.static.primitive import i32, i64  # noqa: E402

    from coordinator.gateway import commit_decode  # noqa: E402
    from coordinator.protocol.apis import OFFSET_COMMIT, request_class  # noqa: E402
    from coordinator.protocol.codec import encode_body  # noqa: E402
    from coordinator.protocol.framing import RequestHeader, frame  # noqa: E402

from fuzz.commit_decode import VERSIONS, check, run_connection  # noqa: E402


def _text(fdp: atheris.FuzzedDataProvider) -> str:
    return fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 40))


def _nullable(fdp: atheris.FuzzedDataProvider) -> str | None:
    return None if fdp.ConsumeIntInRange(0, 3) == 0 else _text(fdp)


def _request(version: int, fdp: atheris.FuzzedDataProvider) -> bytes:
    mod = sys.modules[request_class(OFFSET_COMMIT, version).__module__]
    topics = []
    for _ in range(fdp.ConsumeIntInRange(0, 3)):
        parts = tuple(mod.OffsetCommitRequestPartition(
            partition_index=i32(fdp.ConsumeIntInRange(-2**31, 2**31 - 1)),
            committed_offset=i64(fdp.ConsumeIntInRange(-2**63, 2**63 - 1)),
            committed_leader_epoch=i32(fdp.ConsumeIntInRange(-2**31, 2**31 - 1)),
            committed_metadata=_nullable(fdp)) for _ in range(fdp.ConsumeIntInRange(0, 6)))
        if version >= 10:
            raw = fdp.ConsumeBytes(16).ljust(16, b"\0")
            key = {"topic_id": commit_decode.uuid.UUID(bytes=raw) if any(raw) else None}
        else:
            key = {"name": _text(fdp)}
        topics.append(mod.OffsetCommitRequestTopic(**key, partitions=parts))
    request = mod.OffsetCommitRequest(group_id=_text(fdp), generation_id_or_member_epoch=i32(
        fdp.ConsumeIntInRange(-2**31, 2**31 - 1)), member_id=_text(fdp), group_instance_id=_nullable(fdp),
        topics=tuple(topics))
    return encode_body(request)


def TestOneInput(data: bytes) -> None:  # noqa: N802 (atheris' name)
    if not data:
        return
    if data[0] & 0x40:
        run_connection(atheris.FuzzedDataProvider(data[1:]))
        return
    version = VERSIONS[data[0] % len(VERSIONS)]
    header = RequestHeader(OFFSET_COMMIT, version, 1, "fuzz").encode(2)
    fdp = atheris.FuzzedDataProvider(data[1:])
    if data[0] & 0x80:
        check(frame(header + fdp.ConsumeBytes(fdp.remaining_bytes())), version)
        return
    body = bytearray(_request(version, fdp))
    for _ in range(fdp.ConsumeIntInRange(0, 3)):
        if body:
            body[fdp.ConsumeIntInRange(0, len(body) - 1)] = fdp.ConsumeInt(1) & 0xFF
    cut = fdp.ConsumeIntInRange(0, 4)
    check(frame(header + bytes(body[:len(body) - cut] if cut else body)), version)


def main() -> None:
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
