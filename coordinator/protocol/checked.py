"""Bounded walk of a message body, run before kio's native reader sees the bytes.

Rules of this module:
- kio's native (Rust) reader allocates an array, string or bytes value of whatever length
  the bytes claim before it looks for the bytes: a 5-byte varint claiming 2**32 elements
  made it allocate 34 GB and abort the process. So every body kcoord decodes, a client's
  request or an upstream response it rewrites, is walked here first, and every length
  and count is checked against the bytes left in the frame *before* anything past it is
  read (Kafka's rule: "Tried to allocate a collection of size N, but there are only M
  bytes remaining").
- The walk allocates nothing: it only moves an offset. kio decodes afterwards, over bytes
  whose lengths are known to fit.
- The walk ends every field where kio's reader ends it, or refuses the body: kio reads on
  from where *it* thinks a field ends, over bytes only the walk's reading checked. Where a
  byte could be read two ways (a struct marker other than -1, which Kafka's readers take as
  null and kio as present; a known tagged field whose size is not its value's, which Kafka
  and kio read by the value) the body is refused.
  tests/unit/protocol/test_walk_agrees_with_kio.py checks this on mutated bodies of every
  message class.
- A non-nullable field sent as null is malformed, as Kafka's generated readers say
  ("non-nullable field X was serialized as null"). Strings longer than 32767 bytes are
  malformed too (Kafka's generated readers: "string field X had invalid length").
- A failure raises `Malformed`, whose text names the field path (`topics[3].name`), what
  was wrong and the byte offset in the frame, so the log line says where.
- The walk is compiled once per kio class into closures (one per field, fixed-size runs
  merged into one step), so the heartbeat path pays a few function calls, not a schema
  interpretation.
"""
from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from records.kio_fields import PRIMITIVE, PRIMITIVE_ARRAY, STRUCT, SchemaField, schema_fields

# (buffer, position, end) -> position after the field; raises Malformed.
Step = Callable[[bytes, int, int], int]

MAX_STRING_LENGTH = 0x7FFF

FIXED_SIZES = {
    "bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "error_code": 2, "int32": 4, "uint32": 4,
    "timedelta_i32": 4, "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uuid": 16,
}

_INT16 = struct.Struct(">h").unpack_from
_INT32 = struct.Struct(">i").unpack_from


class Malformed(Exception):
    """The body does not fit its schema; ``str()`` names the field and the offset."""

    def __init__(self, what: str, offset: int) -> None:
        super().__init__(what)
        self.what = what
        self.offset = offset
        self.path: list[str] = []      # innermost first; prefixed as the error unwinds

    def within(self, name: str) -> Malformed:
        self.path.append(name)
        return self

    @property
    def field(self) -> str:
        parts: list[str] = []
        for part in reversed(self.path):
            if part.startswith("[") or not parts:
                parts.append(part)
            else:
                parts.append("." + part)
        return "".join(parts) or "<body>"

    def __str__(self) -> str:
        return f"field {self.field}: {self.what} (at byte {self.offset})"


