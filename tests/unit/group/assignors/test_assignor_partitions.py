"""The `Partitions` representation: canonical, set semantics, helpers."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assignor_checks import check_canonical
from coordinator.group.assignors import EMPTY_PARTITIONS, SortedPartitions, partitions_of, partitions_union
from coordinator.group.assignors.partitions import (
    canonical_sorted,
    free_runs,
    partitions_below,
    partitions_prefix,
    partitions_suffix,
)

id_sets = st.sets(st.integers(0, 60), max_size=25)


def test_arithmetic_progressions_are_ranges():
    assert partitions_of([3, 1, 2, 2]) == range(1, 4) and type(partitions_of([3, 1, 2])) is range
    assert partitions_of([0, 4, 8]) == range(0, 9, 4) and type(partitions_of([8, 0, 4])) is range
    assert partitions_of([7]) == range(7, 8)
    assert partitions_of([]) is EMPTY_PARTITIONS


def test_other_sets_are_sorted_tuples():
    p = partitions_of([5, 0, 1])
    assert type(p) is SortedPartitions and list(p) == [0, 1, 5]
    assert 5 in p and 4 not in p and "x" not in p
    assert len(p) == 3


def test_negative_ids_are_rejected():
    with pytest.raises(ValueError, match="negative partition id -1"):
        partitions_of([0, -1])
    with pytest.raises(ValueError, match="negative"):
        partitions_of(range(-2, 3))


def test_descending_range_is_normalised():
    assert list(partitions_of(range(6, 0, -2))) == [2, 4, 6]


@given(id_sets, id_sets)
def test_equality_and_hash_follow_set_equality(a, b):
    pa, pb = partitions_of(a), partitions_of(b)
    check_canonical(pa)
    assert (pa == pb) == (a == b)
    if a == b:
        assert hash(pa) == hash(pb)
    assert list(pa) == sorted(a)
    assert all(i in pa for i in a) and all(i not in pa for i in range(61) if i not in a)


@given(id_sets, id_sets)
def test_union_is_set_union(a, b):
    result = partitions_union(partitions_of(a), sorted(b))
    check_canonical(result)
    assert set(result) == a | b


@given(id_sets, st.integers(0, 30))
def test_prefix_suffix_below(a, k):
    p = partitions_of(a)
    ordered = sorted(a)
    for got, want in (
        (partitions_prefix(p, k), ordered[:k]),
        (partitions_suffix(p, k), ordered[k:]),
        (partitions_below(p, k), [i for i in ordered if i < k]),
    ):
        check_canonical(got)
        assert list(got) == want


@given(st.integers(0, 80), st.lists(id_sets, max_size=5))
def test_free_runs_is_the_complement(n, held_sets):
    held = [partitions_of(i for i in s if i < n) for s in held_sets]
    runs = free_runs(n, held)
    free = [i for r in runs for i in r]
    taken = set().union(*map(set, held)) if held else set()
    assert free == [i for i in range(n) if i not in taken]
    assert all(r.step == 1 and len(r) for r in runs)
    assert all(a.stop < b.start for a, b in zip(runs, runs[1:])), "runs are maximal"


def test_canonical_sorted_keeps_sorted_partitions_object():
    p = SortedPartitions((0, 1, 5))
    assert canonical_sorted(p) is p
