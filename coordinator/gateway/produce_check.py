"""Each partition's record batch of a forwarded Produce, checked before the upstream sees it.

Rules:
- The batch rules, codes and order are Kafka's (coordinator/protocol/record_batch_check.py):
  INVALID_RECORD, CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, per partition. Kafka appends the other
  partitions of the same request; so does the gateway (state_guard.StateTopicGuard.produce
  splits the request at partition granularity and completes upstream's answer).
- The CRC-32C is checked per upstream (``produce.verify.crc``): ``auto`` checks it in front of
  an upstream that does not (Tansu 0.6, told apart as cluster/upstream.py tells it: no
  OffsetForLeaderEpoch), not in front of Kafka, which checks every batch itself.
- ``message.max.bytes`` (Kafka's broker default for a topic's max.message.bytes) is not
  enforced unless set: kcoord does not know a topic's own max.message.bytes, and a default
  lower than it would refuse what Kafka accepts. Unset, the frame bound applies
  (socket.request.max.bytes).
- A Produce up to max_decoded_request_bytes is checked after the generic bounded walk
  (protocol/checked.py), so every length read here fits the frame. A larger one is read
  here first, each name and span held to the frame, within MAX_NAMED_PARTITIONS topics,
  partitions and tagged fields (state_guard.py says why), and walked only after: over the
  bound, or not fitting its frame, it is refused whole (TooLarge, BodyError: the connection
  is closed). So no Produce goes up unwalked, nor with its records unchecked when the checks
  are on.
- Produce's ``topic_data`` is a keyed array (``mapKey`` name up to v12, topic id from v13,
  which kcoord forwards in front of Kafka 4.1+, leader_endpoints.py): Kafka's network
  thread parses it into a hash table whose cost a repeated key, or keys whose Java hash
  codes meet, makes quadratic to cubic (keyed_arrays.py says how and what was measured).
  The walk here reads every topic's key anyway, so it refuses a Produce that names a topic
  twice, and one of at least NAMES_LAID_OUT_FROM topics whose keys would crowd Kafka's
  table (keyed_arrays.crowded), by raising RepeatedKeys:
  the connection is closed, as for any body Kafka could not take. The names are read in
  every Produce of more than one topic, with the record checks off too. Forwarded unread,
  one of 100 MiB could hold 10**5 names of one hash code and hold a Kafka network thread
  for hours.
- Cost: a few integer reads per topic and partition, O(1) per batch, plus the CRC in C when
  on (bench/bench_produce_checks.py); the names: nothing for one topic, a set of name
  slices for more (bench/bench_keyed_arrays.py check).
"""
from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..protocol.checked import Malformed, read_uvarint
from ..protocol.codec import BodyError
from ..protocol.produce import FIRST_FLEXIBLE, FIRST_TOPIC_ID
from ..protocol.record_batch_check import check_partition_records
from .keyed_arrays import crowded, java_string_hash, java_uuid_hash

RULE_RECORDS = "produce_records"   # metric label value (kcoord_gateway_safeguard_refusals_total)
OFFSET_FOR_LEADER_EPOCH = 23      # listed by every Kafka since 0.11, not by Tansu 0.6
# Produce's names are laid out as Kafka's table would seat them (keyed_arrays.crowded) from
# this many topics: below it one crowd of one hash code costs Kafka at most 256**3/6 steps
# (~1 ms), while laying names out costs ~1.5 µs a topic on the hot path
# (bench/bench_keyed_arrays.py check). Produce has one keyed array, so crowds cannot add up
# over many arrays as in the admin requests (keyed_arrays.SIMULATED_FROM).
NAMES_LAID_OUT_FROM = 256
# A Produce above max_decoded_request_bytes is read here, then walked and checked, up to this
# many topics, partitions and tagged fields: a producer's request names the partitions one
# broker leads, no Kafka broker leads so many, and no Kafka client sends unknown tagged
# fields. Above it: refused. At the bound, tiny batches, idle machine:
# this read 40 ms (two topics) to 105 ms (50,000 topics), the walk 40 ms, the record checks
# 145-165 ms (the read included); a walked frame of max_decoded_request_bytes may hold
# ~520,000 empty partitions (walk 100 ms, checks 540 ms) or 2 million tagged fields (1.4 s),
# so the bound keeps a larger frame inside the same envelope (bench/bench_large_produce.py;
# docs/measurements/hostile-input.md).
MAX_NAMED_PARTITIONS = 100_000
# A name longer than this is refused by Kafka's generated reader ("had invalid length"); a
# frame not yet walked is held to it here, as the generic walk holds a walked one.
MAX_NAME_LENGTH = 0x7FFF
# Laying names out means hashing them in Python (~0.1 µs a byte): a Produce of at least
# NAMES_LAID_OUT_FROM topics whose names take more than this is refused. Kafka's topic
# names are at most 249 characters: 4,096 topics of the longest fit.
MAX_NAME_BYTES_LAID_OUT = 1 << 20

_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from


