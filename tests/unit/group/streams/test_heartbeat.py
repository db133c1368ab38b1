"""StreamsGroupHeartbeat on the shard with a simulated clock: joins, task spreading, leaves,
standbys, fencing, the topology's statuses and the refusals, and reload equality."""
from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from coordinator.group.streams.model import MemberState, StreamsGroupState
from coordinator.group.streams.topology import (
    ASSIGNMENT_DELAYED,
    INCORRECTLY_PARTITIONED_TOPICS,
    MISSING_INTERNAL_TOPICS,
    MISSING_SOURCE_TOPICS,
    SHUTDOWN_APPLICATION,
    STALE_TOPOLOGY,
)

from .driver import Driver, beat, image, join, subtopology, topic_info, topology

TOP = topology(subtopology("0", sources=["input"], changelogs=["app-store-changelog"]))
READY = image(input=6, **{"app-store-changelog": 6})
ALL = {("0", p) for p in range(6)}
EMPTY = (set(), set(), set())


def _fast(**kw) -> Driver:
    return Driver(READY, streams_initial_rebalance_delay_ms=0, streams_assignment_interval_ms=0, **kw)


class App:
    """Members that do what a Streams client does: report the tasks they hold, revoke what is
    no longer listed, take what is."""

    def __init__(self, d: Driver) -> None:
        self.d = d
        self.epoch: dict[str, int] = {}
        self.held: dict[str, tuple[set, set, set]] = {}

    def join(self, member: str, process: str, top=TOP):
        a = self.d.hb(join(member, process, top))
        self._take(member, a)
        return a

    def beat(self, member: str):
        a = self.d.hb(beat(member, self.epoch[member], self.held[member]))
        self._take(member, a)
        return a

    def _take(self, member, a):
        assert a.error_code == ErrorCode.none, a.error_message
        self.epoch[member] = a.member_epoch
        if a.active_tasks is not None:
            self.held[member] = (a.tasks("active"), a.tasks("standby"), a.tasks("warmup"))
        self.held.setdefault(member, EMPTY)

    def settle(self, rounds: int = 6):
        for _ in range(rounds):
            for m in list(self.epoch):
                self.beat(m)


def _never_active_twice(d: Driver):
    seen = {}
    for m in d.group().members.values():
        for t in m.assigned.active | m.pending_revocation.active:
            assert t not in seen, (t, seen[t], m.member_id)
            seen[t] = m.member_id


def test_three_members_join_and_the_tasks_spread():
    d = _fast()
    app = App(d)
    first = app.join("m1", "p1")
    assert first.member_epoch == 2 and first.tasks() == ALL
    app.join("m2", "p2")
    app.join("m3", "p3")
    app.settle()
    group = d.group()
    assert group.state() is StreamsGroupState.STABLE
    assert sorted(len(m.assigned.active) for m in group.members.values()) == [2, 2, 2]
    assert set().union(*(m.assigned.active for m in group.members.values())) == ALL
    assert {m.member_epoch for m in group.members.values()} == {group.group_epoch} == {4}
    _never_active_twice(d)
    reloaded = d.reloaded().groups["app"]
    assert reloaded.members == group.members and reloaded.target == group.target
    assert reloaded.state() is StreamsGroupState.STABLE


def test_a_task_moves_only_after_its_owner_revoked_it():
    d = _fast()
    app = App(d)
    app.join("m1", "p1")
    app.join("m2", "p2")                 # m2's target has tasks m1 still holds
    assert d.group().members["m2"].state is MemberState.UNRELEASED_TASKS
    assert d.group().members["m2"].assigned.active == set()
    app.beat("m1")                       # m1 is told to keep only its half: revocation pending
    m1 = d.group().members["m1"]
    assert m1.state is MemberState.UNREVOKED_TASKS and len(m1.pending_revocation.active) == 3
    _never_active_twice(d)
    app.beat("m1")                       # it reports holding only its half: done, new epoch
    assert d.group().members["m1"].state is MemberState.STABLE
    app.beat("m2")
    assert len(d.group().members["m2"].assigned.active) == 3
    _never_active_twice(d)


