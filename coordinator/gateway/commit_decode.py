"""OffsetCommit v8-v10 requests in their common shape, decoded in one pass: the durable
commit is the request a coordinator serves most, and the general path (codec.decode_body:
the checked walk, then kio's reader building frozen dataclasses) costs it a Python call per
field and a `setattr` per field of every partition (docs/measurements/instruction-counts.md).

Rules of this module:
- `decode` gives the values kio's reader gives for the same bytes (kio's zero topic id is
  None, a null string None), or None when the body is not in the common shape: a tagged
  field anywhere, a non-nullable field sent as null, a length or count the bytes left cannot
  hold, a string over Kafka's 32767 bytes or not UTF-8, bytes left after the body, a header
  that does not parse. The caller then decodes with the general path, which gives its
  answer or its error. So nothing is answered or refused here that the general path would
  not answer or refuse the same way; `tests/unit/gateway/test_commit_decode.py` and the
  `commit-decode` fuzz target compare the two on random values and bytes.
- Every length and count is checked against the bytes left before anything past it is read,
  and a count is checked against the smallest size its elements can have before any element
  is built (the checked walk's rule, coordinator/protocol/checked.py).
- The values are the request's only: the group logic checks them as it checks kio's
  (ops.offset_commit: topics, partition ranges, metadata size, the member's epoch).
- A connection decodes through its own `CommitDecoder`s (`decoders`), which keep the head of
  the last one-topic request (the bytes up to its partitions, and their values): a frame
  with the same head is decoded from its partitions on, with the same answer as `decode`
  (the class's docstring says why).
- The request is a slotted object per version with kio's field names, not kio's class: it
  serves the service's starters only (no authorizer: the authorization stage rebuilds
  requests with `dataclasses.replace`), which read fields and never re-encode the request.
"""
from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from ..group.offsets.requests import OffsetCommit, commit_answer
from ..protocol.apis import OFFSET_COMMIT, request_class
from ..protocol.framing import HeaderError, request_body_offset

MAX_STRING_LENGTH = 0x7FFF        # Kafka's generated readers: "string field X had invalid length"

_INT32 = struct.Struct(">i").unpack_from
_PARTITION = struct.Struct(">iqi").unpack_from     # partition_index, committed_offset, committed_leader_epoch
_PLAIN_PARTITION = struct.Struct(">iqiBB")       # ... then metadata "" (length 1) and no tagged fields (0)
_UUID = struct.Struct(">QQ").unpack_from
_PARTITION_MIN = 16 + 1 + 1       # the fixed fields, a null or empty metadata, no tagged fields
_TOPIC_MIN = 1 + 1 + 1            # a name (or more: a topic id), an empty partition array, no tags


class _Irregular(Exception):
    """Not the common shape: the general path decides."""


class OffsetCommitRequestPartition:
    """Built by `_partitions` as ``cls()``, which then sets the slots itself: no `__init__` frame
    per partition, and with neither `__init__` nor `__new__` of its own the class's call runs
    C only (cheaper than ``object.__new__(cls)``, a call through a wrapper with its own checks)."""
    __slots__ = ("partition_index", "committed_offset", "committed_leader_epoch", "committed_metadata")
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int
    committed_metadata: str | None

    def __repr__(self) -> str:
        return (f"OffsetCommitRequestPartition(partition_index={self.partition_index}, committed_offset="
                f"{self.committed_offset}, committed_leader_epoch={self.committed_leader_epoch}, "
                f"committed_metadata={self.committed_metadata!r})")


class OffsetCommitRequestTopic:
    """By `name` (v8-v9) or by `topic_id` (v10: the other one is None, as kio has no such field).
    Built by `_body` as the partitions are (``cls()``, then the slots)."""
    __slots__ = ("name", "topic_id", "partitions")
    name: str | None
    topic_id: uuid.UUID | None
    partitions: tuple[OffsetCommitRequestPartition, ...]

    def __repr__(self) -> str:
        named = f"topic_id={self.topic_id!r}" if self.name is None else f"name={self.name!r}"
        return f"OffsetCommitRequestTopic({named}, partitions={self.partitions!r})"


