"""A record that fails to load takes down only its own shard; the operator's skip list;
state-topic loss and full reload; reloads after failed writes back off and recover.

Every test runs the real GroupCoordinatorService and ShardRuntime over FakeStateTopic
(tests/unit/runtime/fakes.py), each in its own event loop.
"""
from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest
from kio.schema.errors import ErrorCode
from prometheus_client import REGISTRY

from coordinator.config import CoordinatorConfig
from coordinator.group.image import MetadataImage
from coordinator.group.kio_util import schema
from coordinator.protocol.codec import encode_body
from coordinator.protocol.service import ClientInfo
from coordinator.runtime import shard_runtime
from coordinator.runtime.shard_runtime import ShardState
from coordinator.service import GroupCoordinatorService, SkipOffsetsError, parse_skip_offsets

from ..group.context import topic as topic_image
from .fakes import FakeStateTopic, group_in, group_not_in

PARTITIONS = 4
CLIENT = ClientInfo(client_id="t", host="127.0.0.1", port=1, listener="test")


def service_for(topic: FakeStateTopic, *skip: str) -> GroupCoordinatorService:
    config = CoordinatorConfig(state_topic_partitions=topic.partitions, state_load_skip_corrupt_offsets=skip)
    service = GroupCoordinatorService(config, topic)  # type: ignore[arg-type]
    service.on_metadata_update(MetadataImage.of([topic_image("t", 4)]))
    return service


async def until(condition, what: str, turns: int = 20_000) -> None:
    """Let the loop run until `condition()` holds; bounded, so a bug fails instead of hanging."""
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"not reached within {turns} loop turns: {what}")


def sample(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


# ------------------------------------------------------------------ requests
async def fetch(service, group: str, version: int = 7):
    mod = schema("offset_fetch", version, "request")
    if version < 8:
        req = mod.OffsetFetchRequest(group_id=group, topics=None, require_stable=False)
    else:
        kw = {"member_id": None, "member_epoch": -1} if version >= 9 else {}
        req = mod.OffsetFetchRequest(groups=(mod.OffsetFetchRequestGroup(group_id=group, topics=None, **kw),),
                                     require_stable=False)
    return await service.handle(9, version, req, CLIENT)


def committed(resp) -> dict:
    return {(t.name, p.partition_index): p.committed_offset for t in resp.topics for p in t.partitions}


async def commit(service, group: str, topic: str, partition: int, offset: int, version: int = 9):
    mod = schema("offset_commit", version, "request")
    part = mod.OffsetCommitRequestPartition(partition_index=partition, committed_offset=offset,
                                            committed_leader_epoch=-1, committed_metadata="")
    req = mod.OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                  group_instance_id=None,
                                  topics=(mod.OffsetCommitRequestTopic(name=topic, partitions=(part,)),))
    return await service.handle(8, version, req, CLIENT)


def commit_errors(resp) -> set:
    return {p.error_code for t in resp.topics for p in t.partitions}


def group_api_requests(group: str):
    """(api_key, version, request, codes of the response) for every group API of one group."""
    def m(name, v):
        return schema(name, v, "request")

    hb = m("consumer_group_heartbeat", 1)
    jg = m("join_group", 9)
    sg = m("sync_group", 5)
    ch = m("heartbeat", 4)
    lg = m("leave_group", 5)
    od = m("offset_delete", 0)
    return [
        (68, 1, hb.ConsumerGroupHeartbeatRequest(
            group_id=group, member_id="m-1", member_epoch=0, instance_id=None, rack_id=None,
            rebalance_timeout=timedelta(seconds=30), subscribed_topic_names=("t",), subscribed_topic_regex=None,
            server_assignor=None, topic_partitions=()), lambda r: {r.error_code}),
        (11, 9, jg.JoinGroupRequest(
            group_id=group, session_timeout=timedelta(seconds=10), rebalance_timeout=timedelta(seconds=10),
            member_id="", group_instance_id=None, protocol_type="consumer",
            protocols=(jg.JoinGroupRequestProtocol(name="range", metadata=b""),), reason=None),
         lambda r: {r.error_code}),
        (14, 5, sg.SyncGroupRequest(group_id=group, generation_id=1, member_id="m", group_instance_id=None,
                                    protocol_type="consumer", protocol_name="range", assignments=()),
         lambda r: {r.error_code}),
        (12, 4, ch.HeartbeatRequest(group_id=group, generation_id=1, member_id="m", group_instance_id=None),
         lambda r: {r.error_code}),
        (13, 5, lg.LeaveGroupRequest(group_id=group, members=(
            lg.MemberIdentity(member_id="m", group_instance_id=None, reason=None),)), lambda r: {r.error_code}),
        (47, 0, od.OffsetDeleteRequest(group_id=group, topics=(
            od.OffsetDeleteRequestTopic(name="t", partitions=(od.OffsetDeleteRequestPartition(partition_index=0),)),)),
         lambda r: {r.error_code}),
        (15, 5, m("describe_groups", 5).DescribeGroupsRequest(groups=(group,), include_authorized_operations=False),
         lambda r: {g.error_code for g in r.groups}),
        (69, 1, m("consumer_group_describe", 1).ConsumerGroupDescribeRequest(
            group_ids=(group,), include_authorized_operations=False), lambda r: {g.error_code for g in r.groups}),
        (42, 2, m("delete_groups", 2).DeleteGroupsRequest(groups_names=(group,)),
         lambda r: {g.error_code for g in r.results}),
    ]


