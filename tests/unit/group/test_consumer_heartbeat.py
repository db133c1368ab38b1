"""KIP-848 heartbeat behaviour of the sans-IO shard, scenario by scenario (the cases
Kafka's GroupMetadataManagerTest covers, reference §8.1)."""
from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from coordinator.config import CoordinatorConfig
from coordinator.group.modern.consumer.group import ConsumerGroupState, MemberState
from records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
)

from .context import ShardContext, ok, topic

FOO = topic("foo", 6)
BAR = topic("bar", 3)


def fast(**kw) -> CoordinatorConfig:
    """Kafka defaults, except the KIP-1263 assignment interval (tests step the clock)."""
    return CoordinatorConfig(consumer_assignment_interval_ms=0, **kw)


def test_first_member_joins_empty_group_with_kafka_record_sequence():
    c = ShardContext(FOO, config=fast())
    r = c.heartbeat("g", "m1", 0, topics=["foo"])
    ok(r)
    assert r.member_id == "m1" and r.member_epoch == 2  # 4.3: groups start at epoch 1
    assert c.assigned(r) == {"foo": set(range(6))}
    # testMemberJoinsEmptyConsumerGroup: MemberMetadata, GroupEpoch, TargetMember, TargetMetadata, Current.
    kinds = [type(k) for k in _keys(c)]
    assert kinds == [ConsumerGroupMemberMetadataKey, ConsumerGroupMetadataKey,
                     ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMetadataKey,
                     ConsumerGroupCurrentMemberAssignmentKey]
    m = c.member("g", "m1")
    assert (m.member_epoch, m.previous_member_epoch, m.state) == (2, 0, MemberState.STABLE)
    assert c.group("g").state is ConsumerGroupState.STABLE


def _keys(c: ShardContext):
    from records import decode_record
    return [decode_record(k, v).key for _, k, v in c.log]


def test_second_member_waits_for_revocation_then_gets_partitions():
    c = ShardContext(FOO, config=fast())
    c.heartbeat("g", "m1", 0, topics=["foo"])
    r2 = c.heartbeat("g", "m2", 0, topics=["foo"])
    ok(r2)
    assert r2.member_epoch == 3
    # m2's target partitions are still owned by m1: nothing is handed out yet.
    assert c.assigned(r2) == {}
    assert c.member("g", "m2").state is MemberState.UNRELEASED_PARTITIONS
    assert c.group("g").state is ConsumerGroupState.RECONCILING

    # m1 learns that it must revoke half of its partitions; its epoch stays at 2.
    r1 = c.heartbeat("g", "m1", 2, owned={"foo": range(6)})
    m1 = c.member("g", "m1")
    assert m1.state is MemberState.UNREVOKED_PARTITIONS and r1.member_epoch == 2
    kept = c.assigned(r1)["foo"]
    assert len(kept) == 3
    assert ("rebalance-timeout", "g", "m1") in c.timers

    # m1 acknowledges the revocation: it moves to epoch 3 and the partitions are free.
    r1 = c.heartbeat("g", "m1", 2, owned={"foo": kept})
    assert r1.member_epoch == 3 and c.member("g", "m1").state is MemberState.STABLE
    assert ("rebalance-timeout", "g", "m1") not in c.timers

    r2 = c.heartbeat("g", "m2", 3)
    assert c.assigned(r2) == {"foo": set(range(6)) - kept}
    assert c.group("g").state is ConsumerGroupState.STABLE


def test_no_partition_ever_owned_twice_during_churn():
    c = ShardContext(FOO, BAR, config=fast())
    epochs = {}
    owned = {}
    members = [f"m{i}" for i in range(5)]
    for i, m in enumerate(members):
        r = c.heartbeat("g", m, 0, topics=["foo", "bar"])
        epochs[m], owned[m] = r.member_epoch, c.assigned(r)
        for _ in range(3):  # everyone heartbeats a few rounds, reporting what it owns
            for n in members[: i + 1]:
                r = c.heartbeat("g", n, epochs[n], owned=owned[n])
                ok(r)
                epochs[n] = r.member_epoch
                if r.assignment is not None:
                    owned[n] = c.assigned(r)
                _assert_disjoint(owned)
    assert c.group("g").state is ConsumerGroupState.STABLE
    total = sum(len(ps) for o in owned.values() for ps in o.values())
    assert total == 9


