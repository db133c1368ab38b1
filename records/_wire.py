"""Kafka message-schema primitives: classic and flexible (KIP-482) encodings.

Readers take `(buf, pos)` and return `(value, new_pos)`; they raise
`Malformed` (or let `struct.error`/`IndexError` escape at the end of the
buffer) and the struct decoders turn that into a `FieldError` naming the field
and its start byte.

Bounded reading: a record comes from a log anybody with produce access could
have written, so every length and count is checked against the bytes left
*before* anything is allocated or sliced (Kafka's readers do the same: "Tried to
allocate a collection of size N, but there are only M bytes remaining"). Null
(-1 / compact 0) is only accepted where the schema says nullable; any other
negative length is malformed. Varints longer than 5 bytes or wider than 32 bits
are malformed (Kafka reads them into a Java int).
Writers append to a bytearray.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable

from records.schemas import ZERO_UUID

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")
unpack_h = _H.unpack_from
unpack_i = _I.unpack_from
unpack_q = _Q.unpack_from
pack_h = _H.pack
pack_i = _I.pack
pack_q = _Q.pack
pack_b = struct.Struct(">b").pack
unpack_b = struct.Struct(">b").unpack_from

MAX_STRING = 0x7FFF  # Kafka rejects longer strings on read and write


class Malformed(Exception):
    """A low-level inconsistency found while reading (bad length, varint...)."""


class FieldError(Exception):
    """A decode failure located at a field (dotted path) and a byte position."""

    def __init__(self, field: str, position: int, reason: str) -> None:
        super().__init__(field, position, reason)
        self.field, self.position, self.reason = field, position, reason


class TrailingBytes(FieldError):
    """The struct was complete at byte `end`, but the buffer goes on.

    Kafka's generated readers stop at the end of the struct and ignore the
    rest, so the codec decodes `buf[:end]` again, counts and warns
    (records/_trailing.py) instead of failing the load.
    """

    def __init__(self, end: int, total: int) -> None:
        super().__init__("(end of struct)", end, f"{total - end} unexpected trailing bytes")
        self.end = end


LOW_LEVEL = (Malformed, struct.error, IndexError, UnicodeDecodeError, OverflowError)


def reason_of(exc: BaseException, buf: bytes) -> str:
    if isinstance(exc, Malformed):
        return str(exc)
    if isinstance(exc, UnicodeDecodeError):
        return f"invalid UTF-8 ({exc.reason})"
    return f"truncated: the buffer ends at byte {len(buf)}"


def nested(field: str, exc: FieldError) -> FieldError:
    return FieldError(f"{field}.{exc.field}", exc.position, exc.reason)


# --- readers -----------------------------------------------------------------

def uvarint(b: bytes, pos: int) -> tuple[int, int]:
    x = b[pos]
    if x < 0x80:
        return x, pos + 1
    result = x & 0x7F
    shift = 7
    pos += 1
    while True:
        x = b[pos]
        pos += 1
        result |= (x & 0x7F) << shift
        if x < 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise Malformed("unsigned varint longer than 5 bytes")
        if shift == 28 and b[pos] > 0x0F:
            # The 5th byte may only carry the 4 bits left of a 32-bit int.
            raise Malformed("unsigned varint does not fit in 32 bits")


def _need(b: bytes, end: int, what: str, n: int) -> None:
    if end > len(b):
        raise Malformed(f"{what} of {n} bytes overruns the buffer (ends at byte {len(b)})")


def _bad_length(n: int, kind: str) -> Malformed:
    if n == -1:
        return Malformed(f"non-nullable {kind} is null")
    return Malformed(f"negative {kind} length {n}")


def string(b: bytes, pos: int) -> tuple[str, int]:
    n = unpack_h(b, pos)[0]
    if n < 0:
        raise _bad_length(n, "string")
    pos += 2
    end = pos + n
    _need(b, end, "string", n)
    return b[pos:end].decode(), end


def nstring(b: bytes, pos: int) -> tuple[str | None, int]:
    n = unpack_h(b, pos)[0]
    if n < 0:
        if n != -1:
            raise Malformed(f"negative string length {n}")
        return None, pos + 2
    pos += 2
    end = pos + n
    _need(b, end, "string", n)
    return b[pos:end].decode(), end


def bytes_(b: bytes, pos: int) -> tuple[bytes, int]:
    n = unpack_i(b, pos)[0]
    if n < 0:
        raise _bad_length(n, "bytes field")
    pos += 4
    end = pos + n
    _need(b, end, "bytes", n)
    return b[pos:end], end


def cstring(b: bytes, pos: int) -> tuple[str, int]:
    n, pos = uvarint(b, pos)
    if n == 0:
        raise Malformed("non-nullable string is null")
    n -= 1
    if n > MAX_STRING:
        raise Malformed(f"string length {n} exceeds {MAX_STRING}")
    end = pos + n
    _need(b, end, "string", n)
    return b[pos:end].decode(), end


def cnstring(b: bytes, pos: int) -> tuple[str | None, int]:
    if b[pos] == 0:
        return None, pos + 1
    return cstring(b, pos)


def cbytes(b: bytes, pos: int) -> tuple[bytes, int]:
    n, pos = uvarint(b, pos)
    if n == 0:
        raise Malformed("non-nullable bytes field is null")
    end = pos + n - 1
    _need(b, end, "bytes", n - 1)
    return b[pos:end], end


def array_len(b: bytes, pos: int, flexible: bool, min_item: int = 1) -> tuple[int, int]:
    """Element count of a non-nullable array, bounded by the bytes left (as Kafka does)."""
    if flexible:
        n, pos = uvarint(b, pos)
        if n == 0:
            raise Malformed("non-nullable array is null")
        n -= 1
    else:
        n = unpack_i(b, pos)[0]
        if n < 0:
            raise _bad_length(n, "array")
        pos += 4
    if n * min_item > len(b) - pos:
        raise Malformed(f"array of {n} elements cannot fit in the {len(b) - pos} bytes left")
    return n, pos


_INT32_ARRAYS: dict[int, struct.Struct] = {}


def int32_struct(n: int) -> struct.Struct:
    """Cached `>{n}i` struct: partition lists are read and written as one unpack."""
    s = _INT32_ARRAYS.get(n)
    if s is None:
        s = struct.Struct(f">{n}i")
        if n <= 4096:
            _INT32_ARRAYS[n] = s
    return s


def int32_array(b: bytes, pos: int, flexible: bool) -> tuple[tuple[int, ...], int]:
    n, pos = array_len(b, pos, flexible, 4)
    return int32_struct(n).unpack_from(b, pos), pos + 4 * n


def string_array(b: bytes, pos: int, flexible: bool) -> tuple[tuple[str, ...], int]:
    # Each element takes at least its length: 1 byte compact, 2 bytes classic.
    n, pos = array_len(b, pos, flexible, 1 if flexible else 2)
    read = cstring if flexible else string
    out = []
    for _ in range(n):
        s, pos = read(b, pos)
        out.append(s)
    return tuple(out), pos


# Topic ids repeat across records, so decoded UUIDs are shared (bounded cache).
UUID_CACHE: dict[bytes, uuid.UUID] = {bytes(16): ZERO_UUID}
_new_uuid = object.__new__
_set_attr = object.__setattr__


def uuid_(b: bytes, pos: int) -> tuple[uuid.UUID, int]:
    end = pos + 16
    raw = b[pos:end]
    u = UUID_CACHE.get(raw)
    if u is None:
        if len(raw) != 16:
            raise Malformed("truncated uuid")
        u = _new_uuid(uuid.UUID)
        _set_attr(u, "int", int.from_bytes(raw, "big"))
        _set_attr(u, "is_safe", uuid.SafeUUID.unknown)
        if len(UUID_CACHE) < 65536:
            UUID_CACHE[raw] = u
    return u, end


def tag_count(b: bytes, pos: int) -> tuple[int, int]:
    """Number of tagged fields in a tag section, bounded by the bytes left (each tagged
    field takes at least 2 bytes: its tag and its size)."""
    n, pos = uvarint(b, pos)
    if 2 * n > len(b) - pos:
        raise Malformed(f"{n} tagged fields cannot fit in the {len(b) - pos} bytes left")
    return n, pos


def tagged_field(b: bytes, pos: int) -> tuple[int, int, int]:
    """Header of one tagged field: (tag, data_start, data_end)."""
    tag, pos = uvarint(b, pos)
    size, pos = uvarint(b, pos)
    end = pos + size
    _need(b, end, f"tagged field {tag}", size)
    return tag, pos, end


def unknown_tags(b: bytes, pos: int) -> tuple[tuple[tuple[int, bytes], ...], int]:
    """A tag section of a struct that has no known tagged fields."""
    if b[pos] == 0:
        return (), pos + 1
    n, pos = tag_count(b, pos)
    out = []
    for _ in range(n):
        tag, start, pos = tagged_field(b, pos)
        out.append((tag, b[start:pos]))
    return tuple(out), pos


def expect_end(pos: int, end: int, what: str) -> None:
    """A tagged field's content must fill exactly the size its header declared."""
    if pos != end:
        raise Malformed(f"{what}: content ends at byte {pos} but its declared size ends at {end}")


