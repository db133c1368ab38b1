"""The KIP-848 member (members/consumer.py) driven against kcoord's real group core
(tests/unit/group/context.ShardContext, simulated clock): join, reconcile with revoke
before assign, no partition ever owned twice, leave, fencing and rejoin. The client-assignor
path is checked against the private messages and the coordinator's install validation."""
from __future__ import annotations

import dataclasses
import datetime
import uuid

from coordinator.group.modern.client_assignment import Snapshot, validate_install
from coordinator.protocol import private_messages as pm
from coordinator.protocol.codec import decode_body, encode_body
from members.consumer import Assign, Compute, ConsumerMember, Fatal, Lost, Revoke, State
from members.sticky import StickyAssignor

from ..group.context import ShardContext, topic

FOO = topic("foo", 12)


class App:
    """The application side: answers Revoke/Assign at once and records ownership."""

    def __init__(self, member: ConsumerMember) -> None:
        self.member = member
        self.lost = 0

    def handle(self, actions, now):
        while actions:
            a = actions.pop(0)
            if isinstance(a, Revoke):
                actions.extend(self.member.revoked(now))
            elif isinstance(a, Assign):
                actions.extend(self.member.assigned(now))
            elif isinstance(a, Lost):
                self.lost += 1
            else:
                assert not isinstance(a, Fatal), a


