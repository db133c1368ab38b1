"""A record batch with a bad CRC in one partition of the state topic, on a real Tansu (which
stores what it is sent): only that partition's shard fails, naming topic, partition and
offset; every other shard loads all its records and serves (review 10).

The service runs in-process over the real StateTopic, whose loads read through kcoord's own
Fetch (fenced_reads.py): the bad batch fails its partition at the offset where it starts.
"""
from __future__ import annotations

import asyncio
import logging
import sys
import uuid
from datetime import timedelta

from kio.schema.errors import ErrorCode

from coordinator.config import CoordinatorConfig
from coordinator.group.hashing import partition_for
from coordinator.group.image import MetadataImage, TopicImage
from coordinator.group.kio_util import schema
from coordinator.protocol import apis
from coordinator.protocol.service import ClientInfo
from coordinator.runtime.shard_runtime import ShardState
from coordinator.runtime.state_topic import StateTopic
from coordinator.service import GroupCoordinatorService
from records import OffsetCommitKey, OffsetCommitValue, encode_key, encode_value
from records.batch import build_batch
from support.raw_client import call, request

PARTITIONS = 4
BAD = 1
CLIENT = ClientInfo(client_id="t", host="127.0.0.1", port=1, listener="test")


def group_in(partition: int, prefix: str) -> str:
    return next(g for g in (f"{prefix}-{i}" for i in range(100_000)) if partition_for(g, PARTITIONS) == partition)


def commit_record(group: str, topic: str, offset: int) -> tuple[bytes, bytes]:
    return (encode_key(OffsetCommitKey(group=group, topic=topic, partition=0)),
            encode_value(OffsetCommitValue(offset=offset, metadata="", commit_timestamp=1), 3))


def produce_bad_crc_batch(bootstrap: str, topic: str, partition: int, record: tuple[bytes, bytes]) -> None:
    batch = bytearray(build_batch([record], timestamp_ms=1))
    batch[40] ^= 0xFF       # a byte the CRC covers (it starts after the CRC field, at byte 21)
    cls = type(request(apis.PRODUCE, 9, transactional_id=None, acks=-1, timeout=timedelta(0), topic_data=()))
    m = sys.modules[cls.__module__]
    resp = call(bootstrap, apis.PRODUCE, 9, cls(transactional_id=None, acks=-1, timeout=timedelta(seconds=10),
                topic_data=(m.TopicProduceData(name=topic, partition_data=(
                    m.PartitionProduceData(index=partition, records=bytes(batch)),)),)))
    codes = [p.error_code for t in resp.responses for p in t.partition_responses]
    assert codes == [ErrorCode.none], f"the broker refused the bad batch: {codes}"


async def fetch(service, group: str):
    mod = schema("offset_fetch", 7, "request")
    resp = await service.handle(9, 7, mod.OffsetFetchRequest(group_id=group, topics=None, require_stable=False),
                                CLIENT)
    return resp.error_code, {p.committed_offset for t in resp.topics for p in t.partitions}


def test_a_bad_crc_batch_fails_only_its_shard(tansu, names, caplog):
    state_topic = f"__kcoord_{names.topic()}"
    data_topic = names.topic()
    groups = {p: group_in(p, "g") for p in range(PARTITIONS)}

    async def run():
        topic = StateTopic(tansu.bootstrap, state_topic, PARTITIONS)
        await topic.start()
        try:
            for i in range(3):   # good records first, in every partition
                for p, g in groups.items():
                    await topic.append(p, [commit_record(g, data_topic, 10 * p + i)], 1)
            produce_bad_crc_batch(tansu.bootstrap, state_topic, BAD, commit_record(groups[BAD], data_topic, 99))
            for p, g in groups.items():   # and more after it
                await topic.append(p, [commit_record(g, data_topic, 10 * p + 5)], 1)
            config = CoordinatorConfig(state_topic=state_topic, state_topic_partitions=PARTITIONS)
            service = GroupCoordinatorService(config, topic)
            service.on_metadata_update(MetadataImage.of([TopicImage(uuid.uuid4(), data_topic, 1)]))
            with caplog.at_level(logging.INFO, logger="kcoord"):
                await asyncio.wait_for(service.start(), 60)    # returns: one bad batch is not a failed start
            try:
                assert [rt.state for rt in service.runtimes] == [
                    ShardState.FAILED if p == BAD else ShardState.ACTIVE for p in range(PARTITIONS)]
                assert service.failed_partitions()[BAD] is not None
                for p, g in groups.items():
                    if p == BAD:
                        assert (await fetch(service, g))[0] == ErrorCode.not_coordinator
                    else:   # every record loaded, none lost with the exception
                        assert await fetch(service, g) == (ErrorCode.none, {10 * p + 5})
            finally:
                service.close()
        finally:
            await topic.stop()

    asyncio.run(run())
    errors = [r.getMessage() for r in caplog.records
              if r.levelno == logging.ERROR and "shard 1 FAILED to load" in r.getMessage()]
    assert len(errors) == 1, errors
    # Three good batches before it: the bad one starts at offset 3.
    assert f"topic {state_topic}, partition {BAD}, offset 3" in errors[0] and "CorruptRecordException" in errors[0]
    # The load's problem summary (beside the one-line "loaded N state partitions" summary).
    summary = [r.getMessage() for r in caplog.records
               if "state partitions of" in r.getMessage() and "hold a record batch" in r.getMessage()]
    assert len(summary) == 1 and "skip.corrupt.offsets" not in summary[0] and "cannot be read" in summary[0], summary
