"""The service in a kcoord cluster (issue 14): it serves only the shards assigned to it,
loads a taken shard, drops a released one, and releases no response once the membership
lease ran out (coordinator/service/lifecycle.py enter_cluster_mode/take/release)."""
from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from coordinator.config import CoordinatorConfig
from coordinator.protocol import apis
from coordinator.runtime.shard_runtime import ShardState
from coordinator.service import GroupCoordinatorService
from support import raw_client

from ..runtime.fakes import FakeStateTopic, group_in
from ..runtime.test_shard_failures import CLIENT


def _fetch(group: str):
    t = raw_client.request_types(apis.OFFSET_FETCH, 8)
    return t.OffsetFetchRequest(groups=(t.OffsetFetchRequestGroup(group_id=group, topics=None),), require_stable=False)


async def _settled(svc, partitions, timeout=5.0):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while any(svc.runtimes[p].state is ShardState.LOADING for p in partitions):
        assert loop.time() < deadline, "the taken shards did not load"
        await asyncio.sleep(0.01)


def test_only_assigned_shards_serve_and_the_lease_gates_every_answer():
    async def main():
        log = FakeStateTopic(4)
        svc = GroupCoordinatorService(CoordinatorConfig(state_topic_partitions=4), log)  # type: ignore[arg-type]
        lease = {"valid": True}
        svc.enter_cluster_mode(lambda: lease["valid"], load_grace_ms=3000)
        assert {rt.state for rt in svc.runtimes} == {ShardState.UNLOADED}
        assert svc.runtimes[0].load_grace_ms == 3000
        svc.take({1, 2})
        await _settled(svc, {1, 2})
        assert [rt.state for rt in svc.runtimes] == [ShardState.UNLOADED, ShardState.ACTIVE, ShardState.ACTIVE,
                                                   ShardState.UNLOADED]
        assert {rt.partition for rt in svc.served()} == {1, 2} and svc.all_loaded()
        mine, other = group_in(1, 4), group_in(3, 4)
        ok = await svc.handle(apis.OFFSET_FETCH, 8, _fetch(mine), CLIENT)
        assert ok.groups[0].error_code == ErrorCode.none
        refused = await svc.handle(apis.OFFSET_FETCH, 8, _fetch(other), CLIENT)
        assert refused.groups[0].error_code == ErrorCode.not_coordinator
        lease["valid"] = False        # a pause: the membership lease ran out
        stale = await svc.handle(apis.OFFSET_FETCH, 8, _fetch(mine), CLIENT)
        assert stale.groups[0].error_code == ErrorCode.not_coordinator
        lease["valid"] = True
        svc.release({1}, "moved to kc-1")
        assert svc.runtimes[1].state is ShardState.UNLOADED and svc.owned == {2}
        moved = await svc.handle(apis.OFFSET_FETCH, 8, _fetch(mine), CLIENT)
        assert moved.groups[0].error_code == ErrorCode.not_coordinator
        svc.close()
    asyncio.run(main())
