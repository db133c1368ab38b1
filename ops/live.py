"""Read a live offsets topic, transaction markers included.

aiokafka's consumer hides what replay needs (producer ids, transactional flags, control
batches), so this sends Fetch requests itself through aiokafka's client, at
READ_UNCOMMITTED, and walks the raw record batches of each response with
`records.batch.iter_batches` (CRC checked). Partitions are read one after the other,
from the log start offset (or `start_offset`, for `kcoord offsets show`) up to the high
watermark of the last response.

Right after a topic is created (as `kcoord offsets load` does with the state topic) Kafka
answers NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE or UNKNOWN_TOPIC_OR_PARTITION for a
moment, and a leader can move at any time: those errors are retried, with the leader looked
up again and a bounded backoff, until `retry_seconds` pass (`Retry`); other errors are fatal.
"""
from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Callable, Iterator

from aiokafka.client import AIOKafkaClient
from aiokafka.protocol.fetch import FetchRequest
from aiokafka.structs import TopicPartition

from ops.logsource import LogBatch, OffsetsLogError, Problems, Progress
from records.batch import CorruptBatchError, iter_batches

READ_UNCOMMITTED = 0
OFFSET_OUT_OF_RANGE = 1
_HEADER = struct.Struct(">qi")       # base offset, length
_LAST_DELTA_AT = 23
# Fetch errors that pass by themselves (leadership moving or not yet settled, metadata not
# yet propagated): UNKNOWN_TOPIC_OR_PARTITION 3, LEADER_NOT_AVAILABLE 5,
# NOT_LEADER_OR_FOLLOWER 6, REQUEST_TIMED_OUT 7, REPLICA_NOT_AVAILABLE 9,
# NOT_ENOUGH_REPLICAS 19, KAFKA_STORAGE_ERROR 56, FENCED_LEADER_EPOCH 74,
# UNKNOWN_LEADER_EPOCH 75, OFFSET_NOT_AVAILABLE 78.
RETRIABLE_FETCH_ERRORS = frozenset({3, 5, 6, 7, 9, 19, 56, 74, 75, 78})


