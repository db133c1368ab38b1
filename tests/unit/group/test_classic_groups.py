"""Classic JoinGroup/SyncGroup groups on the sans-IO shard (reference §9)."""
from __future__ import annotations

from datetime import timedelta

from kio.schema.errors import ErrorCode

from coordinator.config import CoordinatorConfig
from coordinator.group.classic.group import ClassicGroupState
from coordinator.group.kio_util import schema

from .context import Pending, ShardContext, topic

MS = timedelta(milliseconds=1)


def cfg(**kw) -> CoordinatorConfig:
    kw.setdefault("group_initial_rebalance_delay_ms", 100)
    return CoordinatorConfig(**kw)


def join(c: ShardContext, group: str, member: str = "", *, version: int = 9, instance: str | None = None,
         protocols=(("range", b"m"),), session: int = 10_000, rebalance: int = 30_000, ptype: str = "consumer",
         client: str = "client"):
    mod = schema("join_group", version, "request")
    kw = dict(group_id=group, session_timeout=session * MS, member_id=member, protocol_type=ptype,
              protocols=tuple(mod.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols))
    if version >= 1:
        kw["rebalance_timeout"] = rebalance * MS
    if version >= 5:
        kw["group_instance_id"] = instance
    return c.call("join_group", mod.JoinGroupRequest(**kw), version, client_id=client)


def sync(c: ShardContext, group: str, member: str, generation: int, assignments=None, *, version: int = 5,
         instance: str | None = None):
    mod = schema("sync_group", version, "request")
    kw = dict(group_id=group, generation_id=generation, member_id=member,
              assignments=tuple(mod.SyncGroupRequestAssignment(member_id=m, assignment=a)
                                for m, a in (assignments or {}).items()))
    if version >= 3:
        kw["group_instance_id"] = instance
    if version >= 5:
        kw["protocol_type"], kw["protocol_name"] = "consumer", "range"
    return c.call("sync_group", mod.SyncGroupRequest(**kw), version)


def heartbeat(c: ShardContext, group: str, member: str, generation: int, version: int = 4):
    mod = schema("heartbeat", version, "request")
    kw = dict(group_id=group, generation_id=generation, member_id=member)
    if version >= 3:
        kw["group_instance_id"] = None
    return c.call("heartbeat", mod.HeartbeatRequest(**kw), version).error_code


def leave(c: ShardContext, group: str, member: str, version: int = 5):
    mod = schema("leave_group", version, "request")
    if version >= 3:
        req = mod.LeaveGroupRequest(group_id=group, members=(mod.MemberIdentity(member_id=member, group_instance_id=None),))
    else:
        req = mod.LeaveGroupRequest(group_id=group, member_id=member)
    return c.call("leave_group", req, version)


def answered(x) -> bool:
    return not isinstance(x, Pending) or x.done


def resp(x):
    return x.response if isinstance(x, Pending) else x


def join_with_id(c: ShardContext, group: str, **kw) -> Pending:
    """KIP-394: the first JoinGroup only hands out a member id."""
    first = join(c, group, **kw)
    assert first.error_code == ErrorCode.member_id_required
    return join(c, group, first.member_id, **kw)


def form_group(c: ShardContext, group: str, n: int) -> list[str]:
    pending = [join_with_id(c, group, client=f"c{i}") for i in range(n)]
    assert not any(p.done for p in pending)  # the initial rebalance delay holds them
    # Each member that joined during the delay extends it by one more delay (Kafka's
    # tryCompleteInitialRebalanceElseSchedule); with no newcomer it completes.
    delay = c.config.group_initial_rebalance_delay_ms
    c.advance(delay)
    assert not any(p.done for p in pending) or n == 1
    c.advance(delay)
    responses = [p.response for p in pending]
    leader = responses[0].leader
    assert all(r.error_code == ErrorCode.none and r.generation_id == 1 and r.leader == leader for r in responses)
    assert [len(r.members) for r in responses if r.member_id == leader] == [n]
    gen = responses[0].generation_id
    followers = [sync(c, group, r.member_id, gen) for r in responses if r.member_id != leader]
    assert all(isinstance(f, Pending) and not f.done for f in followers)
    lead = sync(c, group, leader, gen, {r.member_id: f"a-{r.member_id}".encode() for r in responses})
    assert lead.error_code == ErrorCode.none and lead.assignment == f"a-{leader}".encode()
    follower_ids = [r.member_id for r in responses if r.member_id != leader]
    assert [f.response.assignment for f in followers] == [f"a-{m}".encode() for m in follower_ids]
    assert c.group(group).state is ClassicGroupState.STABLE
    return [r.member_id for r in responses]


def test_group_forms_after_initial_delay_and_syncs_assignments():
    c = ShardContext(topic("foo", 4), config=cfg())
    members = form_group(c, "g", 3)
    g = c.group("g")
    assert g.generation_id == 1 and g.protocol_name == "range" and len(g.members) == 3
    assert {m.assignment for m in g.members.values()} == {f"a-{m}".encode() for m in members}
    assert all(heartbeat(c, "g", m, 1) == ErrorCode.none for m in members)
    assert heartbeat(c, "g", members[0], 7) == ErrorCode.illegal_generation
    assert heartbeat(c, "g", "ghost", 1) == ErrorCode.unknown_member_id


