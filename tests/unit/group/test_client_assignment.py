"""The client-assignor rules (coordinator/group/modern/client_assignment.py; seed-drafts.md §1,
acceptance criteria A4, A5, A7, A8, A9, A10, A11, A13, A14 at the engine level).

The group is driven through ShardContext (the real heartbeat path) where a criterion needs
real members and epochs; the rules themselves are pure."""
from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from coordinator.group.errors import ApiError
from coordinator.group.modern.client_assignment import (
    ClientAssignment,
    ClientAssignorSpec,
    InvalidAssignment,
    Phase,
    Snapshot,
    check_join,
    choose_assigner,
    eligible_assigners,
    gather_install,
    needs_reassignment,
    select_assignor,
    validate_install,
    validate_request,
)

from .context import ShardContext, topic

FOO = uuid.uuid5(uuid.NAMESPACE_DNS, "foo")
BAR = uuid.uuid5(uuid.NAMESPACE_DNS, "bar")


def s(name="s", lo=0, hi=1, v=1, reason=0, meta=b""):
    return ClientAssignorSpec(name, lo, hi, v, reason, meta)


def code(excinfo) -> ErrorCode:
    return excinfo.value.code


# ------------------------------------------------------------------ A13
@pytest.mark.parametrize("specs, server, why", [
    ([s()], "uniform", "both be set"),
    ([s(v=2)], None, "outside"),
    ([s(lo=2, hi=1, v=1)], None, "Min <= Max"),
    ([s(lo=-1, hi=1, v=0)], None, "Min <= Max"),
    ([s(name="")], None, "Name can't be empty"),
    ([s(), s()], None, "appears twice"),
])
def test_a13_request_validation(specs, server, why):
    with pytest.raises(ApiError, match=why) as e:
        validate_request(server, specs)
    assert code(e) is ErrorCode.invalid_request


def test_a13_valid_requests_pass():
    validate_request(None, [s(), s("t", 2, 4, 3)])
    validate_request("uniform", None)
    validate_request(None, None)


# ------------------------------------------------------------------ A14
def test_a14_reason_and_changes_bump():
    old = [s(meta=b"a")]
    assert not needs_reassignment(old, [s(meta=b"a")])             # same list, reason 0
    assert needs_reassignment(old, [s(meta=b"a", reason=1)])       # reason != 0
    assert needs_reassignment(old, [s(meta=b"b")])                 # metadata bytes changed
    assert needs_reassignment(old, [s(hi=2, meta=b"a")])           # range changed
    assert needs_reassignment(None, [s()])                         # first list
    assert not needs_reassignment(old, None)                       # null: unchanged


# ------------------------------------------------------------------ mode, A11
def test_server_mode_when_any_member_lacks_client_assignors():
    assert select_assignor({}) is None
    assert select_assignor({"a": [s()], "real": None}) is None     # A12: a real consumer joined
    assert select_assignor({"a": [s()], "b": []}) is None
    assert select_assignor({"a": [s()], "b": [s("t")]}) is None    # nothing in common
    assert select_assignor({"a": [s()]}) == "s"


def test_a11_rank_sum_then_name():
    assert select_assignor({"a": [s("x"), s("y")], "b": [s("y"), s("x")]}) == "x"   # 1 = 1: name
    assert select_assignor({"a": [s("y"), s("x")], "b": [s("y"), s("x")]}) == "y"   # 0 < 2
    with pytest.raises(ApiError, match="share no assignor") as e:
        check_join({"a": [s("x"), s("y")], "b": [s("y"), s("x")]}, "c", [s("z")])
    assert code(e) is ErrorCode.unsupported_assignor


# ------------------------------------------------------------------ A10
def test_a10_version_cover():
    lists = {"A": [s(lo=1, hi=5, v=5)], "B": [s(lo=3, hi=4, v=4)], "C": [s(lo=2, hi=4, v=4)]}
    assert eligible_assigners("s", lists) == ["A"]
    assert choose_assigner("s", lists) == "A"
    with pytest.raises(ApiError, match=r"covers every member's version \[4, 5, 7\]") as e:
        check_join(lists, "D", [s(lo=6, hi=7, v=7)])
    assert code(e) is ErrorCode.unsupported_assignor
    check_join(lists, "E", [s(lo=1, hi=1, v=1)])                  # A covers 1, 4 and 5


