"""The cluster view's watch on the state topic, with the real GroupCoordinatorService and
ClusterView over FakeStateTopic (no upstream: each "refresh" is a snapshot handed to the
view, as `ClusterView.refresh` does with a Metadata answer).

- a failed write is not a lost topic: only the shard whose write failed reloads (review 7);
- a missing topic with recreation off is reported once, not once per refresh (review 8);
- a recovery ends only when every shard is loaded again (review 9);
- a LOADING shard is found by FindCoordinator and answers COORDINATOR_LOAD_IN_PROGRESS,
  as Kafka's (review 12).
"""
from __future__ import annotations

import asyncio
import logging
import uuid

from kio.schema.errors import ErrorCode

from coordinator.gateway.cluster import ClusterSnapshot, ClusterView
from coordinator.group.image import TopicImage
from coordinator.group.kio_util import schema
from coordinator.protocol.codec import encode_body
from coordinator.runtime import shard_runtime
from coordinator.runtime.fenced_links import StateLogError
from coordinator.runtime.shard_runtime import ShardState
from coordinator.runtime.state_log import TopicAuthorizationFailed

from .fakes import FakeStateTopic, group_in
from .test_shard_failures import (CLIENT, PARTITIONS, commit, commit_errors, committed, fetch, group_api_requests,
                                  sample, service_for, until)


def snapshot(topic: FakeStateTopic, topic_id: uuid.UUID | None, partitions: int = PARTITIONS) -> ClusterSnapshot:
    """What a Metadata answer says: the state topic under ``topic_id``, or missing (None)."""
    if topic_id is None:
        return ClusterSnapshot({}, {}, {})
    image = TopicImage(topic_id, topic.topic, partitions)
    return ClusterSnapshot({}, {topic.topic: image}, {topic.topic: {p: 1 for p in range(partitions)}})


def refreshed(view: ClusterView, snap: ClusterSnapshot) -> None:
    """One refresh answered with ``snap`` (ClusterView.refresh minus the round trip)."""
    view._apply(snap)
    view._track_state_topic(snap)


def watched(topic: FakeStateTopic, service, topic_id: uuid.UUID, *, recreate: bool = True) -> ClusterView:
    view = ClusterView([("127.0.0.1", 1)], topic.topic)
    view._apply(snapshot(topic, topic_id))
    view.manage_state_topic(service, topic, PARTITIONS, {}, recreate=recreate)
    return view


def incidents(kind: str) -> float:
    return sample("kcoord_state_topic_incidents_total", kind=kind) or 0


async def no_sleep(seconds: float) -> None:
    await asyncio.sleep(0)


# ------------------------------------------------------------------ review 7
def test_a_write_failing_with_unknown_topic_fails_only_its_shard_and_asks_the_metadata(caplog):
    """Kafka's clients treat UnknownTopicOrPartition as retriable (a batch expiring during a
    leader move): it must not drop every shard's state. The shard whose write failed answers
    NOT_COORDINATOR and reloads; the watcher refreshes at once and decides from the metadata."""
    topic = FakeStateTopic(PARTITIONS)
    group = group_in(1, PARTITIONS, "g")
    other = group_in(2, PARTITIONS, "other")
    topic.commit(other, "t", 0, 8)
    write_failed, lost = incidents("write_failed"), incidents("lost")

    async def run():
        service = service_for(topic)
        await service.start()
        view = watched(topic, service, uuid.uuid4())
        try:
            topic.fail_writes = StateLogError("produce to t-1: UNKNOWN_TOPIC_OR_PARTITION")
            with caplog.at_level(logging.INFO, logger="kcoord"):
                assert commit_errors(await commit(service, group, "t", 0, 4)) == {ErrorCode.not_coordinator}
            assert view._refresh_wanted.is_set(), "the watcher should check the topic at once"
            assert view.state_topic_lost is None and view._recovery is None
            for p in (0, 2, 3):
                assert service.runtimes[p].state is ShardState.ACTIVE, p
            assert committed(await fetch(service, other)) == {("t", 0): 8}
            topic.fail_writes = None
            await until(lambda: service.runtimes[1].state is ShardState.ACTIVE, "shard 1 reloaded")
            assert commit_errors(await commit(service, group, "t", 0, 5)) == {ErrorCode.none}
        finally:
            await view.close()
            service.close()

    asyncio.run(run())
    assert incidents("write_failed") == write_failed + 1
    assert incidents("lost") == lost
    assert "STATE TOPIC LOST" not in caplog.text and "RELOADING ALL" not in caplog.text


