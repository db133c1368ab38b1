"""Hashes that must agree bit for bit with Apache Kafka.

- `partition_for`: Kafka maps a group to `Utils.abs(groupId.hashCode()) % partitions`
  (`GroupCoordinatorService.partitionFor`), with Java's `String.hashCode` over UTF-16 code
  units and `Utils.abs(n) = n == Integer.MIN_VALUE ? 0 : Math.abs(n)` (clients' Utils.java):
  a negative hash is negated, not masked.
- `legacy_partition_for`: the mapping kcoord used before, `(hash & 0x7fffffff) % partitions`
  (Kafka's `Utils.toPositive`, its producer's partitioner, not the coordinator's). It differs
  for about half the groups (every negative hash). A state topic written with it keeps it
  (coordinator/service/partitioner.py; docs/design/kafka-facts.md "Group placement").
- `topic_hash` / `group_metadata_hash`: KIP-1101 metadata hash, XXH3-64 over a
  hash4j byte stream. hash4j writes every multi-byte value little-endian, and
  `putString(s)` is the UTF-16LE code units followed by `putInt(s.length())`.
"""
from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import xxhash

_MASK32 = 0xFFFFFFFF


def java_string_hash(s: str) -> int:
    """Java `String.hashCode()`: s[0]*31^(n-1) + ... over UTF-16 code units, int32 overflow."""
    h = 0
    data = s.encode("utf-16-le")
    for (unit,) in struct.iter_unpack("<H", data):
        h = (31 * h + unit) & _MASK32
    return h - (1 << 32) if h & 0x80000000 else h


_MIN_INT = -(1 << 31)


def java_abs(i: int) -> int:
    """Kafka's `Utils.abs`: `Math.abs(i)`, except MIN_VALUE maps to 0 (Math.abs keeps it negative)."""
    return 0 if i == _MIN_INT else abs(i)


def java_to_positive(i: int) -> int:
    """Kafka's `Utils.toPositive`: `i & 0x7fffffff` (the producer's partitioner uses it)."""
    return i & 0x7FFFFFFF


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's `GroupCoordinatorService.partitionFor`."""
    return java_abs(java_string_hash(group_id)) % num_partitions


def legacy_partition_for(group_id: str, num_partitions: int) -> int:
    """The placement of kcoord before it followed Kafka's (module rules)."""
    return java_to_positive(java_string_hash(group_id)) % num_partitions


@dataclass(frozen=True)
class Partitioner:
    """A group placement, chosen once per process (coordinator/service/partitioner.py)."""
    name: str
    partition_for: Callable[[str, int], int]


KAFKA = Partitioner("kafka", partition_for)
LEGACY = Partitioner("legacy", legacy_partition_for)
PARTITIONERS = {p.name: p for p in (KAFKA, LEGACY)}


def _signed64(u: int) -> int:
    return u - (1 << 64) if u & (1 << 63) else u


def _java_length(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def _put_string(parts: list[bytes], s: str) -> None:
    parts.append(s.encode("utf-16-le"))
    parts.append(struct.pack("<i", _java_length(s)))


def topic_hash(topic_id: uuid.UUID, name: str, num_partitions: int,
               partition_racks: Sequence[Sequence[str]] = ()) -> int:
    """`Utils.computeTopicHash`: magic 0, id msb, id lsb, name, partition count, then
    per partition its index and its sorted replica racks (length-prefixed)."""
    id_int = topic_id.int
    msb, lsb = id_int >> 64, id_int & ((1 << 64) - 1)
    parts = [b"\x00", struct.pack("<QQ", msb, lsb)]
    _put_string(parts, name)
    parts.append(struct.pack("<i", num_partitions))
    for p in range(num_partitions):
        parts.append(struct.pack("<i", p))
        racks = partition_racks[p] if p < len(partition_racks) else ()
        for rack in sorted(racks):
            parts.append(struct.pack("<i", _java_length(rack)))
            _put_string(parts, rack)
    return _signed64(xxhash.xxh3_64_intdigest(b"".join(parts)))


def group_metadata_hash(topic_hashes_by_name: Iterable[tuple[str, int]]) -> int:
    """`Utils.computeGroupHash`: 0 without topics, else XXH3-64 over the topic hashes
    (as longs) in topic-name order."""
    items = sorted(topic_hashes_by_name)
    if not items:
        return 0
    data = b"".join(struct.pack("<q", h) for _, h in items)
    return _signed64(xxhash.xxh3_64_intdigest(data))
