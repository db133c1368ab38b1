"""The durable OffsetCommit's template decode: the common shape of an OffsetCommit v8/v9
body read in one tight pass, instead of the checked walk and kio's generic reader
(coordinator/protocol/codec.py `decode_body`), which cost more than the commit's own logic
on the gateway's side (docs/measurements/cpu-per-commit.md).

Rules:
- `decode_offset_commit(request_class, frame, offset)` returns the same kio request that
  `decode_body` returns for the same bytes, or None: then the caller takes the slow path,
  which decodes, or rejects, as before. It never raises and never rejects on its own, so
  every check of the slow path still applies to whatever is not the common shape.
- The common shape: every length (strings and arrays) in one varint byte (under 127: no
  length can claim more than the frame holds, nothing is allocated from a claimed size),
  no null where the schema forbids one, valid UTF-8, no tagged fields anywhere, and the body
  ending exactly at the frame's end. Anything else is not the common shape.
- The unit tests compare it with `decode_body` on random valid and invalid inputs
  (tests/unit/gateway/test_commit_fast_path.py).
"""
from __future__ import annotations

import struct
from typing import Any

from kio.schema.offset_commit.v8 import request as v8
from kio.schema.offset_commit.v9 import request as v9

from ..protocol.framing import request_body_offset
from .routes import Route

_I32 = struct.Struct(">i")
_PARTITION = struct.Struct(">iqi")      # partition_index, committed_offset, committed_leader_epoch

_CLASSES = {v8.OffsetCommitRequest: v8, v9.OffsetCommitRequest: v9}


def parse_offset_commit(frame: bytes, route: Route) -> tuple[str | None, Any] | None:
    """(client id, request) as BadInput.parse gives them, for the common shape; else None
    (the header too is then left to the slow path, which rejects what does not parse)."""
    try:
        client_id, offset = request_body_offset(frame, route.request_header_version)
    except Exception:   # noqa: BLE001 - the slow path parses the header again and names the error
        return None
    request = decode_offset_commit(route.request_class, frame, offset)  # type: ignore[arg-type]
    return None if request is None else (client_id, request)


def decode_offset_commit(request_class: type, frame: bytes, offset: int) -> Any | None:
    """The request at ``offset`` of ``frame`` if it has the common shape, else None."""
    mod = _CLASSES.get(request_class)
    if mod is None:
        return None
    try:
        return _decode(mod, frame, offset)
    except (IndexError, UnicodeDecodeError, struct.error, _NotCommon):
        return None


class _NotCommon(Exception):
    pass


def _string(frame: bytes, pos: int, nullable: bool) -> tuple[str | None, int]:
    n = frame[pos]
    if n >= 0x80:
        raise _NotCommon
    if n == 0:
        if not nullable:
            raise _NotCommon
        return None, pos + 1
    end = pos + n
    if end > len(frame):
        raise _NotCommon
    return frame[pos + 1:end].decode(), end


def _decode(mod: Any, frame: bytes, pos: int) -> Any:
    group_id, pos = _string(frame, pos, False)
    (generation,) = _I32.unpack_from(frame, pos)
    member_id, pos = _string(frame, pos + 4, False)
    instance_id, pos = _string(frame, pos, True)
    count = frame[pos] - 1
    if count < 0 or count >= 0x7F:
        raise _NotCommon
    pos += 1
    topic_cls, partition_cls, unpack = mod.OffsetCommitRequestTopic, mod.OffsetCommitRequestPartition, \
        _PARTITION.unpack_from
    topics = []
    for _ in range(count):
        name, pos = _string(frame, pos, False)
        n = frame[pos] - 1
        if n < 0 or n >= 0x7F:
            raise _NotCommon
        pos += 1
        partitions = []
        for _ in range(n):
            index, committed, epoch = unpack(frame, pos)
            metadata, pos = _string(frame, pos + 16, True)
            if frame[pos]:
                raise _NotCommon        # tagged fields
            pos += 1
            partitions.append(partition_cls(partition_index=index, committed_offset=committed,
                                            committed_leader_epoch=epoch, committed_metadata=metadata))
        if frame[pos]:
            raise _NotCommon
        pos += 1
        topics.append(topic_cls(name=name, partitions=tuple(partitions)))
    if frame[pos] or pos + 1 != len(frame):
        raise _NotCommon
    return mod.OffsetCommitRequest(group_id=group_id, generation_id_or_member_epoch=generation, member_id=member_id,
                                   group_instance_id=instance_id, topics=tuple(topics))
