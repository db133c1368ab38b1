"""The differential check of the OffsetCommit fast decoder (coordinator/gateway/commit_decode.py)
against the general path (the checked walk, then kio's reader): for any frame, the fast
decoder gives None (the general path decides) or exactly what the general path gives, and
never a request where the general path refuses the bytes. `atheris_commit_decode.py` and
`tests/unit/gateway/test_commit_decode.py` run it on fuzzed bytes and random values.
"""
from __future__ import annotations

from typing import Any

from coordinator.gateway import commit_decode
from coordinator.protocol.apis import OFFSET_COMMIT, request_class, request_header_version
from coordinator.protocol.codec import BodyError, decode_body
from coordinator.protocol.framing import HeaderError, request_body_offset

VERSIONS = sorted(commit_decode.VERSIONS)


def fields(request: Any) -> tuple:
    """The values of a request, kio's or the fast decoder's, as nested tuples (with the
    Python type of every value, so an int is never a bool nor a str a bytes)."""
    def typed(value: Any) -> tuple:
        return type(value).__name__, value

    def partition(p: Any) -> tuple:
        return (typed(p.partition_index), typed(p.committed_offset), typed(p.committed_leader_epoch),
                typed(p.committed_metadata))

    def topic(t: Any) -> tuple:
        return (typed(getattr(t, "name", None)), typed(getattr(t, "topic_id", None)),
                tuple(partition(p) for p in t.partitions))

    return (request.__version__, typed(request.group_id), typed(request.generation_id_or_member_epoch),
            typed(request.member_id), typed(request.group_instance_id), tuple(topic(t) for t in request.topics))


def general(frame: bytes, version: int) -> tuple[str | None, Any] | None:
    """(client id, kio request) by the gateway's general path, or None where it refuses."""
    try:
        client_id, offset = request_body_offset(frame, request_header_version(OFFSET_COMMIT, version))
        return client_id, decode_body(request_class(OFFSET_COMMIT, version), frame, offset)
    except (HeaderError, BodyError):
        return None


def check(frame: bytes, version: int) -> bool:
    """Asserts the rule above for one frame; True when the fast decoder took it."""
    fast = commit_decode.decode(frame, request_header_version(OFFSET_COMMIT, version), version)
    if fast is None:
        return False
    slow = general(frame, version)
    assert slow is not None, f"fast decode accepted what the general path refuses: {frame!r}"
    assert fast[0] == slow[0], (fast[0], slow[0])
    assert fields(fast[1]) == fields(slow[1]), (fast[1], slow[1])
    return True
