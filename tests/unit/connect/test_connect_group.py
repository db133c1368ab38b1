"""The connect group type (seed 001; seed-drafts.md §4, C1-C10), driven through its
handlers with a simulated clock (driver.py)."""
from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from coordinator.config import CoordinatorConfig
from coordinator.group.modern.client_assignment import COMPUTE_ASSIGNMENT, INVALID_ASSIGNMENT
from coordinator.group.modern.connect.group import ConnectGroup
from coordinator.group.modern.consumer.group import ConsumerGroupState, MemberState

from .driver import ConnectContext, assignor, names

W = "w"


def _joined_w1(c: ConnectContext):
    """C1 + C2: W1 alone owns A, A/0, A/1, B, B/0 at epoch 2."""
    c.cgh(W, "W1", 0)
    c.prepare(W, "W1", 1)
    assert c.install(W, "W1", 1, 2, {"W1": (["A", "B", "A/0", "A/1", "B/0"], 2, b"m1")}).error_code == 0
    r = c.cgh(W, "W1", 1)
    assert r.member_epoch == 2
    return r


def test_c1_first_worker_joins_and_is_asked_to_compute():
    c = ConnectContext()
    r = c.cgh(W, "W1", 0)
    assert (r.error_code, r.member_epoch, r.member_id) == (COMPUTE_ASSIGNMENT, 1, "W1")
    assert names(r.assignment.connectors_and_tasks) == set()
    assert c.types_written(0) == [(1001, False), (1000, False), (1004, False)]
    g = c.group(W)
    assert isinstance(g, ConnectGroup) and (g.group_epoch, g.assignment_epoch) == (2, 1)
    assert g.state is ConsumerGroupState.ASSIGNING
    from coordinator.group.group_admin import group_state_name, group_type_name, protocol_type_of
    assert (group_type_name(g), protocol_type_of(g), group_state_name(g)) == ("connect", "connect", "Assigning")


def test_c2_prepare_install_and_the_worker_gets_its_units_and_metadata():
    c = ConnectContext()
    c.cgh(W, "W1", 0)
    p = c.prepare(W, "W1", 1)
    assert (p.error_code, p.group_epoch, p.assignor_name) == (0, 2, "sessioned")
    assert [(m.member_id, m.assignor_version, names(m.connectors_and_tasks)) for m in p.members] == [("W1", 2, set())]
    assert c.install(W, "W1", 1, 2, {"W1": (["A", "B", "A/0", "A/1", "B/0"], 2, b"m1")}).error_code == 0
    r = c.cgh(W, "W1", 1)
    assert r.error_code == 0 and r.member_epoch == 2
    assert names(r.assignment.connectors_and_tasks) == {"A", "B", "A/0", "A/1", "B/0"}
    assert (r.assignment.version, r.assignment.metadata) == (2, b"m1")
    assert c.group(W).state is ConsumerGroupState.STABLE


def test_c3_revoke_before_assign():
    c = ConnectContext()
    _joined_w1(c)
    r2 = c.cgh(W, "W2", 0)
    assert r2.error_code == 0 and r2.member_epoch == 2          # joins at the current target
    r1 = c.cgh(W, "W1", 2)
    assert r1.error_code == COMPUTE_ASSIGNMENT                   # sticky assigner
    c.prepare(W, "W1", 2)
    assert c.install(W, "W1", 2, 3, {"W1": ["A", "A/0", "A/1"], "W2": ["B", "B/0"]}).error_code == 0
    r1 = c.cgh(W, "W1", 2)
    assert names(r1.assignment.connectors_and_tasks) == {"A", "A/0", "A/1"}   # told the kept set
    w1 = c.member(W, "W1")
    assert (w1.member_epoch, w1.state) == (2, MemberState.UNREVOKED_PARTITIONS)
    r2 = c.cgh(W, "W2", 2)
    assert r2.member_epoch == 3 and names(r2.assignment.connectors_and_tasks) == set()
    assert c.member(W, "W2").state is MemberState.UNRELEASED_PARTITIONS
    r1 = c.cgh(W, "W1", 2, owned=["A", "A/0", "A/1"])              # acknowledges the revocation
    assert r1.member_epoch == 3 and c.member(W, "W1").state is MemberState.STABLE
    r2 = c.cgh(W, "W2", 3)
    assert names(r2.assignment.connectors_and_tasks) == {"B", "B/0"}
    assert c.group(W).state is ConsumerGroupState.STABLE