def test_a_leaving_member_hands_its_tasks_over():
    d = _fast()
    app = App(d)
    for m, p in (("m1", "p1"), ("m2", "p2"), ("m3", "p3")):
        app.join(m, p)
    app.settle()
    app.epoch.pop("m3")
    left = d.hb(beat("m3", -1))
    assert left.member_epoch == -1 and "m3" not in d.group().members
    app.held.pop("m3")
    app.settle()
    assert sorted(len(m.assigned.active) for m in d.group().members.values()) == [3, 3]
    assert d.group().state() is StreamsGroupState.STABLE
    assert "m3" not in d.reloaded().groups["app"].members


def test_standbys_are_placed_on_other_processes_only():
    d = _fast(streams_num_standby_replicas=1)
    app = App(d)
    for m, p in (("a1", "pa"), ("a2", "pa"), ("b1", "pb")):
        app.join(m, p)
    app.settle()
    group = d.group()
    by_process: dict[str, list] = {}
    for m in group.members.values():
        by_process.setdefault(m.process_id, []).append(m)
    for t in ALL:
        holders = [m.process_id for m in group.members.values() if t in m.assigned.active | m.assigned.standby]
        assert sorted(holders) == ["pa", "pb"], t      # one active and one standby, never on one process
    assert sum(len(m.assigned.standby) for m in group.members.values()) == 6


def test_a_member_that_stops_heartbeating_is_fenced_by_its_session():
    d = _fast()
    app = App(d)
    app.join("m1", "p1")
    app.join("m2", "p2")
    app.settle()
    d.advance(20_000)
    app.beat("m1")
    d.advance(30_000)                    # m2 silent for 50 s > 45 s
    assert set(d.group().members) == {"m1"}
    app.epoch.pop("m2")
    app.settle()
    assert d.group().members["m1"].assigned.active == ALL


def test_epochs_are_fenced():
    d = _fast()
    app = App(d)
    app.join("m1", "p1")
    app.join("m2", "p2")
    app.settle()
    epoch = app.epoch["m1"]
    ahead = d.hb(beat("m1", epoch + 1, app.held["m1"]))
    assert ahead.error_code == ErrorCode.fenced_member_epoch and "greater member epoch" in ahead.error_message
    others = (app.held["m2"][0], set(), set())
    behind = d.hb(beat("m1", epoch - 1, others))      # the previous epoch, with tasks it was not given
    assert behind.error_code == ErrorCode.fenced_member_epoch and "smaller member epoch" in behind.error_message
    unknown = d.hb(beat("nobody", 3))
    assert unknown.error_code == ErrorCode.unknown_member_id
    missing = d.hb(beat("m1", 3, group="other"))
    assert (missing.error_code, missing.error_message) == (ErrorCode.group_id_not_found,
                                                           "Streams group other not found.")
    gone = d.hb(beat("m1", -1, group="other"))
    assert (gone.error_code, gone.error_message) == (ErrorCode.group_id_not_found, "Group other not found.")


def test_the_previous_epoch_is_accepted_with_some_of_its_tasks_in_hand():
    """Kafka's `throwIfStreamsGroupMemberEpochIsInvalid`: the previous epoch passes when the
    member holds a subset of its tasks (the answer that moved it on was lost); not without a
    report of what it holds."""
    d = _fast()
    app = App(d)
    app.join("m1", "p1")
    app.beat("m1")
    member = d.group().members["m1"]
    app.join("m2", "p2")                 # m1's next heartbeat moves it on
    app.beat("m1")
    app.beat("m1")
    moved = d.group().members["m1"]
    assert moved.previous_member_epoch == member.member_epoch < moved.member_epoch
    again = d.hb(beat("m1", moved.previous_member_epoch, (moved.assigned.active, set(), set())))
    assert again.error_code == ErrorCode.none
    some = set(sorted(moved.assigned.active)[:1])
    again = d.hb(beat("m1", moved.previous_member_epoch, (some, set(), set())))
    assert again.error_code == ErrorCode.none and again.member_epoch == moved.member_epoch
    assert again.tasks() == moved.assigned.active           # told again what it holds
    unreported = d.hb(beat("m1", moved.previous_member_epoch, None))
    assert unreported.error_code == ErrorCode.fenced_member_epoch