class OffsetCommitRequest(OffsetCommit):
    """kio's OffsetCommitRequest fields at one version (`__version__`, set per subclass), and
    the shard's shape of it (group/offsets/requests.OffsetCommit, whose slots it has: the
    version's constants set with the fields), so the shard takes the request as its own
    shape instead of building one per commit (`offset_commit_shape`). Built by `_body` as the
    partitions are (``cls()``, then the slots)."""
    __slots__ = ()
    __version__: int

    def __repr__(self) -> str:
        return (f"OffsetCommitRequest(v{self.__version__}, group_id={self.group_id!r}, generation_id_or_member_epoch="
                f"{self.generation_id_or_member_epoch}, member_id={self.member_id!r}, group_instance_id="
                f"{self.group_instance_id!r}, topics={self.topics!r})")


_REQUESTS = {v: type(f"OffsetCommitRequestV{v}", (OffsetCommitRequest,), {"__slots__": (), "__version__": v})
             for v in (8, 9, 10)}
# The shape's fields that are the version's (offset_commit_shape's rules): no retention time
# (v5+), a leader epoch per partition (v6+), topics by id from v10, GROUP_ID_NOT_FOUND from v9.
_ANSWERS = {v: commit_answer(v) for v in _REQUESTS}
VERSIONS = frozenset(_REQUESTS)