def test_no_unit_is_ever_owned_twice_during_c3():
    c = ConnectContext()
    _joined_w1(c)
    c.cgh(W, "W2", 0)
    c.cgh(W, "W1", 2)
    c.prepare(W, "W1", 2)
    c.install(W, "W1", 2, 3, {"W1": ["A", "A/0", "A/1"], "W2": ["B", "B/0"]})
    for step in (lambda: c.cgh(W, "W2", 2), lambda: c.cgh(W, "W1", 2), lambda: c.cgh(W, "W2", 3),
                 lambda: c.cgh(W, "W1", 2, owned=["A", "A/0", "A/1"]), lambda: c.cgh(W, "W2", 3)):
        step()
        g = c.group(W)
        seen: dict[tuple[str, int], str] = {}
        for m in g.members.values():
            for units in (m.assigned, m.pending_revocation):
                for conn, tasks in units.items():
                    for t in tasks:
                        assert seen.setdefault((conn, t), m.member_id) == m.member_id, (conn, t)


def test_c4_session_expiry_fences_and_an_incomplete_install_is_accepted():
    c = ConnectContext(config=CoordinatorConfig(consumer_session_timeout_ms=3_000))
    _joined_w1(c)
    c.cgh(W, "W2", 0)
    c.cgh(W, "W1", 2)
    c.prepare(W, "W1", 2)
    c.install(W, "W1", 2, 3, {"W1": ["A", "A/0", "A/1"], "W2": ["B", "B/0"]})
    c.cgh(W, "W1", 2, owned=["A", "A/0", "A/1"])
    c.cgh(W, "W2", 3)
    start = len(c.log)
    for _ in range(3):           # W1 keeps heartbeating, W2 goes silent
        c.advance(1_000)
        c.cgh(W, "W1", 3)
    assert "W2" not in c.group(W).members
    written = c.types_written(start)
    assert written[:4] == [(1004, True), (1003, True), (1001, True), (1000, False)]
    assert c.group(W).group_epoch == 4
    r = c.cgh(W, "W1", 3)
    assert r.error_code == COMPUTE_ASSIGNMENT
    c.prepare(W, "W1", 3)
    # KIP-415's delay: B and B/0 stay unassigned, which the coordinator accepts
    assert c.install(W, "W1", 3, 4, {"W1": ["A", "A/0", "A/1"]}).error_code == 0
    assert c.cgh(W, "W1", 3).member_epoch == 4
    # the delay is over: the assigner bumps its Reason
    r = c.cgh(W, "W1", 4, assignors=[assignor(reason=1)])
    assert c.group(W).group_epoch == 5 and r.error_code == COMPUTE_ASSIGNMENT
    # the fenced worker's next heartbeat is refused: it must rejoin
    assert c.cgh(W, "W2", 3).error_code == ErrorCode.unknown_member_id


@pytest.mark.parametrize("members, why", [
    ({"W1": ["A", "A/0"], "W2": ["A/0"]}, "assigned twice"),
    ({"W1": ["A", "A"]}, "assigned twice"),
    ({"W1": ["A"], "W9": ["B"]}, "not in the prepared group"),
    ({"W1": ["A/-2"]}, "tasks are numbered from 0"),
    ({"W1": ["/0"]}, "empty name"),
])
def test_c5_invalid_installs_write_nothing_and_reask(members, why):
    c = ConnectContext()
    c.cgh(W, "W1", 0)
    c.cgh(W, "W2", 0)
    c.prepare(W, "W1", 1)
    before = len(c.log)
    r = c.install(W, "W1", 1, 3, members)
    assert r.error_code == INVALID_ASSIGNMENT and why in r.error_message
    assert len(c.log) == before
    assert c.cgh(W, "W1", 1).error_code == COMPUTE_ASSIGNMENT


def test_c5_install_without_prepare_or_at_another_epoch_is_refused():
    c = ConnectContext()
    c.cgh(W, "W1", 0)
    assert c.install(W, "W1", 1, 2, {"W1": ["A"]}).error_code == INVALID_ASSIGNMENT
    c.prepare(W, "W1", 1)
    r = c.install(W, "W1", 1, 7, {"W1": ["A"]})
    assert r.error_code == INVALID_ASSIGNMENT and "not the prepared epoch 2" in r.error_message