def test_the_topology_is_not_ready_until_its_topics_are_there():
    d = Driver(image(), streams_initial_rebalance_delay_ms=0, streams_assignment_interval_ms=0)
    a = d.hb(join("m1", "p1", TOP))
    assert a.statuses() == {MISSING_SOURCE_TOPICS: "Source topics input are missing."}
    assert a.tasks() == set() and d.group().state() is StreamsGroupState.NOT_READY
    d.shard.image = image(input=6)
    a = d.hb(beat("m1", a.member_epoch, EMPTY))
    assert a.statuses() == {MISSING_INTERNAL_TOPICS: "Internal topics are missing: app-store-changelog"}
    assert d.group().state() is StreamsGroupState.NOT_READY
    d.shard.image = image(input=6, **{"app-store-changelog": 3})
    a = d.hb(beat("m1", a.member_epoch, EMPTY))
    assert a.statuses() == {INCORRECTLY_PARTITIONED_TOPICS: "Existing topic app-store-changelog has different "
                                                             "number of partitions: expected 6, found 3"}
    d.shard.image = READY
    a = d.hb(beat("m1", a.member_epoch, EMPTY))
    assert a.statuses() == {} and a.tasks() == ALL
    assert d.group().state() is StreamsGroupState.STABLE and d.group().validated_topology_epoch == 1


def test_a_different_topology_is_refused_and_an_older_one_is_stale():
    d = _fast()
    App(d).join("m1", "p1")
    other = topology(subtopology("0", sources=["input"]))
    refused = d.hb(join("m2", "p2", other))
    assert (refused.error_code, refused.error_message) == (ErrorCode.invalid_request,
                                                           "Topology updates are not supported yet.")
    assert "m2" not in d.group().members
    newer = d.hb(join("m2", "p2", topology(*TOP.subtopologies, epoch=2)))
    assert newer.error_code == ErrorCode.invalid_request
    older = d.hb(join("m3", "p3", topology(subtopology("0", sources=["input"]), epoch=0)))
    assert older.error_code == ErrorCode.none
    assert older.statuses()[STALE_TOPOLOGY] == "The member's topology epoch 0 is behind the group's topology epoch 1."


@pytest.mark.parametrize(("req", "message"), [
    (join("", "p", TOP), "MemberId can't be empty."),
    (join("m", "p", None), "Topology must be non-null when (re-)joining."),
    (beat("m", 3, ({("0", 1)}, None, set())), "If one task-type is non-null, all must be non-null."),
    (beat("m", -3), "MemberEpoch is -3, but must be greater than or equal to -2."),
    (beat("m", -2), "InstanceId can't be null."),
    (join("m", "p", topology(subtopology("0", sources=["input"], changelogs=[]), epoch=1),
          rack_id=" "), "RackId can't be empty."),
])
def test_malformed_requests_are_refused_with_kafkas_messages(req, message):
    d = _fast()
    a = d.hb(req)
    assert (a.error_code, a.error_message) == (ErrorCode.invalid_request, message)
    assert d.log == [] and "app" not in d.shard.groups


def test_a_changelog_with_a_partition_count_is_an_invalid_topology():
    d = _fast()
    bad = topology(subtopology("0", sources=["input"], changelogs=[topic_info("c", 3)]))
    a = d.hb(join("m1", "p1", bad))
    assert a.error_code == ErrorCode.streams_invalid_topology
    assert a.error_message == "Changelog topic c must have an undefined partition count, but it is set to 3."


