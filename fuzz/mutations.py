"""Mutation classes for request frames: the ways a hostile or broken client lies.

Each mutation takes a valid framed request (4-byte size, header, body) and the offset
where its body starts, and returns new frame bytes. Most keep the size prefix consistent
with what they produce, so the damage reaches the header and body parsers rather than
stopping at framing; `lying_size` is the one that breaks framing itself. Connection-level
abuse (half frames followed by silence, many connections) lives in `fuzz.live`.
"""
from __future__ import annotations

import random
import struct
from collections.abc import Callable, Iterable, Iterator

from coordinator.protocol.framing import write_uvarint

Mutation = Callable[[bytes, int, random.Random], bytes]

_SIZE = struct.Struct(">i")
BOMBS = (b"\xff\xff\xff\xff\x0f", b"\x7f\xff\xff\xff", b"\x7f\xff", b"\xfe\xff\xff\xff\x07", b"\x80\x80\x80\x80\x01")
NULLS = (b"\x00", b"\xff\xff", b"\xff\xff\xff\xff", b"\xff")
BAD_UTF8 = (b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80")


def reframe(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload


def _body_pos(frame: bytes, body: int, rng: random.Random) -> int:
    return rng.randint(body, max(body, len(frame) - 1))


def _overwrite(frame: bytes, pos: int, data: bytes) -> bytes:
    return frame[:pos] + data + frame[pos + len(data):]


def valid(frame: bytes, body: int, rng: random.Random) -> bytes:
    return frame


def truncate(frame: bytes, body: int, rng: random.Random) -> bytes:
    cut = rng.randint(4 + 8, max(4 + 8, len(frame) - 1))
    return reframe(frame[4:cut])


def length_bomb(frame: bytes, body: int, rng: random.Random) -> bytes:
    return reframe(_overwrite(frame, _body_pos(frame, body, rng), rng.choice(BOMBS))[4:])


def bad_varint(frame: bytes, body: int, rng: random.Random) -> bytes:
    pos = _body_pos(frame, body, rng)
    return reframe((frame[:pos] + b"\x80" * rng.randint(5, 9) + frame[pos:])[4:])


def wrong_version(frame: bytes, body: int, rng: random.Random) -> bytes:
    version = rng.choice((-1, -32768, 32767, 99, rng.randint(0, 40)))
    return frame[:6] + struct.pack(">h", version) + frame[8:]


def null_field(frame: bytes, body: int, rng: random.Random) -> bytes:
    return reframe(_overwrite(frame, _body_pos(frame, body, rng), rng.choice(NULLS))[4:])


def invalid_utf8(frame: bytes, body: int, rng: random.Random) -> bytes:
    return reframe(_overwrite(frame, _body_pos(frame, body, rng), rng.choice(BAD_UTF8))[4:])


def bit_flip(frame: bytes, body: int, rng: random.Random) -> bytes:
    data = bytearray(frame)
    for _ in range(rng.randint(1, 4)):
        pos = rng.randint(4, len(data) - 1)
        data[pos] ^= 1 << rng.randint(0, 7)
    return bytes(data)


def random_body(frame: bytes, body: int, rng: random.Random) -> bytes:
    return reframe(frame[4:body] + rng.randbytes(rng.randint(0, 64)))


def header_lie(frame: bytes, body: int, rng: random.Random) -> bytes:
    """The client id length (int16 after the 8 fixed header bytes) or the header's tagged
    fields claim more than the frame holds."""
    if len(frame) >= 14 and rng.random() < 0.6:
        return frame[:12] + struct.pack(">h", rng.choice((-2, 32767, len(frame)))) + frame[14:]
    return reframe(frame[4:body] + b"\x05\x01\xff\xff\xff\x0f" + frame[body:])


def unknown_tag(frame: bytes, body: int, rng: random.Random) -> bytes:
    """A tagged field the schema does not know, as a newer client sends it (KIP-482): in the
    request header's tagged fields (header v2: the byte before the body is their empty
    count) or in the body's top-level ones (a flexible body ends with their empty count).
    Still a valid request for a flexible version: Kafka's readers skip the field."""
    value = rng.randbytes(rng.choice((0, 1, 5, 200)))
    field = b"\x01" + write_uvarint(rng.choice((9, 127, 128, 10_000, 2**31 - 1))) + write_uvarint(len(value)) + value
    if frame[body - 1] == 0 and rng.random() < 0.5:
        return reframe(frame[4:body - 1] + field + frame[body:])
    if frame[-1] == 0:
        return reframe(frame[4:-1] + field)
    return reframe(frame[4:] + field)


def lying_size(frame: bytes, body: int, rng: random.Random) -> bytes:
    """The size prefix itself lies: negative, above socket.request.max.bytes, or too short."""
    size = rng.choice((-1, -(2**31), 2**31 - 1, 200_000_000, rng.randint(0, 11)))
    if 0 <= size < len(frame) - 4:
        return _SIZE.pack(size) + frame[4:4 + size]
    return _SIZE.pack(size) + frame[4:]


# Body-level mutations, for the differential test of the bounded walk against kio's reader
# (tests/unit/protocol/test_walk_agrees_with_kio.py): each takes a valid body alone.

# Single bytes that readers treat specially: a null marker or length (0x00 compact, 0xff
# int8 -1 and the top of an int16/int32 -1), 1 (a present marker, an empty compact value),
# the largest one-byte varint and int8 (0x7f), a varint that runs on (0x80, 0x81: also the
# int8 markers -128 and -127, the one that made kio read a struct after a "null"), -2.
BYTE_VALUES = (0x00, 0x01, 0x7F, 0x80, 0x81, 0xFE, 0xFF)


def byte_replacements(body: bytes, positions: Iterable[int] | None = None) -> Iterator[tuple[int, int, bytes]]:
    """(position, value, mutant) for each byte at ``positions`` (all by default) replaced by
    each of BYTE_VALUES other than its own."""
    for pos in range(len(body)) if positions is None else positions:
        for value in BYTE_VALUES:
            if body[pos] != value:
                yield pos, value, body[:pos] + bytes((value,)) + body[pos + 1:]


# What follows a known tagged field's value inside its size: a byte, an empty tag, and a
# tag 0 (then 1) whose value starts with a compact array count of 2**32 - 2 (a reader that
# reads on after the value instead of skipping the size meets it as the next field).
TAG_PADDINGS = (b"\x00", b"\x00\x00", b"\x00\x00\xff\xff\xff\xff\x0f", b"\x01\x00\xff\xff\xff\xff\x0f")


def padded_tagged_fields(cls: type, body: bytes, padding: bytes) -> bytes | None:
    """The valid ``cls`` body ``body`` with ``padding`` after the value of every known tagged
    field, in every section, its size grown to cover it; None when the body has no known
    tagged field, or does not walk. Kafka's readers and kio's read a known field's value and
    go on after it, whatever its size says, where a reader that skips by the size goes on
    after the padding."""
    from coordinator.protocol.checked import Malformed
    from coordinator.protocol.unknown_tags import rewrite_tags

    def pad(known: frozenset[int], fields: dict[int, bytes]) -> list[tuple[int, bytes]]:
        return [(tag, value + padding) for tag, value in fields.items()]
    try:
        mutant, _ = rewrite_tags(cls, body, 0, len(body), pad)
    except Malformed:
        return None
    return None if mutant == body else mutant


MUTATIONS: dict[str, Mutation] = {
    "valid": valid,
    "truncate": truncate,
    "length_bomb": length_bomb,
    "bad_varint": bad_varint,
    "wrong_version": wrong_version,
    "null_field": null_field,
    "invalid_utf8": invalid_utf8,
    "bit_flip": bit_flip,
    "random_body": random_body,
    "header_lie": header_lie,
    "lying_size": lying_size,
    "unknown_tag": unknown_tag,
}
# Forwarded traffic: kcoord parses only the framing and the header, and forwards the
# body byte for byte, so only those are mutated (a mutated body would fuzz the upstream).
FORWARD_MUTATIONS = ("valid", "wrong_version", "header_lie", "lying_size")
