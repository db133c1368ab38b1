"""The state topic on a real broker: large atomic writes and a reload that sees them; and its
lifecycle under a running kcoord: a fresh cluster (memory upstream restarted) and a topic
deleted behind kcoord's back are reported, recreated and reloaded, never served from memory."""
from __future__ import annotations

import asyncio
import re

from coordinator.runtime.state_topic import StateTopic
from support.admin import admin_client, committed_offsets, create_topic
from support.metrics import kcoord_with_metrics, sample
from support.produce import produce_records
from support.rdkafka import RdkafkaConsumer
from support.tansu import start_tansu
from support.wait import wait_until


def test_a_write_of_a_megabyte_lands_as_one_batch(tansu, names):
    """Coordinator results are appended atomically; a join storm writes hundreds of KB (more
    than a Kafka producer's default 16 KiB batch)."""
    async def run():
        topic = StateTopic(tansu.bootstrap, f"__kcoord_{names.topic()}", 2, max_batch_bytes=4 * 1024 * 1024)
        await topic.start()
        try:
            records = [(b"k%06d" % i, b"v" * 1000) for i in range(1000)]  # ~1 MB
            base = await topic.append(1, records, 0)
            loaded = []
            ends = {}
            await topic.load([1], lambda p, o, k, v: loaded.append((o, k)), lambda p, leo: ends.update({p: leo}))
            return base, loaded, ends
        finally:
            await topic.stop()

    base, loaded, ends = asyncio.run(run())
    assert base == 0 and ends == {1: 1000}
    assert [k for _, k in loaded] == [b"k%06d" % i for i in range(1000)]


def test_tail_follows_a_partition_from_an_offset_and_sees_later_appends(upstream, names):
    """The port's `tail` (coordinator/runtime/state_log.py): records at and after the offset
    come in order, then what is appended while it follows; other partitions never."""
    async def run():
        topic = StateTopic(upstream.bootstrap, f"__kcoord_{names.topic()}", 2)
        await topic.ensure_topic()
        await topic.start()
        seen: list[tuple[int, int, bytes]] = []
        try:
            await topic.append(0, [(b"k0", b"v"), (b"k1", b"v"), (b"k2", b"v")], 0)
            await topic.append(1, [(b"other", b"v")], 0)
            follower = asyncio.create_task(topic.tail(0, 1, lambda p, o, k, v: seen.append((p, o, k))))
            for _ in range(300):
                if len(seen) >= 2:
                    break
                await asyncio.sleep(0.05)
            await topic.append(0, [(b"k3", None)], 0)
            for _ in range(300):
                if len(seen) >= 3:
                    break
                await asyncio.sleep(0.05)
            follower.cancel()
            await asyncio.gather(follower, return_exceptions=True)
            return seen
        finally:
            await topic.stop()

    seen = asyncio.run(asyncio.wait_for(run(), 60))
    assert seen == [(0, 1, b"k1"), (0, 2, b"k2"), (0, 3, b"k3")], seen


def test_loading_a_missing_state_topic_fails_and_creates_nothing(upstream, names):
    """kcoord's Metadata requests never ask for auto-creation (Tansu would create a
    4-partition, uncompacted topic): a load of a missing topic fails, naming it, after the
    bounded wait for a topic just created (fenced_links.py), or a reload after a fresh
    cluster would build the wrong state topic before kcoord recreates it. The writer's side
    is test_lean_writer.py's."""
    missing = f"__kcoord_{names.topic()}"

    async def run():
        topic = StateTopic(upstream.bootstrap, missing, 8)
        topic.reads.links.metadata_wait_s = 1.0
        try:
            await topic.load([0, 1], lambda *a: None, lambda *a: None)
        except Exception as e:
            return e
        finally:
            await topic.stop()
        return None

    error = asyncio.run(asyncio.wait_for(run(), 30))
    assert type(error).__name__ == "StateTopicUnavailable" and missing in str(error), repr(error)
    assert "UNKNOWN_TOPIC_OR_PARTITION" in str(error), repr(error)
    listed = admin_client(upstream.bootstrap).list_topics(timeout=10).topics
    assert missing not in listed, f"loading created {missing} upstream: {listed[missing]}"


# --- lifecycle under a running kcoord ---------------------------------------------------

_ID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def _committed_total(bootstrap: str, group: str, topic: str) -> int:
    """Records committed over the topic's 2 partitions (a partition with no commit counts 0)."""
    return sum(max(0, o) for o in committed_offsets(bootstrap, group, topic, 2).values())


def _consume_and_commit(drivers, bootstrap: str, topic: str, group: str, count: int) -> None:
    consumer = drivers.add(RdkafkaConsumer(bootstrap, topic, group, group_protocol="consumer"))
    consumer.start()
    consumer.wait_for(lambda: len(consumer.consumed()) >= count, 30, f"{count} records consumed by {group}")
    consumer.close()


