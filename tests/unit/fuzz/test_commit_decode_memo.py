"""The memo check of the OffsetCommit decoder (fuzz/commit_decode.run_connection, the memo
shape of fuzz/atheris_commit_decode.py) on seeded runs: every connection's decoder answers
each frame as the stateless decode does, its memo stays within 512 bytes and is made only
from a frame decoded in full. The runs reach what the check is for (answers from the memo,
refusals after a memo hit, memos of exactly 512 bytes, frames of every version), the frames
it builds are kio's, and it fails on decoders that break the memo's rules.

Longer runs: `.venv/bin/python -m fuzz.commit_decode --connections 100000 --seed 1`, and
`.venv/bin/python fuzz/atheris_commit_decode.py -max_total_time=600 -max_len=4096
-len_control=0 -rss_limit_mb=2048 -malloc_limit_mb=1024` (docs/measurements/hostile-input.md).
"""
from __future__ import annotations

import uuid
from collections import Counter

import pytest
from kio.static.primitive import i32, i64

from coordinator.gateway import commit_decode
from coordinator.protocol.apis import OFFSET_COMMIT, request_class
from coordinator.protocol.codec import encode_body
from coordinator.protocol.framing import RequestHeader, frame
from fuzz.commit_decode import (
    ALL_VERSIONS,
    MEMO_BOUND,
    VERSIONS,
    Head,
    RandomProvider,
    framed,
    plain_tail,
    run_connection,
)

CONNECTIONS = 600


def _run(connections: int, seed: str = "memo") -> Counter[str]:
    seen: Counter[str] = Counter()
    for n in range(connections):
        seen += run_connection(RandomProvider(f"{seed}-{n}")).seen     # raises on a broken rule
    return seen


def test_seeded_runs_answer_as_the_stateless_decode_and_reach_the_memo():
    seen = _run(CONNECTIONS)
    # Frames answered from a kept head, and frames that shared one and were refused after it.
    assert seen["answered from the memo"] > 400 and seen["refused after a memo hit"] > 300, seen
    assert seen["memos made"] > 400 and seen["answered"] > 1000 and seen["refused"] > 1000, seen
    assert seen["memo of 512 bytes"] > 10, seen          # the bound itself is kept
    assert seen["one topic, memo not replaced"] > 50, seen   # heads over it (or the same head again) are not
    assert seen["checked against kio"] > 1000, seen
    assert all(seen[f"template v{v}"] > 5 for v in ALL_VERSIONS), seen


@pytest.mark.parametrize("version", VERSIONS)
def test_the_runs_frames_are_kios(version):
    topic: str | uuid.UUID | None = uuid.UUID(int=7) if version >= 10 else "orders"
    head = Head(version, 2, b"client", b"\x00", "group", 5, "member-1", None, topic)
    mod = __import__(f"kio.schema.offset_commit.v{version}.request", fromlist=["x"])
    values = [(0, 10, -1, ""), (2**31 - 1, -2**63, -2**31, None), (-1, 2**63 - 1, 7, "\u00fcn\u00ef")]
    request = mod.OffsetCommitRequest(
        group_id="group", generation_id_or_member_epoch=i32(5), member_id="member-1", group_instance_id=None,
        topics=(mod.OffsetCommitRequestTopic(**({"topic_id": topic} if version >= 10 else {"name": topic}),
                                             partitions=tuple(mod.OffsetCommitRequestPartition(
                                                 partition_index=i32(p), committed_offset=i64(o),
                                                 committed_leader_epoch=i32(e), committed_metadata=m)
                                                 for p, o, e, m in values)),))
    assert type(request) is request_class(OFFSET_COMMIT, version)
    want = frame(RequestHeader(OFFSET_COMMIT, version, 7, "client").encode(2) + encode_body(request))
    assert framed(head, plain_tail(values)) == want


class _IgnoresHeaderVersion(commit_decode.CommitDecoder):
    """Answers from its memo for a frame read under any header version."""
    __slots__ = ()

    def decode(self, data: bytes, header_version: int):
        if self.head is not None and data.startswith(self.head, 12):
            header_version = self.header_version
        return super().decode(data, header_version)


class _KeepsRefused(commit_decode.CommitDecoder):
    """Keeps a memo made from a frame it refused."""
    __slots__ = ()

    def decode(self, data: bytes, header_version: int):
        got = super().decode(data, header_version)
        if got is None and len(data) > 24:
            self.head, self.start = data[12:24], 24
        return got


def test_the_check_fails_on_a_memo_read_under_another_header_version(monkeypatch):
    monkeypatch.setattr(commit_decode, "CommitDecoder", _IgnoresHeaderVersion)
    with pytest.raises(AssertionError, match="memo decoder"):
        _run(CONNECTIONS)


def test_the_check_fails_on_a_memo_made_from_a_refused_frame(monkeypatch):
    monkeypatch.setattr(commit_decode, "CommitDecoder", _KeepsRefused)
    with pytest.raises(AssertionError, match="a refused frame changed the memo"):
        _run(CONNECTIONS)


def test_the_check_fails_on_a_memo_over_its_bound(monkeypatch):
    monkeypatch.setattr(commit_decode, "MEMO_MAX_BYTES", MEMO_BOUND + 8)
    with pytest.raises(AssertionError, match="a memo of 51[3-9] bytes"):
        _run(CONNECTIONS)