# ------------------------------------------------------------------ load failures
def test_a_bad_value_version_fails_only_its_shard_and_the_rest_serve(caplog):
    topic = FakeStateTopic(PARTITIONS)
    bad_group = group_in(1, PARTITIONS, "bad")
    neighbour = group_in(1, PARTITIONS, "neighbour")      # same shard, loaded before the bad record
    good = group_not_in(PARTITIONS, {1})
    topic.commit(neighbour, "t", 0, 5)
    topic.commit(good, "t", 0, 42)
    bad_p, bad_offset = topic.bad_commit(bad_group, "t", 0)
    assert bad_p == 1 and bad_offset == 1
    failures_before = sample("kcoord_shard_load_failures_total", partition="1") or 0

    async def run():
        service = service_for(topic)
        with caplog.at_level(logging.INFO, logger="kcoord"):
            await service.start()   # returns: one failed shard is not a failed process
        try:
            assert [service.partition_available(p) for p in range(PARTITIONS)] == [True, False, True, True]
            assert service.failed_partitions() == {1: 1}
            # The failed shard answers NOT_COORDINATOR, for the bad group and its neighbour.
            for g in (bad_group, neighbour):
                assert (await fetch(service, g, 7)).error_code == ErrorCode.not_coordinator
                v9 = await fetch(service, g, 9)
                assert [x.error_code for x in v9.groups] == [ErrorCode.not_coordinator]
            # ...and never shows what it replayed before the failure.
            assert service.runtimes[1].shard.groups == {}
            ok = await fetch(service, good, 7)
            assert ok.error_code == ErrorCode.none and committed(ok) == {("t", 0): 42}
            # ListGroups leaves the failed shard out (Kafka lists active partitions only).
            lmod = schema("list_groups", 5, "request")
            listed = await service.handle(16, 5, lmod.ListGroupsRequest(states_filter=(), types_filter=()), CLIENT)
            assert listed.error_code == ErrorCode.none
            assert {g.group_id for g in listed.groups} == {good}
            assert sample("kcoord_shard_state", partition="1", state="failed") == 1
            assert sample("kcoord_shard_state", partition="1", state="active") == 0
            assert sample("kcoord_shard_state", partition="0", state="active") == 1
            assert sample("kcoord_shard_load_failures_total", partition="1") == failures_before + 1
        finally:
            service.close()

    asyncio.run(run())
    errors = [r for r in caplog.records if r.levelno == logging.ERROR and "FAILED to load" in r.getMessage()]
    assert errors, caplog.text
    msg = errors[0].getMessage()
    for part in (f"topic {topic.topic}", "partition 1", "offset 1", "unknown value version 99",
                 "state.load.skip.corrupt.offsets=1:1"):
        assert part in msg, msg


def test_every_group_api_of_a_failed_shard_answers_not_coordinator_in_its_own_shape():
    topic = FakeStateTopic(PARTITIONS)
    bad_group = group_in(2, PARTITIONS, "bad")
    topic.bad_commit(bad_group, "t", 0)

    async def run():
        service = service_for(topic)
        await service.start()
        try:
            for api_key, version, req, codes in group_api_requests(bad_group):
                resp = await service.handle(api_key, version, req, CLIENT)
                assert codes(resp) == {ErrorCode.not_coordinator}, (api_key, resp)
                encode_body(resp)   # a response the client can read at its version
            resp = await commit(service, bad_group, "t", 0, 1)
            assert commit_errors(resp) == {ErrorCode.not_coordinator}
            encode_body(resp)
        finally:
            service.close()

    asyncio.run(run())


