"""A classic Heartbeat to a shard that is still loading answers NONE, as Kafka's
GroupCoordinatorService does ("The group is still loading, so blindly respond"); the other
group APIs answer COORDINATOR_LOAD_IN_PROGRESS, and a FAILED shard NOT_COORDINATOR.

Why it matters: aiokafka treats COORDINATOR_LOAD_IN_PROGRESS in a Heartbeat as an unexpected
error that ends its heartbeat task, so after a kcoord restart its members were expired or
left the group (tests/integration/classic/test_classic_restart.py failed so, more often with
the raw marker-aware loader, whose load is a few tens of milliseconds longer)."""
from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from coordinator.config import CoordinatorConfig
from coordinator.protocol import apis
from coordinator.runtime.shard_runtime import ShardState
from coordinator.service import GroupCoordinatorService
from support import raw_client

from .fakes import FakeStateTopic, group_in
from .test_shard_failures import CLIENT


def _heartbeat(group: str):
    t = raw_client.request_types(apis.HEARTBEAT, 4)
    return t.HeartbeatRequest(group_id=group, generation_id=1, member_id="m-1", group_instance_id=None)


def _join(group: str):
    t = raw_client.request_types(apis.JOIN_GROUP, 9)
    return t.JoinGroupRequest(group_id=group, session_timeout=6000, rebalance_timeout=6000, member_id="",
                              group_instance_id=None, protocol_type="consumer",
                              protocols=(t.JoinGroupRequestProtocol(name="range", metadata=b""),), reason=None)


def test_heartbeat_answers_none_while_loading_and_the_others_load_in_progress():
    async def main():
        log = FakeStateTopic(2)
        log.hold_loads = asyncio.Event()          # the load waits: every shard stays LOADING
        svc = GroupCoordinatorService(CoordinatorConfig(state_topic_partitions=2), log)  # type: ignore[arg-type]
        group = group_in(1, 2)
        assert svc.runtimes[1].state is ShardState.LOADING
        beat = await svc.handle(apis.HEARTBEAT, 4, _heartbeat(group), CLIENT)
        assert beat.error_code == ErrorCode.none
        join = await svc.handle(apis.JOIN_GROUP, 9, _join(group), CLIENT)
        assert join.error_code == ErrorCode.coordinator_load_in_progress
        svc.runtimes[1].loader.failed(RuntimeError("a record that does not decode"), 0)
        assert svc.runtimes[1].state is ShardState.FAILED
        failed = await svc.handle(apis.HEARTBEAT, 4, _heartbeat(group), CLIENT)
        assert failed.error_code == ErrorCode.not_coordinator
        svc.close()
    asyncio.run(main())
