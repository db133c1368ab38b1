"""GroupCoordinatorService fan-out: multi-group requests are split by shard, answered in the
request's order, and a shard that cannot serve answers for its own groups only, in the shape
and with the error Kafka gives (issue 12, point 6). Real service and runtimes over the fake
state topic (tests/unit/runtime/fakes.py)."""
from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from coordinator.group.kio_util import schema
from coordinator.runtime.shard_runtime import ShardState

from ..runtime.fakes import FakeStateTopic, group_in
from ..runtime.test_shard_failures import CLIENT, commit, service_for

PARTITIONS = 4


def groups_across_shards() -> list[str]:
    """Two groups per shard, interleaved so that request order differs from shard order."""
    return [group_in(p, PARTITIONS, prefix=f"g{i}") for i in range(2) for p in (3, 0, 2, 1)]


async def loaded_with_commits(groups):
    topic = FakeStateTopic(PARTITIONS)
    service = service_for(topic)
    await service.start()
    for g in groups:
        await commit(service, g, "t", 0, 1)
    return topic, service


def test_describe_groups_answers_in_request_order_and_a_failed_shard_fails_only_its_groups():
    async def main():
        groups = groups_across_shards()
        _, service = await loaded_with_commits(groups)
        service.runtimes[2].unload("test")                 # NOT_COORDINATOR for partition 2 only
        req = schema("describe_groups", 5, "request").DescribeGroupsRequest(
            groups=tuple(groups), include_authorized_operations=False)
        resp = await service.handle(15, 5, req, CLIENT)
        assert [g.group_id for g in resp.groups] == groups
        for g in resp.groups:
            expected = ErrorCode.not_coordinator if service.partition_for(g.group_id) == 2 else ErrorCode.none
            assert g.error_code == expected, (g.group_id, g.error_code)
            if expected == ErrorCode.none:
                assert g.group_state == "Empty" and g.protocol_type == "", g
    asyncio.run(main())


def test_consumer_group_describe_keeps_order_and_answers_load_in_progress_for_a_loading_shard():
    async def main():
        groups = groups_across_shards()
        _, service = await loaded_with_commits(groups)
        service.runtimes[1].begin_load()                    # LOADING until its replay finishes
        req = schema("consumer_group_describe", 1, "request").ConsumerGroupDescribeRequest(
            group_ids=tuple(groups), include_authorized_operations=False)
        resp = await service.handle(69, 1, req, CLIENT)
        assert [g.group_id for g in resp.groups] == groups
        codes = {g.group_id: g.error_code for g in resp.groups}
        for g in groups:
            # Simple (offsets-only) groups are not consumer groups: GROUP_ID_NOT_FOUND, as Kafka.
            want = (ErrorCode.coordinator_load_in_progress if service.partition_for(g) == 1
                    else ErrorCode.group_id_not_found)
            assert codes[g] == want, (g, codes[g])
    asyncio.run(main())


def test_list_groups_leaves_out_a_failed_shard_but_reports_a_loading_one():
    async def main():
        groups = groups_across_shards()
        _, service = await loaded_with_commits(groups)
        req = schema("list_groups", 4, "request").ListGroupsRequest(states_filter=())
        listed = await service.handle(16, 4, req, CLIENT)
        assert listed.error_code == ErrorCode.none and sorted(g.group_id for g in listed.groups) == sorted(groups)

        service.runtimes[0].unload("test")
        partial = await service.handle(16, 4, req, CLIENT)
        assert partial.error_code == ErrorCode.none
        assert sorted(g.group_id for g in partial.groups) == sorted(g for g in groups if service.partition_for(g) != 0)

        service.runtimes[3].begin_load()
        loading = await service.handle(16, 4, req, CLIENT)
        assert loading.error_code == ErrorCode.coordinator_load_in_progress
    asyncio.run(main())


def test_delete_groups_keeps_order_per_shard_errors_and_invalid_ids():
    async def main():
        groups = groups_across_shards()
        topic, service = await loaded_with_commits(groups)
        service.runtimes[3].unload("test")
        names = (*groups, "")
        req = schema("delete_groups", 2, "request").DeleteGroupsRequest(groups_names=names)
        resp = await service.handle(42, 2, req, CLIENT)
        assert [r.group_id for r in resp.results] == list(names)
        for r in resp.results:
            if r.group_id == "":
                want = ErrorCode.invalid_group_id
            elif service.partition_for(r.group_id) == 3:
                want = ErrorCode.not_coordinator
            else:
                want = ErrorCode.none
            assert r.error_code == want, (r.group_id, r.error_code)
        # Deleted groups wrote their tombstones; the failed shard wrote nothing.
        assert all(service.runtimes[p].state is ShardState.ACTIVE for p in (0, 1, 2))
        assert any(v is None for _, v in topic.logs[0])
        assert all(v is not None for _, v in topic.logs[3])
    asyncio.run(main())


def test_offset_fetch_v8_multi_group_keeps_order_and_fails_per_group():
    async def main():
        groups = groups_across_shards()
        _, service = await loaded_with_commits(groups)
        service.runtimes[0].unload("test")
        mod = schema("offset_fetch", 8, "request")
        req = mod.OffsetFetchRequest(groups=tuple(mod.OffsetFetchRequestGroup(group_id=g, topics=None) for g in groups),
                                     require_stable=False)
        resp = await service.handle(9, 8, req, CLIENT)
        assert [g.group_id for g in resp.groups] == groups
        for g in resp.groups:
            if service.partition_for(g.group_id) == 0:
                assert g.error_code == ErrorCode.not_coordinator and g.topics == ()
            else:
                assert g.error_code == ErrorCode.none
                assert [(t.name, p.partition_index, p.committed_offset) for t in g.topics for p in t.partitions] \
                    == [("t", 0, 1)]
    asyncio.run(main())
