"""Records of the state log itself, not of any shard: a shard's load skips them.

Rules of this module:
- Two kcoord-private types: the fence record (1100, epoch_producers.fence_record) and the
  partitioner marker (1300, records/partitioner_records.py: which formula placed the groups).
  The generic runtime does not import the record codec (tests/unit/runtime/test_runtime_parts.py),
  so the marker's type is restated here; a unit test checks that the two agree.
- `is_log_record` runs on every replayed record: one slice and one set lookup.
"""
from __future__ import annotations

import struct

from .epoch_producers import FENCE_RECORD_TYPE

PARTITIONER_MARKER_TYPE = 1300
LOG_RECORD_TYPES = (FENCE_RECORD_TYPE, PARTITIONER_MARKER_TYPE)
_PREFIXES = frozenset(struct.pack(">h", t) for t in LOG_RECORD_TYPES)


def is_log_record(key: bytes | None) -> bool:
    return key is not None and key[:2] in _PREFIXES
