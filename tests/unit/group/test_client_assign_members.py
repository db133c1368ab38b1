"""The member library (members/) with client assignors against kcoord's real core, sans IO:
A17's scenario on a simulated clock. Three members with the sample sticky assignor and one
key-68 member (as librdkafka joins) share 12 partitions; one Python member is killed (stops
heartbeating) and later one leaves. No partition is ever owned by two members, and the
partitions come back within a few heartbeats of the session timeout.

Each request goes through coordinator/private_apis.py's answers and the private wire
schemas, as a member reads them off the socket (test_client_assign.CsaContext)."""
from __future__ import annotations

from coordinator import private_apis
from coordinator.config import CoordinatorConfig
from coordinator.protocol import private_messages as pm
from members.consumer import Compute, ConsumerMember

from ..members.test_consumer_member import App
from .context import topic
from .test_client_assign import COMPUTE_ASSIGNMENT, CsaContext, _wire

FOO = topic("foo", 12)
SESSION_MS = 3_000


class Node(App):
    """An App that also runs the assigner's round when told to compute."""

    def __init__(self, member: ConsumerMember, ctx: CsaContext) -> None:
        super().__init__(member)
        self.ctx = ctx
        self.alive = True
        self.installs = 0

    def handle(self, actions, now):
        computes = [a for a in actions if isinstance(a, Compute)]
        super().handle([a for a in actions if not isinstance(a, Compute)], now)
        if computes:
            self.compute(now)

    def compute(self, now):
        c = self.ctx
        prep = _wire(self.member.prepare_request())
        answer = c.apply(c.shard.consumer_group_prepare_assignment(c.ctx(0), prep, now)).response
        install = self.member.on_prepare(_wire(private_apis.prepare_response(answer)))
        if install is None:
            return
        done = c.apply(c.shard.consumer_group_install_assignment(c.ctx(0), _wire(install), now)).response
        assert done.error_code == 0, done
        self.installs += 1


def step(ctx: CsaContext, nodes: list[Node], ms: int, every: int = 50) -> None:
    """Heartbeat every live member as due, for `ms`; after every exchange no partition may
    be owned twice."""
    for _ in range(ms // every):
        for n in nodes:
            if not n.alive:
                continue
            req = n.member.poll(ctx.now_ms)
            if req is None:
                continue
            if isinstance(req, pm.CsaHeartbeatRequest):
                result = ctx.apply(ctx.shard.consumer_group_csa_heartbeat(ctx.ctx(1), _wire(req), ctx.now_ms))
                resp = _wire(private_apis.csa_response(result.response))
            else:
                resp = ctx.apply(ctx.shard.consumer_group_heartbeat(ctx.ctx(1), req, ctx.now_ms)).response
            n.handle(n.member.on_heartbeat(resp, ctx.now_ms), ctx.now_ms)
            owner: dict = {}
            for other in nodes:
                if not other.alive:
                    continue
                for t, ps in other.member.owned.items():
                    for p in ps:
                        assert (t, p) not in owner, f"{p} owned by {owner[(t, p)]} and {other.member.member_id}"
                        owner[(t, p)] = other.member.member_id
        ctx.advance(every)


def counts(nodes: list[Node]) -> list[int]:
    return sorted(sum(len(ps) for ps in n.member.owned.values()) for n in nodes if n.alive)


def test_a17_sans_io_three_sticky_members_and_a_key_68_member():
    from members.sticky import StickyAssignor
    ctx = CsaContext(FOO, config=CoordinatorConfig(consumer_session_timeout_ms=SESSION_MS,
                                                   consumer_min_session_timeout_ms=SESSION_MS,
                                                   consumer_assignment_interval_ms=0))
    nodes = [Node(ConsumerMember("g", ["foo"], member_id=f"p{i}", rebalance_timeout_ms=5_000,
                                 assignors=[StickyAssignor()]), ctx) for i in range(3)]
    step(ctx, nodes, 2_000)
    assert counts(nodes) == [4, 4, 4] and ctx.group("g").assignment_epoch == ctx.group("g").group_epoch
    assert sum(n.installs for n in nodes) >= 1
    assert ctx.prepare("g", "p0", nodes[0].member.member_epoch).error_code != COMPUTE_ASSIGNMENT
    # a real consumer (key 68) joins: server mode, everyone shares 12 partitions
    real = Node(ConsumerMember("g", ["foo"], member_id="rd", rebalance_timeout_ms=5_000), ctx)
    nodes.append(real)
    step(ctx, nodes, 3_000)
    assert counts(nodes) == [3, 3, 3, 3]
    assert ctx.group("g").client_assignor_name is None          # the server assignor computed it
    # kill a Python member: fenced at its session timeout, its partitions consumed again soon after
    killed = nodes[1]
    killed.alive = False
    step(ctx, nodes, SESSION_MS)
    assert "p1" not in ctx.group("g").members
    step(ctx, nodes, 2_000)
    assert counts(nodes) == [4, 4, 4]
    # the key-68 member leaves: client mode again, a Python member computes, 6/6
    before = sum(n.installs for n in nodes)
    real.handle(real.member.leave(ctx.now_ms), ctx.now_ms)
    step(ctx, nodes, 2_000)
    real.alive = False
    step(ctx, nodes, 2_000)
    assert counts(nodes) == [6, 6]
    assert sum(n.installs for n in nodes) > before
    assert ctx.group("g").client_assignor_name == StickyAssignor.name
