"""Range assignor: contiguous ranges in (static by instance id, dynamic by member id) order."""
from __future__ import annotations

import pytest
from hypothesis import given, settings

from assignor_checks import HETEROGENEOUS, HOMOGENEOUS, T, as_sets, check_valid, describer, groups, spec, sub
from coordinator.group.assignors import ASSIGNORS, PartitionAssignorError

range_assignor = ASSIGNORS["range"]


def test_name_and_empty_group():
    assert range_assignor.name == "range" and ASSIGNORS["uniform"].name == "uniform"
    assert range_assignor.assign(spec({}), describer({})) == {}


def test_co_partitioning_example_from_kafka_javadoc():
    # M0, M1; T1 and T2 with 3 partitions each.
    members = {"M1": sub(T[0], T[1]), "M0": sub(T[0], T[1])}
    result = range_assignor.assign(spec(members), describer({T[0]: 3, T[1]: 3}))
    assert result == {
        "M1": {T[0]: range(2, 3), T[1]: range(2, 3)},
        "M0": {T[0]: range(0, 2), T[1]: range(0, 2)},
    }
    assert list(result) == ["M1", "M0"], "answer keeps the spec's member order"


def test_static_members_first_by_instance_id_then_dynamic_by_member_id():
    members = {
        "z": sub(T[0]),
        "a": sub(T[0]),
        "m1": sub(T[0], instance_id="I2"),
        "m2": sub(T[0], instance_id="I1"),
    }
    result = range_assignor.assign(spec(members), describer({T[0]: 8}))
    assert as_sets(result) == {
        "m2": {T[0]: {0, 1}}, "m1": {T[0]: {2, 3}}, "a": {T[0]: {4, 5}}, "z": {T[0]: {6, 7}},
    }


def test_rolling_bounce_of_static_members_keeps_the_assignment():
    before = {"x1": sub(T[0], instance_id="I0"), "x2": sub(T[0], instance_id="I1")}
    after = {"y9": sub(T[0], instance_id="I1"), "y0": sub(T[0], instance_id="I0")}
    first = range_assignor.assign(spec(before), describer({T[0]: 3}))
    second = range_assignor.assign(spec(after), describer({T[0]: 3}))
    assert second["y0"] == first["x1"] and second["y9"] == first["x2"]


def test_extra_partitions_go_to_the_first_members_and_empty_ranges_are_omitted():
    members = {m: sub(T[0], T[1]) for m in "ABC"}
    result = range_assignor.assign(spec(members), describer({T[0]: 5, T[1]: 2}))
    assert result == {
        "A": {T[0]: range(0, 2), T[1]: range(0, 1)},
        "B": {T[0]: range(2, 4), T[1]: range(1, 2)},
        "C": {T[0]: range(4, 5)},
    }


def test_heterogeneous_counts_subscribers_per_topic():
    members = {"A": sub(T[0]), "B": sub(T[0], T[1]), "C": sub(T[1])}
    result = range_assignor.assign(spec(members), describer({T[0]: 4, T[1]: 3}))
    assert as_sets(result) == {"A": {T[0]: {0, 1}}, "B": {T[0]: {2, 3}, T[1]: {0, 1}}, "C": {T[1]: {2}}}


def test_unknown_topic_raises():
    for subscription_type in (HOMOGENEOUS, HETEROGENEOUS):
        with pytest.raises(PartitionAssignorError, match=str(T[5])):
            range_assignor.assign(spec({"A": sub(T[5])}, subscription_type=subscription_type), describer({}))


def test_unchanged_assignment_is_the_same_object():
    members = {m: sub(T[0]) for m in "AB"}
    first = range_assignor.assign(spec(members), describer({T[0]: 4}))
    second = range_assignor.assign(spec(members, first), describer({T[0]: 4}))
    assert all(second[m] is first[m] for m in "AB")
    third = range_assignor.assign(spec({**members, "C": sub(T[0])}, first), describer({T[0]: 4}))
    # A keeps [0, 2) (it takes the extra partition), B shrinks to [2, 3).
    assert third["A"] is first["A"]
    assert third["B"] is not first["B"] and third["B"] == {T[0]: range(2, 3)}


def test_member_ids_compare_as_java_utf16_strings():
    # U+1F600 is the surrogate pair D83D DE00 in UTF-16, which sorts before U+FFFD in Java
    # (code points would put it after).
    members = {"\ufffd": sub(T[0]), "\U0001F600": sub(T[0])}
    result = range_assignor.assign(spec(members), describer({T[0]: 2}))
    assert as_sets(result) == {"\ufffd": {T[0]: {1}}, "\U0001F600": {T[0]: {0}}}


@settings(max_examples=150, deadline=None)
@given(groups(homogeneous=False))
def test_valid_and_deterministic(group):
    subscriptions, counts = group
    group_spec = spec(subscriptions)
    result = range_assignor.assign(group_spec, describer(counts))
    check_valid(group_spec, counts, result)
    assert range_assignor.assign(group_spec, describer(counts)) == result
    # Per topic, subscriber shares differ by at most one partition.
    for topic_id in counts:
        shares = [len(a.get(topic_id, ())) for m, a in result.items()
                  if topic_id in subscriptions[m].subscribed_topic_ids]
        if shares:
            assert max(shares) - min(shares) <= 1