def test_a_lasting_authorization_failure_fails_its_shard_with_backoff_and_a_rate_limited_log(caplog):
    """No Write ACL: every write fails, every reload succeeds. Only that shard answers
    NOT_COORDINATOR; its reloads back off as the failures repeat (never at request rate),
    and the ERROR is written once (then rate-limited) with what to fix."""
    topic = FakeStateTopic(PARTITIONS)
    group = group_in(3, PARTITIONS, "g")
    delays: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        delays.append(seconds)
        await asyncio.sleep(0)

    async def run():
        service = service_for(topic)
        rt = service.runtimes[3]
        rt._sleep = fake_sleep
        await service.start()
        view = watched(topic, service, uuid.uuid4())
        try:
            topic.fail_writes = TopicAuthorizationFailed("produce to t-3: TOPIC_AUTHORIZATION_FAILED")
            with caplog.at_level(logging.INFO, logger="kcoord"):
                for i in range(8):
                    await until(lambda: rt.state is ShardState.ACTIVE, f"shard 3 reloaded before commit {i}")
                    assert commit_errors(await commit(service, group, "t", 0, i)) == {ErrorCode.not_coordinator}
                    assert view.state_topic_lost is None
                    assert all(service.runtimes[p].state is ShardState.ACTIVE for p in (0, 1, 2))
                await until(lambda: rt.state is ShardState.ACTIVE, "shard 3 reloaded")
        finally:
            await view.close()
            service.close()

    asyncio.run(run())
    # 8 failures in a row: the first reload at once, then 7 growing waits up to the cap.
    lo, hi = shard_runtime.RELOAD_BACKOFF_MIN_S, shard_runtime.RELOAD_BACKOFF_MAX_S
    assert len(delays) == 7, delays
    assert lo * 0.8 <= delays[0] <= lo * 1.2 and all(d <= hi * 1.2 for d in delays)
    assert delays[-1] >= hi * 0.8, delays
    shard_errors = [r.getMessage() for r in caplog.records
                    if r.levelno == logging.ERROR and "shard 3: write of" in r.getMessage()]
    assert len(shard_errors) == 1, shard_errors
    assert f"topic {topic.topic} partition 3" in shard_errors[0] and "Write" in shard_errors[0]
    assert "STATE TOPIC LOST" not in caplog.text


# ------------------------------------------------------------------ review 8
def test_a_missing_topic_with_recreation_off_is_reported_once_and_recovers_when_created(caplog):
    topic = FakeStateTopic(PARTITIONS)

    async def run():
        service = service_for(topic)
        await service.start()
        view = watched(topic, service, uuid.uuid4(), recreate=False)
        try:
            with caplog.at_level(logging.INFO, logger="kcoord"):
                refreshed(view, snapshot(topic, None))
                recovery = view._recovery
                assert recovery is not None
                for _ in range(30):          # 30 refreshes, the topic still missing
                    for _ in range(5):
                        await asyncio.sleep(0)
                    refreshed(view, snapshot(topic, None))
                assert view._recovery is recovery and not recovery.done(), "recovery restarted per refresh"
                assert view.state_topic_lost is not None
                # The operator creates it: recovery goes on by itself.
                refreshed(view, snapshot(topic, uuid.uuid4()))
                await asyncio.wait_for(recovery, 5)
            assert view.state_topic_lost is None
            assert all(rt.state is ShardState.ACTIVE for rt in service.runtimes)
        finally:
            await view.close()
            service.close()

    asyncio.run(run())
    off = [r for r in caplog.records if "recreation is off" in r.getMessage()]
    assert len(off) == 1 and off[0].levelno == logging.ERROR, [r.getMessage() for r in off]
    assert "serving again" in caplog.text


