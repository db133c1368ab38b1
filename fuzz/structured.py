"""Structured fuzzing: valid requests whose field values are pushed to their extremes.

The byte mutations (fuzz.mutations) test kcoord's parsers; these frames parse perfectly,
so kcoord serves or forwards them, and what they test is whether a *value* can hurt kcoord
or its upstream: a count an upstream allocates from (CreateTopics num_partitions,
CreatePartitions count, a record batch's records_count), a size (Fetch max_bytes), a wait
(max_wait_ms, timeouts), an index, an epoch.

Rules:
- Every API kcoord advertises, every advertised version kio has a schema for, except
  `EXCLUDED` (each with its reason). Bodies start as `fuzz.samples.sample` (valid, small)
  and get 1-3 fields set to an extreme of their wire type (`EXTREMES`), or a Produce
  record batch given one extreme header field (its CRC recomputed, so only that field is
  wrong). A few (`heavy`) instead get an array repeated up to the frame limit (a huge
  count that is still consistent with the frame) or a string 32767 bytes long.
- Fast: each API version is encoded a few times up front (`Template`) with the offset of
  every fixed-width field found by a marker value; a frame is then a template with bytes
  patched (~40,000 frames/s on one core, where kio's encoder makes ~1,500).
- Each frame carries a label naming API, version, field path and value, so a broker that
  dies can be traced to the frames it was handling (`fuzz.live` reports them with the seed).
- Deterministic for a given `random.Random`.
"""
from __future__ import annotations

import dataclasses
import datetime
import random
import struct
from collections.abc import Collection
from typing import Any

from aiokafka.record.util import calc_crc32c

from coordinator.protocol.apis import api_name, api_schemas, request_class, request_header_version
from coordinator.protocol.codec import encode_body
from coordinator.protocol.framing import RequestHeader
from records.batch import build_batch
from records.kio_fields import PRIMITIVE, PRIMITIVE_ARRAY, STRUCT, schema_fields

from .mutations import reframe
from .samples import sample

I32_MAX, I64_MAX = 2**31 - 1, 2**63 - 1
EXTREMES: dict[str, tuple[Any, ...]] = {
    "bool": (True, False),
    "float64": (0.0, -1.0, 1e308, float("nan")),
    "int8": (-1, 0, 127, -128),
    "int16": (-1, 0, 32767, -32768),
    "uint16": (0, 65535),
    "int32": (-1, 0, I32_MAX, -(2**31), 1_000_000, 50_000_000),
    "int64": (-1, 0, I64_MAX, -(2**63), 2**31),
    "timedelta_i32": tuple(datetime.timedelta(milliseconds=v) for v in (-1, 0, I32_MAX, -(2**31))),
    "timedelta_i64": tuple(datetime.timedelta(milliseconds=v) for v in (-1, 0, I32_MAX, 2**53)),
    "datetime_i64": (datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC),),
    "string": ("", "", "x" * 300, "x" * 32767, "\u00fc" * 10000),
    "bytes": (b"", b"", b"\x00" * 1000, b"\x00" * 65536),
}
# How often a field of each kind is picked: numbers are cheap and most of the point; a huge
# array or string costs up to a frame (1 MB) of traffic and encoding, so it is rare.
_WEIGHT = {None: 0.03, "string": 0.15, "bytes": 0.15, "records": 3.0}

# APIs the structured mode leaves out, and why: they change who may reach the upstream at
# all, which is an authorized admin's choice rather than a value a broker must survive.
EXCLUDED = {
    17: "SASL handshake: changes the connection's protocol state, not a value",
    36: "SASL authenticate: the same",
    51: "AlterUserScramCredentials: would lock the fuzzer's own principal out",
    57: "UpdateFeatures: may downgrade metadata.version, an admin's decision",
    64: "UnregisterBroker: removes the upstream broker itself",
}