def test_shutdown_application_is_told_to_every_member():
    d = _fast()
    app = App(d)
    app.join("m1", "p1")
    app.join("m2", "p2")
    d.hb(beat("m1", app.epoch["m1"], app.held["m1"], shutdown_application=True))
    told = d.hb(beat("m2", app.epoch["m2"], app.held["m2"]))
    assert told.statuses()[SHUTDOWN_APPLICATION] == "The application is requested to shutdown by member m1."


def test_the_first_assignment_waits_for_the_initial_rebalance_delay():
    d = Driver(READY, streams_assignment_interval_ms=0)     # Kafka's default delay: 3000 ms
    app = App(d)
    first = app.join("m1", "p1")
    assert first.tasks() == set() and ASSIGNMENT_DELAYED in first.statuses()
    d.advance(1_000)
    app.join("m2", "p2")
    assert d.group().state() is StreamsGroupState.ASSIGNING
    d.advance(2_000)                     # the assignment timer computes the target
    assert d.group().state() is StreamsGroupState.RECONCILING
    app.settle()
    assert sorted(len(m.assigned.active) for m in d.group().members.values()) == [3, 3]


def test_a_streams_heartbeat_to_a_group_of_another_type_is_refused():
    from coordinator.group.modern.consumer.group import ConsumerGroup
    d = _fast()
    d.shard.groups["c"] = ConsumerGroup("c")
    a = d.hb(join("m1", "p1", TOP, group="c"))
    assert (a.error_code, a.error_message) == (ErrorCode.group_id_not_found, "Group c is not a streams group.")
    assert isinstance(d.shard.groups["c"], ConsumerGroup) and d.log == []


def test_an_empty_classic_group_becomes_a_streams_group_and_keeps_its_offsets():
    from records import CoordinatorRecord, OffsetCommitKey, OffsetCommitValue
    d = _fast()
    d.shard.replay(CoordinatorRecord(OffsetCommitKey("app", "input", 0), OffsetCommitValue(offset=42)))
    assert type(d.shard.groups["app"]).__name__ == "ClassicGroup"
    a = d.hb(join("m1", "p1", TOP))
    assert a.error_code == ErrorCode.none and a.tasks() == ALL
    assert d.group().group_type == "streams"
    assert d.shard.offsets.offsets["app"]["input"][0].offset == 42
    tombstone = d.log[0]                 # the classic group's, first
    assert type(tombstone.key).__name__ == "GroupMetadataKey" and tombstone.value is None
    assert d.reloaded().groups["app"].group_type == "streams"


def test_a_member_that_does_not_revoke_in_time_is_fenced_by_its_rebalance_timeout():
    d = _fast()
    app = App(d)
    app.join("m1", "p1")
    app.join("m2", "p2")
    app.beat("m1")                       # told to revoke half
    assert d.group().members["m1"].state is MemberState.UNREVOKED_TASKS
    d.advance(10_000)
    d.hb(beat("m1", app.epoch["m1"], (ALL, set(), set())))    # still holding everything
    d.advance(25_000)                    # 35 s > its 30 s rebalance timeout, < its session
    assert set(d.group().members) == {"m2"}
    app.epoch.pop("m1")
    app.settle()
    assert d.group().members["m2"].assigned.active == ALL


def test_a_v0_member_gets_a_v0_response():
    d = _fast()
    a = d.hb(join("m1", "p1", TOP), version=0)
    assert a.error_code == ErrorCode.none and a.raw.__version__ == 0 and a.acceptable_recovery_lag == 10_000


def test_a_loaded_shard_arms_its_members_timers_again():
    d = _fast()
    app = App(d)
    app.join("m1", "p1")
    app.join("m2", "p2")
    app.beat("m1")                       # m1 revoking
    loaded = d.reloaded()
    timers = {t.key: t for t in loaded.on_loaded(d.now_ms)}
    assert ("streams", "session", "app", "m1") in timers and ("streams", "session", "app", "m2") in timers
    rebalance = timers[("streams", "rebalance", "app", "m1")]
    assert rebalance.payload == d.group().members["m1"].member_epoch
    assert ("streams", "assignment", "app") not in timers          # the target is current


