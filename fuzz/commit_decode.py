"""The differential check of the OffsetCommit fast decoder (coordinator/gateway/commit_decode.py)
against the general path (the checked walk, then kio's reader): for any frame, the fast
decoder gives None (the general path decides) or exactly what the general path gives, and
never a request where the general path refuses the bytes. `atheris_commit_decode.py` and
`tests/unit/gateway/test_commit_decode.py` run it on fuzzed bytes and random values.
"""
from __future__ import annotations

import dataclasses
import functools
import random
import struct
import sys
import uuid
from collections import Counter
from collections.abc import Sequence
from typing import Any, TypeVar

from kio.static.primitive import i32

from coordinator.gateway import commit_decode
from coordinator.gateway.commit_decode import MAX_STRING_LENGTH
from coordinator.protocol.apis import OFFSET_COMMIT, api_schemas, request_class, request_header_version
from coordinator.protocol.codec import BodyError, decode_body, encode_body
from coordinator.protocol.framing import HeaderError, request_body_offset, write_uvarint
from fuzz.mutations import BAD_UTF8, BOMBS, BYTE_VALUES, MUTATIONS, NULLS, reframe
from fuzz.structured import EXTREMES, Template, template

T = TypeVar("T")

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


# The connection's memo (commit_decode.CommitDecoder): one connection's decoders driven
# through a run of frames, most of which share the head an earlier frame left in the memo
# and then differ; every answer must be the stateless `decode`'s for the same frame (which
# `check` holds to the general path), and the memo must stay bounded and be made only from a
# frame decoded in full. `atheris_commit_decode.py` runs it on fuzzed input,
# `tests/unit/fuzz/test_commit_decode_memo.py` on seeded runs, and
#
#     .venv/bin/python -m fuzz.commit_decode --connections 100000 --seed 1
#
# runs it without atheris and prints what it reached.

# The memo's bound, as its rule states it (commit_decode.MEMO_MAX_BYTES): written here, not
# read from the module, so a decoder whose bound grew fails the check.
MEMO_BOUND = 512
_INT32 = EXTREMES["int32"]
_INT64 = EXTREMES["int64"]
_WORDS = ("", "g", "orders", "\u00fcn\u00ef", "x" * 40, "\u00fc" * 100)
_TAGS = (b"\x00", b"\x00", b"\x00", b"\x01", b"\x01\x00\x00", b"\x01\x05\x02ab", b"", b"\x80")


class RandomProvider:
    """The FuzzedDataProvider methods the memo run draws with, from a seeded random.Random
    (the seeded runs: the test and the command line)."""

    def __init__(self, seed: int | str) -> None:
        self.rng = random.Random(seed)

    def ConsumeIntInRange(self, low: int, high: int) -> int:  # noqa: N802 (atheris' names)
        return self.rng.randint(low, high)

    def ConsumeBool(self) -> bool:  # noqa: N802
        return self.rng.random() < 0.5

    def ConsumeBytes(self, count: int) -> bytes:  # noqa: N802
        return self.rng.randbytes(count)


def _pick(p: Any, items: Sequence[T]) -> T:
    return items[p.ConsumeIntInRange(0, len(items) - 1)]


def _i32(p: Any) -> int:
    return _pick(p, _INT32) if p.ConsumeBool() else p.ConsumeIntInRange(-2**31, 2**31 - 1)


def _i64(p: Any) -> int:
    return _pick(p, _INT64) if p.ConsumeBool() else p.ConsumeIntInRange(-2**63, 2**63 - 1)


def _text(p: Any) -> str:
    if p.ConsumeBool():
        return _pick(p, _WORDS)
    return p.ConsumeBytes(p.ConsumeIntInRange(0, 24)).decode("utf-8", "replace")


def _compact(data: bytes) -> bytes:
    return write_uvarint(len(data) + 1) + data


