"""Uniform assignor invariants on generated groups (hypothesis).

Validity, balance, stickiness when one member joins or leaves, determinism, and Kafka's
CommonAssignorTests: re-running on the assignor's own output, with members in any order,
changes nothing and hands back the same objects.
"""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from assignor_checks import (
    HETEROGENEOUS,
    check_balanced,
    check_no_improving_move,
    check_valid,
    describer,
    groups,
    sizes,
    spec,
    sub,
)
from coordinator.group.assignors import ASSIGNORS, partitions_of

uniform = ASSIGNORS["uniform"]
EXAMPLES = settings(max_examples=200, deadline=None)


def permuted(members: dict, order: list[int]) -> dict:
    ids = list(members)
    return {ids[i]: members[ids[i]] for i in order}


@st.composite
def previous_assignments(draw, subscriptions, counts):
    """Some partitions of each topic spread over arbitrary members (each owned once),
    including members that no longer subscribe and members not in the group."""
    owners = list(subscriptions) + ["gone"]
    current: dict[str, dict] = {}
    for topic_id, count in counts.items():
        for partition in range(count):
            owner = draw(st.sampled_from(owners + [None]))
            if owner is not None:
                current.setdefault(owner, {}).setdefault(topic_id, []).append(partition)
    return {m: {t: partitions_of(p) for t, p in a.items()} for m, a in current.items()}


@EXAMPLES
@given(st.data(), groups(homogeneous=True))
def test_homogeneous_valid_balanced_and_sticky_from_any_previous(data, group):
    subscriptions, counts = group
    current = data.draw(previous_assignments(subscriptions, counts))
    group_spec = spec(subscriptions, current)
    result = uniform.assign(group_spec, describer(counts))
    check_valid(group_spec, counts, result)
    check_balanced(result)
    assert uniform.assign(group_spec, describer(counts)) == result, "deterministic"
    # Balance before stickiness, but no more movement than balance needs: every member
    # keeps at least min(what it held of its topics, the minimum quota).
    subscribed = next(iter(subscriptions.values())).subscribed_topic_ids
    min_quota = sum(counts[t] for t in subscribed) // len(subscriptions)
    for member_id, new in result.items():
        old = current.get(member_id, {})
        held = {(t, p) for t, ps in old.items() if t in subscribed for p in ps}
        kept = {(t, p) for t, ps in new.items() for p in ps} & held
        assert len(kept) >= min(len(held), min_quota)
        if member_id in current and new == old:
            assert new is old


@EXAMPLES
@given(st.data(), groups(homogeneous=True))
def test_homogeneous_join_moves_partitions_only_to_the_new_member(data, group):
    subscriptions, counts = group
    first = uniform.assign(spec(subscriptions), describer(counts))
    topics = next(iter(subscriptions.values())).subscribed_topic_ids
    joined = {**subscriptions, "new": sub(*topics)}
    joined = permuted(joined, data.draw(st.permutations(range(len(joined)))))
    second = uniform.assign(spec(joined, first), describer(counts))
    check_valid(spec(joined), counts, second)
    check_balanced(second)
    for member_id, old in first.items():
        for topic_id, p in second[member_id].items():
            assert set(p) <= set(old.get(topic_id, ())), f"{member_id} gained partitions"
    moved = sum(sizes(first).values()) - sum(sizes({m: second[m] for m in first}).values())
    assert moved == sizes(second)["new"]


@EXAMPLES
@given(st.data(), groups(homogeneous=True, max_members=8))
def test_homogeneous_leave_keeps_survivors_partitions(data, group):
    subscriptions, counts = group
    first = uniform.assign(spec(subscriptions), describer(counts))
    leaving = data.draw(st.sampled_from(list(subscriptions)))
    survivors = {m: s for m, s in subscriptions.items() if m != leaving}
    if not survivors:
        return
    second = uniform.assign(spec(survivors, first), describer(counts))
    check_valid(spec(survivors), counts, second)
    check_balanced(second)
    for member_id in survivors:
        for topic_id, p in first[member_id].items():
            assert set(p) <= set(second[member_id].get(topic_id, ())), f"{member_id} lost partitions"


@EXAMPLES
@given(st.data(), st.booleans(), groups(homogeneous=True))
def test_own_output_is_a_fixed_point_in_any_member_order(data, as_heterogeneous, group):
    # Kafka's CommonAssignorTests (testReassignmentStickiness, testAssignmentReuse), for
    # both builders with identical subscriptions.
    subscriptions, counts = group
    subscription_type = HETEROGENEOUS if as_heterogeneous else None
    first = uniform.assign(spec(subscriptions, subscription_type=subscription_type), describer(counts))
    reordered = permuted(subscriptions, data.draw(st.permutations(range(len(subscriptions)))))
    second = uniform.assign(spec(reordered, first, subscription_type), describer(counts))
    assert all(second[m] is first[m] for m in subscriptions)


@EXAMPLES
@given(st.data(), groups(homogeneous=False))
def test_heterogeneous_valid_and_balanced_from_any_previous(data, group):
    subscriptions, counts = group
    current = data.draw(previous_assignments(subscriptions, counts))
    group_spec = spec(subscriptions, current, HETEROGENEOUS)
    result = uniform.assign(group_spec, describer(counts))
    check_valid(group_spec, counts, result)
    check_no_improving_move(group_spec, result)
    assert uniform.assign(group_spec, describer(counts)) == result, "deterministic"
    # Members keep every partition of a topic they still subscribe to unless balancing
    # moved it away, and balancing only moves partitions off members above the least loaded.
    for member_id, new in result.items():
        if new == current.get(member_id):
            assert new is current[member_id]
    # Re-running on the output (same order) moves nothing.
    again = uniform.assign(spec(subscriptions, result, HETEROGENEOUS), describer(counts))
    assert all(again[m] is result[m] for m in subscriptions)


@EXAMPLES
@given(st.data(), groups(homogeneous=True))
def test_heterogeneous_builder_with_identical_subscriptions_is_sticky_on_leave(data, group):
    subscriptions, counts = group
    first = uniform.assign(spec(subscriptions, subscription_type=HETEROGENEOUS), describer(counts))
    check_balanced(first)
    leaving = data.draw(st.sampled_from(list(subscriptions)))
    survivors = {m: s for m, s in subscriptions.items() if m != leaving}
    if not survivors:
        return
    second = uniform.assign(spec(survivors, first, HETEROGENEOUS), describer(counts))
    check_balanced(second)
    for member_id in survivors:
        for topic_id, p in first[member_id].items():
            assert set(p) <= set(second[member_id].get(topic_id, ()))


@EXAMPLES
@given(groups(homogeneous=True, max_members=12, max_partitions=20))
def test_homogeneous_fresh_group_path_matches_the_general_path(group):
    # An empty current_assignment takes a shortcut; a current assignment that only names
    # a departed member goes through both of Kafka's passes. They must agree exactly.
    subscriptions, counts = group
    fresh = uniform.assign(spec(subscriptions), describer(counts))
    general = uniform.assign(spec(subscriptions, {"departed": {}}), describer(counts))
    assert fresh == general and list(fresh) == list(general)
    check_valid(spec(subscriptions), counts, fresh)
    check_balanced(fresh)