class Retry:
    """A deadline for retriable errors and a backoff that doubles up to `max_backoff`."""

    def __init__(self, seconds: float = 30.0, *, first_backoff: float = 0.05,
                 max_backoff: float = 1.0, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.seconds, self.first_backoff, self.max_backoff = seconds, first_backoff, max_backoff
        self._clock, self._sleep = clock, sleep
        self._deadline: float | None = None
        self._backoff = first_backoff
        self.attempts = 0

    def reset(self) -> None:
        """Progress was made: the next error starts a new deadline."""
        self._deadline, self._backoff = None, self.first_backoff

    def wait(self, what: str) -> float:
        """Back off before retrying `what` (returns the pause, for callers that pass a no-op
        `sleep` and pause themselves, e.g. with asyncio.sleep); TimeoutError once the
        deadline has passed."""
        now = self._clock()
        if self._deadline is None:
            self._deadline = now + self.seconds
        if now >= self._deadline:
            raise TimeoutError(f"{what}: still failing after {self.seconds:g}s of retries")
        self.attempts += 1
        pause = min(self._backoff, max(0.0, self._deadline - now))
        self._sleep(pause)
        self._backoff = min(self._backoff * 2, self.max_backoff)
        return pause


def _partition_response(resp, topic: str, partition: int):
    for t, parts in resp.topics:
        if t == topic:
            for pr in parts:
                if pr[0] == partition:
                    return pr
    return None     # Tansu leaves out partitions it has nothing for


def _skip_past(data: bytes, position: int) -> int | None:
    """The offset after a batch whose body is damaged, read from its header."""
    if len(data) - position < 27:
        return None
    base = _HEADER.unpack_from(data, position)[0]
    delta = struct.unpack_from(">i", data, position + _LAST_DELTA_AT)[0]
    return base + delta + 1 if delta >= 0 else None


class _PartitionFetch:
    """`fetch(offset)` for one partition: a Fetch to its leader, looked up again after an
    answer with a retriable error (the leader may have moved); no leader is error 5."""

    def __init__(self, reader: TopicReader, loop, client, partition: int, leader: int | None) -> None:
        self.reader, self.loop, self.client, self.partition = reader, loop, client, partition
        self.leader = leader if leader is not None and leader >= 0 else None
        self.stale = self.leader is None

    def __call__(self, offset: int):
        r, p = self.reader, self.partition
        if self.stale:
            md = self.loop.run_until_complete(self.client.fetch_all_metadata())
            node = md.leader_for_partition(TopicPartition(r.topic, p))
            self.leader = node if node is not None and node >= 0 else None
        if self.leader is None:
            self.stale = True
            return (p, 5, -1, -1, -1, None, b"")      # LEADER_NOT_AVAILABLE
        # min_bytes 1: Tansu answers min_bytes 0 with no partitions at all.
        req = FetchRequest(max_wait_time=200, min_bytes=1, max_bytes=r.max_bytes,
                           isolation_level=READ_UNCOMMITTED,
                           topics=[(r.topic, [(p, offset, r.max_bytes)])])
        pr = _partition_response(self.loop.run_until_complete(self.client.send(self.leader, req)),
                                 r.topic, p)
        self.stale = pr is not None and pr[1] in RETRIABLE_FETCH_ERRORS
        return pr


class TopicReader:
    def __init__(self, bootstrap: str, topic: str, *, partitions: list[int] | None = None,
                 max_bytes: int = 8 * 1024 * 1024, client_id: str = "kcoord-offsets",
                 start_offset: int = 0, retry_seconds: float = 30.0) -> None:
        self.bootstrap, self.topic, self.max_bytes = bootstrap, topic, max_bytes
        self.retry_seconds = retry_seconds
        self.start_offset = start_offset
        self.partitions, self.client_id = partitions, client_id
        self.high_watermarks: dict[int, int] = {}

    def read(self, problems: Problems, progress: Progress | None = None) -> Iterator[LogBatch]:
        loop = asyncio.new_event_loop()

        async def connect() -> AIOKafkaClient:
            # aiokafka's client must be created inside its running loop.
            c = AIOKafkaClient(bootstrap_servers=self.bootstrap, client_id=self.client_id,
                               request_timeout_ms=30_000)
            await c.bootstrap()
            return c

        try:
            client = loop.run_until_complete(connect())
        except BaseException:
            loop.close()
            raise
        try:
            metadata = loop.run_until_complete(client.fetch_all_metadata())
            known = metadata.partitions_for_topic(self.topic)
            retry = Retry(min(self.retry_seconds, 5.0))
            while not known:     # a topic created a moment ago may not be in metadata yet
                try:
                    retry.wait(f"topic {self.topic} in the metadata of {self.bootstrap}")
                except TimeoutError:
                    raise OffsetsLogError(self.topic, None,
                                          f"topic not found on {self.bootstrap}") from None
                metadata = loop.run_until_complete(client.fetch_all_metadata())
                known = metadata.partitions_for_topic(self.topic)
            for p in sorted(self.partitions if self.partitions is not None else known):
                if p not in known:
                    raise OffsetsLogError(f"{self.topic}-{p}", None, "no such partition")
                fetch = _PartitionFetch(self, loop, client, p,
                                        metadata.leader_for_partition(TopicPartition(self.topic, p)))
                yield from self._read_partition(fetch, p, problems, progress)
        finally:
            loop.run_until_complete(client.close())
            loop.close()


    def _read_partition(self, fetch: Callable[[int], tuple | None], p: int, problems: Problems,
                        progress: Progress | None) -> Iterator[LogBatch]:
        """`fetch(offset)`: the partition's Fetch answer (error, high watermark, ..., records)."""
        source = f"{self.topic}-{p}"
        offset = self.start_offset
        empty = 0
        retry = Retry(self.retry_seconds)
        while True:
            pr = fetch(offset)
            if pr is None:
                # No answer for the partition: nothing to read past `offset` (an empty
                # partition on Tansu); Kafka always answers with the high watermark.
                empty += 1
                if empty < 3:
                    continue
                self.high_watermarks[p] = offset
                return
            empty = 0
            error, hwm, data = pr[1], pr[2], pr[-1]
            if error == OFFSET_OUT_OF_RANGE and len(pr) >= 7 and pr[4] > offset:
                offset = pr[4]     # the log starts later (retention or DeleteRecords)
                continue
            if error in RETRIABLE_FETCH_ERRORS:
                try:
                    retry.wait(f"fetch at offset {offset} (error code {error})")
                except TimeoutError as e:
                    raise OffsetsLogError(source, None, str(e), offset) from None
                continue
            if error:
                raise OffsetsLogError(source, None, f"fetch at offset {offset} failed with "
                                                    f"error code {error}", offset)
            retry.reset()
            if p not in self.high_watermarks and progress is not None:
                progress.set_total(sum(self.high_watermarks.values()) + hwm)
            self.high_watermarks[p] = hwm
            start = offset
            try:
                for batch in iter_batches(data or b"", allow_partial_tail=True):
                    if batch.next_offset <= offset:
                        continue   # a fetch may start at an earlier batch boundary
                    if batch.base_offset < offset:
                        batch.records = [r for r in batch.records if r.offset >= offset]
                    offset = batch.next_offset
                    yield LogBatch(source, p, batch)
            except CorruptBatchError as e:
                problems.report(source, None, f"fetched batch at offset {offset}: {e.reason}",
                                offset=offset)
                after = _skip_past(data, e.position)
                if after is None or after <= offset:
                    return
                offset = after
            if progress is not None:
                progress.update(offset - start)
            if offset >= hwm:
                return
            if offset == start:
                raise OffsetsLogError(source, None, f"no progress at offset {offset} below the "
                                                    f"high watermark {hwm}", offset)


def cluster_image(bootstrap: str):
    """The metadata image (topic ids and names) of a live cluster, as kcoord's gateway sees it."""
    from coordinator.gateway.cluster import ClusterView

    async def fetch():
        addresses = [(h, int(p)) for h, _, p in (a.rpartition(":") for a in bootstrap.split(","))]
        view = ClusterView(addresses, "__kcoord_offsets", client_id="kcoord-offsets")
        await view.start()
        try:
            return view.image
        finally:
            await view.close()
    return asyncio.run(fetch())