def test_prepare_and_install_caller_checks():
    c = ConnectContext()
    c.cgh(W, "W1", 0)
    c.cgh(W, "W2", 0)
    assert c.prepare(W, "W2", 1).error_code == ErrorCode.unknown_member_id       # not the chosen one
    assert c.prepare(W, "W9", 1).error_code == ErrorCode.unknown_member_id
    assert c.prepare(W, "W1", 7).error_code == ErrorCode.fenced_member_epoch
    assert c.prepare("nope", "W1", 1).error_code == ErrorCode.group_id_not_found
    assert c.prepare("", "W1", 1).error_code == ErrorCode.invalid_request
    assert c.install(W, "W2", 1, 3, {}).error_code == ErrorCode.unknown_member_id


def test_install_with_an_error_keeps_targets_and_advances_the_epoch():
    c = ConnectContext()
    _joined_w1(c)
    c.cgh(W, "W2", 0)
    c.cgh(W, "W1", 2)
    c.prepare(W, "W1", 2)
    assert c.install(W, "W1", 2, 3, {}, error=1).error_code == 0
    g = c.group(W)
    assert (g.assignment_epoch, g.assignment_error) == (3, 1)
    assert set(g.target_of("W1").units) == {"A", "B"}
    r = c.cgh(W, "W1", 2)
    assert r.member_epoch == 3 and r.assignment.error == 1 and r.error_code == 0    # no new round


def test_c6_request_errors():
    c = ConnectContext()
    assert c.cgh(W, "W1", 0, server_assignor="uniform").error_code == ErrorCode.unsupported_assignor
    assert c.cgh(W, "W1", 0, assignors=()).error_code == ErrorCode.invalid_request
    assert c.cgh(W, "", 0).error_code == ErrorCode.invalid_request
    assert c.cgh(W, "W1", 0, assignors=[assignor(lo=2, hi=1)]).error_code == ErrorCode.invalid_request
    assert c.cgh(W, "W1", 0, owned=["A"]).error_code == ErrorCode.invalid_request
    _joined_w1(c)
    c.cgh(W, "W2", 0)
    c.cgh(W, "W1", 2)
    c.prepare(W, "W1", 2)
    c.install(W, "W1", 2, 3, {"W1": ["A", "B", "A/0", "A/1", "B/0"], "W2": []})
    assert c.cgh(W, "W1", 2).member_epoch == 3                  # W1 moves to 3, keeping everything
    # stale previous epoch, owning a subset of what it has: accepted (a lost response)
    assert c.cgh(W, "W1", 2, owned=["A", "B/0"]).error_code == 0
    # stale epoch claiming units it was not given: fenced
    assert c.cgh(W, "W1", 2, owned=["A", "C"]).error_code == ErrorCode.fenced_member_epoch
    assert c.cgh(W, "W1", 9).error_code == ErrorCode.fenced_member_epoch
    # incompatible assignors
    assert c.cgh(W, "W3", 0, assignors=[assignor(name="eager")]).error_code == ErrorCode.unsupported_assignor


def test_c7_group_id_collisions():
    c = ConnectContext()
    c.heartbeat("cg", "m1", 0, topics=["t"])                      # a consumer group
    assert c.cgh("cg", "W1", 0).error_code == ErrorCode.group_id_not_found
    c.cgh(W, "W1", 0)
    r = c.heartbeat(W, "m1", 0, topics=["t"])                     # key 68 on a connect group
    assert r.error_code == ErrorCode.group_id_not_found
    from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
    req = ConsumerGroupDescribeRequest(group_ids=(W,), include_authorized_operations=False)
    d = c.call("consumer_group_describe", req, 1)
    assert d.groups[0].error_code == ErrorCode.group_id_not_found
    from kio.schema.describe_groups.v6.request import DescribeGroupsRequest
    d = c.call("describe_groups", DescribeGroupsRequest(groups=(W,), include_authorized_operations=False), 6)
    assert (d.groups[0].error_code, d.groups[0].group_state) == (ErrorCode.group_id_not_found, "Dead")
    from coordinator.group.errors import ApiError
    from coordinator.group.group_types import group_type
    with pytest.raises(ApiError) as e:
        group_type(c.group(W)).validate_offset_commit(c.group(W), c.shard.image, "W1", None, 1, 9)
    assert e.value.code == ErrorCode.group_id_not_found


