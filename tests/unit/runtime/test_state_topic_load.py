"""StateTopic.load over kcoord's own Fetch (fenced_reads.LogReads, the fenced log's reads
without the fence), fed by a stand-in for the upstream links that answers each Fetch with
the partition's record batches from the fetch offset, a few batches per answer:

- a batch that does not read (a CRC, a codec) fails its own partition only, at the offset
  where it starts; the records before it in the same answer and every other partition load;
- a partition whose shard gave up is not read to its end;
- however many partitions a load has, at most MAX_REPLAYS are fetched at once;
- compressed batches (records/batch.py's codecs) and transactions (COMMIT replayed at the
  marker, ABORT never) load as Kafka's read_committed consumer would see them.
"""
from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

import pytest
from kio.schema.errors import ErrorCode

from coordinator.runtime.fenced_reads import MAX_REPLAYS, CorruptRecordException
from coordinator.runtime.shard_runtime import ShardState
from coordinator.runtime.state_topic import CorruptBatchError, StateTopic
from records.batch import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    ControlMarker,
    build_batch,
    build_control_batch,
)

from .fakes import FakeStateTopic, group_in
from .test_shard_failures import PARTITIONS, committed, fetch, service_for

TOPIC = "__kcoord_load"


class FakeLinks:
    """The part of fenced_links.UpstreamLinks LogReads uses, over batches in memory."""

    per_fetch = 2          # batches per Fetch answer

    def __init__(self, logs: dict[int, list[bytes]]) -> None:
        self.logs = logs                     # partition -> batches in offset order
        self.brokers = {1: ("127.0.0.1", 1)}
        self.fetched: list[int] = []         # partitions fetched, in order
        self.in_flight = self.most_in_flight = 0

    async def refresh_metadata(self, partition: int | None = None) -> None:
        pass

    def forget_leader(self, partition: int) -> None:
        pass

    async def log_start(self, partition: int) -> int:
        return 0

    def close(self) -> None:
        pass

    def end(self, partition: int) -> int:
        return sum(_count(b) for b in self.logs[partition])

    async def fetch(self, partition: int, offset: int, max_wait_ms: int):
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(0)
        self.in_flight -= 1
        self.fetched.append(partition)
        first, out, position = None, [], 0
        for batch in self.logs[partition]:
            if position + _count(batch) > offset and first is None:
                first = len(out)
            if first is not None and len(out) - first < self.per_fetch:
                out.append(batch)
            elif first is None:
                out.append(None)
            position += _count(batch)
        data = b"".join(b for b in out if b is not None)
        return SimpleNamespace(error_code=ErrorCode.none, high_watermark=self.end(partition), records=data)


def _count(batch: bytes) -> int:
    return int.from_bytes(batch[23:27], "big") + 1     # last offset delta + 1


def log_of(records: int, *, start: int = 0, per_batch: int = 3, compression: int = COMPRESSION_NONE) -> list[bytes]:
    return [build_batch([(b"k%d" % o, b"v") for o in range(base, min(base + per_batch, start + records))],
                        base_offset=base, timestamp_ms=1, compression=compression)
            for base in range(start, start + records, per_batch)]


def corrupted(batch: bytes) -> bytes:
    bad = bytearray(batch)
    bad[-1] ^= 0xFF          # inside the records, which the CRC covers
    return bytes(bad)


def load_with(logs: dict[int, list[bytes]], *, abandoned=None, on_corrupt=True):
    links = FakeLinks(logs)
    seen: dict[int, list[tuple[int, bytes]]] = {p: [] for p in logs}
    loaded: dict[int, int] = {}
    bad: dict[int, CorruptBatchError] = {}

    async def run():
        topic = StateTopic("127.0.0.1:1", TOPIC, len(logs))
        topic.reads.links = links    # type: ignore[assignment]
        await topic.load(logs, lambda p, o, k, v: seen[p].append((o, k)), loaded.__setitem__,
                         on_corrupt=bad.__setitem__ if on_corrupt else None,
                         abandoned=abandoned and (lambda p: abandoned(p, links)))

    asyncio.run(asyncio.wait_for(run(), 10))
    return seen, loaded, bad, links


def offsets(seen: list[tuple[int, bytes]]) -> list[int]:
    return [o for o, _ in seen]


def test_a_corrupt_batch_fails_its_partition_at_its_offset_and_the_others_load_every_record():
    logs = {p: log_of(12) for p in range(4)}
    logs[2][3] = corrupted(logs[2][3])               # offsets 9-11, fetched with 6-8 before it
    seen, loaded, bad, _ = load_with(logs)
    assert set(bad) == {2}
    assert (bad[2].partition, bad[2].offset) == (2, 9)      # the records before it were replayed
    assert isinstance(bad[2].error, CorruptRecordException)
    assert f"state topic {TOPIC} partition 2 at or after offset 9" in str(bad[2])
    assert loaded == {0: 12, 1: 12, 3: 12}
    for p in (0, 1, 3):   # none lost, none replayed twice
        assert offsets(seen[p]) == list(range(12)), (p, seen[p])
    assert offsets(seen[2]) == list(range(9))


