"""Uniform assignor, heterogeneous subscriptions: hand-worked cases from Kafka's rules."""
from __future__ import annotations

import pytest

from assignor_checks import (
    HETEROGENEOUS,
    T,
    as_sets,
    check_no_improving_move,
    check_valid,
    describer,
    parts,
    sizes,
    spec,
    sub,
)
from coordinator.group.assignors import ASSIGNORS, PartitionAssignorError

uniform = ASSIGNORS["uniform"]


def test_unknown_topic_raises():
    with pytest.raises(PartitionAssignorError, match=str(T[3])):
        uniform.assign(spec({"A": sub(T[0]), "B": sub(T[3])}), describer({T[0]: 3}))


def test_nobody_subscribed():
    old = {T[0]: parts(0)}
    result = uniform.assign(spec({"A": sub(), "B": sub()}, {"A": old}, HETEROGENEOUS), describer({T[0]: 1}))
    assert result == {"A": {}, "B": {}}


def test_partitions_go_round_robin_to_least_loaded_subscribers():
    # Equal loads: each partition goes to the next subscriber in member order, so members
    # get every other partition (a stepped range), as Kafka's one-at-a-time loop does.
    members = {"A": sub(T[0]), "B": sub(T[0]), "C": sub(T[1])}
    result = uniform.assign(spec(members), describer({T[0]: 6, T[1]: 1}))
    assert result["A"] == {T[0]: range(0, 6, 2)} and type(result["A"][T[0]]) is range
    assert result["B"] == {T[0]: range(1, 6, 2)}
    assert as_sets(result)["C"] == {T[1]: {0}}


def test_less_loaded_subscriber_fills_up_to_the_others_first():
    # B already holds 2 of T1. The 4 free T0 partitions go to A alone until it reaches
    # B's load (T0-0, T0-1), then to A and B in turn (T0-2 to A, T0-3 to B).
    current = {"B": {T[1]: parts(0, 1)}}
    members = {"A": sub(T[0]), "B": sub(T[0], T[1])}
    result = uniform.assign(spec(members, current), describer({T[0]: 4, T[1]: 2}))
    assert as_sets(result) == {"A": {T[0]: {0, 1, 2}}, "B": {T[0]: {3}, T[1]: {0, 1}}}


def test_topics_with_equal_partitions_per_subscriber_go_fewer_subscribers_first():
    # T0: 2 partitions / 1 subscriber and T1: 4 / 2 tie at 2 per subscriber; T0 (one
    # subscriber) goes first, so A is loaded before T1 is spread and B takes more of T1.
    members = {"A": sub(T[0], T[1]), "B": sub(T[1])}
    result = uniform.assign(spec(members), describer({T[0]: 2, T[1]: 4}))
    assert as_sets(result) == {"A": {T[0]: {0, 1}, T[1]: {3}}, "B": {T[1]: {0, 1, 2}}}


def test_topics_go_by_partitions_per_subscriber_descending():
    # T1 has 6 per subscriber, T0 has 1: T1 is spread first.
    members = {"A": sub(T[0], T[1]), "B": sub(T[0], T[1]), "C": sub(T[0])}
    result = uniform.assign(spec(members), describer({T[0]: 3, T[1]: 12}))
    check_valid(spec(members), {T[0]: 3, T[1]: 12}, result)
    # After T1: A 6, B 6, C 0. C (least loaded) then takes all of T0, balance leaves it.
    assert as_sets(result) == {"A": {T[1]: set(range(0, 12, 2))}, "B": {T[1]: set(range(1, 12, 2))},
                               "C": {T[0]: {0, 1, 2}}}


def test_new_member_takes_the_highest_partitions_of_the_most_loaded():
    current = {"A": {T[0]: parts(0, 1, 2)}, "B": {T[0]: parts(3, 4, 5)}}
    members = {"A": sub(T[0]), "B": sub(T[0]), "C": sub(T[0])}
    result = uniform.assign(spec(members, current, HETEROGENEOUS), describer({T[0]: 6}))
    assert as_sets(result) == {"A": {T[0]: {0, 1}}, "B": {T[0]: {3, 4}}, "C": {T[0]: {2, 5}}}


def test_single_subscriber_topics_are_never_moved():
    # C's topic cannot go anywhere else, so A and B differ from C by more than one.
    members = {"A": sub(T[0]), "B": sub(T[0]), "C": sub(T[1])}
    counts = {T[0]: 2, T[1]: 9}
    result = uniform.assign(spec(members), describer(counts))
    assert sizes(result) == {"A": 1, "B": 1, "C": 9}
    check_no_improving_move(spec(members), result)


def test_almost_balanced_assignment_is_kept():
    # Kafka's javadoc example: A and B subscribe to T0, B and C to T1. 9/10/11 is as far
    # as per-topic balancing goes (each topic's subscribers differ by one), so nothing moves.
    current = {
        "A": {T[0]: parts(*range(9))},
        "B": {T[0]: parts(*range(9, 14)), T[1]: parts(*range(5))},
        "C": {T[1]: parts(*range(5, 16))},
    }
    members = {"A": sub(T[0]), "B": sub(T[0], T[1]), "C": sub(T[1])}
    result = uniform.assign(spec(members, current), describer({T[0]: 14, T[1]: 16}))
    assert sizes(result) == {"A": 9, "B": 10, "C": 11}
    assert all(result[m] is current[m] for m in "ABC")


def test_unsubscribed_topic_is_revoked_and_reassigned():
    current = {"A": {T[0]: parts(0, 1), T[1]: parts(0)}, "B": {T[1]: parts(1)}}
    members = {"A": sub(T[0]), "B": sub(T[0], T[1])}
    result = uniform.assign(spec(members, current), describer({T[0]: 2, T[1]: 2}))
    assert as_sets(result) == {"A": {T[0]: {0, 1}}, "B": {T[1]: {0, 1}}}
    assert current["A"] == {T[0]: parts(0, 1), T[1]: parts(0)}, "input is not mutated"


def test_balancing_moves_partitions_towards_a_member_with_fewer():
    # B holds everything; A is new. T0 is balanced first (same partitions per subscriber
    # as T1, lower id): B gives T0-3, T0-2, T0-1, T0-0 until A and B are level, and T1
    # then needs no move.
    current = {"B": {T[0]: parts(*range(4)), T[1]: parts(*range(4))}}
    members = {"A": sub(T[0], T[1]), "B": sub(T[0], T[1]), "C": sub(T[2])}
    counts = {T[0]: 4, T[1]: 4, T[2]: 1}
    result = uniform.assign(spec(members, current), describer(counts))
    check_valid(spec(members), counts, result)
    assert as_sets(result) == {"A": {T[0]: {0, 1, 2, 3}}, "B": {T[1]: {0, 1, 2, 3}}, "C": {T[2]: {0}}}
    assert result["B"][T[1]] is current["B"][T[1]], "an untouched topic keeps its object"