@dataclasses.dataclass(frozen=True)
class Head:
    """What a memo keeps, as values: the request header's client id (raw bytes: any, as a
    client may send) and tagged fields, and the body up to the one topic's partitions."""
    version: int
    header_version: int
    client_id: bytes | None
    header_tags: bytes
    group: str
    epoch: int
    member: str
    instance: str | None
    topic: str | uuid.UUID | None

    def header(self) -> bytes:
        """The header after its fixed 8 bytes (api key, version, correlation id)."""
        if self.header_version == 0:
            return b""
        client = b"\xff\xff" if self.client_id is None else struct.pack(">h", len(self.client_id)) + self.client_id
        return client + (self.header_tags if self.header_version == 2 else b"")


@functools.lru_cache(maxsize=512)
def _body_head(head: Head) -> bytes:
    """The body of ``head``'s request up to its topic's partitions: kio's encoding of it with
    no partitions, less the empty partition array and the two empty tagged fields."""
    mod = sys.modules[request_class(OFFSET_COMMIT, head.version).__module__]
    key = {"topic_id": head.topic} if head.version >= 10 else {"name": head.topic}
    request = mod.OffsetCommitRequest(
        group_id=head.group, generation_id_or_member_epoch=i32(head.epoch), member_id=head.member,
        group_instance_id=head.instance, topics=(mod.OffsetCommitRequestTopic(**key, partitions=()),))
    body = encode_body(request)
    assert body.endswith(b"\x01\x00\x00"), body
    return body[:-3]


def framed(head: Head, tail: bytes, correlation_id: int = 7) -> bytes:
    prefix = struct.pack(">hhi", OFFSET_COMMIT, head.version, correlation_id)
    return reframe(prefix + head.header() + _body_head(head) + tail)


def plain_tail(partitions: Sequence[tuple[int, int, int, str | None]]) -> bytes:
    """The partitions as kio writes them, then the topic's and the request's empty tagged fields."""
    out = [write_uvarint(len(partitions) + 1)]
    for index, offset, epoch, metadata in partitions:
        out.append(struct.pack(">iqi", index, offset, epoch))
        out.append(b"\x00" if metadata is None else _compact(metadata.encode()))
        out.append(b"\x00")
    return b"".join(out) + b"\x00\x00"


def _metadata(p: Any) -> bytes:
    """A partition's metadata field: mostly what clients send, else a hostile length or value."""
    kind = p.ConsumeIntInRange(0, 11)
    if kind <= 4:
        return b"\x01"
    if kind == 5:
        return b"\x00"
    if kind == 6:
        return _compact(_text(p).encode())
    if kind == 7:
        data = p.ConsumeBytes(p.ConsumeIntInRange(0, 8))
        return (_pick(p, BOMBS) if p.ConsumeBool() else write_uvarint(len(data) + _pick(p, (0, 2, 3)))) + data
    if kind == 8:
        return _compact(_pick(p, BAD_UTF8))
    if kind == 9:           # Kafka's longest string, and one byte more
        return _compact(b"m" * (MAX_STRING_LENGTH + p.ConsumeIntInRange(0, 1)))
    if kind == 10:          # a string length whose varint does not end within 5 bytes
        return b"\x80" * p.ConsumeIntInRange(5, 6)
    return _pick(p, NULLS)


def _count(p: Any, n: int) -> bytes:
    """The partition count of ``n`` partitions: mostly true, else null, off by one, a bomb,
    a two-byte encoding of the true count, or the int32 and uint32 extremes."""
    kind = p.ConsumeIntInRange(0, 11)
    if kind <= 5:
        return write_uvarint(n + 1)
    if kind == 6:
        return b"\x00"
    if kind == 7:
        return write_uvarint(max(0, n + _pick(p, (0, 2, 3))))
    if kind == 8:
        return _pick(p, BOMBS)
    if kind == 9 and n + 1 < 0x4000:
        return bytes(((n + 1) & 0x7F | 0x80, (n + 1) >> 7))
    return write_uvarint(_pick(p, (2**31 - 1, 2**31, 2**32 - 1, 2**35 - 1)))