def test_a_failed_load_is_not_retried():
    """Kafka leaves a partition whose load failed FAILED until its leadership changes; kcoord
    until a restart. No reload loop runs for it."""
    topic = FakeStateTopic(PARTITIONS)
    topic.bad_commit(group_in(3, PARTITIONS, "bad"), "t", 0)

    async def run():
        service = service_for(topic)
        await service.start()
        loads = topic.load_calls
        for _ in range(50):
            await asyncio.sleep(0)
        assert topic.load_calls == loads
        assert service.runtimes[3].state is ShardState.FAILED
        assert service.runtimes[3]._reload_task is None
        service.close()

    asyncio.run(run())


def test_start_still_raises_when_the_state_topic_cannot_be_read():
    topic = FakeStateTopic(PARTITIONS)
    topic.down = True

    async def run():
        service = service_for(topic)
        with pytest.raises(ConnectionError):
            await service.start()

    asyncio.run(run())


# ------------------------------------------------------------------ skip list
def test_the_skip_list_skips_exactly_the_named_record_with_a_warning(caplog):
    topic = FakeStateTopic(PARTITIONS)
    bad_group = group_in(1, PARTITIONS, "bad")
    topic.commit(bad_group, "t", 1, 11)
    p, bad_offset = topic.bad_commit(bad_group, "t", 0)
    _, fine_offset = topic.commit(bad_group, "t", 2, 22)
    skipped_before = sample("kcoord_shard_load_skipped_records_total", partition="1") or 0

    async def run():
        # The second entry names a record that decodes fine: it loads, with a warning.
        service = service_for(topic, f"{p}:{bad_offset}", f"{p}:{fine_offset}")
        with caplog.at_level(logging.INFO, logger="kcoord"):
            await service.start()
        try:
            assert all(service.partition_available(q) for q in range(PARTITIONS))
            resp = await fetch(service, bad_group)
            assert resp.error_code == ErrorCode.none
            assert committed(resp) == {("t", 1): 11, ("t", 2): 22}   # t-0's commit was the bad record
        finally:
            service.close()

    asyncio.run(run())
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("SKIPPED" in w and f"partition {p}, offset {bad_offset}" in w and "version 99" in w
               for w in warnings), warnings
    assert any(f"lists {p}:{fine_offset}" in w and "loaded normally" in w for w in warnings), warnings
    assert sample("kcoord_shard_load_skipped_records_total", partition=str(p)) == skipped_before + 1


def test_a_skip_entry_for_another_offset_does_not_hide_the_bad_record():
    topic = FakeStateTopic(PARTITIONS)
    p, bad_offset = topic.bad_commit(group_in(0, PARTITIONS, "bad"), "t", 0)

    async def run():
        service = service_for(topic, f"{p}:{bad_offset + 1}")
        await service.start()
        try:
            assert not service.partition_available(p)
            assert service.failed_partitions() == {p: bad_offset}
        finally:
            service.close()

    asyncio.run(run())


@pytest.mark.parametrize("entry", ["3", "x:1", "1:y", "1:", ":4", "9:1", "-1:3", "1:-5", "1;2"])
def test_malformed_skip_entries_are_a_startup_error_naming_the_entry(entry):
    with pytest.raises(SkipOffsetsError, match=repr(entry).replace("[", r"\[")):
        service_for(FakeStateTopic(PARTITIONS), "0:1", entry)


def test_skip_entries_parse():
    assert parse_skip_offsets((" 3:1200", "7:55 ", "3:4"), 8) == {3: frozenset({1200, 4}), 7: frozenset({55})}
    assert parse_skip_offsets((), 8) == {}


# ------------------------------------------------------------------ state topic lost / reload
def test_state_topic_lost_fails_pending_requests_and_drops_state_until_reload_all(caplog):
    topic = FakeStateTopic(PARTITIONS)
    group = group_in(0, PARTITIONS, "g")
    topic.commit(group, "t", 0, 3)

    async def run():
        service = service_for(topic)
        await service.start()
        try:
            topic.hold_writes = asyncio.Event()
            pending = asyncio.ensure_future(commit(service, group, "t", 0, 9))
            await until(lambda: topic.append_calls > 0, "the commit's write started")
            with caplog.at_level(logging.ERROR, logger="kcoord"):
                service.state_topic_lost("topic deleted")
            resp = await asyncio.wait_for(pending, 5)
            assert commit_errors(resp) == {ErrorCode.not_coordinator}
            assert not any(service.partition_available(p) for p in range(PARTITIONS))
            assert all(rt.shard.groups == {} for rt in service.runtimes)
            assert (await fetch(service, group)).error_code == ErrorCode.not_coordinator
            assert sample("kcoord_shard_state", partition="0", state="unloaded") == 1
            # The write held across the loss completes late: it must not revive anything.
            topic.hold_writes.set()
            for _ in range(20):
                await asyncio.sleep(0)
            assert not service.partition_available(0)
            # A fresh cluster: the topic is back, empty. reload_all serves what the log holds.
            topic.logs = {p: [] for p in range(PARTITIONS)}
            with caplog.at_level(logging.ERROR, logger="kcoord"):
                assert await service.reload_all("new topic id") is True
            assert all(service.partition_available(p) for p in range(PARTITIONS))
            resp = await fetch(service, group)
            assert resp.error_code == ErrorCode.none and committed(resp) == {}
            assert commit_errors(await commit(service, group, "t", 0, 10)) == {ErrorCode.none}
            assert committed(await fetch(service, group)) == {("t", 0): 10}
        finally:
            service.close()

    asyncio.run(run())
    text = caplog.text
    assert "STATE TOPIC LOST" in text and "topic deleted" in text
    assert "RELOADING ALL" in text and "new topic id" in text