def test_list_groups_shows_connect_groups():
    c = ConnectContext()
    c.cgh(W, "W1", 0)
    from kio.schema.list_groups.v5.request import ListGroupsRequest
    r = c.call("list_groups", ListGroupsRequest(states_filter=(), types_filter=("connect",)), 5)
    assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in r.groups] == \
        [(W, "connect", "Assigning", "connect")]


def test_c8_delete_and_expiry():
    c = ConnectContext()
    _joined_w1(c)
    from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
    r = c.call("delete_groups", DeleteGroupsRequest(groups_names=(W,)), 2)
    assert r.results[0].error_code == ErrorCode.non_empty_group
    c.cgh(W, "W1", -1)                                          # the last worker leaves
    assert c.group(W).is_empty()
    start = len(c.log)
    r = c.call("delete_groups", DeleteGroupsRequest(groups_names=(W,)), 2)
    assert r.results[0].error_code == ErrorCode.none
    assert W not in c.shard.groups
    assert {t for t, tomb in c.types_written(start) if tomb} >= {1000, 1002}
    # expiry: an empty group goes at the next retention check
    c.cgh("w2", "X", 0)
    c.cgh("w2", "X", -1)
    c.loaded()
    c.advance(c.config.offsets_retention_check_interval_ms + 1)
    assert "w2" not in c.shard.groups
    assert "w2" not in c.reload().groups


def test_c9_reload_in_the_middle_of_c3():
    c = ConnectContext()
    _joined_w1(c)
    c.cgh(W, "W2", 0)
    c.cgh(W, "W1", 2)
    c.prepare(W, "W1", 2)
    c.install(W, "W1", 2, 3, {"W1": ["A", "A/0", "A/1"], "W2": ["B", "B/0"]})
    c.cgh(W, "W1", 2)
    c.cgh(W, "W2", 2)
    fresh = c.reload()
    g = fresh.groups[W]
    w1, w2 = g.members["W1"], g.members["W2"]
    assert w1.state is MemberState.UNREVOKED_PARTITIONS and set(w1.pending_revocation) == {"B"}
    assert {c_: set(t) for c_, t in w1.pending_revocation.items()} == {"B": {-1, 0}}
    assert w2.state is MemberState.UNRELEASED_PARTITIONS
    assert g.targets == c.group(W).targets and g.members == c.group(W).members


def test_c9_bulk_replay_equals_replay():
    """The loader's bulk replay (bulk_replay.py) decodes through the codec: with types
    1000-1004 registered (the shared patch) it must rebuild what record-by-record replay does."""
    from coordinator.group.bulk_replay import BulkReplay
    from coordinator.group.shard import GroupCoordinatorShard

    from .driver import codec_knows_connect
    if not codec_knows_connect():
        pytest.skip("records/codec.py does not register types 1000-1004 yet (issue 18 shared patch)")
    c = ConnectContext()
    _joined_w1(c)
    c.cgh(W, "W2", 0)
    c.cgh(W, "W1", 2)
    c.prepare(W, "W1", 2)
    c.install(W, "W1", 2, 3, {"W1": ["A", "A/0", "A/1"], "W2": ["B", "B/0"]})
    c.cgh(W, "W1", 2)
    c.cgh(W, "W2", 2)
    c.cgh("gone", "X", 0)
    c.cgh("gone", "X", -1)
    bulk = GroupCoordinatorShard(0, c.config, c.shard.image)
    loader = BulkReplay(bulk)
    for offset, key, value in c.log:
        loader.add(key, value, offset)
    loader.flush()
    one = c.reload()
    assert set(bulk.groups) == set(one.groups)
    for gid, g in one.groups.items():
        b = bulk.groups[gid]
        assert (b.group_epoch, b.assignment_epoch, b.members, b.targets) == \
            (g.group_epoch, g.assignment_epoch, g.members, g.targets)


def test_c10_migration_phase_c1():
    from coordinator.group.classic.group import ClassicGroup
    c = ConnectContext()
    # an empty classic connect group (its workers all left) becomes a connect group
    g = ClassicGroup(W)
    g.protocol_type = "connect"
    c.shard.groups[W] = g
    start = len(c.log)
    r = c.cgh(W, "W1", 0)
    assert r.error_code == COMPUTE_ASSIGNMENT
    assert c.types_written(start)[0] == (2, True)              # GroupMetadata tombstone first
    assert isinstance(c.group(W), ConnectGroup)