def _assert_disjoint(owned):
    seen = set()
    for assignment in owned.values():
        for t, ps in assignment.items():
            for p in ps:
                assert (t, p) not in seen, f"{t}-{p} owned twice"
                seen.add((t, p))


def test_leave_fences_member_and_bumps_epoch():
    c = ShardContext(FOO, config=fast())
    c.heartbeat("g", "m1", 0, topics=["foo"])
    r = c.heartbeat("g", "m1", -1)
    ok(r)
    assert r.member_epoch == -1
    g = c.group("g")
    assert not g.members and g.group_epoch == 3 and g.assignment_epoch == 3  # KAFKA-20442
    assert g.state is ConsumerGroupState.EMPTY
    assert not any(k[0] == "session-timeout" for k in c.timers)


def test_session_timeout_fences_silent_member():
    c = ShardContext(FOO, config=fast())
    c.heartbeat("g", "m1", 0, topics=["foo"])
    c.heartbeat("g", "m2", 0, topics=["foo"])
    for _ in range(10):  # m2 keeps heartbeating, m1 goes silent
        c.advance(5_000)
        r = c.heartbeat("g", "m2", c.member("g", "m2").member_epoch, owned=UNOWNED)
        if "m1" not in c.group("g").members:
            break
    assert "m1" not in c.group("g").members
    ok(r)


UNOWNED = {}


def test_unknown_member_and_fenced_epochs():
    c = ShardContext(FOO, config=fast())
    c.heartbeat("g", "m1", 0, topics=["foo"])
    assert c.heartbeat("g", "nope", 2).error_code == ErrorCode.unknown_member_id
    assert c.heartbeat("g", "m1", 7).error_code == ErrorCode.fenced_member_epoch
    assert c.heartbeat("other", "m1", 2).error_code == ErrorCode.group_id_not_found


def test_lost_response_previous_epoch_tolerated_only_with_subset_owned():
    c = ShardContext(FOO, config=fast())
    c.heartbeat("g", "m1", 0, topics=["foo"])
    c.heartbeat("g", "m2", 0, topics=["foo"])
    r = c.heartbeat("g", "m1", 2, owned={"foo": range(6)})
    kept = c.assigned(r)["foo"]
    r = c.heartbeat("g", "m1", 2, owned={"foo": kept})
    assert r.member_epoch == 3
    # The response was lost: the client retries with epoch 2 and what it owns.
    ok(c.heartbeat("g", "m1", 2, owned={"foo": kept}))
    # Claiming partitions it was never given is fenced.
    assert c.heartbeat("g", "m1", 2, owned={"foo": range(6)}).error_code == ErrorCode.fenced_member_epoch


def test_rejoin_with_epoch_zero_is_allowed():  # KAFKA-19233 (4.2)
    c = ShardContext(FOO, config=fast())
    c.heartbeat("g", "m1", 0, topics=["foo"])
    r = c.heartbeat("g", "m1", 0, topics=["foo"])
    ok(r)
    assert r.member_epoch == 2 and c.assigned(r) == {"foo": set(range(6))}


