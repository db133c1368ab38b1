"""Group placement on real upstreams (coordinator/service/partitioner.py).

- Tansu: a fresh state topic gets the partitioner marker at offset 0 of partition 0 and routes
  with Kafka's formula; a topic an earlier kcoord wrote (group records, no marker) keeps the
  legacy formula, so `kcoord serve` still finds a negative-hash group's commits where they
  were written; two processes deciding on one fresh topic at once agree.
- A reload after the topic was replaced: a process on Kafka's placement marks the new, empty
  topic before its shards load it; a legacy process leaves it unmarked (legacy again).
- `kcoord offsets load` into a new topic marks it first and places with Kafka's formula.
- Kafka 4.4: a group's OffsetCommit through kcoord lands in the state-topic partition with
  the number of the `__consumer_offsets` partition Kafka's own coordinator wrote the same
  group's commit to (both topics with 5 partitions; read raw, as kcoord's loader reads).
"""
from __future__ import annotations

import asyncio
import logging

import pytest
from confluent_kafka import Consumer, TopicPartition

from coordinator.group.hashing import KAFKA, LEGACY, java_string_hash, legacy_partition_for, partition_for
from coordinator.runtime.state_topic import StateTopic
from coordinator.service.partitioner import before_reload, decide
from ops.load import load
from ops.logsource import LogBatch
from records import OffsetCommitKey, OffsetCommitValue, decode_key, encode_key, encode_value
from records.batch import build_batch, iter_batches
from records.partitioner_records import is_partitioner_marker, marker_partitioner, marker_record
from support.admin import committed_offsets, create_topic
from support.kcoord import KcoordProcess
from support.state_partition import read_batches

PARTITIONS = 5    # the test brokers' offsets.topic.num.partitions (support/kafka_broker.py)


def moved_group(prefix: str) -> str:
    """A group whose Java hash is negative and whose two placements differ on PARTITIONS."""
    # The varying part first: it is multiplied by 31^len(rest), so the hashes spread over
    # the whole int range (a varying suffix only moves the low bits of a long prefix's hash).
    return next(g for g in (f"{i}-{prefix}" for i in range(10_000))
                if java_string_hash(g) < 0 and partition_for(g, PARTITIONS) != legacy_partition_for(g, PARTITIONS))


def data_records(bootstrap: str, topic: str, partition: int) -> list:
    return [r for b in read_batches(bootstrap, topic, partition) if not b.is_control_batch for r in b.records]


def commit_partitions(bootstrap: str, topic: str, group: str) -> set[int]:
    """The partitions of ``topic`` holding an OffsetCommit record of ``group``."""
    found = set()
    for p in range(PARTITIONS):
        for r in data_records(bootstrap, topic, p):
            if r.key is not None and r.key[:2] == b"\x00\x01" and decode_key(bytes(r.key)).group == group:
                found.add(p)
    return found


def commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def test_a_fresh_state_topic_is_marked_and_routes_with_kafkas_formula(tansu, names):
    topic = f"__kcoord_{names.topic()}"

    async def run():
        await StateTopic(tansu.bootstrap, topic, PARTITIONS).ensure_topic()
        # Two processes starting at once on the empty topic: both write a marker, both agree.
        first = await asyncio.gather(decide(tansu.bootstrap, topic, PARTITIONS),
                                     decide(tansu.bootstrap, topic, PARTITIONS))
        again = await decide(tansu.bootstrap, topic, PARTITIONS)     # no longer empty: reads, writes nothing
        return first, again

    first, again = asyncio.run(run())
    assert list(first) == [KAFKA, KAFKA] and again is KAFKA
    records = data_records(tansu.bootstrap, topic, 0)
    assert 1 <= len(records) <= 2 and all(is_partitioner_marker(bytes(r.key)) for r in records), records
    assert records[0].offset == 0 and marker_partitioner(bytes(records[0].key), bytes(records[0].value)) == "kafka"
    assert all(not data_records(tansu.bootstrap, topic, p) for p in range(1, PARTITIONS))


