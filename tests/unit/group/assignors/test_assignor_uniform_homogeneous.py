"""Uniform assignor, homogeneous subscriptions: hand-worked cases from Kafka's rules.

Topic order for unassigned partitions is Kafka's `Uuid.compareTo` order: T[0] < T[1].
"""
from __future__ import annotations

import pytest

from assignor_checks import T, as_sets, check_balanced, check_valid, describer, parts, spec, sub
from coordinator.group.assignors import ASSIGNORS, PartitionAssignorError

uniform = ASSIGNORS["uniform"]


def test_empty_group_and_no_subscription():
    assert uniform.assign(spec({}), describer({})) == {}
    kept_empty = {}
    result = uniform.assign(
        spec({"A": sub(), "B": sub()}, {"A": kept_empty, "B": {T[0]: parts(0)}}), describer({T[0]: 3})
    )
    assert result == {"A": {}, "B": {}}
    assert result["A"] is kept_empty


def test_unknown_topic_raises():
    with pytest.raises(PartitionAssignorError, match=str(T[1])):
        uniform.assign(spec({"A": sub(T[1])}), describer({T[0]: 3}))


def test_first_assignment_gives_the_extra_to_the_last_member():
    # 5 partitions over 2: with KAFKA-18688, A gives the tentative extra up for B.
    result = uniform.assign(spec({"A": sub(T[0], T[1]), "B": sub(T[0], T[1])}), describer({T[0]: 3, T[1]: 2}))
    assert as_sets(result) == {"A": {T[0]: {0, 1}}, "B": {T[0]: {2}, T[1]: {0, 1}}}


def test_more_members_than_partitions():
    members = {m: sub(T[2]) for m in "ABC"}
    result = uniform.assign(spec(members), describer({T[2]: 2}))
    assert as_sets(result) == {"A": {}, "B": {T[2]: {0}}, "C": {T[2]: {1}}}


def test_kafka_18688_balanced_assignment_is_stable():
    # 10 partitions over 3 members; the member holding minQuota + 1 is the *last* one.
    # Before KAFKA-18688, A would have claimed the extra and C lost a partition to it.
    current = {"A": {T[0]: parts(0, 1, 2)}, "B": {T[0]: parts(3, 4, 5)}, "C": {T[0]: parts(6, 7, 8, 9)}}
    members = {m: sub(T[0]) for m in "ABC"}
    result = uniform.assign(spec(members, current), describer({T[0]: 10}))
    assert all(result[m] is current[m] for m in "ABC")


def test_member_above_minimum_keeps_the_extra_even_if_later_members_could_take_it():
    current = {"A": {T[0]: parts(0, 1, 2)}}
    members = {m: sub(T[0]) for m in "ABC"}
    result = uniform.assign(spec(members, current), describer({T[0]: 7}))
    assert result["A"] is current["A"]
    assert as_sets(result) == {"A": {T[0]: {0, 1, 2}}, "B": {T[0]: {3, 4}}, "C": {T[0]: {5, 6}}}


def test_unbalanced_previous_assignment_moves_one_partition():
    current = {
        "A": {T[0]: parts(0, 1), T[1]: parts(0, 1)},
        "B": {T[0]: parts(2), T[1]: parts(2)},
    }
    members = {m: sub(T[0], T[1]) for m in "AB"}
    result = uniform.assign(spec(members, current), describer({T[0]: 3, T[1]: 3}))
    # A keeps its quota of 3 in its own topic order (T0 first) and revokes T1-1.
    assert as_sets(result) == {"A": {T[0]: {0, 1}, T[1]: {0}}, "B": {T[0]: {2}, T[1]: {1, 2}}}


def test_partitions_added():
    current = {"A": {T[0]: parts(0, 2), T[1]: parts(0)}, "B": {T[0]: parts(1), T[1]: parts(1, 2)}}
    members = {m: sub(T[0], T[1]) for m in "AB"}
    result = uniform.assign(spec(members, current), describer({T[0]: 6, T[1]: 5}))
    # 11 partitions: A gives the extra up (B, later, can still take it); new partitions
    # go in topic order: A takes T0-3, T0-4; B takes T0-5, T1-3, T1-4.
    assert as_sets(result) == {"A": {T[0]: {0, 2, 3, 4}, T[1]: {0}}, "B": {T[0]: {1, 5}, T[1]: {1, 2, 3, 4}}}


def test_member_added_takes_revoked_partitions_in_member_order():
    current = {"A": {T[0]: parts(0, 2), T[1]: parts(0)}, "B": {T[0]: parts(1), T[1]: parts(1, 2)}}
    members = {m: sub(T[0], T[1]) for m in "ABC"}
    result = uniform.assign(spec(members, current), describer({T[0]: 3, T[1]: 3}))
    assert as_sets(result) == {"A": {T[0]: {0, 2}}, "B": {T[0]: {1}, T[1]: {1}}, "C": {T[1]: {0, 2}}}


def test_member_removed_frees_its_partitions():
    # C left: its target is still in current_assignment, but C is not a member any more.
    current = {"A": {T[0]: parts(0), T[1]: parts(0)}, "B": {T[0]: parts(1), T[1]: parts(1)},
               "C": {T[0]: parts(2), T[1]: parts(2)}}
    members = {m: sub(T[0], T[1]) for m in "AB"}
    result = uniform.assign(spec(members, current), describer({T[0]: 3, T[1]: 3}))
    assert as_sets(result) == {"A": {T[0]: {0, 2}, T[1]: {0}}, "B": {T[0]: {1}, T[1]: {1, 2}}}


def test_unsubscribed_topic_is_dropped():
    current = {"A": {T[0]: parts(0), T[1]: parts(0)}, "B": {T[0]: parts(1), T[1]: parts(1)}}
    members = {m: sub(T[1]) for m in "AB"}
    result = uniform.assign(spec(members, current), describer({T[0]: 2, T[1]: 2}))
    assert as_sets(result) == {"A": {T[1]: {0}}, "B": {T[1]: {1}}}
    assert current["A"] == {T[0]: parts(0), T[1]: parts(0)}, "input is not mutated"


def test_ids_past_the_partition_count_are_dropped():
    current = {"A": {T[0]: parts(0, 1, 7)}}
    result = uniform.assign(spec({"A": sub(T[0])}, current), describer({T[0]: 3}))
    assert as_sets(result) == {"A": {T[0]: {0, 1, 2}}}


def test_full_assignment_hands_out_contiguous_ranges():
    members = {f"m{i}": sub(T[0], T[1]) for i in range(4)}
    counts = {T[0]: 10, T[1]: 10}
    result = uniform.assign(spec(members), describer(counts))
    check_valid(spec(members), counts, result)
    check_balanced(result)
    assert result["m0"] == {T[0]: range(0, 5)}
    assert all(type(p) is range for a in result.values() for p in a.values())


def test_partitions_left_over_raise():
    # Only inconsistent input can do this: T0-0 and T0-1 are in both targets, so the two
    # members' kept partitions use up more quota than there are partitions, and of the
    # three free ones B can take only one (Kafka raises "Partitions were left unassigned").
    current = {"A": {T[0]: parts(0, 1)}, "B": {T[0]: parts(0, 1)}}
    members = {m: sub(T[0]) for m in "AB"}
    with pytest.raises(PartitionAssignorError, match="left unassigned"):
        uniform.assign(spec(members, current), describer({T[0]: 5}))