def test_an_abandoned_partition_is_not_read_to_its_end():
    logs = {0: log_of(30), 1: log_of(30)}
    seen, loaded, bad, links = load_with(logs, abandoned=lambda p, links: p == 1 and links.fetched.count(1) >= 1)
    assert loaded == {0: 30} and not bad
    assert links.fetched.count(1) == 1, links.fetched
    assert offsets(seen[1]) == list(range(6))


def test_without_on_corrupt_the_error_is_raised_once_the_others_loaded():
    logs = {0: log_of(5), 1: log_of(5)}
    logs[0][1] = corrupted(logs[0][1])
    with pytest.raises(CorruptBatchError, match="partition 0 at or after offset 3"):
        load_with(logs, on_corrupt=False)


def test_a_load_of_many_partitions_replays_a_bounded_number_at_once():
    logs = {p: log_of(9) for p in range(MAX_REPLAYS + 8)}
    seen, loaded, bad, links = load_with(logs)
    assert loaded == {p: 9 for p in logs} and not bad
    assert links.most_in_flight == MAX_REPLAYS


@pytest.mark.parametrize("compression", [COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD],
                         ids=["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_load(compression):
    seen, loaded, bad, _ = load_with({0: log_of(10, compression=compression)})
    assert not bad and loaded == {0: 10}
    assert seen[0] == [(o, b"k%d" % o) for o in range(10)]


def test_committed_transactions_load_at_their_marker_and_aborted_ones_never():
    def txn(base: int, key: bytes, pid: int) -> bytes:
        return build_batch([(key, b"v")], base_offset=base, timestamp_ms=1, producer_id=pid, producer_epoch=0,
                           base_sequence=0, transactional=True)

    log = [txn(0, b"committed", 7), txn(1, b"aborted", 8),
           build_batch([(b"plain", b"v")], base_offset=2, timestamp_ms=1),
           build_control_batch(ControlMarker.ABORT, base_offset=3, timestamp_ms=1, producer_id=8, producer_epoch=0),
           build_control_batch(ControlMarker.COMMIT, base_offset=4, timestamp_ms=1, producer_id=7, producer_epoch=0)]
    seen, loaded, bad, _ = load_with({0: log})
    assert seen[0] == [(2, b"plain"), (0, b"committed")] and loaded == {0: 5} and not bad


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
    errors = [r.getMessage() for r in caplog.records
              if r.levelno == logging.ERROR and "FAILED to load" in r.getMessage()]
    assert errors and f"topic {topic.topic}, partition 2, offset 3" in errors[0], errors
    assert "cannot be skipped" in errors[0] and "CorruptRecordException" in errors[0]


def test_append_then_goes_to_the_lean_writer_and_a_refusal_is_handed_over_on_a_later_turn():
    """The shard writer's path (partition_writer.py's `append_then`): suspended or without
    a writer, the outcome is the refusal, on a later loop turn; a writer not started is
    also reported to on_write_error, as `append` reports it."""
    from coordinator.runtime.state_topic import StateTopicUnavailable

    from .test_lean_writer import Broker, started

    outcomes: list[tuple[int, BaseException | None]] = []
    reported: list[int] = []

    async def run():
        topic = StateTopic("127.0.0.1:1", "__t", 4)
        topic.on_write_error = lambda partition, error: reported.append(partition)
        third = asyncio.Event()

        def then(base: int, error: BaseException | None) -> None:
            outcomes.append((base, error))
            if len(outcomes) == 3:
                third.set()
        topic.append_then(1, [(b"k", b"v")], 0, then)
        topic.suspend("the topic is gone")
        topic.append_then(2, [(b"k", b"v")], 0, then)
        assert not outcomes, "refused on a later turn, never from inside the call"
        await asyncio.sleep(0)
        assert reported == [1], "a writer not started is reported; a suspended topic is not"
        topic.resume()
        topic._lean = await started(Broker())
        topic.append_then(3, [(b"k", b"v")], 0, then)
        await asyncio.wait_for(third.wait(), 5)
        topic._lean.close()
        topic.reads.links.close()

    asyncio.run(run())
    assert [base for base, _ in outcomes] == [-1, -1, 0]
    assert all(isinstance(e, StateTopicUnavailable) for _, e in outcomes[:2]) and outcomes[2][1] is None
    assert "not started" in str(outcomes[0][1]) and "the topic is gone" in str(outcomes[1][1])
