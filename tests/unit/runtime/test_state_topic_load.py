"""StateTopic.load when one partition holds a batch aiokafka cannot read, and when a shard
gave up on its partition (review 10). The real load loop runs over a stand-in for
AIOKafkaConsumer that behaves as aiokafka 0.14's does where it matters:

- getmany(*tps) drains the partitions in turn, moving each one's position as it goes; a
  bad batch raises CorruptRecordException out of getmany, naming no partition, and the
  records already drained from other partitions in that call are lost with it;
- pause(tp) stops a partition from being returned.
"""
from __future__ import annotations

import asyncio
import logging

from aiokafka import TopicPartition
from aiokafka.errors import CorruptRecordException
from kio.schema.errors import ErrorCode

from coordinator.runtime import state_topic as state_topic_module
from coordinator.runtime.shard_runtime import ShardState
from coordinator.runtime.state_topic import CorruptBatchError, StateTopic

from .fakes import FakeStateTopic, group_in
from .test_shard_failures import PARTITIONS, committed, fetch, service_for

TOPIC = "__kcoord_load"


class Record:
    def __init__(self, offset: int) -> None:
        self.offset, self.key, self.value = offset, b"k%d" % offset, b"v"


class FakeConsumer:
    logs: dict[int, int] = {}          # partition -> number of records
    corrupt: dict[int, int] = {}       # partition -> offset of a batch that cannot be read
    batch = 3                          # records per partition per getmany (a fetch's worth)
    fetched: list[int] = []            # partitions returned by getmany, in order

    def __init__(self, **kwargs) -> None:
        self.positions: dict[TopicPartition, int] = {}
        self.paused: set[TopicPartition] = set()

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def topics(self) -> set[str]:
        return {TOPIC}

    def assign(self, tps) -> None:
        self.positions = {tp: 0 for tp in tps}

    async def seek_to_beginning(self, *tps) -> None:
        for tp in tps:
            self.positions[tp] = 0

    def seek(self, tp, offset: int) -> None:
        self.positions[tp] = offset

    def pause(self, tp) -> None:
        self.paused.add(tp)

    async def position(self, tp) -> int:
        return self.positions[tp]

    def highwater(self, tp) -> int:
        return self.logs[tp.partition]

    async def getmany(self, *tps, timeout_ms: int = 0, max_records: int | None = None):
        await asyncio.sleep(0)
        drained = {}
        for tp in sorted(tps or self.positions, key=lambda t: t.partition):
            if tp in self.paused:
                continue
            start = self.positions[tp]
            end = min(start + self.batch, self.logs[tp.partition])
            bad = self.corrupt.get(tp.partition)
            if bad is not None and start <= bad < end:
                raise CorruptRecordException(f"Invalid CRC - {tp}")   # drained records are lost
            if end > start:
                drained[tp] = [Record(o) for o in range(start, end)]
                self.positions[tp] = end
                FakeConsumer.fetched.append(tp.partition)
        return drained


def load_with(monkeypatch, logs: dict[int, int], corrupt: dict[int, int], abandoned=None):
    monkeypatch.setattr(FakeConsumer, "logs", logs)
    monkeypatch.setattr(FakeConsumer, "corrupt", corrupt)
    monkeypatch.setattr(FakeConsumer, "fetched", [])
    monkeypatch.setattr(state_topic_module, "AIOKafkaConsumer", FakeConsumer)
    seen: dict[int, list[int]] = {p: [] for p in logs}
    loaded: dict[int, int] = {}
    bad: dict[int, CorruptBatchError] = {}

    async def run():
        topic = StateTopic("127.0.0.1:1", TOPIC, len(logs))
        await topic.load(logs, lambda p, o, k, v: seen[p].append(o), loaded.__setitem__,
                         on_corrupt=bad.__setitem__, abandoned=abandoned)

    asyncio.run(asyncio.wait_for(run(), 10))
    return seen, loaded, bad


def test_a_corrupt_batch_fails_its_partition_and_the_others_load_every_record(monkeypatch):
    logs = {0: 10, 1: 10, 2: 10, 3: 10}
    seen, loaded, bad = load_with(monkeypatch, logs, corrupt={2: 7})
    assert set(bad) == {2}
    assert (bad[2].partition, bad[2].offset) == (2, 6)         # replayed up to 5; the bad batch is after
    assert isinstance(bad[2].error, CorruptRecordException)
    assert f"state topic {TOPIC} partition 2 at or after offset 6" in str(bad[2])
    assert loaded == {0: 10, 1: 10, 3: 10}
    for p in (0, 1, 3):   # none lost with the exception, none replayed twice
        assert seen[p] == list(range(10)), (p, seen[p])
    assert seen[2] == list(range(6))


def test_an_abandoned_partition_is_paused_not_read_to_its_end(monkeypatch):
    logs = {0: 30, 1: 30}
    seen, loaded, bad = load_with(monkeypatch, logs, corrupt={},
                                  abandoned=lambda p: p == 1 and FakeConsumer.fetched.count(1) >= 1)
    assert loaded == {0: 30} and not bad
    assert FakeConsumer.fetched.count(1) == 1, FakeConsumer.fetched


def test_without_on_corrupt_the_error_is_raised(monkeypatch):
    monkeypatch.setattr(FakeConsumer, "logs", {0: 5})
    monkeypatch.setattr(FakeConsumer, "corrupt", {0: 1})
    monkeypatch.setattr(state_topic_module, "AIOKafkaConsumer", FakeConsumer)

    async def run():
        await StateTopic("127.0.0.1:1", TOPIC, 1).load([0], lambda *a: None, lambda *a: None)

    try:
        asyncio.run(run())
    except CorruptRecordException:
        pass
    else:
        raise AssertionError("the corrupt batch was ignored")


def test_a_corrupt_batch_fails_only_its_shard_and_kcoord_starts(caplog):
    topic = FakeStateTopic(PARTITIONS)
    bad_group = group_in(2, PARTITIONS, "bad")
    good = group_in(0, PARTITIONS, "good")
    topic.commit(good, "t", 0, 4)
    for i in range(5):
        topic.commit(bad_group, "t", i, i)
    topic.corrupt[2] = 3

    async def run():
        service = service_for(topic)
        with caplog.at_level(logging.INFO, logger="kcoord"):
            await service.start()
        try:
            assert [rt.state for rt in service.runtimes][2] is ShardState.FAILED
            assert service.failed_partitions() == {2: 3}
            assert (await fetch(service, bad_group)).error_code == ErrorCode.not_coordinator
            assert committed(await fetch(service, good)) == {("t", 0): 4}
            # A single-shard reload meets the same batch: FAILED again, no exception, no loop.
            await service.runtimes[2].reload()
            assert service.runtimes[2].state is ShardState.FAILED
        finally:
            service.close()

    asyncio.run(run())
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR and "FAILED to load" in r.getMessage()]
    assert errors and f"topic {topic.topic}, partition 2, offset 3" in errors[0], errors
    assert "cannot be skipped" in errors[0] and "CorruptRecordException" in errors[0]