# Magic-v2 record batch header (Kafka's DefaultRecordBatch): field -> (offset, struct).
BATCH_HEADER = {
    "base_offset": (0, ">q"), "batch_length": (8, ">i"), "partition_leader_epoch": (12, ">i"),
    "magic": (16, ">b"), "crc": (17, ">I"), "attributes": (21, ">h"), "last_offset_delta": (23, ">i"),
    "base_timestamp": (27, ">q"), "max_timestamp": (35, ">q"), "producer_id": (43, ">q"),
    "producer_epoch": (51, ">h"), "base_sequence": (53, ">i"), "records_count": (57, ">i"),
}
_CRC_COVERS_FROM = 21
_BATCH_EXTREMES = {">q": (-1, I64_MAX, -(2**63)), ">i": (-1, 0, I32_MAX, -(2**31), 50_000_000),
                   ">h": (-1, 32767, -32768, 0x20), ">b": (-1, 0, 1, 3, 127), ">I": (0, 2**32 - 1)}


Path = tuple[str | int, ...]


def _leaves(value: Any, path: Path = ()) -> list[tuple[Path, str | None]]:
    """Every field of a kio instance: (path, kafka type); entity arrays get type None."""
    out: list[tuple[Path, str | None]] = []
    for field in schema_fields(type(value)):
        here = (*path, field.name)
        current = getattr(value, field.name)
        if field.kind in (PRIMITIVE, PRIMITIVE_ARRAY):
            out.append((here, field.kafka_type))
        elif field.kind == STRUCT:
            if current is not None:
                out += _leaves(current, here)
        else:
            out.append((here, None))
            for i, item in enumerate(current or ()):
                out += _leaves(item, (*here, i))
    return out


def _get(value: Any, path: Path) -> Any:
    for step in path:
        value = value[step] if isinstance(step, int) else getattr(value, step)
    return value


def _set(value: Any, path: Path, new: Any) -> Any:
    if not path:
        return new
    step, rest = path[0], path[1:]
    if isinstance(step, int):
        return value[:step] + (_set(value[step], rest, new),) + value[step + 1:]
    return dataclasses.replace(value, **{step: _set(getattr(value, step), rest, new)})


def _label(path: Path) -> str:
    return ".".join(f"[{s}]" if isinstance(s, int) else s for s in path).replace(".[", "[")


