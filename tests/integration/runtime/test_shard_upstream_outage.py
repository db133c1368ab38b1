"""A shard whose write fails while the upstream is down answers NOT_COORDINATOR, retries its
reload with a bounded backoff (no hot loop), and serves again on its own once the upstream
returns, without a restart (issue 10 §5).

The service runs in-process over the real StateTopic, against a Tansu on moto's S3 store so
that a restarted broker keeps the state topic (a memory-store Tansu comes back empty, which
is the fresh-cluster case `reload_all` handles).
"""
from __future__ import annotations

import asyncio
import os
import time
import uuid

import pytest
from kio.schema.errors import ErrorCode

from coordinator.config import CoordinatorConfig
from coordinator.group.hashing import partition_for
from coordinator.group.image import MetadataImage, TopicImage
from coordinator.group.kio_util import schema
from coordinator.protocol.service import ClientInfo
from coordinator.runtime.shard_runtime import ShardState
from coordinator.runtime.state_topic import StateTopic
from coordinator.service import GroupCoordinatorService
from support.tansu import start_tansu

PARTITIONS = 2
CLIENT = ClientInfo(client_id="t", host="127.0.0.1", port=1, listener="test")


async def commit(service, group: str, topic: str, offset: int) -> set:
    mod = schema("offset_commit", 8, "request")
    req = mod.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=(mod.OffsetCommitRequestTopic(name=topic, partitions=(mod.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata=""),)),))
    resp = await service.handle(8, 8, req, CLIENT)
    return {p.error_code for t in resp.topics for p in t.partitions}


async def fetch(service, group: str):
    mod = schema("offset_fetch", 7, "request")
    resp = await service.handle(9, 7, mod.OffsetFetchRequest(group_id=group, topics=None, require_stable=False),
                                CLIENT)
    return resp.error_code, {(t.name, p.partition_index): p.committed_offset for t in resp.topics
                             for p in t.partitions}


def kcoord_tasks() -> int:
    """Tasks running kcoord's code. A library's own (a connection's reader) would come and go
    with its connections, more of them once the broker is back: not kcoord's to bound."""
    return sum(1 for t in asyncio.all_tasks()
               if "/coordinator/" in getattr(getattr(t.get_coro(), "cr_code", None), "co_filename", ""))


async def wait_for(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds}s: {what}")
        await asyncio.sleep(0.05)


def test_a_shard_comes_back_on_its_own_after_an_upstream_outage(tmp_path, names):
    try:
        from support.moto_s3 import start_moto_s3
        s3 = start_moto_s3(tmp_path)
    except ImportError as e:   # moto[server] is a test extra; anything else is a real failure
        if os.environ.get("CI"):
            pytest.fail(f"CI must run this test, but moto[server] is missing: {e}")
        pytest.skip(f"no moto S3 server: {e}")
    brokers = [start_tansu(log_dir=tmp_path, extra_args=("--storage-engine", s3.storage_url), env=s3.tansu_env)]
    port = brokers[0].port
    state_topic = f"__kcoord_{names.topic()}"
    data_topic = names.topic()
    group = next(g for g in (f"g-{i}" for i in range(1000)) if partition_for(g, PARTITIONS) == 1)
    try:
        async def run():
            topic = StateTopic(brokers[0].bootstrap, state_topic, PARTITIONS)
            await topic.start()
            config = CoordinatorConfig(state_topic=state_topic, state_topic_partitions=PARTITIONS,
                                       offsets_commit_timeout_ms=2000)
            service = GroupCoordinatorService(config, topic)
            service.on_metadata_update(MetadataImage.of([TopicImage(
                topic_id=uuid.uuid5(uuid.NAMESPACE_DNS, data_topic),
                name=data_topic, num_partitions=1)]))
            await service.start()
            rt = service.runtimes[1]
            try:
                assert await commit(service, group, data_topic, 5) == {ErrorCode.none}

                brokers[-1].stop()
                down_at = time.monotonic()
                # The write cannot be acknowledged: the client hears COORDINATOR_NOT_AVAILABLE
                # (write timeout) or NOT_COORDINATOR (write failed), never success.
                assert await commit(service, group, data_topic, 6) & {
                    ErrorCode.coordinator_not_available, ErrorCode.not_coordinator}
                await wait_for(lambda: rt.state is not ShardState.ACTIVE, 60, "shard 1 gave up the failed write")
                attempts_before = rt.reload_attempts
                await wait_for(lambda: rt.reload_attempts >= attempts_before + 3, 30, "reload retries")
                assert (await fetch(service, group))[0] in (ErrorCode.not_coordinator,
                                                            ErrorCode.coordinator_load_in_progress)
                outage = time.monotonic() - down_at
                # Backoff 0.1 s doubling to 5 s (±20 %): at most ~6 + outage/4 attempts.
                assert rt.reload_attempts <= 8 + outage / 3, (rt.reload_attempts, outage)
                tasks = kcoord_tasks()

                brokers.append(start_tansu(port, log_dir=tmp_path, extra_args=("--storage-engine", s3.storage_url),
                                           env=s3.tansu_env))
                await wait_for(lambda: rt.state is ShardState.ACTIVE, 60, "shard 1 serves again")
                assert kcoord_tasks() <= tasks, "reload retries left tasks behind"
                # The log holds the acknowledged commit and not the failed one.
                assert await fetch(service, group) == (ErrorCode.none, {(data_topic, 0): 5})
                assert await commit(service, group, data_topic, 7) == {ErrorCode.none}
                assert await fetch(service, group) == (ErrorCode.none, {(data_topic, 0): 7})
            finally:
                service.close()
                await topic.stop()

        asyncio.run(run())
    finally:
        for b in brokers:
            b.stop()
        s3.stop()