UNDECIDED: Any = object()       # the checks of a process whose upstream is not known yet


@dataclass(frozen=True, slots=True)
class RecordChecks:
    max_message_bytes: int
    verify_crc: bool


def record_checks(config: Any, upstream_api_keys: Any) -> RecordChecks | None:
    """The checks for this process: ``produce.verify.crc`` (auto/true/false) and
    ``message.max.bytes`` from the config; ``auto`` decided by the upstream's API keys.
    None with ``produce.record.checks=false``."""
    if not getattr(config, "produce_record_checks", True):
        return None
    mode = str(getattr(config, "produce_verify_crc", "auto")).lower()
    crc = (OFFSET_FOR_LEADER_EPOCH not in upstream_api_keys) if mode == "auto" else mode in ("1", "true", "yes")
    return RecordChecks(int(getattr(config, "message_max_bytes", 2**31 - 1)), crc)


def _skip_tags(frame: bytes, pos: int, end: int) -> int:
    count, pos = read_uvarint(frame, pos, end)
    for _ in range(count):
        _, pos = read_uvarint(frame, pos, end)
        size, pos = read_uvarint(frame, pos, end)
        pos += size
    return pos


class Refused(BodyError):
    """A Produce that parses as far as it was read, refused whole and never forwarded: the
    connection is closed, as Kafka closes one whose body it cannot take."""


class RepeatedKeys(Refused):
    """A Produce naming one topic twice, or topics whose names would crowd Kafka's table
    (keyed_arrays.py)."""


class TooLarge(Refused):
    """A Produce above max_decoded_request_bytes of more than MAX_NAMED_PARTITIONS topics,
    partitions and tagged fields."""


def record_spans(frame: bytes, offset: int, version: int,
                 budget: int | None = None) -> Iterator[tuple[int, int, int, int]]:
    """(topic position, partition position, start, end) of each partition's records in a
    framed Produce body starting at ``offset``. Walked already, its lengths fit; with a
    ``budget`` (a frame not walked yet) more topics, partitions and tagged fields than the
    budget raise TooLarge, a name or record span past the frame, or a name no Kafka reader takes,
    BodyError, and a length read past the frame struct.error or Malformed (_unfit says so)."""
    end = len(frame)
    seen = 0
    flexible = version >= FIRST_FLEXIBLE
    # Lengths and counts: a compact (unsigned varint, +1) or a classic int16/int32 prefix.
    def prefix(pos: int, wide: bool) -> tuple[int, int]:
        if flexible:
            n, pos = read_uvarint(frame, pos, end)
            return n - 1, pos
        return (_I32(frame, pos)[0], pos + 4) if wide else (_I16(frame, pos)[0], pos + 2)
    topics, pos = _topic_count(frame, offset, flexible)
    # topic_data is keyed by name up to v12, by topic id from v13 (keyed_arrays.py): the
    # keys' bytes, checked once walked, when more than one.
    names: list[bytes] | None = [] if topics > 1 else None
    keep = names.append if names is not None else None
    for t in range(max(0, topics)):
        if budget is not None:            # topics count too: one with no partition costs a step
            seen += 1
            if seen > budget:
                raise _too_large(end, version, budget)
        if version >= FIRST_TOPIC_ID:
            if keep is not None:
                keep(frame[pos:pos + 16])
            pos += 16
        else:
            length, pos = prefix(pos, False)
            if budget is not None and not 0 <= length <= MAX_NAME_LENGTH:   # Kafka's reader refuses it too
                raise BodyError(f"Produce v{version}: topic_data[{t}].name has invalid length {length}")
            if keep is not None:
                keep(frame[pos:pos + length])      # a walked name is never null (-1)
            pos += length
        partitions, pos = prefix(pos, True)
        for p in range(max(0, partitions)):
            length, pos = prefix(pos + 4, True)                    # index, then records
            start = pos
            pos += max(0, length)
            if budget is not None:
                seen += 1
                if seen > budget:
                    raise _too_large(end, version, budget)
                if pos > end:
                    raise BodyError(f"Produce v{version}: topic_data[{t}].partition_data[{p}]'s records end "
                                    f"past the frame")
            yield t, p, start, (start if length < 0 else pos)
            if flexible:
                if budget is not None:
                    seen = _counted_tags(frame, pos, end, seen, budget, version)
                pos = _skip_tags(frame, pos, end)
        if flexible:
            if budget is not None:
                seen = _counted_tags(frame, pos, end, seen, budget, version)
            pos = _skip_tags(frame, pos, end)
    if budget is not None:
        if flexible:           # the request's own tagged fields, which the walk after this meets too
            seen = _counted_tags(frame, pos, end, seen, budget, version)
            pos = _skip_tags(frame, pos, end)
        if pos > end:
            raise BodyError(f"Produce v{version}: its topic_data ends past the frame")
    if names is not None:
        _check_names(names, version)