def test_interactive_query_endpoints_map_each_instance_to_its_partitions():
    from .driver import REQ
    d = _fast(streams_num_standby_replicas=1)
    app = App(d)
    for m, p, port in (("m1", "p1", 7001), ("m2", "p2", 7002)):
        a = d.hb(join(m, p, TOP, user_endpoint=REQ.Endpoint(host=f"{p}.local", port=port)))
        app._take(m, a)
    app.settle()
    a = d.hb(beat("m1", app.epoch["m1"], app.held["m1"]))      # its epoch 0 is not the group's
    by_host = {e.user_endpoint.host: e for e in a.partitions_by_user_endpoint}
    assert set(by_host) == {"p1.local", "p2.local"} and a.endpoint_information_epoch > 0
    active = {(tp.topic, p) for e in by_host.values() for tp in e.active_partitions for p in tp.partitions}
    assert active == {("input", p) for p in range(6)}
    for host, member in (("p1.local", "m1"), ("p2.local", "m2")):
        mine = {p for tp in by_host[host].active_partitions for p in tp.partitions}
        assert mine == {p for _, p in d.group().members[member].assigned.active}
        standby = {p for tp in by_host[host].standby_partitions for p in tp.partitions}
        assert standby == {p for _, p in d.group().members[member].assigned.standby} and standby
    current = d.hb(beat("m1", app.epoch["m1"], app.held["m1"], endpoint_epoch=a.endpoint_information_epoch))
    assert current.partitions_by_user_endpoint is None          # it has the group's map already


def test_the_soft_state_of_groups_that_are_gone_is_dropped():
    d = _fast()
    for i in range(1_200):
        d.hb(join("m", "p", TOP, group=f"g{i}"))
        d.shard.groups.pop(f"g{i}")      # deleted elsewhere (DeleteGroups, expiry)
    assert len(d.shard.streams_soft) <= 1_001


def test_a_static_member_leaves_with_minus_two_and_its_replacement_takes_its_tasks_back():
    d = _fast()
    app = App(d)
    app.d.hb(join("s1", "p1", TOP, instance_id="i1"))
    app.join("m2", "p2")
    app.epoch["s1"] = d.group().members["s1"].member_epoch
    app.held["s1"] = EMPTY
    app.settle()
    group = d.group()
    epoch, mine = group.group_epoch, group.members["s1"].assigned
    others = {m: group.members[m].assigned for m in group.members if m != "s1"}
    left = d.hb(beat("s1", -2, instance_id="i1"))
    assert (left.error_code, left.member_epoch) == (ErrorCode.none, -2)
    assert d.group().members["s1"].member_epoch == -2 and d.group().group_epoch == epoch
    app.epoch.pop("s1"), app.held.pop("s1")
    app.settle(2)                                    # the others keep their tasks meanwhile
    assert {m: d.group().members[m].assigned for m in others} == others
    taken = d.hb(join("s1-again", "p1", TOP, instance_id="i1"))
    assert taken.error_code == ErrorCode.none and taken.member_epoch == epoch
    assert taken.tasks() == mine.active and d.group().group_epoch == epoch
    assert "s1" not in d.group().members and d.group().members["s1-again"].assigned == mine
    refused = d.hb(join("s1-third", "p3", TOP, instance_id="i1"))
    assert refused.error_code == ErrorCode.unreleased_instance_id
    reloaded = d.reloaded().groups["app"]
    assert reloaded.members == d.group().members and reloaded.target == d.group().target


def test_a_static_member_that_does_not_come_back_is_removed_when_its_session_ends():
    d = _fast()
    d.hb(join("s1", "p1", TOP, instance_id="i1"))
    d.hb(beat("s1", -2, instance_id="i1"))
    assert "s1" in d.group().members
    d.advance(45_001)
    assert "s1" not in d.group().members