def _length(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """A compact length or count (an unsigned varint of at most 5 bytes), minus one: -1 is null."""
    if pos >= end:
        raise _Irregular
    byte = buf[pos]
    if byte < 0x80:
        return byte - 1, pos + 1
    value = byte & 0x7F
    shift = 7
    at = pos + 1
    while at < end and shift <= 28:
        byte = buf[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value - 1, at
        shift += 7
    raise _Irregular


def _string(buf: bytes, pos: int, end: int, nullable: bool) -> tuple[str | None, int]:
    if pos < end and (n := buf[pos] - 1) < 0x7F:
        # A one-byte length (a string under 127 bytes: the group, member and topic names
        # clients send), read here once: `_length`'s call was a third of this function.
        # Such a length is under MAX_STRING_LENGTH.
        pos += 1
    else:
        n, pos = _length(buf, pos, end)
        if n > MAX_STRING_LENGTH:
            raise _Irregular
    if n < 0:
        if nullable:
            return None, pos
        raise _Irregular
    if n > end - pos:
        raise _Irregular
    try:
        return buf[pos:pos + n].decode(), pos + n
    except UnicodeDecodeError:
        raise _Irregular from None


def _no_tags(buf: bytes, pos: int, end: int) -> int:
    if pos >= end or buf[pos] != 0:
        raise _Irregular
    return pos + 1


def _partitions(buf: bytes, pos: int, end: int) -> tuple[tuple[OffsetCommitRequestPartition, ...], int]:
    if pos < end and (count := buf[pos] - 1) < 0x7F:
        pos += 1        # a one-byte count, read here once (as in `_string`)
    else:
        count, pos = _length(buf, pos, end)
    if count < 0 or count * _PARTITION_MIN > end - pos:
        raise _Irregular
    cls = OffsetCommitRequestPartition    # slots set here: no Python __init__ frame per partition
    # What clients send: every partition without metadata and tagged fields, 18 bytes each,
    # cut by one C iterator; the first partition of another shape sends all to the loop below.
    parts: list[OffsetCommitRequestPartition] = []
    append = parts.append
    # A slice of the frame (a copy of at most the frame's rest) costs less than a memoryview
    # and its slice for the few partitions a commit holds.
    for index, offset, epoch, metadata, tags in _PLAIN_PARTITION.iter_unpack(buf[pos:pos + count * _PARTITION_MIN]):
        if metadata != 1 or tags:
            break
        p = cls()
        # One store per slot: a four-target assignment builds and unpacks a tuple first.
        p.partition_index = index
        p.committed_offset = offset
        p.committed_leader_epoch = epoch
        p.committed_metadata = ""
        append(p)
    else:
        return tuple(parts), pos + count * _PARTITION_MIN
    parts.clear()
    for _ in range(count):
        if pos + 16 > end:
            raise _Irregular
        p = cls()
        p.partition_index, p.committed_offset, p.committed_leader_epoch = _PARTITION(buf, pos)
        pos += 16
        p.committed_metadata, pos = _string(buf, pos, end, True)
        pos = _no_tags(buf, pos, end)
        append(p)
    return tuple(parts), pos


def _body(version: int, buf: bytes, pos: int) -> tuple[OffsetCommitRequest, int]:
    """The request, and where its one topic's partitions begin (0 for any other count of
    topics): `CommitDecoder`'s memo ends there."""
    end = len(buf)
    group_id, pos = _string(buf, pos, end, False)
    if pos + 4 > end:
        raise _Irregular
    (generation,) = _INT32(buf, pos)
    member_id, pos = _string(buf, pos + 4, end, False)
    if pos < end and buf[pos] == 0:
        instance_id, pos = None, pos + 1        # no group instance id: what a consumer sends
    else:
        instance_id, pos = _string(buf, pos, end, True)
    if pos < end and (count := buf[pos] - 1) < 0x7F:
        pos += 1        # a one-byte count, read here once (as in `_string`)
    else:
        count, pos = _length(buf, pos, end)
    if count < 0 or count * (_TOPIC_MIN if version < 10 else _TOPIC_MIN + 15) > end - pos:
        raise _Irregular
    topics: list[OffsetCommitRequestTopic] = []
    memo_end = 0
    # The tagged fields' counts (0, one byte each) are checked here, without `_no_tags`'s call.
    for _ in range(count):
        if version < 10:
            name, pos = _string(buf, pos, end, False)
            topic_id = None
        else:
            if pos + 16 > end:
                raise _Irregular
            high, low = _UUID(buf, pos)
            pos += 16
            topic_id = uuid.UUID(int=(high << 64) | low) if high or low else None
            name = None
        if count == 1:
            memo_end = pos
        partitions, pos = _partitions(buf, pos, end)
        if pos >= end or buf[pos]:
            raise _Irregular
        pos += 1
        topic = OffsetCommitRequestTopic()
        topic.name, topic.topic_id, topic.partitions = name, topic_id, partitions
        topics.append(topic)
    if pos + 1 != end or buf[pos]:
        raise _Irregular
    request = _REQUESTS[version]()
    request.group_id = group_id
    request.generation_id_or_member_epoch = generation
    request.member_id = member_id
    request.group_instance_id = instance_id
    request.topics = tuple(topics)
    request.retention_ms = -1
    request.by_id = version >= 10
    request.leader_epochs = True
    request.group_id_not_found = version >= 9
    request.answer = _ANSWERS[version]
    return request, memo_end


def decode(frame: bytes, header_version: int, api_version: int) -> tuple[str | None, Any] | None:
    """(client id, request) of a framed OffsetCommit v8-v10 in the common shape, else None."""
    try:
        client_id, offset = request_body_offset(frame, header_version)
        return client_id, _body(api_version, frame, offset)[0]
    except (_Irregular, HeaderError):
        return None


# The longest head `CommitDecoder` keeps: a consumer's (client id, group, member and topic
# names) is under 200 bytes; a longer one is decoded in full each time.
MEMO_MAX_BYTES = 512


class CommitDecoder:
    """`decode` of one OffsetCommit version for one connection, which keeps the head of the
    last request it decoded in full with one topic: the bytes from the request header's
    client id to that topic's partitions (client id, group, epoch, member, instance, topic),
    and their values. A consumer commits its partitions again and again with the same head,
    so a frame starting with those bytes has only its partitions and its end decoded (about
    a third of the decode of a 4-partition commit, docs/measurements/cpu-per-commit.md).

    The same answer as `decode` for any frame: decoding reads a frame from its start, so the
    same bytes up to a point leave the same values and position there, given the same header
    version (kept with the memo) and request version (the decoder's own); the checks made
    there that depend on the frame's length (a string or count that the bytes left cannot
    hold) hold for any frame that starts with bytes that passed them, or the rest fails to
    decode too. The memo is made only from a frame decoded in full without fault, and holds
    at most MEMO_MAX_BYTES. `tests/unit/gateway/test_commit_decode.py` compares the two on
    runs of frames sharing heads, mutated and cut short."""

    __slots__ = ("version", "head", "header_version", "start", "client_id", "group_id", "generation",
                 "member_id", "instance_id", "name", "topic_id", "request_class", "by_id", "group_id_not_found",
                 "answer")

    def __init__(self, version: int) -> None:
        self.version = version
        self.request_class = _REQUESTS[version]
        self.by_id = version >= 10
        self.group_id_not_found = version >= 9
        self.answer = _ANSWERS[version]
        self.head: bytes | None = None
        self.header_version = -1
        self.start = 0
        self.client_id: str | None = None
        self.group_id = self.member_id = ""
        self.generation = 0
        self.instance_id: str | None = None
        self.name: str | None = None
        self.topic_id: uuid.UUID | None = None

    def decode(self, frame: bytes, header_version: int) -> tuple[str | None, Any] | None:
        head = self.head
        if head is not None and header_version == self.header_version and frame.startswith(head, 12):
            end = len(frame)
            try:
                partitions, pos = _partitions(frame, self.start, end)
            except _Irregular:
                return None
            # The topic's and the request's tagged fields: none, and nothing after them.
            if pos + 2 != end or frame[pos] or frame[pos + 1]:
                return None
            topic = _new(OffsetCommitRequestTopic)
            topic.name = self.name
            topic.topic_id = self.topic_id
            topic.partitions = partitions
            request = self.request_class()
            request.group_id = self.group_id
            request.generation_id_or_member_epoch = self.generation
            request.member_id = self.member_id
            request.group_instance_id = self.instance_id
            request.topics = (topic,)
            request.retention_ms = -1
            request.by_id = self.by_id
            request.leader_epochs = True
            request.group_id_not_found = self.group_id_not_found
            request.answer = self.answer
            return self.client_id, request
        try:
            client_id, offset = request_body_offset(frame, header_version)
            request, start = _body(self.version, frame, offset)
        except (_Irregular, HeaderError):
            return None
        if start and start - 12 <= MEMO_MAX_BYTES:
            self.head = frame[12:start]
            self.header_version = header_version
            self.start = start
            self.client_id = client_id
            self.group_id = request.group_id
            self.generation = request.generation_id_or_member_epoch
            self.member_id = request.member_id
            self.instance_id = request.group_instance_id
            (topic,) = request.topics
            self.name = topic.name
            self.topic_id = topic.topic_id
        return client_id, request


_new = object.__new__


Decoders = dict[type | None, Callable[[bytes, int], tuple[str | None, Any] | None]]


def decoders(starters: Any = None) -> Decoders:
    """One connection's decoders (`CommitDecoder.decode`, a memo each) by kio's request class
    of each version it serves (the route's class). With ``starters`` (the service's calls
    without a coroutine), only when OffsetCommit has one: the authorization stage rebuilds
    kio's requests, so it needs the general path."""
    if starters is not None and OFFSET_COMMIT not in starters:
        return {}
    return {request_class(OFFSET_COMMIT, v): CommitDecoder(v).decode for v in VERSIONS}