def _topic_count(frame: bytes, offset: int, flexible: bool) -> tuple[int, int]:
    """(topic_data's count, its first topic's position) of a framed Produce body."""
    if flexible:
        length, pos = read_uvarint(frame, offset, len(frame))                 # transactional_id
        count, pos = read_uvarint(frame, pos + max(0, length - 1) + 6, len(frame))
        return count - 1, pos
    length = _I16(frame, offset)[0]
    return _I32(frame, offset + 2 + max(0, length) + 6)[0], offset + 2 + max(0, length) + 10


def check_names(frame: bytes, offset: int, version: int, walked: bool) -> None:
    """Raise RepeatedKeys if a Produce of more than one topic names one twice or names that
    would crowd Kafka's table; for a frame not ``walked`` yet also TooLarge past
    MAX_NAMED_PARTITIONS topics, partitions and tagged fields, or BodyError when it does not
    fit its frame (the connection is closed)."""
    if walked and _topic_count(frame, offset, version >= FIRST_FLEXIBLE)[0] <= 1:
        return
    try:
        for _ in record_spans(frame, offset, version, None if walked else MAX_NAMED_PARTITIONS):
            pass
    except (Malformed, struct.error) as e:      # only a frame not walked yet: a length past its end
        raise _unfit(version, e) from None


def _too_large(end: int, version: int, budget: int) -> TooLarge:
    return TooLarge(f"Produce v{version} of {end - 4:,} bytes has more than {budget:,} topics, partitions and "
                    f"tagged fields: above max_decoded_request_bytes kcoord reads no more, and no Kafka broker "
                    f"leads so many partitions (nor does any Kafka client send unknown tagged fields)")


def _counted_tags(frame: bytes, pos: int, end: int, seen: int, budget: int, version: int) -> int:
    """``seen`` plus the count of the tagged fields at ``pos``: each costs a step here and in
    the walk, and 2 bytes each fit 50 million in a socket.request.max.bytes frame."""
    count, _ = read_uvarint(frame, pos, end)
    seen += count
    if seen > budget:
        raise _too_large(end, version, budget)
    return seen


def _unfit(version: int, e: Exception) -> BodyError:
    return BodyError(f"Produce v{version}: {e or 'a length past the end of the frame'}")


def _check_names(keys: list[bytes], version: int) -> None:
    """Raise RepeatedKeys if a key (a name, or from v13 a topic id) repeats, or if the keys
    would crowd Kafka's table."""
    ids = version >= FIRST_TOPIC_ID
    if len(set(keys)) < len(keys):          # in C: the per-request cost (bench/bench_keyed_arrays.py)
        first: dict[bytes, int] = {}
        for t, key in enumerate(keys):
            if first.setdefault(key, t) != t:
                what = f"topic id of topic_data[{first[key]}] ({uuid.UUID(bytes=key)})" if ids else \
                    f"name of topic_data[{first[key]}] ({_shown(key)})"
                raise RepeatedKeys(f"Produce v{version}: topic_data[{t}] repeats the {what}: Kafka's clients never "
                                   f"repeat a key of this array")
    if len(keys) >= NAMES_LAID_OUT_FROM:
        if ids:
            hashes = [java_uuid_hash(key) for key in keys]
        else:
            size = sum(map(len, keys))
            if size > MAX_NAME_BYTES_LAID_OUT:     # hashing is Python, ~0.1 µs a byte: bounded
                raise RepeatedKeys(f"Produce v{version}: the names of its {len(keys):,} topics take {size:,} bytes, "
                                   f"over {MAX_NAME_BYTES_LAID_OUT:,}: they cannot be checked against Kafka's "
                                   f"table within kcoord's bound")
            hashes = [java_string_hash(name) for name in keys]
        why = crowded("topic_data", hashes)
        if why is not None:
            raise RepeatedKeys(f"Produce v{version}: {why}")


def _shown(name: bytes) -> str:
    text = repr(name.decode("utf-8", "replace"))
    return text if len(text) <= 120 else f"{text[:117]}..."


def refused_partitions(frame: bytes, offset: int, version: int, checks: RecordChecks,
                       walked: bool = True) -> dict[tuple[int, int], tuple[int, str]] | None:
    """(topic position, partition position) -> (Kafka error code, message) of each partition
    whose records Kafka would refuse; None when all pass (the common case). A frame not
    ``walked`` yet is read within MAX_NAMED_PARTITIONS (record_spans)."""
    refused: dict[tuple[int, int], tuple[int, str]] | None = None
    view = memoryview(frame)
    max_bytes, crc = checks.max_message_bytes, checks.verify_crc
    try:
        for t, p, start, stop in record_spans(frame, offset, version, None if walked else MAX_NAMED_PARTITIONS):
            error = check_partition_records(view[start:stop] if stop > start else None,
                                            max_message_bytes=max_bytes, verify_crc=crc, api_version=version)
            if error is not None:
                if refused is None:
                    refused = {}
                refused[t, p] = error
    except (Malformed, struct.error) as e:      # only a frame not walked yet: a length past its end
        raise _unfit(version, e) from None
    return refused