def test_c10_non_empty_classic_group_is_not_found():
    from coordinator.group.classic.group import ClassicGroup, ClassicGroupMember
    c = ConnectContext()
    g = ClassicGroup("cl")
    g.protocol_type = "connect"
    g.add(ClassicGroupMember(member_id="x", group_instance_id=None, client_id="c", client_host="h",
                             rebalance_timeout_ms=1000, session_timeout_ms=1000, protocol_type="connect",
                             supported_protocols=[("sessioned", b"")]))
    c.shard.groups["cl"] = g
    r = c.cgh("cl", "W1", 0)
    assert r.error_code == ErrorCode.group_id_not_found and "classic group" in r.error_message


def test_assigner_deadline_moves_the_round_without_fencing():
    c = ConnectContext()
    c.cgh(W, "W1", 0, rebalance_timeout_ms=5_000)
    c.cgh(W, "W2", 0, rebalance_timeout_ms=5_000)
    c.advance(5_001)
    assert "W1" in c.group(W).members
    assert c.cgh(W, "W2", 1).error_code == COMPUTE_ASSIGNMENT
    assert c.cgh(W, "W1", 1).error_code == 0
    assert c.prepare(W, "W1", 1).error_code == ErrorCode.unknown_member_id


def test_rebalance_timeout_fences_a_worker_that_does_not_revoke():
    c = ConnectContext()
    c.cgh(W, "W1", 0, rebalance_timeout_ms=2_000)
    c.prepare(W, "W1", 1)
    c.install(W, "W1", 1, 2, {"W1": ["A", "B"]})
    c.cgh(W, "W1", 1)
    c.cgh(W, "W2", 0)
    c.cgh(W, "W1", 2)
    c.prepare(W, "W1", 2)
    c.install(W, "W1", 2, 3, {"W1": ["A"], "W2": ["B"]})
    c.cgh(W, "W1", 2)
    assert c.member(W, "W1").state is MemberState.UNREVOKED_PARTITIONS
    c.cgh(W, "W2", 2)
    c.advance(2_001)
    assert "W1" not in c.group(W).members
    r = c.cgh(W, "W2", 3)
    assert names(r.assignment.connectors_and_tasks) == {"B"}


def test_static_worker_leaves_and_comes_back_under_a_new_id():
    c = ConnectContext()
    c.cgh(W, "W1", 0, instance_id="i1")
    c.prepare(W, "W1", 1)
    c.install(W, "W1", 1, 2, {"W1": ["A", "A/0"]})
    c.cgh(W, "W1", 1)
    assert c.cgh(W, "W1", -2, instance_id="i1").error_code == 0
    epoch = c.group(W).group_epoch
    r = c.cgh(W, "W1b", 0, instance_id="i1")
    assert r.error_code == 0 and names(r.assignment.connectors_and_tasks) == {"A", "A/0"}
    assert set(c.group(W).members) == {"W1b"} and c.group(W).group_epoch == epoch
    assert c.cgh(W, "W1c", 0, instance_id="i1").error_code == ErrorCode.unreleased_instance_id


def test_describe_shows_each_workers_connectors_and_tasks():
    c = ConnectContext()
    _joined_w1(c)
    d = c.describe(W, "nope", "")
    g = d.groups[0]
    assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == \
        (0, "Stable", 2, 2, "sessioned")
    assert names(g.members[0].assignment) == {"A", "B", "A/0", "A/1", "B/0"}
    assert g.members[0].metadata == b"m1"
    assert d.groups[1].error_code == ErrorCode.group_id_not_found
    assert d.groups[2].error_code == ErrorCode.invalid_group_id


def test_reload_rearms_the_round_in_flight():
    c = ConnectContext()
    c.cgh(W, "W1", 0)
    c.prepare(W, "W1", 1)
    fresh = ConnectContext(config=c.config)
    fresh.shard = c.reload()
    fresh.log = list(c.log)
    assert fresh.install(W, "W1", 1, 2, {"W1": ["A"]}).error_code == ErrorCode.unknown_member_id
    fresh.loaded()
    assert fresh.install(W, "W1", 1, 2, {"W1": ["A"]}).error_code == INVALID_ASSIGNMENT    # no Prepare yet
    assert fresh.cgh(W, "W1", 1).error_code == COMPUTE_ASSIGNMENT