def _extreme(value: Any, path: Path, kafka_type: str | None, rng: random.Random, room: int) -> tuple[Any, str]:
    """(new value, label) for the field at ``path``."""
    current = _get(value, path)
    if kafka_type is None:          # an array of entities: repeat one element up to the room
        if not current:
            return current, f"{_label(path)}=()"
        one = len(encode_body(_set(value, path, current[:1]))) - len(encode_body(_set(value, path, ())))
        count = min(rng.choice((100, 1000, 10_001, 30_000)), max(1, room // max(1, one)))
        return tuple(current[0] for _ in range(count)), f"{_label(path)}=[{count} elements]"
    if kafka_type == "records":
        batch, label = _patched_batch(rng)
        return batch, f"{_label(path)}.{label}"
    if isinstance(current, tuple):    # an array of primitives: many extreme values
        choices = EXTREMES.get(kafka_type)
        if not choices or kafka_type in ("string", "bytes"):
            return current, f"{_label(path)}=unchanged"
        count = rng.choice((1, 1, 1, 100, 100, min(10_001, room // 8)))
        pick = rng.choice(choices)
        return tuple(pick for _ in range(count)), f"{_label(path)}=[{count} x {pick!r}]"
    choices = EXTREMES.get(kafka_type)
    if not choices:
        return current, f"{_label(path)}=unchanged"
    pick = rng.choice(choices)
    shown = pick if not isinstance(pick, str | bytes) or len(pick) < 20 else f"<{len(pick)} {type(pick).__name__}>"
    return pick, f"{_label(path)}={shown}"


def mutated_body(cls: type, rng: random.Random, room: int) -> tuple[Any, str]:
    """A valid instance of ``cls`` with 1-3 fields at extremes, and its label."""
    value = sample(cls, rng)
    leaves = [leaf for leaf in _leaves(value) if leaf[1] != "uuid"]
    labels: list[str] = []
    if not leaves:
        return value, "valid"
    weights = [_WEIGHT.get(kafka_type, 1.0) for _, kafka_type in leaves]
    picked = {leaf[0]: leaf for leaf in rng.choices(leaves, weights, k=rng.choice((1, 1, 2, 3)))}
    for path, kafka_type in picked.values():
        try:
            new, label = _extreme(value, path, kafka_type, rng, room)
            value = _set(value, path, new)
            labels.append(label)
        except (IndexError, AttributeError):
            continue     # an earlier change removed the element this path went through
    return value, ", ".join(labels) or "valid"


# Fixed-width wire types: (struct format, marker). Every such field sits at a fixed offset
# in its message's encoding, so a template encoded once can take any value there by a
# byte patch (Kafka's numbers are fixed width; only lengths and records use varints).
_FIXED = {"int8": (">b", 0x5A), "int16": (">h", 0x5A5B), "uint16": (">H", 0x5A5B), "int32": (">i", 0x5A5B5C5D),
          "int64": (">q", 0x5A5B5C5D5E5F6061), "float64": (">d", 1234.5678),
          "timedelta_i32": (">i", 0x5A5B5C5D), "timedelta_i64": (">q", 0x5A5B5C5D5E5F)}
_RAW_EXTREMES = {">b": EXTREMES["int8"], ">h": EXTREMES["int16"], ">H": EXTREMES["uint16"],
                 ">i": (*EXTREMES["int32"], 10_001), ">q": EXTREMES["int64"], ">d": EXTREMES["float64"]}
RECORDS = "records"
_MARKER_BATCH = build_batch([(b"marker-key", b"marker-value")], timestamp_ms=1_700_000_000_000)


def _marker_value(kafka_type: str, raw: int | float) -> Any:
    if kafka_type.startswith("timedelta"):
        return datetime.timedelta(milliseconds=raw)
    return raw


@dataclasses.dataclass(frozen=True)
class Template:
    """One valid request, encoded once, with the byte offset of each patchable field."""

    label: str                                    # "create_topics v7"
    frame: bytes                                  # correlation id 0
    # (field path, offset in frame, struct format or RECORDS: a record batch starts there);
    # record batches are listed three times, so that a Produce mostly gets a batch field
    slots: tuple[tuple[str, int, str], ...]

    def variant(self, rng: random.Random) -> tuple[str, bytes]:
        """The template with 1-3 fields at extremes (a record batch header field counts as one)."""
        out = bytearray(self.frame)
        labels = []
        picked = dict.fromkeys(rng.choices(self.slots, k=rng.choice((1, 1, 2, 3)))) if self.slots else {}
        for path, offset, fmt in picked:
            if fmt == RECORDS:
                batch, label = _patched_batch(rng)
                out[offset:offset + len(batch)] = batch
                labels.append(f"{path}.{label}")
            else:
                value = rng.choice(_RAW_EXTREMES[fmt])
                struct.pack_into(fmt, out, offset, value)
                labels.append(f"{path}={value}")
        return f"{self.label}: {', '.join(labels) or 'valid'}", bytes(out)


def _patched_batch(rng: random.Random) -> tuple[bytes, str]:
    """The marker batch with one header field at an extreme (same length: patchable in place)."""
    batch = bytearray(_MARKER_BATCH)
    name = rng.choice(tuple(BATCH_HEADER))
    offset, fmt = BATCH_HEADER[name]
    value = rng.choice(_BATCH_EXTREMES[fmt])
    struct.pack_into(fmt, batch, offset, value)
    if name != "crc" and offset >= _CRC_COVERS_FROM:
        struct.pack_into(">I", batch, 17, calc_crc32c(bytes(batch[_CRC_COVERS_FROM:])))
    return bytes(batch), f"{name}={value}"


def _encode_frame(key: int, version: int, body: Any, correlation_id: int = 0) -> bytes:
    header = RequestHeader(key, version, correlation_id, "fuzz").encode(request_header_version(key, version))
    return reframe(header + encode_body(body))


def template(key: int, version: int, rng: random.Random) -> Template:
    """A random valid request of ``key`` v``version`` and where its fixed-width fields lie:
    each found by encoding it once with a marker value that occurs once in the frame."""
    value = sample(request_class(key, version), rng)
    leaves = [(path, kafka_type) for path, kafka_type in _leaves(value)
              if _get(value, path) is not None and not isinstance(_get(value, path), tuple)]
    # Record batches first: each becomes the marker batch, so that later offsets hold.
    for path, kafka_type in leaves:
        if kafka_type == "records":
            value = _set(value, path, _MARKER_BATCH)
    base = _encode_frame(key, version, value)
    slots: list[tuple[str, int, str]] = []
    at = -1
    for path, kafka_type in leaves:
        if kafka_type == "records":
            at = base.find(_MARKER_BATCH, at + 1)
            if at >= 0:
                slots += [(_label(path), at, RECORDS)] * 3
            continue
        if kafka_type not in _FIXED:
            continue
        fmt, raw = _FIXED[kafka_type]
        marked = _encode_frame(key, version, _set(value, path, _marker_value(kafka_type, raw)))
        needle = struct.pack(fmt, raw)
        if len(marked) == len(base) and marked.count(needle) == 1:
            slots.append((_label(path), marked.index(needle), fmt))
    return Template(f"{api_name(key)} v{version}", base, tuple(slots))


class StructuredFrames:
    """Structured frames for the APIs and versions a kcoord advertises: most are a template
    with fields patched to extremes (microseconds each); ``heavy`` of them are re-encoded
    with a huge array or a long string (milliseconds each, up to a frame of traffic)."""

    def __init__(self, advertised: dict[int, tuple[int, int]], rng: random.Random, *, templates_per_version: int = 3,
                 heavy: float = 0.02, max_frame: int = 1_000_000, exclude: Collection[int] = ()) -> None:
        self.max_frame, self.heavy = max_frame, heavy
        self.versions: list[tuple[int, int]] = []
        for key, (low, high) in sorted(advertised.items()):
            schemas = api_schemas(key)
            if key in EXCLUDED or key in exclude or schemas is None:
                continue
            self.versions += [(key, v) for v in range(max(low, schemas.min_version),
                                                      min(high, schemas.max_version) + 1)]
        self.templates = [template(key, version, rng) for key, version in self.versions
                          for _ in range(templates_per_version)]

    def frame(self, rng: random.Random, correlation_id: int) -> tuple[str, bytes]:
        """(label, frame) of one random API and version."""
        if rng.random() < self.heavy:
            label, frame = self.heavy_frame(rng)
        else:
            label, frame = rng.choice(self.templates).variant(rng)
        return label, with_correlation_id(frame, correlation_id)

    def heavy_frame(self, rng: random.Random) -> tuple[str, bytes]:
        key, version = rng.choice(self.versions)
        header_room = self.max_frame - 4096
        for _ in range(4):
            body, label = mutated_body(request_class(key, version), rng, header_room)
            try:
                frame = _encode_frame(key, version, body)
            except (struct.error, ValueError, OverflowError, TypeError):
                continue     # a value the wire type cannot carry (kio refuses to encode it)
            if len(frame) - 4 <= self.max_frame:
                return f"{api_name(key)} v{version}: {label}", frame
        body = sample(request_class(key, version), rng)
        return f"{api_name(key)} v{version}: valid", _encode_frame(key, version, body)


def with_correlation_id(frame: bytes, correlation_id: int) -> bytes:
    """Size (4), api key (2), version (2), then the correlation id (every header version)."""
    return frame[:8] + struct.pack(">i", correlation_id) + frame[12:]