def test_memory_upstream_restarted_under_kcoord_is_a_fresh_cluster(tmp_path, names, drivers):
    """The memory-store upstream restarts on the same port: every topic is gone. kcoord says
    so (ERROR, metrics), recreates its state topic, names the old and new topic ids, reloads,
    and serves new groups; an old group's offsets are not served from memory."""
    broker = start_tansu(log_dir=tmp_path)
    kcoord = None
    try:
        kcoord = kcoord_with_metrics(broker.bootstrap, f"__kcoord_{names.topic()}", state_partitions=4).start()
        topic, old_group, new_group = names.topic(), names.group(), names.group()
        create_topic(broker.bootstrap, topic, 2)
        produce_records(broker.bootstrap, topic, 10)
        _consume_and_commit(drivers, kcoord.bootstrap, topic, old_group, 10)
        assert _committed_total(kcoord.bootstrap, old_group, topic) == 10

        port = broker.port
        broker.stop()
        broker = start_tansu(port=port, log_dir=tmp_path)   # memory store: a fresh, empty cluster

        wait_until(lambda: "every shard reloaded from state topic" in kcoord.log_text(), 30, message=
                   lambda: f"kcoord to reload after the fresh cluster; log tail:\n{kcoord.log_text()[-3000:]}")
        log = kcoord.log_text()
        old_id = re.search(rf"state topic \S+: topic id ({_ID}), 4 partitions expected", log).group(1)
        recreated = re.search(rf"ERROR .*state topic \S+ recreated with 4 partitions, topic id ({_ID}).*"
                              rf"\(topic id {old_id}\) is gone", log)
        assert recreated, f"no ERROR naming the recreated topic's new and old ids; log:\n{log[-3000:]}"
        assert recreated.group(1) != old_id
        assert re.search(rf"ERROR .*state topic \S+ \(topic id {old_id}\) is gone from the upstream "
                         rf"after kcoord lost the upstream", log), f"no ERROR on the missing topic; log:\n{log[-3000:]}"
        metrics = kcoord.metrics()
        assert sample(metrics, "kcoord_state_topic_incidents_total", kind="missing") == 1
        assert sample(metrics, "kcoord_state_topic_incidents_total", kind="recreated") == 1
        # kcoord's own clients never let the upstream auto-create it (Tansu: 4 partitions, not compacted).
        assert sample(metrics, "kcoord_state_topic_incidents_total", kind="wrong_partitions") == 0
        assert sample(metrics, "kcoord_state_topic_present") == 1

        # The old group's offsets lived in the old log only: never served from memory.
        assert committed_offsets(kcoord.bootstrap, old_group, topic, 2) == {0: -1001, 1: -1001}
        # A new group on the fresh cluster consumes and commits through the same kcoord.
        create_topic(broker.bootstrap, topic, 2)
        produce_records(broker.bootstrap, topic, 6)
        _consume_and_commit(drivers, kcoord.bootstrap, topic, new_group, 6)
        assert _committed_total(kcoord.bootstrap, new_group, topic) == 6
        assert kcoord.process.poll() is None, "kcoord must survive the upstream's restart"
        assert "Traceback" not in kcoord.log_text()
    finally:
        if kcoord is not None and kcoord.process is not None:
            kcoord.stop()
        broker.stop()


def test_state_topic_deleted_behind_kcoords_back_is_loud_and_recreated(tansu, names, drivers):
    """Someone deletes the state topic on the upstream directly (the gateway refuses it, but
    the upstream can be reached without kcoord). kcoord logs an ERROR saying so, counts it,
    recreates the topic, reloads, and serves again; the old offsets are gone, not cached."""
    state_topic = f"__kcoord_{names.topic()}"
    kcoord = kcoord_with_metrics(tansu.bootstrap, state_topic, state_partitions=4).start()
    try:
        topic, group = names.topic(), names.group()
        create_topic(tansu.bootstrap, topic, 2)
        produce_records(tansu.bootstrap, topic, 4)
        _consume_and_commit(drivers, kcoord.bootstrap, topic, group, 4)
        assert _committed_total(kcoord.bootstrap, group, topic) == 4

        # support.admin.delete_topic drops its AdminClient before the result arrives
        # (_DESTROY); keep the client alive until the deletion is acknowledged.
        admin = admin_client(tansu.bootstrap)
        admin.delete_topics([state_topic], operation_timeout=10)[state_topic].result(10)
        wait_until(lambda: "every shard reloaded from state topic" in kcoord.log_text(), 30, message=lambda:
                   f"kcoord to recreate and reload its state topic; log tail:\n{kcoord.log_text()[-3000:]}")
        log = kcoord.log_text()
        assert re.search(r"ERROR .*is gone from the upstream while the upstream stayed reachable: "
                         r"it was deleted behind kcoord's back", log), f"no ERROR on the deletion; log:\n{log[-3000:]}"
        metrics = kcoord.metrics()
        assert sample(metrics, "kcoord_state_topic_incidents_total", kind="missing") == 1
        assert sample(metrics, "kcoord_state_topic_present") == 1
        assert committed_offsets(kcoord.bootstrap, group, topic, 2) == {0: -1001, 1: -1001}
        # Serving again: the same group commits anew into the recreated log.
        produce_records(tansu.bootstrap, topic, 2)
        _consume_and_commit(drivers, kcoord.bootstrap, topic, group, 6)
        assert _committed_total(kcoord.bootstrap, group, topic) == 6
    finally:
        kcoord.stop()
