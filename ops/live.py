"""Read a live offsets topic, transaction markers included.

aiokafka's consumer hides what replay needs (producer ids, transactional flags, control
batches), so this sends Fetch requests itself through aiokafka's client, at
READ_UNCOMMITTED, and walks the raw record batches of each response with
`records.batch.iter_batches` (CRC checked). Partitions are read one after the other,
from the log start offset (or `start_offset`, for `kcoord offsets show`) up to the high
watermark of the last response.
"""
from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterator

from aiokafka.client import AIOKafkaClient
from aiokafka.protocol.fetch import FetchRequest
from aiokafka.structs import TopicPartition

from ops.logsource import LogBatch, OffsetsLogError, Problems, Progress
from records.batch import CorruptBatchError, iter_batches

READ_UNCOMMITTED = 0
OFFSET_OUT_OF_RANGE = 1
_HEADER = struct.Struct(">qi")       # base offset, length
_LAST_DELTA_AT = 23


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


class TopicReader:
    def __init__(self, bootstrap: str, topic: str, *, partitions: list[int] | None = None,
                 max_bytes: int = 8 * 1024 * 1024, client_id: str = "kcoord-offsets",
                 start_offset: int = 0) -> None:
        self.bootstrap, self.topic, self.max_bytes = bootstrap, topic, max_bytes
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
            if not known:
                raise OffsetsLogError(self.topic, None, f"topic not found on {self.bootstrap}")
            for p in sorted(self.partitions if self.partitions is not None else known):
                if p not in known:
                    raise OffsetsLogError(f"{self.topic}-{p}", None, "no such partition")
                leader = metadata.leader_for_partition(TopicPartition(self.topic, p))
                yield from self._read_partition(loop, client, leader, p, problems, progress)
        finally:
            loop.run_until_complete(client.close())
            loop.close()

    def _fetch(self, loop, client, leader: int, partition: int, offset: int):
        # min_bytes 1: Tansu answers min_bytes 0 with no partitions at all.
        req = FetchRequest(max_wait_time=200, min_bytes=1, max_bytes=self.max_bytes,
                           isolation_level=READ_UNCOMMITTED,
                           topics=[(self.topic, [(partition, offset, self.max_bytes)])])
        return _partition_response(loop.run_until_complete(client.send(leader, req)), self.topic,
                                   partition)

    def _read_partition(self, loop, client, leader: int, p: int, problems: Problems,
                        progress: Progress | None) -> Iterator[LogBatch]:
        source = f"{self.topic}-{p}"
        offset = self.start_offset
        empty = 0
        while True:
            pr = self._fetch(loop, client, leader, p, offset)
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
            if error:
                raise OffsetsLogError(source, None, f"fetch at offset {offset} failed with "
                                                    f"error code {error}", offset)
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