def hostile_tail(p: Any) -> bytes:
    """Partitions with extreme values, and lengths, counts and tagged fields that may lie."""
    n = p.ConsumeIntInRange(0, 6) if p.ConsumeIntInRange(0, 7) else p.ConsumeIntInRange(7, 300)
    parts = [struct.pack(">iqi", _i32(p), _i64(p), _i32(p)) + _metadata(p)
             + (b"\x00" if p.ConsumeIntInRange(0, 3) else _pick(p, _TAGS)) for _ in range(n)]
    ends = b"\x00\x00" if p.ConsumeIntInRange(0, 2) else _pick(p, _TAGS) + _pick(p, _TAGS)
    return _count(p, n) + b"".join(parts) + ends


def _valid_tail(p: Any) -> bytes:
    n = p.ConsumeIntInRange(0, 6)
    return plain_tail([(_i32(p), _i64(p), _i32(p), None if not p.ConsumeIntInRange(0, 5) else
                        "" if p.ConsumeIntInRange(0, 3) else _text(p)) for _ in range(n)])


def _new_head(p: Any) -> Head:
    version = _pick(p, VERSIONS)
    header_version = 2 if p.ConsumeIntInRange(0, 5) else p.ConsumeIntInRange(0, 1)
    client = None if not p.ConsumeIntInRange(0, 7) else (
        _text(p).encode() if p.ConsumeIntInRange(0, 3) else p.ConsumeBytes(p.ConsumeIntInRange(0, 12)))
    topic: str | uuid.UUID | None
    if version >= 10:
        topic = None if not p.ConsumeIntInRange(0, 5) else uuid.UUID(bytes=p.ConsumeBytes(16).ljust(16, b"\x00"))
    else:
        topic = _text(p)
    return Head(version, header_version, client, b"\x00" if p.ConsumeIntInRange(0, 7) else b"\x01\x03\x01z",
                _text(p), _i32(p), _text(p), None if p.ConsumeBool() else _text(p), topic)


def _varied(p: Any, head: Head) -> Head:
    """``head`` with one thing changed: a client id of the same length, a topic name or group
    with the same prefix and another length, another epoch or instance, or header tags."""
    kind = p.ConsumeIntInRange(0, 6)
    if kind == 0 and head.client_id:
        return dataclasses.replace(head, client_id=p.ConsumeBytes(len(head.client_id)).ljust(len(head.client_id), b"a"))
    if kind == 1 and isinstance(head.topic, str):
        longer = head.topic + _text(p)[:3] or "t"
        return dataclasses.replace(head, topic=longer if p.ConsumeBool() else head.topic[:-1])
    if kind == 1 and head.version >= 10:
        raw = bytearray(head.topic.bytes if isinstance(head.topic, uuid.UUID) else bytes(16))
        raw[p.ConsumeIntInRange(0, 15)] ^= 1 << p.ConsumeIntInRange(0, 7)
        return dataclasses.replace(head, topic=uuid.UUID(bytes=bytes(raw)) if any(raw) else None)
    if kind == 2:
        return dataclasses.replace(head, group=head.group + "g" if p.ConsumeBool() else head.group[:-1])
    if kind == 3:
        return dataclasses.replace(head, epoch=_i32(p))
    if kind == 4:
        return dataclasses.replace(head, instance=None if head.instance is not None else _text(p))
    if kind == 5:
        return dataclasses.replace(head, header_tags=_pick(p, (b"\x00", b"\x01\x03\x01z", b"\x02\x01\x00\x02\x00")))
    return dataclasses.replace(head, member=head.member + "-")


def _long_head(p: Any, head: Head) -> Head:
    """``head`` with a group name that makes the memo's bytes MEMO_MAX_BYTES, or a few more or less."""
    head = dataclasses.replace(head, group="")
    rest = len(head.header()) + len(_body_head(head)) - 1       # less the empty group's length byte
    n = MEMO_BOUND - rest - 2 + p.ConsumeIntInRange(-3, 3)   # a two-byte length
    return dataclasses.replace(head, group="g" * max(n, 0))


