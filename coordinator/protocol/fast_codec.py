"""Hand-written encoders for the hottest response bodies (a profile showed kio's generic
writer at ~10 µs per ConsumerGroupHeartbeat response, a fifth of the whole request).

Each encoder writes exactly the bytes kio writes for the same message (the unit tests
compare them on generated messages), so `codec.encode_body` may use it transparently.
Only flexible-version messages without tagged fields are covered; anything else goes
through kio. The durable OffsetCommit's response (v8-v10, a topic name or id and a
partition index + error code per partition) is the commit path's: kio's generic writer
walks four nested entities per partition for six bytes. The ProduceRequest v9 is the
state-topic writer's (coordinator/runtime/lean_writer.py): one per broker and loop turn,
carrying every shard's batch, whose type checks in kio's writer cost more than the bytes.
"""
from __future__ import annotations

import struct
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from kio.schema.consumer_group_heartbeat.v0 import response as cgh_v0
from kio.schema.consumer_group_heartbeat.v1 import response as cgh_v1
from kio.schema.offset_commit.v8 import response as oc_v8
from kio.schema.offset_commit.v9 import response as oc_v9
from kio.schema.offset_commit.v10 import response as oc_v10
from kio.schema.produce.v9 import request as produce_v9

from .framing import write_uvarint

_MS = timedelta(milliseconds=1)
_I32 = struct.Struct(">i")
_I32_I16 = struct.Struct(">ih")      # throttle_time_ms, error_code
_I32_I32 = struct.Struct(">ii")      # member_epoch, heartbeat_interval_ms
_I32_I16_TAGS = struct.Struct(">ihB")  # partition_index, error_code, no tagged fields
_I16_I32 = struct.Struct(">hi")      # acks, timeout_ms
_NULL_STRING = b"\x00"
_NULL_STRUCT = b"\xff"               # KIP-893 nullable struct: -1 marker
_PRESENT_STRUCT = b"\x01"
_NO_TAGS = b"\x00"
_ZERO_UUID = bytes(16)              # kio writes a None topic id as the zero UUID


def compact_nullable_string(value: str | None) -> bytes:
    if value is None:
        return _NULL_STRING
    raw = value.encode()
    return write_uvarint(len(raw) + 1) + raw


def _ms(value: timedelta | int) -> int:
    return value if value.__class__ is int else value // _MS  # type: ignore[operator]


_INT32_ARRAYS: dict[int, struct.Struct] = {}


def _int32_array(values: tuple[int, ...]) -> bytes:
    """Compact array of int32; one compiled Struct per length (parsing a format per call
    costs more than the packing)."""
    n = len(values)
    packer = _INT32_ARRAYS.get(n)
    if packer is None:
        packer = _INT32_ARRAYS[n] = struct.Struct(f">B{n}i") if n < 127 else struct.Struct(f">{n}i")
    if n < 127:
        return packer.pack(n + 1, *values)
    return write_uvarint(n + 1) + packer.pack(*values)


# The bodies of the last answers without an assignment or an error, by the message's identity: the
# group hands a steady member the same message every interval (modern/consumer/heartbeat.py),
# and a committing consumer the same accepted answer (offset_commit_response), so its bytes
# are written once. An entry holds its message, so the id names no other object
# while it is kept; bounded (cleared when full, and only bodies of at most 1 KiB are kept).
BODIES_KEPT = 16_384
BODY_KEPT_MAX_BYTES = 1024
# The group shares an all-accepted one-topic OffsetCommit answer of at most this many
# partitions (group/offsets/ops.py); only such answers come back and are worth keeping.
SHARED_ANSWER_PARTITIONS = 64
_BODIES: dict[int, tuple[Any, bytes]] = {}


def consumer_group_heartbeat_response(message: Any) -> bytes:
    """ConsumerGroupHeartbeatResponse v0/v1 (identical layouts; flexible)."""
    if message.assignment is None and not message.error_code:
        kept = _BODIES.get(id(message))
        if kept is not None and kept[0] is message:
            return kept[1]
        body = _consumer_group_heartbeat_response(message)
        if len(body) <= BODY_KEPT_MAX_BYTES:     # a steady answer is far smaller; member ids come from clients
            if len(_BODIES) >= BODIES_KEPT:
                _BODIES.clear()
            _BODIES[id(message)] = (message, body)
        return body
    return _consumer_group_heartbeat_response(message)