def test_pairwise_overlap_is_not_enough():
    """A[1-2]v1 and B[2-3]v3 overlap, yet neither covers both versions (001:L154)."""
    with pytest.raises(ApiError) as e:
        check_join({"A": [s(lo=1, hi=2, v=1)]}, "B", [s(lo=2, hi=3, v=3)])
    assert code(e) is ErrorCode.unsupported_assignor


def test_join_check_ignores_members_without_client_assignors():
    check_join({"real": None, "A": [s()]}, "B", [s()])
    check_join({"A": [s()]}, "real", None)
    # a member re-sending its own list is checked without its old entry
    check_join({"A": [s(lo=1, hi=1, v=1)]}, "A", [s(lo=2, hi=2, v=2)])


def test_assigner_pick_is_sticky_then_highest_max_then_smallest_id():
    lists = {"b": [s(lo=0, hi=3, v=1)], "a": [s(lo=0, hi=2, v=1)], "c": [s(lo=0, hi=3, v=1)]}
    assert choose_assigner("s", lists) == "b"                      # highest Max 3, smaller id than c
    assert choose_assigner("s", lists, current="a") == "a"         # kept while eligible
    assert choose_assigner("s", lists, current="gone") == "b"
    assert choose_assigner("s", lists, excluded={"b"}) == "c"
    assert choose_assigner("s", {"a": [s()]}, excluded={"a"}) == "a"   # the only one


# ------------------------------------------------------------------ A4, A7
SNAP = Snapshot(group_epoch=2, assignor="s", subscriptions={"A": frozenset({FOO}), "B": frozenset({FOO})},
                partitions={FOO: 6})


def test_a4_a_valid_install_passes():
    validate_install(SNAP, {"A": {FOO: [0, 1, 2]}, "B": {FOO: [3, 4, 5]}})
    validate_install(SNAP, {"A": {FOO: range(6)}})                 # B may get nothing


@pytest.mark.parametrize("members, why", [
    ({"A": {FOO: [0, 1, 2]}, "B": {FOO: [0, 3, 4, 5]}}, "is assigned twice"),
    ({"A": {FOO: [0, 0, 1, 2, 3, 4, 5]}}, "is assigned twice"),
    ({"A": {FOO: [0, 1, 2, 3, 4]}}, "-5 is not assigned"),
    ({"A": {FOO: range(6)}, "X": {}}, "X was not in the prepared group"),
    ({"A": {FOO: range(7)}}, "-6 assigned to A does not exist"),
    ({"A": {FOO: range(6), BAR: [0]}}, "not a subscribed topic"),
])
def test_a4_invalid_installs_name_the_invariant(members, why):
    with pytest.raises(InvalidAssignment, match=why):
        validate_install(SNAP, members)


def test_a4_partition_only_to_a_subscriber():
    snap = Snapshot(2, "s", {"A": frozenset({FOO}), "B": frozenset({BAR})}, {FOO: 1, BAR: 1})
    with pytest.raises(InvalidAssignment, match="does not subscribe"):
        validate_install(snap, {"A": {FOO: [0], BAR: [0]}})
    validate_install(snap, {"A": {FOO: [0]}, "B": {BAR: [0]}})


def test_gather_install_refuses_a_member_listed_twice_and_merges_topics():
    assert gather_install([("A", [(FOO, [0]), (FOO, [1])])]) == {"A": {FOO: [0, 1]}}
    with pytest.raises(InvalidAssignment, match="listed twice"):
        gather_install([("A", []), ("A", [])])


# ------------------------------------------------------------------ the round
def _round(now=0, timeouts=None) -> tuple[ClientAssignment, dict]:
    lists = {"A": [s()], "B": [s()]}
    ca = ClientAssignment()
    assert ca.maybe_request(lists, True, now, timeouts or {"A": 1000, "B": 1000}) == "A"
    return ca, lists


def test_one_round_at_a_time_and_compute_until_prepare():
    ca, lists = _round()
    assert ca.asked("A") and not ca.asked("B")
    assert ca.maybe_request(lists, True, 1, {"A": 1000, "B": 1000}) is None    # one in flight
    ca.prepare(SNAP)
    assert not ca.asked("A") and ca.in_flight.phase is Phase.PREPARED