@functools.cache
def _templates(version: int) -> tuple[Template, ...]:
    """Valid OffsetCommit frames of ``version`` (v2-v10) whose fixed-width fields can be set
    to extremes (fuzz/structured.py); for v8-v10, ones with a single topic, whose variants
    share a memo's head (an extreme partition field) or not (an extreme epoch)."""
    out: list[Template] = []
    for seed in range(200):
        t = template(OFFSET_COMMIT, version, random.Random(seed * 11 + version))
        if version < 8:
            out.append(t)
        else:
            kio_request = general(t.frame, version)
            if kio_request is not None and len(kio_request[1].topics) == 1:
                out.append(t)
        if len(out) == 3:
            break
    return tuple(out)


# Every OffsetCommit version kio has a schema for (v2-v10: kcoord serves v0-v1 nowhere).
ALL_VERSIONS = tuple(range(api_schemas(OFFSET_COMMIT).min_version, api_schemas(OFFSET_COMMIT).max_version + 1))


class Connection:
    """One connection's decoders (one memo per version, as `commit_decode.decoders`), the
    frames it was sent (for the report of a failure) and counts of what the run reached."""

    def __init__(self) -> None:
        self.decoders = {v: commit_decode.CommitDecoder(v) for v in VERSIONS}
        self.sent: list[tuple[int, int, bytes]] = []
        self.seen: Counter[str] = Counter()

    def send(self, version: int, header_version: int, frame: bytes) -> None:
        """One frame through the decoder of ``version``, checked against the stateless decode."""
        self.sent.append((version, header_version, frame))
        try:
            self._send(self.decoders[version], header_version, frame)
        except AssertionError as e:
            raise AssertionError(f"{e}\nframes sent on this connection (decoder version, header version, "
                                 f"frame): {self.sent!r}") from None

    def _send(self, decoder: commit_decode.CommitDecoder, header_version: int, frame: bytes) -> None:
        version = decoder.version
        before = _memo(decoder)
        hit = (decoder.head is not None and header_version == decoder.header_version
               and frame.startswith(decoder.head, 12))
        got = decoder.decode(frame, header_version)
        want = commit_decode.decode(frame, header_version, version)
        after = _memo(decoder)
        self.seen["frames"] += 1
        self.seen["memo hits" if hit else "full decodes"] += 1
        assert (got is None) == (want is None), f"memo decoder {got!r}, stateless {want!r} (hit {hit})"
        if got is None:
            self.seen["refused after a memo hit" if hit else "refused"] += 1
            assert after == before, "a refused frame changed the memo"
            return
        self.seen["answered from the memo" if hit else "answered"] += 1
        assert got[0] == want[0], (got[0], want[0])
        assert type(got[1]) is type(want[1]) and got[1].__version__ == version, (got[1], want[1])
        assert fields(got[1]) == fields(want[1]), (got[1], want[1])
        if hit:
            assert after == before, "a frame answered from the memo changed it"
        elif after != before:
            self.seen["memos made"] += 1
            self.seen[f"memo of {'512' if len(decoder.head) == MEMO_BOUND else 'other'} bytes"] += 1
            (topic,) = got[1].topics
            assert decoder.head == frame[12:decoder.start] and decoder.header_version == header_version
            assert (decoder.client_id, decoder.group_id, decoder.generation, decoder.member_id, decoder.instance_id,
                    decoder.name, decoder.topic_id) == (
                got[0], got[1].group_id, got[1].generation_id_or_member_epoch, got[1].member_id,
                got[1].group_instance_id, topic.name, topic.topic_id)
        elif len(got[1].topics) == 1:
            self.seen["one topic, memo not replaced"] += 1
        assert decoder.head is None or len(decoder.head) <= MEMO_BOUND, f"a memo of {len(decoder.head)} bytes"
        if header_version == request_header_version(OFFSET_COMMIT, version):
            assert check(frame, version)     # and the stateless answer is the general path's
            self.seen["checked against kio"] += 1


def _memo(decoder: commit_decode.CommitDecoder) -> tuple:
    return (decoder.head, decoder.header_version, decoder.start, decoder.client_id, decoder.group_id,
            decoder.generation, decoder.member_id, decoder.instance_id, decoder.name, decoder.topic_id)