def test_new_member_triggers_rebalance_and_everyone_rejoins():
    c = ShardContext(topic("foo", 4), config=cfg())
    members = form_group(c, "g", 2)
    newcomer = join_with_id(c, "g", client="late")
    assert c.group("g").state is ClassicGroupState.PREPARING_REBALANCE
    assert heartbeat(c, "g", members[0], 1) == ErrorCode.rebalance_in_progress
    rejoins = [join(c, "g", m) for m in members]
    # The last member to rejoin completes the join phase at once (no initial delay now).
    assert all(answered(r) for r in rejoins) and newcomer.done
    assert {resp(r).generation_id for r in rejoins} == {2}


def test_leave_group_rebalances_remaining_members():
    c = ShardContext(topic("foo", 4), config=cfg())
    members = form_group(c, "g", 3)
    left = leave(c, "g", members[2])
    assert [m.error_code for m in left.members] == [ErrorCode.none]
    assert c.group("g").state is ClassicGroupState.PREPARING_REBALANCE
    rejoins = [join(c, "g", m) for m in members[:2]]
    assert all(answered(r) and resp(r).generation_id == 2 for r in rejoins)
    assert leave(c, "g", "ghost", version=1).error_code == ErrorCode.unknown_member_id


def test_session_expiry_removes_silent_member():
    c = ShardContext(topic("foo", 4), config=cfg())
    members = form_group(c, "g", 2)
    for _ in range(4):  # members[0] keeps heartbeating, members[1] is silent
        c.advance(4_000)
        heartbeat(c, "g", members[0], c.group("g").generation_id)
    assert members[1] not in c.group("g").members


def test_static_member_restart_in_stable_keeps_generation():
    c = ShardContext(topic("foo", 4), config=cfg())
    a = join(c, "g", instance="i1", client="a")
    b = join(c, "g", instance="i2", client="b")
    c.advance(200)
    leader = a.response.leader
    sync(c, "g", b.response.member_id, 1)
    sync(c, "g", leader, 1, {a.response.member_id: b"A", b.response.member_id: b"B"})
    old_id = b.response.member_id
    restarted = join(c, "g", instance="i2", client="b")  # no member id: a restart
    assert restarted.error_code == ErrorCode.none and restarted.generation_id == 1
    assert restarted.member_id != old_id and restarted.member_id in c.group("g").members
    assert c.group("g").state is ClassicGroupState.STABLE  # no rebalance (KIP-345)
    assert sync(c, "g", restarted.member_id, 1, instance="i2").assignment == b"B"
    assert heartbeat(c, "g", old_id, 1) == ErrorCode.unknown_member_id


def test_group_max_size():
    c = ShardContext(topic("foo", 4), config=cfg(group_max_size=2))
    form_group(c, "g", 2)
    first = join(c, "g")
    assert first.error_code == ErrorCode.group_max_size_reached


def test_reload_gives_stable_group_with_assignments():
    c = ShardContext(topic("foo", 4), config=cfg())
    members = form_group(c, "g", 2)
    fresh = c.reload()
    g = fresh.groups["g"]
    assert g.state is ClassicGroupState.STABLE and g.generation_id == 1
    assert {m.assignment for m in g.members.values()} == {f"a-{m}".encode() for m in members}
    assert set(g.members) == set(members)


def test_inconsistent_protocol_and_session_timeout_checks():
    c = ShardContext(topic("foo", 4), config=cfg())
    form_group(c, "g", 1)
    assert join(c, "g", protocols=(("roundrobin", b""),)).error_code == ErrorCode.inconsistent_group_protocol
    assert join(c, "g", session=10).error_code == ErrorCode.invalid_session_timeout


def test_v3_join_adds_member_without_member_id_round_trip():
    c = ShardContext(topic("foo", 4), config=cfg())
    p = join(c, "g", version=3)
    assert isinstance(p, Pending)
    c.advance(200)
    assert p.response.error_code == ErrorCode.none and p.response.member_id.startswith("client-")


def test_repeated_protocol_name_counts_once_and_the_group_still_forms():
    """Found by the live fuzzer: a member listing one protocol name twice made no protocol
    "supported by every member", and completing the join raised in the timer."""
    c = ShardContext(topic("foo", 4), config=cfg())
    pending = join_with_id(c, "dup", protocols=(("range", b"a"), ("range", b"b"), ("roundrobin", b"c")))
    c.advance(c.config.group_initial_rebalance_delay_ms)
    c.advance(c.config.group_initial_rebalance_delay_ms)
    response = pending.response
    assert response.error_code == ErrorCode.none and response.protocol_name == "range"
    assert c.group("dup").state is ClassicGroupState.COMPLETING_REBALANCE