def test_a_topic_an_earlier_kcoord_wrote_keeps_its_placement(tansu, names, caplog):
    state_topic, data_topic = f"__kcoord_{names.topic()}", names.topic()
    group = moved_group(names.group("legacy"))
    where = legacy_partition_for(group, PARTITIONS)

    async def write_legacy_log() -> None:
        # What kcoord wrote before it followed Kafka's placement: the group's commit in its
        # legacy partition, no marker.
        log = StateTopic(tansu.bootstrap, state_topic, PARTITIONS)
        await log.start()
        try:
            await log.append(where, [commit_record(group, data_topic, 42)], 1)
        finally:
            await log.stop()
        with caplog.at_level(logging.WARNING, logger="kcoord"):
            assert await decide(tansu.bootstrap, state_topic, PARTITIONS) is LEGACY

    asyncio.run(write_legacy_log())
    warnings = [r.getMessage() for r in caplog.records if "no partitioner marker" in r.getMessage()]
    assert len(warnings) == 1 and state_topic in warnings[0] and "kcoord offsets load" in warnings[0], warnings
    assert not any(is_partitioner_marker(bytes(r.key)) for p in range(PARTITIONS)
                   for r in data_records(tansu.bootstrap, state_topic, p)), "a written topic gets no marker"

    create_topic(tansu.bootstrap, data_topic, 1)
    kcoord = KcoordProcess(upstream=tansu.bootstrap, state_topic=state_topic, state_partitions=PARTITIONS).start()
    try:
        # The commit an earlier kcoord acknowledged is still the group's: no group moved.
        assert committed_offsets(kcoord.bootstrap, group, data_topic, 1) == {0: 42}
        commit(kcoord.bootstrap, group, data_topic, 43)
        assert commit_partitions(tansu.bootstrap, state_topic, group) == {where}
    finally:
        kcoord.stop()


def test_a_replaced_topic_is_marked_before_a_reload_by_a_kafka_placement_process(tansu, names, caplog):
    kafka_topic, legacy_topic = f"__kcoord_{names.topic()}", f"__kcoord_{names.topic()}"

    async def replaced(topic: str, partitioner) -> None:
        # What the state-topic watch leaves before the reload: a new, empty topic.
        await StateTopic(tansu.bootstrap, topic, PARTITIONS).ensure_topic()
        await before_reload(tansu.bootstrap, topic, PARTITIONS, partitioner)()

    with caplog.at_level(logging.WARNING, logger="kcoord"):
        asyncio.run(replaced(kafka_topic, KAFKA))
        asyncio.run(replaced(legacy_topic, LEGACY))
    first = data_records(tansu.bootstrap, kafka_topic, 0)
    assert first and first[0].offset == 0 and marker_partitioner(bytes(first[0].key), bytes(first[0].value)) == "kafka"
    assert not data_records(tansu.bootstrap, legacy_topic, 0)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def commit_record(group: str, topic: str, offset: int) -> tuple[bytes, bytes]:
    return (encode_key(OffsetCommitKey(group=group, topic=topic, partition=0)),
            encode_value(OffsetCommitValue(offset=offset, metadata="", commit_timestamp=1), 3))


def test_offsets_load_marks_a_new_topic_and_places_with_kafkas_formula(tansu, names):
    state_topic, group = f"__kcoord_{names.topic()}", moved_group(names.group("loaded"))
    # A source log whose own marker (first) must not be copied.
    source = [LogBatch("source-0", 0, b) for b in iter_batches(build_batch(
        [marker_record("kafka"), commit_record(group, "t", 5)], timestamp_ms=1))]
    result = load(source, tansu.bootstrap, state_topic, PARTITIONS)
    assert result.partitioner == "kafka" and result.records == 1
    first = data_records(tansu.bootstrap, state_topic, 0)[0]
    assert first.offset == 0 and marker_partitioner(bytes(first.key), bytes(first.value)) == "kafka"
    assert sum(is_partitioner_marker(bytes(r.key)) for p in range(PARTITIONS)
               for r in data_records(tansu.bootstrap, state_topic, p)) == 1
    assert commit_partitions(tansu.bootstrap, state_topic, group) == {partition_for(group, PARTITIONS)}


@pytest.mark.parametrize("upstream", ["kafka44"], indirect=True)
def test_kcoord_places_a_group_where_kafkas_coordinator_does(upstream, names):
    state_topic, data_topic = f"__kcoord_{names.topic()}", names.topic()
    group = moved_group(names.group("placed"))
    create_topic(upstream.bootstrap, data_topic, 1)
    commit(upstream.bootstrap, group, data_topic, 7)            # Kafka's own coordinator
    kafka = commit_partitions(upstream.bootstrap, "__consumer_offsets", group)
    assert kafka == {partition_for(group, PARTITIONS)}, (kafka, java_string_hash(group))

    kcoord = KcoordProcess(upstream=upstream.bootstrap, state_topic=state_topic, state_partitions=PARTITIONS).start()
    try:
        commit(kcoord.bootstrap, group, data_topic, 8)
        assert commit_partitions(upstream.bootstrap, state_topic, group) == kafka
        assert committed_offsets(kcoord.bootstrap, group, data_topic, 1) == {0: 8}
    finally:
        kcoord.stop()
    first = data_records(upstream.bootstrap, state_topic, 0)[0]
    assert first.offset == 0 and marker_partitioner(bytes(first.key), bytes(first.value)) == "kafka"
