"""Offset commits of streams members as Kafka 4.4's `StreamsGroup.validateOffsetCommit` judges
them: the identity-less transactional commit, the per-task assignment epochs (KIP-1251) of
tasks assigned and pending revocation, kept across reconciliation and record 22."""
from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from coordinator.group.errors import ApiError
from coordinator.group.streams import record_types as rt
from coordinator.group.streams import records as rh
from coordinator.group.streams.group_type import validate_streams_commit
from coordinator.group.streams.model import (
    Holders,
    MemberState,
    StreamsGroup,
    StreamsMember,
    Subtopology,
    Tasks,
    TopicInfo,
    Topology,
)
from coordinator.group.streams.reconciliation import reconcile

TOP = Topology.of(1, [Subtopology("0", source_topics=("in",), repartition_sink_topics=("rep",)),
                      Subtopology("1", repartition_source_topics=(TopicInfo("rep"),),
                                  state_changelog_topics=(TopicInfo("store-changelog"),))])
STALE = ErrorCode.stale_member_epoch


def active(*tasks: tuple[str, int]) -> Tasks:
    return Tasks(frozenset(tasks))


def group_with(member: StreamsMember) -> StreamsGroup:
    group = StreamsGroup("app")
    group.topology = TOP
    group.members[member.member_id] = member
    return group


# A member at epoch 3 that holds ("0", 0) since epoch 1 and ("1", 0) since epoch 3.
M = StreamsMember("m", member_epoch=3, previous_member_epoch=1, process_id="p",
                  assigned=active(("0", 0), ("1", 0)), active_epochs={("0", 0): 1, ("1", 0): 3})


def test_a_transactional_commit_naming_no_member_passes_while_members_run():
    group = group_with(M)
    assert validate_streams_commit(group, "", -1, 5, transactional=True)("t", "in", 0) is None
    # An instance id, a member id or a plain OffsetCommit is an identity to check.
    for args in (("", -1, 9, False, None), ("", -1, 5, True, "i"), ("x", -1, 5, True, None)):
        with pytest.raises(ApiError) as e:
            validate_streams_commit(group, *args)
        assert e.value.code == ErrorCode.unknown_member_id


def test_the_member_is_checked_before_the_version_and_the_epochs_after_it():
    group = group_with(M)
    with pytest.raises(ApiError) as e:
        validate_streams_commit(group, "other", 3, 8)
    assert e.value.code == ErrorCode.unknown_member_id
    with pytest.raises(ApiError) as e:
        validate_streams_commit(group, "m", 3, 8)
    assert e.value.code == ErrorCode.unsupported_version
    with pytest.raises(ApiError) as e:
        validate_streams_commit(group, "m", 4, 9)
    assert (e.value.code, str(e.value.message)) == (STALE, "Received member epoch 4 is newer than current member "
                                                           "epoch 3.")


def test_an_older_epoch_is_checked_per_task_source_and_repartition_topics():
    check = validate_streams_commit(group_with(M), "m", 1, 9)
    assert check(None, "in", 0) is None                   # task 0_0, given at 1
    assert check(None, "rep", 0) == STALE                 # task 1_0, given at 3
    assert check(None, "in", 1) == STALE                  # not this member's task
    assert check(None, "store-changelog", 0) == STALE     # no task reads a changelog
    assert validate_streams_commit(group_with(M), "m", 0, 9)(None, "in", 0) == STALE


def test_a_task_pending_revocation_keeps_its_epoch_until_the_member_reports_it_revoked():
    holders = Holders.of([M])
    revoking = reconcile(M, 4, active(("1", 0)), M.assigned, holders)
    assert revoking.state is MemberState.UNREVOKED_TASKS and revoking.member_epoch == 3
    assert revoking.pending_revocation.active == {("0", 0)}
    check = validate_streams_commit(group_with(revoking), "m", 1, 9)
    assert check(None, "in", 0) is None                   # pending revocation, given at 1
    assert check(None, "rep", 0) == STALE

    done = reconcile(revoking, 4, active(("1", 0)), active(("1", 0)), Holders.of([revoking]))
    assert (done.member_epoch, dict(done.active_epochs)) == (4, {("1", 0): 3})
    assert validate_streams_commit(group_with(done), "m", 1, 9)(None, "in", 0) == STALE


def test_a_task_given_back_after_its_revocation_gets_the_new_epoch():
    revoked = StreamsMember("m", member_epoch=4, previous_member_epoch=3, process_id="p",
                            assigned=active(("1", 0)), active_epochs={("1", 0): 3})
    regiven = reconcile(revoked, 5, active(("0", 0), ("1", 0)), revoked.assigned, Holders.of([revoked]))
    assert dict(regiven.active_epochs) == {("0", 0): 5, ("1", 0): 3}


def test_record_22_carries_the_epochs_of_tasks_pending_revocation():
    member = StreamsMember("m", member_epoch=3, state=MemberState.UNREVOKED_TASKS, process_id="p",
                           assigned=active(("1", 0)), pending_revocation=active(("0", 0), ("0", 2)),
                           active_epochs={("1", 0): 3, ("0", 0): 1, ("0", 2): 2})
    record = rt.decode(*rt.encode(rh.current_assignment("app", member)))
    [pending] = record.value.active_tasks_pending_revocation
    assert (pending.subtopology_id, list(pending.partitions), list(pending.assignment_epochs)) == ("0", [0, 2], [1, 2])
    replayed = rh.apply_current_assignment(StreamsMember("m"), record.value)
    assert dict(replayed.active_epochs) == dict(member.active_epochs)
