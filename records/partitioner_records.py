"""The partitioner marker (type 1300, kcoord-private): which formula placed the groups of a
state topic (coordinator/service/partitioner.py; docs/design/kafka-facts.md "Group placement").

Rules of this module:
- The type is in kcoord's private block (docs/design/client-assignors-spec.md §0: 1000+, far
  above Kafka 4.4's 0-23; connect 1000-1004, the fence record 1100, group configs 1200).
  Kafka, and a kcoord older than this module, decode it to an unknown type and skip it
  (KIP-915); kcoord's loaders drop it before replay, as they drop the fence record.
- It is not a group record: no group id, and the codec (records/codec.py) leaves it unknown,
  so no shard ever replays it. Tools name it (`is_partitioner_marker`) before they look for
  a group id in a key.
- Key: int16 type, then the 16 bytes of a random id of the write. Every marker has a key
  of its own, so compaction, which keeps the latest record of each key, never removes one:
  the marker a topic's first writer put at offset 0 of partition 0 stays there.
- Value: int16 version 0, then the partitioner's name as a classic string ("kafka").
- Decoding is bounded: a value that is not exactly version 0 and one string answers None
  (not a marker kcoord can read), never an exception.
"""
from __future__ import annotations

import struct
import uuid

PARTITIONER_MARKER = 1300

_TYPE_PREFIX = struct.pack(">h", PARTITIONER_MARKER)
_KEY_LENGTH = 2 + 16
_MAX_NAME = 64


def marker_record(partitioner: str, write_id: uuid.UUID | None = None) -> tuple[bytes, bytes]:
    """(key, value) of a marker naming ``partitioner``."""
    name = partitioner.encode()
    if not name or len(name) > _MAX_NAME:
        raise ValueError(f"a partitioner name is 1 to {_MAX_NAME} bytes, not {len(name)}")
    key = _TYPE_PREFIX + (write_id or uuid.uuid4()).bytes
    return key, struct.pack(">hh", 0, len(name)) + name


def is_partitioner_marker(key: bytes | None) -> bool:
    # On every replayed record: as cheap as epoch_producers.is_fence_record.
    return key is not None and key[:2] == _TYPE_PREFIX


def marker_partitioner(key: bytes | None, value: bytes | None) -> str | None:
    """The partitioner a marker names; None for anything else (another type, a tombstone, a
    version or a length this module does not know)."""
    if not is_partitioner_marker(key) or key is None or len(key) != _KEY_LENGTH or value is None:
        return None
    value = bytes(value)
    if len(value) < 4:
        return None
    version, length = struct.unpack_from(">hh", value)
    if version != 0 or not 0 < length <= _MAX_NAME or len(value) != 4 + length:
        return None
    try:
        return value[4:].decode()
    except UnicodeDecodeError:
        return None
