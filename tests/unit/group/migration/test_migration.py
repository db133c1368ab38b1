"""Online migration between classic and consumer groups (reference §5) on the sans-IO shard."""
from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from coordinator.config import CoordinatorConfig
from coordinator.group.classic.group import ClassicGroup, ClassicGroupState
from coordinator.group.modern.consumer.group import ConsumerGroup
from coordinator.protocol.consumer_protocol import decode_assignment, encode_assignment, encode_subscription
from records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    GroupMetadataKey,
    decode_record,
)
from tests.unit.group.context import ShardContext, ok, topic
from tests.unit.group.test_classic_groups import heartbeat, join, resp, sync

FOO = topic("foo", 4)


def cfg(**kw) -> CoordinatorConfig:
    kw.setdefault("group_initial_rebalance_delay_ms", 0)
    kw.setdefault("consumer_assignment_interval_ms", 0)
    return CoordinatorConfig(**kw)


def classic_group(c: ShardContext, group: str, n: int, *, user_data: bytes | None = None) -> list[str]:
    """A STABLE classic `consumer` group whose leader assigned foo's partitions round-robin."""
    sub = encode_subscription(["foo"], version=1)
    ids = []
    for i in range(n):
        first = join(c, group, protocols=(("range", sub),), client=f"c{i}")
        ids.append(first.member_id)
    pending = [join(c, group, m, protocols=(("range", sub),)) for m in ids]
    c.advance(10)
    responses = [resp(p) for p in pending]
    leader = responses[0].leader
    gen = responses[0].generation_id
    assignment = {m: encode_assignment({"foo": [p for p in range(4) if p % n == i]}, 1, user_data)
                  for i, m in enumerate(ids)}
    for m in ids:
        if m != leader:
            sync(c, group, m, gen)
    sync(c, group, leader, gen, assignment)
    assert c.group(group).state is ClassicGroupState.STABLE
    return ids


def kinds(c: ShardContext, start: int) -> list:
    return [type(decode_record(k, v).key) for _, k, v in c.log[start:]]


def test_first_consumer_heartbeat_upgrades_with_kafkas_record_sequence():
    c = ShardContext(FOO, config=cfg())
    ids = classic_group(c, "g", 2)
    generation = c.group("g").generation_id
    mark = len(c.log)
    r = c.heartbeat("g", "new", 0, topics=["foo"])
    ok(r)
    g = c.group("g")
    assert isinstance(g, ConsumerGroup)
    sequence = kinds(c, mark)
    # GroupMetadata tombstone, then createConsumerGroupRecords for the 2 classic members.
    assert sequence[:9] == [GroupMetadataKey,
                            ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataKey,
                            ConsumerGroupMetadataKey,
                            ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberKey,
                            ConsumerGroupTargetAssignmentMetadataKey,
                            ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentKey]
    converted = c.member("g", ids[0])
    assert converted.uses_classic_protocol and converted.previous_member_epoch == generation
    # KIP-1251: partitions held at the upgrade count as assigned at the generation.
    assert {e for ps in converted.assigned_partitions.values() for e in ps.values()} <= {generation}
    assert g.group_epoch == generation + 1  # the new member's subscription bumped it


def test_classic_members_rejoin_through_translation_and_group_converges():
    c = ShardContext(FOO, config=cfg())
    ids = classic_group(c, "g", 2)
    r = c.heartbeat("g", "new", 0, topics=["foo"])
    g = c.group("g")
    # The classic members learn through Heartbeat that they must rejoin.
    gen = g.members[ids[0]].member_epoch
    assert heartbeat(c, "g", ids[0], gen) == ErrorCode.rebalance_in_progress
    for _ in range(4):
        for m in ids:
            member = c.member("g", m)
            owned = {"foo": sorted(member.assigned_partitions.get(c.id_of("foo"), {}))}
            jr = join(c, "g", m, protocols=(("range", encode_subscription(["foo"], 1, owned=owned)),))
            assert jr.error_code == ErrorCode.none and jr.protocol_type == "consumer"
            s = sync(c, "g", m, jr.generation_id)
            assert s.error_code in (ErrorCode.none, ErrorCode.rebalance_in_progress)
        r = c.heartbeat("g", "new", r.member_epoch)
    assert c.group("g").state.value == "Stable"
    owners = [p for m in c.group("g").members.values() for ps in m.assigned_partitions.values() for p in ps]
    assert sorted(owners) == [0, 1, 2, 3]


def test_custom_assignor_user_data_blocks_upgrade():
    c = ShardContext(FOO, config=cfg())
    classic_group(c, "g", 2, user_data=b"custom")
    r = c.heartbeat("g", "new", 0, topics=["foo"])
    assert r.error_code == ErrorCode.group_id_not_found and "custom assignor" in r.error_message
    assert isinstance(c.group("g"), ClassicGroup)


@pytest.mark.parametrize("policy", ["disabled", "downgrade"])
def test_policy_without_upgrade_refuses_online_upgrade(policy):
    c = ShardContext(FOO, config=cfg(consumer_migration_policy=policy))
    classic_group(c, "g", 1)
    assert c.heartbeat("g", "new", 0, topics=["foo"]).error_code == ErrorCode.group_id_not_found


