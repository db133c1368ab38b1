"""`Partitions`: the immutable set of partition ids the assignors hand out.

A target assignment of a big group holds hundreds of thousands of partitions, and
building one Python int per partition would cost more than the whole assignment.
Kafka's own range assignor already answers with `RangeSet` (a contiguous [start, end)
set) for the same reason. Here every set that is an arithmetic progression is a plain
Python `range` (contiguous runs have step 1; the heterogeneous uniform builder hands
partitions out round-robin, which gives stepped ranges). Any other set is a
`SortedPartitions`: a tuple of ascending, distinct ids.

The representation is canonical (an arithmetic progression is *always* a `range`,
never a `SortedPartitions`), so two equal sets are always of the same type and `==`
and `hash` agree with set equality. Both types support `len`, ascending iteration,
`in`, `==` and `hash`; `range` equality is O(1).

Builders never mutate inputs: an unchanged set is handed back as the same object.
"""
from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from typing import TypeAlias

__all__ = [
    "EMPTY_PARTITIONS",
    "Partitions",
    "SortedPartitions",
    "partitions_of",
    "partitions_union",
]


class SortedPartitions(tuple):
    """Ascending, distinct partition ids that do not form an arithmetic progression.

    Build it through `partitions_of`, which returns a `range` whenever it can; the
    constructor does not check or canonicalise.
    """

    __slots__ = ()

    def __contains__(self, partition: object) -> bool:
        # Sets can hold tens of thousands of ids: binary search, not tuple's linear scan.
        try:
            i = bisect_left(self, partition)
        except TypeError:
            return False
        return i < len(self) and self[i] == partition

    def __repr__(self) -> str:
        return f"SortedPartitions({list(self)!r})"


Partitions: TypeAlias = range | SortedPartitions
"""An immutable set of partition ids: a `range` (step > 0) or a `SortedPartitions`."""

EMPTY_PARTITIONS: range = range(0)


def canonical_sorted(ids: Sequence[int]) -> Partitions:
    """Canonical form of ids that are already ascending and distinct (a list, tuple or range)."""
    if type(ids) is range:
        return ids
    n = len(ids)
    if n == 0:
        return EMPTY_PARTITIONS
    first = ids[0]
    if n == 1:
        return range(first, first + 1)
    step = ids[1] - first
    last = ids[-1]
    if last - first == step * (n - 1):
        # Distinct ascending ids spanning exactly (n-1) steps: with step 1 that is already
        # a run; with a bigger step some gaps may be uneven, so compare in C.
        if step == 1:
            return range(first, last + 1)
        candidate = range(first, last + 1, step)
        if tuple(ids) == tuple(candidate):
            return candidate
    if type(ids) is SortedPartitions:
        return ids
    return SortedPartitions(ids)


def partitions_of(ids: Iterable[int]) -> Partitions:
    """Canonical `Partitions` holding `ids` (any iterable of ints, duplicates allowed).

    Raises ValueError for a negative id (partition ids are non-negative int32).
    """
    if type(ids) is range:
        if ids.step < 0:
            ids = ids[::-1]
        if len(ids) and ids[0] < 0:
            raise ValueError(f"negative partition id {ids[0]} in {ids!r}")
        return ids if len(ids) else EMPTY_PARTITIONS
    if type(ids) is SortedPartitions:
        return ids
    ordered = sorted(set(ids))
    if ordered and ordered[0] < 0:
        raise ValueError(f"negative partition id {ordered[0]}")
    return canonical_sorted(ordered)


def partitions_union(a: Partitions, b: Sequence[int]) -> Partitions:
    """`a` ∪ `b`, canonical. `b` is ascending and distinct (Partitions, list or tuple)."""
    if not b:
        return a
    if not a:
        return canonical_sorted(b)
    if type(a) is range and type(b) is range and a.step == 1 and b.step == 1:
        # Two runs that touch or overlap merge into one run (the common case when a
        # member keeps its range and gets the next partitions after it).
        if a.start <= b.stop and b.start <= a.stop:
            return range(min(a.start, b.start), max(a.stop, b.stop))
    merged = set(a)
    merged.update(b)
    return canonical_sorted(sorted(merged))


def partitions_prefix(p: Partitions, count: int) -> Partitions:
    """The `count` lowest ids of `p`, canonical."""
    if type(p) is range:
        return p[:count]
    return canonical_sorted(p[:count])


def partitions_suffix(p: Partitions, start: int) -> Partitions:
    """The ids of `p` from index `start` on, canonical."""
    if type(p) is range:
        return p[start:]
    return canonical_sorted(p[start:])


def partitions_below(p: Partitions, limit: int) -> Partitions:
    """The ids of `p` that are < `limit`, canonical."""
    if not p or p[-1] < limit:
        return p
    if type(p) is range:
        return range(p.start, min(p.stop, limit), p.step) if p.start < limit else EMPTY_PARTITIONS
    return canonical_sorted(p[: bisect_left(p, limit)])


_FREE_RUN = re.compile(b"\x00+")


def free_runs(num_partitions: int, held: Iterable[Partitions]) -> list[range]:
    """The runs of [0, num_partitions) that no set in `held` contains, ascending.

    Marks a byte per partition so that the work is C loops over bytes, not Python
    loops over partitions. Every id in `held` must be < num_partitions.
    """
    owned = bytearray(num_partitions)
    ones = b"\x01" * num_partitions
    for p in held:
        if type(p) is range:
            owned[p.start : p.stop : p.step] = ones[: len(p)]
        else:
            for partition in p:
                owned[partition] = 1
    return [range(m.start(), m.end()) for m in _FREE_RUN.finditer(owned)]