def test_join_validation_errors():
    c = ShardContext(FOO, config=fast())
    assert c.heartbeat("g", "", 0, topics=["foo"]).error_code == ErrorCode.invalid_request
    assert c.heartbeat("", "m", 0, topics=["foo"]).error_code == ErrorCode.invalid_request
    assert c.heartbeat("g", "m", 0, topics=["foo"], owned={"foo": [1]}).error_code == ErrorCode.invalid_request
    assert c.heartbeat("g", "m", 0, topics=None).error_code == ErrorCode.invalid_request
    assert c.heartbeat("g", "m", -3).error_code == ErrorCode.invalid_request
    assert c.heartbeat("g", "m", -2).error_code == ErrorCode.invalid_request  # needs an instance id
    r = c.heartbeat("g", "m", 0, topics=["foo"], assignor="sticky")
    assert r.error_code == ErrorCode.unsupported_assignor
    # v0 may join without a member id: the coordinator makes one up.
    r = c.heartbeat("g", "", 0, topics=["foo"], version=0)
    ok(r)
    assert r.member_id


def test_static_member_temporary_leave_and_rejoin_keeps_assignment():
    c = ShardContext(FOO, config=fast())
    r = c.heartbeat("g", "a1", 0, topics=["foo"], instance_id="i1")
    c.heartbeat("g", "b1", 0, topics=["foo"], instance_id="i2")
    kept = c.assigned(c.heartbeat("g", "a1", 2, owned={"foo": range(6)}))["foo"]
    c.heartbeat("g", "a1", 2, owned={"foo": kept})
    epoch_before = c.group("g").group_epoch
    assigned_before = dict(c.member("g", "a1").assigned_partitions)

    r = c.heartbeat("g", "a1", -2, instance_id="i1")
    ok(r)
    assert r.member_epoch == -2
    m = c.member("g", "a1")
    assert m.member_epoch == -2 and c.group("g").group_epoch == epoch_before  # no epoch bump
    # KIP-1251: a static member that leaves keeps its partitions at assignment epoch 0.
    assert all(e == 0 for ps in m.assigned_partitions.values() for e in ps.values())

    # A second instance with the same id while a2's slot is released: it takes over.
    r = c.heartbeat("g", "a2", 0, topics=["foo"], instance_id="i1")
    ok(r)
    assert "a1" not in c.group("g").members
    new = c.member("g", "a2")
    assert {t: set(ps) for t, ps in new.assigned_partitions.items()} == \
           {t: set(ps) for t, ps in assigned_before.items()}


def test_duplicate_static_instance_gets_unreleased_instance_id():
    c = ShardContext(FOO, config=fast())
    c.heartbeat("g", "a1", 0, topics=["foo"], instance_id="i1")
    r = c.heartbeat("g", "a2", 0, topics=["foo"], instance_id="i1")
    assert r.error_code == ErrorCode.unreleased_instance_id
    assert "a1" in c.group("g").members
    r = c.heartbeat("g", "a2", 2, instance_id="i1")
    assert r.error_code == ErrorCode.fenced_instance_id


def test_subscription_change_to_other_topic():
    c = ShardContext(FOO, BAR, config=fast())
    r = c.heartbeat("g", "m1", 0, topics=["foo"])
    r = c.heartbeat("g", "m1", r.member_epoch, topics=["bar"], owned={"foo": range(6)})
    # foo is revoked at once (unsubscribed topic), bar comes after the revocation.
    assert c.member("g", "m1").state is MemberState.UNREVOKED_PARTITIONS
    r = c.heartbeat("g", "m1", r.member_epoch, owned={})
    assert c.assigned(r) == {"bar": {0, 1, 2}}


def test_regex_subscription_full_match_and_refresh():
    foo1, foo2, other = topic("foo-1", 2), topic("foo-2", 2), topic("xfoo-3", 1)
    c = ShardContext(foo1, foo2, other, config=fast())
    r = c.heartbeat("g", "m1", 0, regex="foo-.*")
    ok(r)
    assert c.assigned(r) == {}  # unresolved yet: resolution is a separate operation
    c.advance(0)  # the regex-refresh timer fires at once
    resolved = c.group("g").resolved_regexes["foo-.*"]
    assert resolved.topics == {"foo-1", "foo-2"}  # full match: xfoo-3 does not match
    r = c.heartbeat("g", "m1", r.member_epoch)
    assert c.assigned(r) == {"foo-1": {0, 1}, "foo-2": {0, 1}}