# --- writers -----------------------------------------------------------------

_SMALL_UVARINTS = [bytes([i]) for i in range(128)]


def uv(n: int) -> bytes:
    if n < 0x80:
        return _SMALL_UVARINTS[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _encoded(s: str) -> bytes:
    e = s.encode()
    if len(e) > MAX_STRING:
        raise ValueError(f"string of {len(e)} bytes exceeds Kafka's limit of {MAX_STRING}")
    return e


def w_string(out: bytearray, s: str) -> None:
    e = _encoded(s)
    out += pack_h(len(e))
    out += e


def w_nstring(out: bytearray, s: str | None) -> None:
    if s is None:
        out += b"\xff\xff"
    else:
        w_string(out, s)


def w_cstring(out: bytearray, s: str) -> None:
    e = _encoded(s)
    out += uv(len(e) + 1)
    out += e


def w_cnstring(out: bytearray, s: str | None) -> None:
    if s is None:
        out.append(0)
    else:
        w_cstring(out, s)


def w_bytes(out: bytearray, v: bytes) -> None:
    out += pack_i(len(v))
    out += v


def w_cbytes(out: bytearray, v: bytes) -> None:
    out += uv(len(v) + 1)
    out += v


def w_array_len(out: bytearray, n: int, flexible: bool) -> None:
    out += uv(n + 1) if flexible else pack_i(n)


def w_int32s(out: bytearray, xs: tuple[int, ...] | list[int]) -> None:
    out += int32_struct(len(xs)).pack(*xs)


def w_string_array(out: bytearray, xs: Iterable[str], flexible: bool) -> None:
    xs = tuple(xs)
    w_array_len(out, len(xs), flexible)
    write = w_cstring if flexible else w_string
    for s in xs:
        write(out, s)


def w_tags(out: bytearray, known: list[tuple[int, bytes]],
           unknown: tuple[tuple[int, bytes], ...]) -> None:
    """Tag section: known non-default fields and unknown ones, ascending by tag.

    Kafka writes unknown (raw) tags in the order they were read, interleaved
    before the first known tag greater than them; for the ascending sections
    Kafka produces this is the same as a sort by tag.
    """
    if not unknown:
        if not known:
            out.append(0)
            return
        fields = known
    else:
        taken = {t for t, _ in known}
        for t, _ in unknown:
            if t in taken:
                raise ValueError(f"unknown tagged field {t} collides with a known field")
        fields = sorted([*known, *unknown], key=lambda f: f[0])
    out += uv(len(fields))
    for tag, data in fields:
        out += uv(tag)
        out += uv(len(data))
        out += data