def test_no_round_in_server_mode_or_when_up_to_date():
    ca = ClientAssignment()
    assert ca.maybe_request({"A": [s()], "real": None}, True, 0, {"A": 1}) is None
    assert ca.maybe_request({"A": [s()]}, False, 0, {"A": 1}) is None
    assert ca.in_flight is None


def test_a4_invalid_install_reasks_and_keeps_the_round():
    ca, _ = _round()
    with pytest.raises(InvalidAssignment, match="No PrepareAssignment"):
        ca.install(2, 0, {"A": {FOO: range(6)}}, {}, {"A", "B"})
    assert ca.asked("A")                                           # COMPUTE again
    ca.prepare(SNAP)
    with pytest.raises(InvalidAssignment, match="GroupEpoch 3 is not the prepared epoch 2"):
        ca.install(3, 0, {"A": {FOO: range(6)}}, {}, {"A", "B"})
    assert ca.asked("A")
    ca.prepare(SNAP)
    with pytest.raises(InvalidAssignment, match="not assigned"):
        ca.install(2, 0, {"A": {FOO: range(5)}}, {}, {"A", "B"})
    assert ca.asked("A") and ca.in_flight.snapshot is None


def test_a7_install_naming_a_departed_member_is_accepted_and_dropped():
    ca, _ = _round()
    ca.prepare(SNAP)
    done = ca.install(2, 0, {"A": {FOO: [0, 1, 2]}, "B": {FOO: [3, 4, 5]}}, {"A": (1, b"x"), "B": (1, b"y")},
                      live={"A"})
    assert done.epoch == 2 and done.error == 0
    assert done.targets == {"A": {FOO: frozenset({0, 1, 2})}}
    assert done.metadata == {"A": (1, b"x")}
    assert ca.in_flight is None


def test_a8_assignor_error_completes_the_round_without_targets():
    ca, lists = _round()
    ca.prepare(SNAP)
    done = ca.install(2, 7, {"A": {FOO: [0, 0, 9]}}, {}, {"A", "B"})   # rules skipped
    assert (done.epoch, done.error, done.targets) == (2, 7, {})
    # The caller advances the assignment epoch to 2: nothing is asked until the group moves.
    assert ca.maybe_request(lists, False, 5, {"A": 1000, "B": 1000}) is None


def test_a9_deadline_asks_another_member_without_fencing():
    ca, lists = _round(now=0, timeouts={"A": 1000, "B": 500})
    assert ca.in_flight.deadline_ms == 1000                        # A's rebalance timeout
    assert ca.expire(999) is None and ca.asked("A")
    assert ca.expire(1000) == "A"
    assert ca.in_flight is None
    assert ca.maybe_request(lists, True, 1000, {"A": 1000, "B": 500}) == "B"
    assert ca.in_flight.deadline_ms == 1500
    assert ca.skip_once == frozenset()                             # skipped once only


def test_a5_caller_checks_in_order():
    ctx = ShardContext(topic("foo", 6))
    for m in ("A", "B"):
        ctx.heartbeat("g", m, 0, topics=["foo"])
    group = ctx.group("g")
    ca, _ = _round()
    epoch_a = group.members["A"].member_epoch

    def err(gid, grp, mid, epoch):
        with pytest.raises(ApiError) as e:
            ca.check_caller(gid, grp, mid, epoch)
        return e.value.code

    assert err("", group, "A", epoch_a) is ErrorCode.invalid_request
    assert err("g", group, "", epoch_a) is ErrorCode.invalid_request
    assert err("g", group, "A", -1) is ErrorCode.invalid_request
    assert err("nope", None, "A", epoch_a) is ErrorCode.group_id_not_found
    assert err("g", group, "Z", epoch_a) is ErrorCode.unknown_member_id
    assert err("g", group, "A", epoch_a + 5) is ErrorCode.fenced_member_epoch
    assert err("g", group, "B", group.members["B"].member_epoch) is ErrorCode.unknown_member_id   # not chosen
    assert ca.check_caller("g", group, "A", epoch_a).assigner == "A"
    ca.expire(10**9)
    assert err("g", group, "A", epoch_a) is ErrorCode.unknown_member_id   # A9: a late Install