def test_disabled_policy_refuses_classic_join_to_consumer_group():
    c = ShardContext(FOO, config=cfg(consumer_migration_policy="disabled"))
    c.heartbeat("g", "m1", 0, topics=["foo"])
    r = join(c, "g", protocols=(("range", encode_subscription(["foo"], 1)),))
    assert r.error_code == ErrorCode.inconsistent_group_protocol


def test_empty_groups_convert_both_ways_whatever_the_policy():
    c = ShardContext(FOO, config=cfg(consumer_migration_policy="disabled"))
    c.heartbeat("g", "m1", 0, topics=["foo"])
    c.heartbeat("g", "m1", -1)
    assert isinstance(c.group("g"), ConsumerGroup) and c.group("g").is_empty()
    r = join(c, "g", protocols=(("range", encode_subscription(["foo"], 1)),))
    assert r.error_code == ErrorCode.member_id_required
    assert isinstance(c.group("g"), ClassicGroup)


def test_last_consumer_member_leaving_downgrades_to_classic():
    c = ShardContext(FOO, config=cfg())
    ids = classic_group(c, "g", 2)
    c.heartbeat("g", "new", 0, topics=["foo"])
    target = {m: dict(c.group("g").target_of(m)) for m in ids}
    mark = len(c.log)
    ok(c.heartbeat("g", "new", -1))
    g = c.group("g")
    assert isinstance(g, ClassicGroup) and set(g.members) == set(ids)
    assert g.state is ClassicGroupState.PREPARING_REBALANCE  # trigger A always rebalances
    assert kinds(c, mark)[-1] is GroupMetadataKey
    # Each member got its consumer target assignment, in ConsumerProtocol bytes.
    for m in ids:
        got = decode_assignment(g.members[m].assignment).partitions.get("foo", ())
        assert sorted(got) == sorted(p for ps in target[m].values() for p in ps)
    # Reload gives the same classic group (the conversion records replay in order).
    fresh = c.reload().groups["g"]
    assert isinstance(fresh, ClassicGroup) and set(fresh.members) == set(ids)


def test_every_prefix_of_a_conversion_log_replays_consistently():
    """Reload at any offset of a classic -> consumer -> classic history, also after a
    compaction that keeps only each key's last record (KAFKA-17306, KAFKA-21117)."""
    c = ShardContext(FOO, config=cfg())
    classic_group(c, "g", 2)
    r = c.heartbeat("g", "new", 0, topics=["foo"])
    c.heartbeat("g", "new", r.member_epoch)
    c.heartbeat("g", "new", -1)
    assert isinstance(c.group("g"), ClassicGroup)
    log = list(c.log)
    for end in range(len(log) + 1):
        for compacted in (False, True):
            prefix = log[:end]
            if compacted:
                last = {}
                for offset, k, v in prefix:
                    last[k] = offset
                prefix = [(o, k, v) for o, k, v in prefix if last[k] == o]
            group = c.reload(prefix).groups.get("g")
            if isinstance(group, ConsumerGroup):
                owners = {}
                for m in group.members.values():
                    for t, ps in m.assigned_partitions.items():
                        for p in ps:
                            assert (t, p) not in owners, f"prefix {end}: partition owned twice"
                            owners[(t, p)] = m.member_id



def test_classic_static_member_replacing_the_last_consumer_member_downgrades():
    """Trigger B: the static instance of the only consumer-protocol member comes back
    speaking the classic protocol; the group becomes classic and it keeps its target."""
    c = ShardContext(FOO, config=cfg())
    ids = classic_group(c, "g", 1)
    r = c.heartbeat("g", "new", 0, topics=["foo"], instance_id="i1")
    for _ in range(3):  # let the group reconcile: the classic member rejoins as needed
        m = c.member("g", ids[0])
        owned = {"foo": sorted(m.assigned_partitions.get(c.id_of("foo"), {}))}
        jr = join(c, "g", ids[0], protocols=(("range", encode_subscription(["foo"], 1, owned=owned)),))
        sync(c, "g", ids[0], jr.generation_id)
        r = c.heartbeat("g", "new", r.member_epoch, instance_id="i1")
    target = sorted(p for ps in c.group("g").target_of("new").values() for p in ps)
    assert target, "the consumer member should own partitions before the swap"
    joined = join(c, "g", instance="i1", protocols=(("range", encode_subscription(["foo"], 1)),), client="back")
    g = c.group("g")
    assert isinstance(g, ClassicGroup) and "new" not in g.members
    new_id = g.static_members["i1"]
    assigned = decode_assignment(g.members[new_id].assignment).partitions.get("foo", ())
    assert sorted(assigned) == target
    # It is a known static member of a STABLE classic group now: answered at once, no rebalance.
    assert resp(joined).error_code == ErrorCode.none and resp(joined).member_id == new_id
    assert g.state is ClassicGroupState.STABLE
    assert isinstance(c.reload().groups["g"], ClassicGroup)