def run_connection(p: Any, max_frames: int = 16) -> Connection:
    """A run of frames on one connection, drawn from ``p`` (a FuzzedDataProvider or a
    RandomProvider): heads kept and varied, tails valid or hostile, frames cut, patched,
    mutated, sent with another header version or to another version's decoder, and valid
    frames of v0-v10 with fields at extremes."""
    conn = Connection()
    heads = [_new_head(p) for _ in range(p.ConsumeIntInRange(1, 3))]
    last: tuple[int, int, bytes, int] | None = None        # version, header version, frame, body offset
    for _ in range(p.ConsumeIntInRange(1, max_frames)):
        kind = p.ConsumeIntInRange(0, 11)
        at = p.ConsumeIntInRange(0, len(heads) - 1)
        if kind == 8:
            heads[at] = _varied(p, heads[at])
        elif kind == 9:
            heads[at] = _long_head(p, heads[at])
        head = heads[at]
        body = 12 + len(head.header())
        if kind <= 2 or kind in (8, 9):
            frame = framed(head, _valid_tail(p))
        elif kind <= 4:
            frame = framed(head, hostile_tail(p))
        elif kind == 10:
            version = _pick(p, ALL_VERSIONS)
            label, frame = _pick(p, _templates(version)).variant(random.Random(p.ConsumeIntInRange(0, 2**32 - 1)))
            to = version if version in VERSIONS else _pick(p, VERSIONS)
            conn.send(to, request_header_version(OFFSET_COMMIT, version), frame)
            conn.seen[f"template v{version}"] += 1
            continue
        elif last is None:
            frame = framed(head, _valid_tail(p))
        else:
            version, header_version, frame, body = last
            if kind == 5:      # cut short, or bytes after the body
                if p.ConsumeBool():
                    frame = reframe(frame[4:p.ConsumeIntInRange(12, max(12, len(frame)))])
                else:
                    frame = reframe(frame[4:] + p.ConsumeBytes(p.ConsumeIntInRange(1, 4)))
            elif kind == 6:    # bytes overwritten anywhere after the fixed header
                data = bytearray(frame)
                for _ in range(p.ConsumeIntInRange(1, 3)):
                    pos = p.ConsumeIntInRange(12, max(12, len(data) - 1))
                    patch = _pick(p, (bytes((_pick(p, BYTE_VALUES),)), _pick(p, BOMBS), _pick(p, NULLS),
                                      _pick(p, BAD_UTF8)))
                    data[pos:pos + len(patch)] = patch
                frame = reframe(bytes(data[4:]))
            elif kind == 7 and body < len(frame) < 32767:    # fuzz/mutations.py's classes (frames under an int16 size)
                name = _pick(p, sorted(MUTATIONS))
                frame = MUTATIONS[name](frame, body, random.Random(p.ConsumeIntInRange(0, 2**32 - 1)))
            else:              # the same frame under another header version or version's decoder
                if p.ConsumeBool():
                    header_version = p.ConsumeIntInRange(0, 2)
                else:
                    version = _pick(p, VERSIONS)
            conn.send(version, header_version, frame)
            last = (version, header_version, frame, body)
            continue
        conn.send(head.version, head.header_version, frame)
        last = (head.version, head.header_version, frame, body)
    return conn


def main(argv: list[str] | None = None) -> None:
    import argparse
    import time
    parser = argparse.ArgumentParser(description="Seeded runs of the memo check, without atheris.")
    parser.add_argument("--connections", type=int, default=10_000)
    parser.add_argument("--seed", default="1")
    args = parser.parse_args(argv)
    seen: Counter[str] = Counter()
    started = time.perf_counter()
    for n in range(args.connections):
        seen += run_connection(RandomProvider(f"{args.seed}-{n}")).seen
    took = time.perf_counter() - started
    print(f"{args.connections} connections, {seen['frames']} frames in {took:.1f} s "
          f"({seen['frames'] / took:,.0f} frames/s), no failure")
    for key, value in sorted(seen.items()):
        print(f"  {key}: {value}")


if __name__ == "__main__":
    main()