def run(ctx, apps, ms, step=50):
    """Heartbeat every member as due, for `ms` of simulated time; after every exchange
    no partition may be owned by two members."""
    for _ in range(ms // step):
        for app in apps:
            req = app.member.poll(ctx.now_ms)
            if req is not None:
                resp = ctx.apply(ctx.shard.consumer_group_heartbeat(ctx.ctx(1), req, ctx.now_ms)).response
                app.handle(app.member.on_heartbeat(resp, ctx.now_ms), ctx.now_ms)
            seen = {}
            for other in apps:
                for t, ps in other.member.owned.items():
                    for p in ps:
                        assert (t, p) not in seen, f"{p} owned by {seen[(t, p)]} and {other.member.member_id}"
                        seen[(t, p)] = other.member.member_id
        ctx.advance(step)


def owned_counts(apps):
    return sorted(sum(len(ps) for ps in a.member.owned.values()) for a in apps)


def test_members_converge_hand_over_and_leave():
    ctx = ShardContext(FOO)
    apps = [App(ConsumerMember("g", ["foo"], member_id=f"m{i}", rebalance_timeout_ms=5000)) for i in range(3)]
    run(ctx, apps[:1], 500)
    assert owned_counts(apps[:1]) == [12] and apps[0].member.state is State.STABLE
    run(ctx, apps, 3000)
    assert owned_counts(apps) == [4, 4, 4]
    assert all(a.member.state is State.STABLE for a in apps)
    assert all(a.member.member_epoch == ctx.group("g").group_epoch for a in apps)
    app = apps.pop()
    app.handle(app.member.leave(ctx.now_ms), ctx.now_ms)
    run(ctx, apps + [app], 3000)
    assert app.member.state is State.LEFT and app.member.owned == {}
    assert "m2" not in ctx.group("g").members
    assert owned_counts(apps) == [6, 6]


def test_fenced_member_loses_its_partitions_and_rejoins():
    ctx = ShardContext(FOO)
    apps = [App(ConsumerMember("g", ["foo"], member_id=f"m{i}", rebalance_timeout_ms=5000)) for i in range(2)]
    run(ctx, apps, 2000)
    assert owned_counts(apps) == [6, 6]
    # m1 stops heartbeating past its session timeout (45 s): the coordinator fences it
    ctx.advance(ctx.config.consumer_session_timeout_ms + 1000)
    assert "m1" not in ctx.group("g").members
    run(ctx, apps, 3000)
    assert apps[1].lost == 1                                       # Lost, not Revoke
    assert "m1" in ctx.group("g").members                          # rejoined, same id
    assert owned_counts(apps) == [6, 6]


def test_static_member_leaves_with_epoch_minus_two():
    ctx = ShardContext(FOO)
    app = App(ConsumerMember("g", ["foo"], member_id="s1", instance_id="i1"))
    run(ctx, [app], 500)
    app.handle(app.member.leave(ctx.now_ms), ctx.now_ms)
    req = app.member.poll(ctx.now_ms)
    assert req.member_epoch == -2 and req.instance_id == "i1"


def test_heartbeat_requests_send_only_what_changed():
    m = ConsumerMember("g", ["foo"], member_id="m", rebalance_timeout_ms=1234, server_assignor="range")
    join = m.poll(0)
    assert (join.member_epoch, join.subscribed_topic_names, join.server_assignor, join.topic_partitions) == \
        (0, ("foo",), "range", ())
    assert join.rebalance_timeout == datetime.timedelta(milliseconds=1234)
    assert m.poll(0) is None                                       # one request in flight
    m.request_failed(0)
    assert m.poll(50) is None and m.poll(100) is not None          # retried after the backoff


def _csa_member(mid="a") -> ConsumerMember:
    return ConsumerMember("g", ["foo"], member_id=mid, assignors=[StickyAssignor()])


def test_client_assignor_member_speaks_32700_and_computes():
    m = _csa_member()
    join = m.poll(0)
    assert isinstance(join, pm.CsaHeartbeatRequest)
    assert decode_body(pm.CsaHeartbeatRequest, encode_body(join), 0) == join
    assert [(a.name, a.minimum_version, a.maximum_version, a.version, a.metadata) for a in join.client_assignors] \
        == [("sticky", 1, 2, 2, b"\x01")]
    resp = pm.CsaHeartbeatResponse(throttle_time=datetime.timedelta(0), error_code=32700, member_id="a",
                                   member_epoch=1, heartbeat_interval=datetime.timedelta(milliseconds=100),
                                   assignment=pm.CsaAssignment())
    assert m.on_heartbeat(resp, 0) == [Compute()]
    assert m.member_epoch == 1
    assert m.prepare_request() == pm.PrepareAssignmentRequest(group_id="g", member_id="a", member_epoch=1)
    fid = FOO.topic_id
    prepared = pm.PrepareAssignmentResponse(
        throttle_time=datetime.timedelta(0), error_code=0, group_epoch=2, client_assignor_name="sticky",
        members=tuple(pm.PreparedMember(member_id=x, member_epoch=1, subscriptions=(fid,), assignor_version=2,
                                        assignor_metadata=b"\x01") for x in ("a", "b")),
        partition_metadata=(pm.PartitionMetadata(topic_id=fid, topic_name="foo", num_partitions=12),))
    install = m.on_prepare(prepared)
    assert (install.group_epoch, install.error, install.member_epoch) == (2, 0, 1)
    validate_install(Snapshot(2, "sticky", {"a": frozenset({fid}), "b": frozenset({fid})}, {fid: 12}),
                     {im.member_id: {tp.topic_id: tp.partitions for tp in im.partitions} for im in install.members})
    # an assignor failure is installed as Error, never as a bad assignment (seed 000 L274-276)
    bad = dataclasses.replace(prepared, members=(pm.PreparedMember(
        member_id="a", member_epoch=1, subscriptions=(fid,), assignor_version=2, assignor_metadata=b""),))
    failed = m.on_prepare(bad)
    assert failed.error == 1 and failed.members == ()
    assert m.on_prepare(pm.PrepareAssignmentResponse(throttle_time=datetime.timedelta(0), error_code=25)) is None


def test_client_assignor_member_reports_assignment_metadata_and_reason():
    a = StickyAssignor()
    m = ConsumerMember("g", ["foo"], member_id="a", assignors=[a])
    m.poll(0)
    tid = uuid.uuid4()
    resp = pm.CsaHeartbeatResponse(
        throttle_time=datetime.timedelta(0), error_code=0, member_id="a", member_epoch=2,
        heartbeat_interval=datetime.timedelta(milliseconds=100),
        assignment=pm.CsaAssignment(topic_partitions=(pm.TopicPartitions(topic_id=tid, partitions=(0, 1)),),
                                    error=0, metadata_version=2, metadata_bytes=b"\x01"))
    actions = m.on_heartbeat(resp, 0)
    assert actions == [Assign({tid: frozenset({0, 1})})]
    assert a.last == ({tid: frozenset({0, 1})}, 2, b"\x01", 0)
    m.assigned(0)
    m.rejoin_with_reason(1)
    ack = m.poll(0)
    assert [c.reason for c in ack.client_assignors] == [1]
    assert ack.topic_partitions == (pm.TopicPartitions(topic_id=tid, partitions=(0, 1)),)