def test_reload_all_with_the_upstream_down_recovers_on_its_own():
    topic = FakeStateTopic(PARTITIONS)
    group = group_in(2, PARTITIONS, "g")
    topic.commit(group, "t", 0, 3)
    delays: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        delays.append(seconds)
        await asyncio.sleep(0)

    async def run():
        service = service_for(topic)
        for rt in service.runtimes:
            rt._sleep = fake_sleep
        await service.start()
        try:
            topic.down = True
            # Does not raise, but says the shards are not back: they retry on their own.
            assert await service.reload_all("upstream restarted") is False
            assert not service.all_loaded()
            assert all(rt.state in (ShardState.FAILED, ShardState.LOADING) for rt in service.runtimes)
            await until(lambda: len(delays) >= 40, "40 retries")
            topic.down = False
            assert await asyncio.wait_for(service.wait_reloaded(), 5) is True
            assert all(rt.state is ShardState.ACTIVE for rt in service.runtimes)
            assert committed(await fetch(service, group)) == {("t", 0): 3}
        finally:
            service.close()

    asyncio.run(run())
    assert max(delays) <= shard_runtime.RELOAD_BACKOFF_MAX_S * 1.2


def test_a_failed_write_reloads_with_bounded_backoff_and_comes_back_when_the_upstream_returns(caplog):
    """Upstream down: the write fails, the waiter gets NOT_COORDINATOR, the shard reloads
    with a backoff that grows to a cap (fake clock: the sleeps are recorded, not slept),
    one reload task at a time, and serves again once the upstream answers."""
    topic = FakeStateTopic(PARTITIONS)
    group = group_in(1, PARTITIONS, "g")
    topic.commit(group, "t", 0, 3)
    delays: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        delays.append(seconds)
        await asyncio.sleep(0)

    async def run():
        service = service_for(topic)
        rt = service.runtimes[1]
        rt._sleep = fake_sleep
        await service.start()
        try:
            topic.down = True
            with caplog.at_level(logging.INFO, logger="kcoord"):
                resp = await commit(service, group, "t", 0, 4)
                assert commit_errors(resp) == {ErrorCode.not_coordinator}
                tasks_before = len(asyncio.all_tasks())
                for _ in range(20_000):
                    if len(delays) >= 30:
                        break
                    await asyncio.sleep(0)
                    assert len(asyncio.all_tasks()) <= tasks_before   # no task growth
                    assert service.runtimes[1].state in (ShardState.FAILED, ShardState.LOADING)
                assert len(delays) >= 30
                assert (await fetch(service, group)).error_code in (
                    ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress)
                topic.down = False
                await until(lambda: service.runtimes[1].state is ShardState.ACTIVE, "shard 1 back")
            assert committed(await fetch(service, group)) == {("t", 0): 3}   # the failed write is not there
            assert commit_errors(await commit(service, group, "t", 0, 5)) == {ErrorCode.none}
            assert committed(await fetch(service, group)) == {("t", 0): 5}
        finally:
            service.close()

    asyncio.run(run())
    lo, hi = shard_runtime.RELOAD_BACKOFF_MIN_S, shard_runtime.RELOAD_BACKOFF_MAX_S
    assert lo * 0.8 <= delays[0] <= lo * 1.2
    assert all(d <= hi * 1.2 for d in delays)
    assert all(d >= hi * 0.8 for d in delays[10:]), delays   # reached the cap, stays there
    assert all(b >= a * 0.66 for a, b in zip(delays, delays[1:]))
    # Attempt failures are logged at most once a minute, not once per retry.
    reload_errors = [r for r in caplog.records if "reload from topic" in r.getMessage()]
    assert len(reload_errors) == 1
