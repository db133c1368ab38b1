"""`state.load.skip.corrupt.offsets`: the operator's explicit way past a bad record in the
state log (docs/user/reliability.md).

Rules of this module:
- Pure parsing, at start: `PARTITION:OFFSET` entries become one frozen set of offsets per
  state-topic partition, which each shard's load skips IF the record there fails to load.
- A malformed entry, a partition the state topic does not have or a negative offset stops
  the start (`SkipOffsetsError`, naming the entry): a typo must never be ignored.
"""
from __future__ import annotations

from collections import defaultdict


class SkipOffsetsError(ValueError):
    """A `state.load.skip.corrupt.offsets` entry that is not `PARTITION:OFFSET`."""


def parse_skip_offsets(entries, partitions: int) -> dict[int, frozenset[int]]:
    """`("3:1200", "7:55")` -> {3: {1200}, 7: {55}}. Every entry must name a partition of the
    state topic and a non-negative offset: a typo must stop the start, not be ignored."""
    out: dict[int, set[int]] = defaultdict(set)
    for entry in entries:
        text = str(entry).strip()
        p, sep, o = text.partition(":")
        try:
            if not sep:
                raise ValueError
            partition, offset = int(p.strip()), int(o.strip())
        except ValueError:
            raise SkipOffsetsError(f"state.load.skip.corrupt.offsets: entry {text!r} is not "
                                   f"PARTITION:OFFSET (for example 3:1200)") from None
        if not 0 <= partition < partitions:
            raise SkipOffsetsError(f"state.load.skip.corrupt.offsets: entry {text!r} names partition "
                                   f"{partition}, but the state topic has partitions 0..{partitions - 1}")
        if offset < 0:
            raise SkipOffsetsError(f"state.load.skip.corrupt.offsets: entry {text!r} has a negative offset")
        out[partition].add(offset)
    return {p: frozenset(o) for p, o in out.items()}