# ------------------------------------------------------------------ review 9
def test_recovery_is_reported_only_once_every_shard_reloaded(caplog):
    """A fresh cluster (new topic id) while the log cannot be read: reload_all fails and the
    shards retry on their own. The loss is over, and kcoord_state_topic_present 1, only when
    they are all loaded."""
    topic = FakeStateTopic(PARTITIONS)
    group = group_in(0, PARTITIONS, "g")

    async def run():
        service = service_for(topic)
        for rt in service.runtimes:
            rt._sleep = no_sleep
        await service.start()
        view = watched(topic, service, uuid.uuid4())
        try:
            with caplog.at_level(logging.INFO, logger="kcoord"):
                topic.down = True
                refreshed(view, snapshot(topic, uuid.uuid4()))     # a new topic id: lost
                recovery = view._recovery
                assert recovery is not None
                await until(lambda: sum(rt.reload_attempts for rt in service.runtimes) >= 40, "shard retries")
                assert not recovery.done()
                assert view.state_topic_lost is not None
                assert sample("kcoord_state_topic_present") == 0
                assert "serving again" not in caplog.text
                topic.down = False
                await asyncio.wait_for(recovery, 5)
            assert view.state_topic_lost is None
            assert sample("kcoord_state_topic_present") == 1
            assert all(rt.state is ShardState.ACTIVE for rt in service.runtimes)
            assert commit_errors(await commit(service, group, "t", 0, 1)) == {ErrorCode.none}
        finally:
            await view.close()
            service.close()

    asyncio.run(run())
    assert "serving again" in caplog.text


# ------------------------------------------------------------------ review 12
def test_a_loading_shard_is_found_and_answers_coordinator_load_in_progress():
    """Kafka's FindCoordinator looks only at the partition's leader; the group APIs of a
    coordinator still loading answer COORDINATOR_LOAD_IN_PROGRESS (14), which clients retry
    on the same coordinator, except a classic Heartbeat (NONE, as Kafka). Failed and unloaded
    shards are not found (NOT_AVAILABLE)."""
    topic = FakeStateTopic(PARTITIONS)
    group = group_in(1, PARTITIONS, "g")

    async def run():
        service = service_for(topic)
        topic.hold_loads = asyncio.Event()
        start = asyncio.ensure_future(service.start())
        await until(lambda: topic.load_calls == 1, "the load started")
        try:
            assert all(rt.state is ShardState.LOADING for rt in service.runtimes)
            assert all(service.partition_available(p) for p in range(PARTITIONS))
            for api_key, version, req, codes in group_api_requests(group):
                resp = await service.handle(api_key, version, req, CLIENT)
                # A classic Heartbeat is answered NONE while loading, as Kafka does
                # (test_heartbeat_while_loading.py); every other group API is retried.
                expected = ErrorCode.none if api_key == 12 else ErrorCode.coordinator_load_in_progress
                assert codes(resp) == {expected}, (api_key, resp)
                encode_body(resp)
            resp = await commit(service, group, "t", 0, 1)
            assert commit_errors(resp) == {ErrorCode.coordinator_load_in_progress}
            assert (await fetch(service, group)).error_code == ErrorCode.coordinator_load_in_progress
            lmod = schema("list_groups", 5, "request")
            listed = await service.handle(16, 5, lmod.ListGroupsRequest(states_filter=(), types_filter=()), CLIENT)
            assert listed.error_code == ErrorCode.coordinator_load_in_progress
            topic.hold_loads.set()
            await asyncio.wait_for(start, 5)
            assert all(service.partition_available(p) for p in range(PARTITIONS))
            service.runtimes[2].unload("test")
            assert not service.partition_available(2)
        finally:
            topic.hold_loads.set()
            service.close()

    asyncio.run(run())


# ------------------------------------------------------------------ review 15
def test_one_counter_counts_loss_and_reload_with_the_watchers_incidents():
    from coordinator.gateway import cluster
    from coordinator import metrics

    assert cluster.STATE_TOPIC_INCIDENTS is metrics.STATE_TOPIC_INCIDENTS
    assert not hasattr(metrics, "STATE_TOPIC_EVENTS")
    topic = FakeStateTopic(PARTITIONS)
    lost, reload = incidents("lost"), incidents("reload")

    async def run():
        service = service_for(topic)
        await service.start()
        try:
            service.state_topic_lost("test")
            assert await service.reload_all("test") is True
        finally:
            service.close()

    asyncio.run(run())
    assert (incidents("lost"), incidents("reload")) == (lost + 1, reload + 1)
    assert sample("kcoord_state_topic_events_total", event="lost") is None