def read_uvarint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Unsigned varint of at most 5 bytes (Kafka's readUnsignedVarint), within ``end``."""
    if pos >= end:
        raise Malformed("truncated before a varint", pos)
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    value = byte & 0x7F
    shift = 7
    at = pos + 1
    while True:
        if at >= end:
            raise Malformed("truncated varint", pos)
        byte = buf[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7
        if shift > 28:
            raise Malformed("varint longer than 5 bytes", pos)


def _fixed(size: int, names: tuple[tuple[str, int], ...]) -> Step:
    def step(buf: bytes, pos: int, end: int) -> int:
        stop = pos + size
        if stop > end:
            at = pos
            for name, width in names:         # name the first field that does not fit
                if at + width > end:
                    short = Malformed(f"needs {width} bytes, {end - at} left", at)
                    raise short.within(name) if name else short
                at += width
        return stop
    return step


# --- strings and bytes -------------------------------------------------------------------

def _compact_blob(nullable: bool, cap: int | None) -> Step:
    def step(buf: bytes, pos: int, end: int) -> int:
        if pos < end and buf[pos] < 0x80:      # one-byte length: the usual case
            n = buf[pos]
            pos += 1
        else:
            n, pos = read_uvarint(buf, pos, end)
        if n == 0:
            if nullable:
                return pos
            raise Malformed("non-nullable field was serialized as null", pos - 1)
        n -= 1
        if cap is not None and n > cap:
            raise Malformed(f"string length {n} is above {cap}", pos)
        if n > end - pos:
            raise Malformed(f"length {n} but only {end - pos} bytes remain", pos)
        return pos + n
    return step


def _legacy_blob(nullable: bool, cap: int | None) -> Step:
    width = 2 if cap is not None else 4
    unpack = _INT16 if cap is not None else _INT32

    def step(buf: bytes, pos: int, end: int) -> int:
        if pos + width > end:
            raise Malformed(f"truncated length: needs {width} bytes, {end - pos} left", pos)
        (n,) = unpack(buf, pos)
        pos += width
        if n < 0:
            if n == -1 and nullable:
                return pos
            raise Malformed("non-nullable field was serialized as null" if n == -1 else f"negative length {n}",
                            pos - width)
        if n > end - pos:
            raise Malformed(f"length {n} but only {end - pos} bytes remain", pos)
        return pos + n
    return step


def _blob(kafka_type: str, flexible: bool, nullable: bool) -> Step:
    cap = MAX_STRING_LENGTH if kafka_type == "string" else None
    return _compact_blob(nullable, cap) if flexible else _legacy_blob(nullable, cap)


# --- arrays ------------------------------------------------------------------------------

def _array(element: Step | None, element_size: int, flexible: bool, nullable: bool) -> Step:
    """An array of ``element`` steps, or of fixed-size elements when ``element`` is None."""
    min_size = max(element_size, 1)

    def step(buf: bytes, pos: int, end: int) -> int:
        start = pos
        if flexible:
            if pos < end and buf[pos] < 0x80:
                n = buf[pos]
                pos += 1
            else:
                n, pos = read_uvarint(buf, pos, end)
            n -= 1                            # compact: 0 = null
        else:
            if pos + 4 > end:
                raise Malformed(f"truncated array length: needs 4 bytes, {end - pos} left", pos)
            (n,) = _INT32(buf, pos)
            pos += 4
        if n < 0:
            if n == -1 and nullable:
                return pos
            raise Malformed("non-nullable array was serialized as null" if n == -1 else f"negative count {n}",
                            start)
        if n * min_size > end - pos:
            raise Malformed(f"tried to allocate a collection of size {n}, but there are only "
                            f"{end - pos} bytes remaining", start)
        if element is None:
            return pos + n * element_size
        i = 0
        try:
            while i < n:
                pos = element(buf, pos, end)
                i += 1
        except Malformed as e:
            raise e.within(f"[{i}]") from None
        return pos
    return step


# --- structs -----------------------------------------------------------------------------

def _nullable_struct(inner: Step) -> Step:
    # KIP-893: an int8 marker, -1 for null, then the struct. Kafka's readers take any
    # negative marker as null, but kio's native reader takes only -1 as null and reads a
    # struct after any other: a walk that skipped a -127 as null would let kio read
    # lengths nobody checked (94 GB asked for by a 34-byte connect response). Real
    # clients write -1 and 1 only; any other negative marker is refused here.
    def step(buf: bytes, pos: int, end: int) -> int:
        if pos >= end:
            raise Malformed("truncated before the null marker of a struct", pos)
        marker = buf[pos]
        if marker == 0xFF:                    # -1: null
            return pos + 1
        if marker >= 0x80:
            raise Malformed(struct_marker_refused(marker), pos)
        return inner(buf, pos + 1, end)
    return step


def _tagged_section(tags: dict[int, tuple[str, Step]]) -> Step:
    def step(buf: bytes, pos: int, end: int) -> int:
        start = pos
        count, pos = read_uvarint(buf, pos, end)
        if count * 2 > end - pos:             # a tag and a size, at least a byte each
            raise Malformed(f"{count} tagged fields, but only {end - pos} bytes remain", start)
        for _ in range(count):
            tag, pos = read_uvarint(buf, pos, end)
            size, pos = read_uvarint(buf, pos, end)
            if size > end - pos:
                raise Malformed(f"tagged field {tag} of {size} bytes, but only {end - pos} remain", pos)
            known = tags.get(tag)
            if known is not None:
                name, inner = known
                try:
                    stop = inner(buf, pos, pos + size)
                except Malformed as e:
                    raise e.within(name) from None
                if stop != pos + size:
                    raise Malformed(tag_size_mismatch(tag, size, stop - pos), pos).within(name)
            pos += size
        return pos
    return step


def struct_marker_refused(marker: int) -> str:
    """The refusal of a negative KIP-893 marker other than -1 (``marker`` as its byte)."""
    return f"null marker {marker - 256} of a struct; Kafka's clients write -1"


def tag_size_mismatch(tag: int, size: int, used: int) -> str:
    # Kafka's generated readers and kio's native reader read a known tagged field's value
    # and go on after it, never looking at its size again; this walk, unknown_tags.py and
    # every reader that skips a field by its size go on after the size. A value shorter than
    # its size would have kio read the rest as fields nobody walked (a hidden array count
    # of 2**32 made it allocate past the machine), so the two must be the same: Kafka's
    # writers and kio's always make them so.
    return f"tagged field {tag}'s size says {size} bytes, but its value takes {used}"


def _struct(steps: list[tuple[str, Step]]) -> Step:
    if len(steps) == 1:
        name, only = steps[0]

        def single(buf: bytes, pos: int, end: int) -> int:
            try:
                return only(buf, pos, end)
            except Malformed as e:
                raise e.within(name) if name else e from None
        return single
    plan = tuple(steps)

    def step(buf: bytes, pos: int, end: int) -> int:
        name = ""
        try:
            for name, each in plan:  # noqa: B007 (the except clause names the field)
                pos = each(buf, pos, end)
        except Malformed as e:
            raise e.within(name) if name else e from None
        return pos
    return step


def field_step(field: SchemaField, flexible: bool) -> tuple[Step | None, int]:
    """(step, fixed size): a fixed-size primitive has no step, only its size."""
    # Tagged fields are optional by their absence, and kio writes them non-nullable; a
    # tagged value that is null where the type allows it is still accepted (kio's reader
    # then refuses a null string as non-nullable, which moves nothing). A nullable struct
    # is the exception: kio's reader reads its KIP-893 marker tagged or not (its writer
    # writes none when tagged), so the walk reads the marker too, or kio would read one
    # byte further than the walk, and every field after from bytes nobody walked.
    if field.kind == PRIMITIVE:
        size = FIXED_SIZES.get(field.kafka_type)
        if size is not None:
            return None, size
        return _blob(field.kafka_type, flexible, field.nullable), 0
    if field.kind == PRIMITIVE_ARRAY:
        size = FIXED_SIZES.get(field.kafka_type)
        element = None if size is not None else _blob(field.kafka_type, flexible, False)
        return _array(element, size or 0, flexible, field.nullable), 0
    inner = struct_step(field.struct)
    if field.kind == STRUCT:
        return (_nullable_struct(inner) if field.nullable else inner), 0
    return _array(inner, 0, flexible, field.nullable), 0


_STRUCTS: dict[type, Step] = {}


def struct_step(cls: type) -> Step:
    """The compiled walk of one kio message or nested struct class."""
    step = _STRUCTS.get(cls)
    if step is None:
        step = _compile(cls)
        fast = _FAST_PATHS.get((cls.__module__, cls.__name__))
        if fast is not None:
            step = fast(step)
        _STRUCTS[cls] = step
    return step


def _compile(cls: Any) -> Step:
    flexible = bool(cls.__flexible__)
    steps: list[tuple[str, Step]] = []
    run: list[tuple[str, int]] = []          # consecutive fixed-size fields, merged
    tags: dict[int, tuple[str, Step]] = {}

    def close_run() -> None:
        if run:
            steps.append(("", _fixed(sum(w for _, w in run), tuple(run))))
            run.clear()

    for field in schema_fields(cls):
        step, size = field_step(field, flexible)
        if field.tag is not None:
            tags[field.tag] = (field.name, step or _fixed(size, (("", size),)))   # the section names it
        elif step is None:
            run.append((field.name, size))
        else:
            close_run()
            steps.append((field.name, step))
    close_run()
    if flexible:
        steps.append(("_tagged_fields", _tagged_section(tags)))
    return _struct(steps) if steps else (lambda buf, pos, end: pos)


def _steady_heartbeat(has_regex: bool) -> Callable[[Step], Step]:
    """ConsumerGroupHeartbeat v0/v1 as members send it in steady state (ids and epoch; every
    other field null), walked in straight-line code: it is most of kcoord's traffic. Any
    other shape, or anything out of bounds, goes to the general walk, which also names the
    field that is wrong."""
    def wrap(general: Step) -> Step:
        def step(buf: bytes, pos: int, end: int) -> int:
            try:
                n = buf[pos]                        # group_id: compact, non-null, < 127 bytes
                if n == 0 or n >= 0x80:
                    return general(buf, pos, end)
                at = pos + n
                n = buf[at]                         # member_id
                if n == 0 or n >= 0x80:
                    return general(buf, pos, end)
                at += n + 4                         # and member_epoch
                n = buf[at]                         # instance_id (null: one byte)
                if n >= 0x80:
                    return general(buf, pos, end)
                at += n or 1
                n = buf[at]                         # rack_id, then rebalance_timeout
                if n >= 0x80:
                    return general(buf, pos, end)
                at += (n or 1) + 4
                if buf[at]:                         # subscribed_topic_names: null when steady
                    return general(buf, pos, end)
                at += 1
                if has_regex:                       # subscribed_topic_regex (v1)
                    n = buf[at]
                    if n >= 0x80:
                        return general(buf, pos, end)
                    at += n or 1
                n = buf[at]                         # server_assignor
                if n >= 0x80:
                    return general(buf, pos, end)
                at += n or 1
                if buf[at] or buf[at + 1]:          # topic_partitions null; no tagged fields
                    return general(buf, pos, end)
                at += 2
            except IndexError:
                return general(buf, pos, end)
            # Every read above is followed by a step forward, so a walk that strayed past
            # ``end`` ends past it too.
            return at if at <= end else general(buf, pos, end)
        return step
    return wrap


_FAST_PATHS: dict[tuple[str, str], Callable[[Step], Step]] = {
    ("kio.schema.consumer_group_heartbeat.v0.request", "ConsumerGroupHeartbeatRequest"): _steady_heartbeat(False),
    ("kio.schema.consumer_group_heartbeat.v1.request", "ConsumerGroupHeartbeatRequest"): _steady_heartbeat(True),
}


def check_body(cls: type, buf: bytes, offset: int, end: int | None = None) -> int:
    """Walk one ``cls`` body at ``offset``; returns where it ends, or raises Malformed."""
    return struct_step(cls)(buf, offset, len(buf) if end is None else end)