def _consumer_group_heartbeat_response(message: Any) -> bytes:
    parts = [
        _I32_I16.pack(_ms(message.throttle_time), message.error_code),
        compact_nullable_string(message.error_message),
        compact_nullable_string(message.member_id),
        _I32_I32.pack(message.member_epoch, _ms(message.heartbeat_interval)),
    ]
    assignment = message.assignment
    if assignment is None:
        parts.append(_NULL_STRUCT)
    else:
        topics = assignment.topic_partitions
        parts += (_PRESENT_STRUCT, write_uvarint(len(topics) + 1))
        for tp in topics:
            topic_id = tp.topic_id
            parts += (topic_id.bytes if topic_id is not None else _ZERO_UUID,
                      _int32_array(tp.partitions), _NO_TAGS)
        parts.append(_NO_TAGS)                 # Assignment's tagged fields
    parts.append(_NO_TAGS)                     # the response's tagged fields
    return b"".join(parts)


def _compact_string(value: str) -> bytes:
    raw = value.encode()
    return write_uvarint(len(raw) + 1) + raw


def offset_commit_response(message: Any) -> bytes:
    """OffsetCommitResponse v8/v9 (topic names) and v10 (topic ids); flexible. The body of an
    answer to one topic with every partition accepted is kept in `_BODIES` (the heartbeat's
    memo, by the message's identity and holding it): the group shares that answer per
    (topic, partitions) (group/offsets/ops.py), so a consumer's next commit finds its bytes.
    Any other answer (several topics, a refused partition, more than
    SHARED_ANSWER_PARTITIONS partitions) is built anew per request, so keeping it would only
    churn the memo and push the steady heartbeats' bodies out with it."""
    kept = _BODIES.get(id(message))
    if kept is not None and kept[0] is message:
        return kept[1]
    body = _offset_commit_response(message)
    topics = message.topics
    if len(topics) == 1 and len(body) <= BODY_KEPT_MAX_BYTES \
            and len(topics[0].partitions) <= SHARED_ANSWER_PARTITIONS \
            and not any(p.error_code for p in topics[0].partitions):
        if len(_BODIES) >= BODIES_KEPT:
            _BODIES.clear()
        _BODIES[id(message)] = (message, body)
    return body


def _offset_commit_response(message: Any) -> bytes:
    topics = message.topics
    parts = [_I32.pack(_ms(message.throttle_time)), write_uvarint(len(topics) + 1)]
    pack = _I32_I16_TAGS.pack
    for t in topics:
        topic_id: Any = getattr(t, "topic_id", _NAMED)
        if topic_id is _NAMED:
            parts.append(_compact_string(t.name))
        else:
            parts.append(topic_id.bytes if topic_id is not None else _ZERO_UUID)
        partitions = t.partitions
        parts.append(write_uvarint(len(partitions) + 1))
        parts += [pack(p.partition_index, p.error_code, 0) for p in partitions]
        parts.append(_NO_TAGS)                 # the topic's tagged fields
    parts.append(_NO_TAGS)                     # the response's tagged fields
    return b"".join(parts)


_NAMED = object()       # a v8/v9 topic has no topic_id field


def produce_request(message: Any) -> bytes:
    """ProduceRequest v9 (flexible): records as compact nullable bytes."""
    topics = message.topic_data
    parts = [compact_nullable_string(message.transactional_id), _I16_I32.pack(message.acks, _ms(message.timeout)),
             write_uvarint(len(topics) + 1)]
    for t in topics:
        partitions = t.partition_data
        parts += (_compact_string(t.name), write_uvarint(len(partitions) + 1))
        for p in partitions:
            records = p.records
            parts.append(_I32.pack(p.index))
            if records is None:
                parts.append(_NULL_STRING)
            else:
                parts += (write_uvarint(len(records) + 1), records)
            parts.append(_NO_TAGS)             # the partition's tagged fields
        parts.append(_NO_TAGS)                 # the topic's tagged fields
    parts.append(_NO_TAGS)                     # the request's tagged fields
    return b"".join(parts)


FAST_ENCODERS: dict[type, Callable[[Any], bytes]] = {
    cgh_v0.ConsumerGroupHeartbeatResponse: consumer_group_heartbeat_response,
    cgh_v1.ConsumerGroupHeartbeatResponse: consumer_group_heartbeat_response,
    oc_v8.OffsetCommitResponse: offset_commit_response,
    oc_v9.OffsetCommitResponse: offset_commit_response,
    oc_v10.OffsetCommitResponse: offset_commit_response,
    produce_v9.ProduceRequest: produce_request,
}