def test_invalid_regex():
    c = ShardContext(FOO, config=fast())
    r = c.heartbeat("g", "m1", 0, regex="foo[")
    assert r.error_code == ErrorCode.invalid_regular_expression


def test_new_topic_matching_regex_starts_new_epoch():
    c = ShardContext(topic("foo-1", 2), config=fast())
    r = c.heartbeat("g", "m1", 0, regex="foo-.*")
    c.advance(0)
    r = c.heartbeat("g", "m1", r.member_epoch)
    epoch = c.group("g").group_epoch
    c.advance(11_000)  # past Kafka's 10 s minimum between refreshes
    c.update_image(topic("foo-1", 2), topic("foo-2", 4))
    c.advance(0)
    assert c.group("g").group_epoch == epoch + 1
    r = c.heartbeat("g", "m1", r.member_epoch)
    assert c.assigned(r) == {"foo-1": {0, 1}, "foo-2": {0, 1, 2, 3}}


def test_partition_count_change_starts_new_epoch_on_next_heartbeat():
    c = ShardContext(FOO, config=fast())
    r = c.heartbeat("g", "m1", 0, topics=["foo"])
    epoch = c.group("g").group_epoch
    c.update_image(topic("foo", 8))
    r = c.heartbeat("g", "m1", r.member_epoch)
    assert c.group("g").group_epoch == epoch + 1
    assert c.assigned(r) == {"foo": set(range(8))}


def test_assignment_interval_defers_target_and_timer_computes_it():
    c = ShardContext(FOO, config=CoordinatorConfig(consumer_assignment_interval_ms=1_000))  # Kafka 4.3's
    c.heartbeat("g", "m1", 0, topics=["foo"])
    r2 = c.heartbeat("g", "m2", 0, topics=["foo"])
    g = c.group("g")
    assert g.state is ConsumerGroupState.ASSIGNING and c.assigned(r2) == {}
    # The deferred target is pending work: the member is told to come back soon.
    assert r2.heartbeat_interval.total_seconds() * 1000 == c.config.consumer_heartbeat_pending_interval_ms
    c.advance(999)
    assert g.assignment_epoch < g.group_epoch
    c.advance(1)
    assert g.assignment_epoch == g.group_epoch


def test_max_size_and_static_exemption():
    c = ShardContext(FOO, config=fast(consumer_max_size=1))
    c.heartbeat("g", "m1", 0, topics=["foo"], instance_id="i1")
    assert c.heartbeat("g", "m2", 0, topics=["foo"]).error_code == ErrorCode.group_max_size_reached
    c.heartbeat("g", "m1", -2, instance_id="i1")
    ok(c.heartbeat("g", "m3", 0, topics=["foo"], instance_id="i1"))  # KAFKA-20601


def test_reload_rebuilds_identical_state():
    c = ShardContext(FOO, BAR, config=fast())
    for i in range(4):
        c.heartbeat("g", f"m{i}", 0, topics=["foo", "bar"])
    c.heartbeat("g", "m0", c.member("g", "m0").member_epoch, owned={"foo": range(6), "bar": range(3)})
    c.heartbeat("g", "m3", -1)
    fresh = c.reload()
    a, b = c.group("g"), fresh.groups["g"]
    assert (a.group_epoch, a.assignment_epoch, a.metadata_hash) == (b.group_epoch, b.assignment_epoch, b.metadata_hash)
    assert a.members == b.members
    assert a.target_assignment == b.target_assignment
    assert a.current_partition_epoch == b.current_partition_epoch


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_server_assignor_choice(assignor):
    c = ShardContext(FOO, config=fast())
    c.heartbeat("g", "m1", 0, topics=["foo"], assignor=assignor)
    assert c.group("g").preferred_server_assignor("uniform") == assignor


def _steady_member(c: ShardContext, group: str, member: str):
    r = c.heartbeat(group, member, 0, topics=["foo"])
    return c.heartbeat(group, member, r.member_epoch, owned=c.assigned(r))


