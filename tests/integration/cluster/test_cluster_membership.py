"""kcoord instances form a cluster through a group on the real upstream (Tansu and Apache
Kafka): every shard is owned by exactly one instance once the group settles, a joiner
takes a share, a leaver's shards move at once, and a silent instance's shards move after
its session timeout (issue 14, point 1)."""
from __future__ import annotations

import asyncio
import uuid

from coordinator.cluster.membership import ClusterMembership, group_name
from coordinator.cluster.protocol import Endpoint
from coordinator.gateway.listeners import parse_addresses
from coordinator.upstream.client import UpstreamClient
from support.tansu import TansuBroker

SHARDS = 12
SESSION_MS = 6_000     # Kafka's fixture lowers group.min.session.timeout.ms to 1 s


def static_expected(upstream) -> bool:
    """Tansu 0.6 cannot carry static members (membership.static_membership_works says why,
    with its source lines); the membership sees that in ApiVersions and joins dynamically."""
    return not isinstance(upstream, TansuBroker)


async def _open(addresses):
    return await UpstreamClient.connect(addresses, client_id="kcoord-cluster-test")


class Instances:
    def __init__(self, bootstrap: str, static: bool | None = None) -> None:
        self.bootstrap = parse_addresses(bootstrap)
        self.static = static
        self.group = group_name(f"__kcoord_test_{uuid.uuid4().hex[:8]}")
        self.members: dict[str, ClusterMembership] = {}
        self.tasks: dict[str, asyncio.Task] = {}
        self.changes: list[tuple[str, int, frozenset[int], frozenset[int]]] = []

    def start(self, instance: str, port: int) -> ClusterMembership:
        def on_change(assignment, added, revoked, instance=instance):
            self.changes.append((instance, assignment.generation, added, revoked))

        m = ClusterMembership(group_id=self.group, instance_id=instance, endpoint=Endpoint("127.0.0.1", port),
                              n_shards=SHARDS, open_link=_open, bootstrap=self.bootstrap, on_change=on_change,
                              session_ms=SESSION_MS, rebalance_ms=10_000, heartbeat_ms=250, lease_margin_ms=500,
                              static=self.static)
        self.members[instance] = m
        self.tasks[instance] = asyncio.create_task(m.run())
        return m

    async def settled(self, alive: list[str], timeout: float = 45.0) -> dict[str, frozenset[int]]:
        """Wait (bounded) until the live instances hold every shard, each exactly once, in
        one generation, with nobody else holding any."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            owned = {i: self.members[i].owned for i in alive}
            generations = {self.members[i].generation for i in alive}
            union = frozenset().union(*owned.values())
            if (len(generations) == 1 and all(self.members[i].stable.is_set() for i in alive)
                    and union == frozenset(range(SHARDS)) and sum(map(len, owned.values())) == SHARDS):
                return owned
            for i, t in self.tasks.items():
                if t.done() and i in alive:
                    raise AssertionError(f"{i} stopped: {t.exception()!r}")
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"not settled after {timeout}s: {owned} generations {generations}")
            await asyncio.sleep(0.05)

    async def kill(self, instance: str) -> None:
        """Stop without leaving: its link closes, the group notices only by the session timeout."""
        self.tasks[instance].cancel()
        await asyncio.gather(self.tasks[instance], return_exceptions=True)
        self.members[instance]._drop_link()

    async def close(self) -> None:
        for i, m in self.members.items():
            if not self.tasks[i].done():
                await m.leave()
                self.tasks[i].cancel()
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)


def test_instances_share_every_shard_exactly_once_through_joins_leaves_and_a_crash(upstream):
    async def scenario():
        c = Instances(upstream.bootstrap)      # static or dynamic: chosen from the upstream's ApiVersions
        try:
            c.start("kcoord-0", 19000)
            c.start("kcoord-1", 19001)
            owned = await c.settled(["kcoord-0", "kcoord-1"])
            assert {m.static for m in c.members.values()} == {static_expected(upstream)}
            assert sorted(map(len, owned.values())) == [6, 6]
            nodes = {i: c.members[i].node_id for i in owned}
            assert nodes == {"kcoord-0": 1 << 30, "kcoord-1": (1 << 30) + 1}

            c.start("kcoord-2", 19002)       # a joiner takes a share; the others keep the rest
            before = dict(owned)
            owned = await c.settled(["kcoord-0", "kcoord-1", "kcoord-2"])
            assert sorted(map(len, owned.values())) == [4, 4, 4]
            assert owned["kcoord-0"] <= before["kcoord-0"] and owned["kcoord-1"] <= before["kcoord-1"]

            await c.members["kcoord-2"].leave()      # scale-down: its shards move at once
            # Well before the session timeout: the leave moved them, not a timeout.
            owned = await c.settled(["kcoord-0", "kcoord-1"], timeout=SESSION_MS / 1000 - 1)
            assert sorted(map(len, owned.values())) == [6, 6]

            await c.kill("kcoord-1")          # a crash: moves after the session timeout
            owned = await c.settled(["kcoord-0"])
            assert owned["kcoord-0"] == frozenset(range(SHARDS))
            # No shard was ever added to one instance while another still held it.
            holder: dict[int, str] = {}
            for instance, _, added, revoked in c.changes:
                for s in revoked:
                    if holder.get(s) == instance:
                        del holder[s]
                for s in added:
                    assert s not in holder or holder[s] in ("kcoord-1", "kcoord-2"), \
                        f"shard {s} added to {instance} while {holder[s]} held it"
                    holder[s] = instance
        finally:
            await c.close()

    asyncio.run(scenario())


def test_a_second_process_with_the_same_instance_id_is_refused(upstream):
    async def scenario():
        c = Instances(upstream.bootstrap)
        try:
            c.start("kcoord-0", 19000)
            await c.settled(["kcoord-0"])
            twin = ClusterMembership(group_id=c.group, instance_id="kcoord-0", endpoint=Endpoint("127.0.0.1", 19009),
                                     n_shards=SHARDS, open_link=_open, bootstrap=c.bootstrap,
                                     on_change=lambda *a: None, session_ms=SESSION_MS, heartbeat_ms=250,
                                     lease_margin_ms=500, static=None)
            task = asyncio.create_task(twin.run())
            # Static membership (KIP-345): the newcomer replaces the old member, which is
            # fenced on its next heartbeat and drops its shards; one of them stops. Dynamic
            # members (Tansu): the leader's balancer gives the second member with the same
            # instance id an error and no shards, and it stops.
            async def one_fenced():
                while not (task.done() or c.tasks["kcoord-0"].done()):
                    await asyncio.sleep(0.05)
            await asyncio.wait_for(one_fenced(), 30)
            done = task if task.done() else c.tasks["kcoord-0"]
            assert "FENCED_INSTANCE_ID" in repr(done.exception()) or "another member" in repr(done.exception())
            fenced = twin if task.done() else c.members["kcoord-0"]
            assert fenced.owned == frozenset()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        finally:
            await c.close()

    asyncio.run(scenario())