def test_a2_prepare_view_of_a_real_group():
    """A2's content: members with resolved subscriptions, their entry for the assignor, their
    current target, and the subscribed topics' partition counts, at the group epoch."""
    from coordinator.group.modern.consumer.client_round import prepare_view

    ctx = ShardContext(topic("foo", 6), topic("bar", 2), topic("unused", 3))
    ctx.heartbeat("g", "A", 0, topics=["foo"])
    ctx.heartbeat("g", "B", 0, topics=["foo", "bar", "missing"])
    group = ctx.group("g")
    lists = {"A": [s(v=1, meta=b"a")], "B": [s("t"), s(v=0, reason=1)]}
    view = prepare_view(group, ctx.shard.image, lists, "s")
    assert view.snapshot.group_epoch == group.group_epoch
    assert view.snapshot.partitions == {FOO: 6, BAR: 2}                    # subscribed, existing topics
    assert view.snapshot.subscriptions == {"A": frozenset({FOO}), "B": frozenset({FOO, BAR})}
    assert view.topic_names == {FOO: "foo", BAR: "bar"}
    a, b = view.members
    assert (a.member_id, a.spec.metadata, a.member_epoch) == ("A", b"a", group.members["A"].member_epoch)
    assert (b.spec.version, b.spec.reason) == (0, 1)
    # the current target (server-assigned here) is the stickiness input
    assert a.target == {t: frozenset(ps) for t, ps in group.target_assignment["A"].items() if ps}
    assert sum(len(ps) for m in view.members for ps in m.target.values()) == \
        sum(len(ps) for t in group.target_assignment.values() for ps in t.values()) > 0


def _installed_group():
    """A and B in group g (server-assigned so far) and a round prepared at its epoch."""
    from coordinator.group.modern.consumer.client_round import prepare_view

    ctx = ShardContext(topic("foo", 6))
    ctx.heartbeat("g", "A", 0, topics=["foo"])
    ctx.heartbeat("g", "B", 0, topics=["foo"])
    group = ctx.group("g")
    lists = {"A": [s()], "B": [s()]}
    ca = ClientAssignment()
    assert ca.maybe_request(lists, True, ctx.now_ms, {"A": 1000, "B": 1000}) == "A"
    ca.prepare(prepare_view(group, ctx.shard.image, lists, "s").snapshot)
    return ctx, group, ca


def test_a3_a7_install_records_land_in_the_group_and_replay():
    from coordinator.group.modern.consumer.client_round import installed_records
    from coordinator.group.result import Result

    ctx, group, ca = _installed_group()
    epoch = group.group_epoch
    # B "left" between Prepare and Install (A7): it is not live, so nothing is written for it
    b_before = group.target_assignment.get("B")
    done = ca.install(epoch, 0, {"A": {FOO: [0, 1, 2]}, "B": {FOO: [3, 4, 5]}}, {"B": (1, b"y")}, {"A"})
    assert done.metadata == {}
    records = installed_records(group, done, ctx.now_ms)
    assert [getattr(r.key, "member_id", None) for r in records] == ["A", None]
    ctx.apply(Result(records=records, replay=True))
    assert group.assignment_epoch == epoch
    assert {t: set(ps) for t, ps in group.target_assignment["A"].items() if ps} == {FOO: {0, 1, 2}}
    assert group.target_assignment.get("B") == b_before
    fresh = ctx.reload()                                    # the real codec, replayed from the log
    assert fresh.groups["g"].target_assignment == group.target_assignment
    assert fresh.groups["g"].assignment_epoch == epoch


def test_a8_error_install_advances_the_epoch_only():
    from coordinator.group.modern.consumer.client_round import installed_records
    from coordinator.group.result import Result

    ctx, group, ca = _installed_group()
    before = {m: dict(a) for m, a in group.target_assignment.items()}
    done = ca.install(group.group_epoch, 7, {}, {}, set(group.members))
    records = installed_records(group, done, ctx.now_ms)
    assert len(records) == 1                                # the target metadata only
    ctx.apply(Result(records=records, replay=True))
    assert group.assignment_epoch == group.group_epoch
    assert {m: dict(a) for m, a in group.target_assignment.items()} == before