def test_a_steady_member_gets_the_same_answer_until_its_epoch_moves():
    c = ShardContext(FOO, config=fast())
    acked = _steady_member(c, "g", "m1")
    first = c.heartbeat("g", "m1", acked.member_epoch)
    again = c.heartbeat("g", "m1", acked.member_epoch)
    ok(again)
    assert again is first           # kept, not built again (the encoder keeps its bytes too)
    assert (again.member_id, again.member_epoch, again.assignment) == ("m1", acked.member_epoch, None)
    v0 = c.heartbeat("g", "m1", acked.member_epoch, version=0)
    assert v0 is not first and type(v0).__module__.split(".")[-2] == "v0" and v0.member_epoch == first.member_epoch
    # The same member id in another group, at another epoch, gets its own answer.
    c.heartbeat("g2", "x", 0, topics=["foo"])
    other = _steady_member(c, "g2", "m1")
    steady_other = c.heartbeat("g2", "m1", other.member_epoch)
    ok(steady_other)
    assert steady_other.member_epoch == other.member_epoch != first.member_epoch
    # ... and its session pushed in its own group: each group's timer moves with its heartbeat.
    from coordinator.group.timers import session_timer
    c.now_ms += 1_000
    c.heartbeat("g", "m1", acked.member_epoch)
    c.now_ms += 1_000
    c.heartbeat("g2", "m1", other.member_epoch)
    assert c.timers[session_timer("g2", "m1")][0] - c.timers[session_timer("g", "m1")][0] == 1_000
    # A second member moves the group's epoch: m1 is told to give partitions up, not kept steady.
    c.heartbeat("g", "m2", 0, topics=["foo"])
    moved = c.heartbeat("g", "m1", acked.member_epoch)
    ok(moved)
    assert moved is not first and moved.assignment is not None


def test_the_kept_steady_answers_are_bounded(monkeypatch):
    from coordinator.group.modern.consumer import heartbeat

    monkeypatch.setattr(heartbeat, "STEADY_ANSWERS_KEPT", 2)
    monkeypatch.setattr(heartbeat, "_STEADY_ANSWERS", {})
    c = ShardContext(FOO, config=fast())
    for m in ("m1", "m2", "m3"):
        acked = _steady_member(c, "g" + m, m)
        ok(c.heartbeat("g" + m, m, acked.member_epoch))
        assert len(heartbeat._STEADY_ANSWERS) <= 2
    heartbeat._STEADY_ANSWERS.clear()
    long_id = "m" * 600
    acked = _steady_member(c, "g4", long_id)
    steady = c.heartbeat("g4", long_id, acked.member_epoch)
    ok(steady)
    assert steady.member_id == long_id and not heartbeat._STEADY_ANSWERS, "ids of any size answered, not kept"


@pytest.mark.parametrize("policy", ["adaptive", "fixed"])
@pytest.mark.parametrize("own", [None, {}, {"consumer.session.timeout.ms": 60_000},
                                 {"consumer.heartbeat.interval.ms": 9_000, "consumer.session.timeout.ms": 12_000}])
def test_steady_ms_is_interval_ms_and_the_session_of_a_stable_member(policy, own):
    from coordinator.group.modern.consumer.heartbeat_policy import SESSION_TIMEOUT, HeartbeatIntervalPolicy

    config = fast(consumer_heartbeat_policy=policy, consumer_heartbeat_budget_per_second=10)
    c = ShardContext(FOO, config=config)
    _steady_member(c, "g", "m1")
    group, member = c.group("g"), c.member("g", "m1")
    for members in (1, 50, 100_000):
        p = HeartbeatIntervalPolicy(config, lambda members=members: members, lambda group_id: own)
        session = config.consumer_session_timeout_ms if own is None else own.get(SESSION_TIMEOUT,
                                                                                  config.consumer_session_timeout_ms)
        assert p.steady_ms("g") == (p.interval_ms(group, member), session)
