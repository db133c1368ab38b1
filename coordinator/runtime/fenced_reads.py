"""The state log's reads: a shard's load (fence, then replay to the high watermark), the raw
reads of the transactional tail, and a standby's tail. Part of fenced_state_log.py's
`FencedStateLog` (which states the protocol) and, without the fence, of the single-process
state_topic.py's `StateTopic`.

Rules:
- A load is "fence, then load", per partition: the caller's `fence` step runs first (today
  the takeover's InitProducerId; fence-by-writing later), and the partition is replayed only
  once it returned, so everything a previous owner landed before the fence is inside the
  load. A partition whose fence or replay fails does not stop the others; the first error is
  raised at the end. At most `MAX_REPLAYS` partitions replay at once (a bound on the Fetch
  answers held in memory); every fence runs at once.
- Fetches are read_uncommitted with control batches visible (kcoord's own Fetch: a
  read_committed consumer stops at the last stable offset behind any open client
  transaction). Transactional data batches are held per producer id until their marker:
  COMMIT hands their records to the sink at the marker, ABORT drops them.
- A batch that does not read (records/batch.py: CRC, codec, bounds) stops its partition
  only: `on_corrupt` gets the offset where that batch starts (the records before it were
  replayed), or the load raises CorruptBatchError once the other partitions are done.
- A tail follows until cancelled: a failed link is retried with backoff (0.2 s doubling to
  5 s), as a consumer reconnects; an error answer for the partition ends it.
- With `readers`, a partition is read by the marker-aware `TxnLogReader` instead (client
  offsets pending with their producer id, markers ending them).
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from records.batch import ControlMarker, iter_batches
from records.batch import CorruptBatchError as _BatchError

from .fenced_links import REFRESH, StateLogError, UpstreamLinks
from .state_log import CorruptBatchError, Fence, RecordSink
from .txn_log_reader import TxnLogReader

log = logging.getLogger("kcoord.fenced_state_log")

# Partitions replayed at once by one load: each has one Fetch answer (up to the links'
# fetch_max_bytes) in memory at a time, so this bounds a load's buffers (16 x 8 MiB by
# default) however many shards it loads; a broker serves one connection's requests in
# order, so more in flight would not load faster.
MAX_REPLAYS = 16


class CorruptRecordException(Exception):
    """A batch that fails its CRC or does not decode: Kafka's clients name this error so
    (org.apache.kafka.common.errors.CorruptRecordException); operators search logs for it."""


class LogReads:
    def __init__(self, links: UpstreamLinks, topic: str) -> None:
        self.links = links
        self.topic = topic
        # Per partition after its load: kcoord's own transactional records still held (none
        # after a fence), and how many transactions were aborted.
        self.open_transactions: dict[int, dict[int, list[tuple[int, bytes, bytes | None]]]] = {}
        self.aborted_transactions: dict[int, int] = {}

    async def load(self, partitions: Iterable[int], sink: RecordSink,
                   on_loaded: Callable[[int, int], None],
                   progress: Callable[[int, int], None] | None = None,
                   on_corrupt: Callable[[int, CorruptBatchError], None] | None = None,
                   abandoned: Callable[[int], bool] | None = None,
                   readers: Callable[[int], TxnLogReader] | None = None,
                   fence: Fence | None = None) -> None:
        parts = sorted(set(partitions))
        if not parts:
            return
        if not self.links.brokers:
            await self.links.refresh_metadata()
        records = [0]
        done = [0]
        replaying = asyncio.Semaphore(MAX_REPLAYS)

        async def one(p: int) -> None:
            if fence is not None:
                await fence(p)
            async with replaying:
                end = await self._replay(p, sink, on_corrupt, abandoned, records,
                                         readers(p) if readers is not None else None)
            done[0] += 1
            if end is not None:
                on_loaded(p, end)
            if progress is not None:
                progress(records[0], done[0])

        # Every partition is fenced and replayed even if another one fails (a refused take
        # raises ShardFenced for its partition only); the first error is raised at the end.
        results = await asyncio.gather(*(one(p) for p in parts), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def read_partition(self, partition: int, offset: int) -> tuple[bytes, int]:
        """(records from `offset`, high watermark), read_uncommitted with markers visible."""
        for attempt in range(50):
            # Tansu answers no partition at all to a Fetch with a short wait on an empty
            # partition; a longer wait with min_bytes 1 gets its high watermark.
            part = await self.links.fetch(partition, offset, 10 if attempt == 0 else 100)
            if part is None:
                continue
            if part.error_code in REFRESH:
                self.links.forget_leader(partition)
                await asyncio.sleep(0.05)
                continue
            if part.error_code != ErrorCode.none:
                raise StateLogError(f"Fetch {self.topic}-{partition} at {offset}: {part.error_code.name}")
            return part.records or b"", int(part.high_watermark)
        raise StateLogError(f"Fetch {self.topic}-{partition} at {offset}: no usable answer")

    async def _replay(self, partition: int, sink: RecordSink,
                      on_corrupt: Callable[[int, CorruptBatchError], None] | None,
                      abandoned: Callable[[int], bool] | None, counter: list[int],
                      txn_reader: TxnLogReader | None = None) -> int | None:
        reader: Any = _Reader(partition, sink) if txn_reader is None else _TxnReaderAdapter(txn_reader)
        links = self.links
        offset = 0
        refreshes = empties = 0
        while True:
            if abandoned is not None and abandoned(partition):
                return None
            part = await links.fetch(partition, offset, 10 if empties == 0 else 100)
            if part is None:
                empties += 1
                if empties > 100:
                    raise StateLogError(f"Fetch {self.topic}-{partition} at {offset}: no answer for the partition")
                continue
            empties = 0
            code = part.error_code
            if code == ErrorCode.offset_out_of_range:
                offset = await links.log_start(partition)
                continue
            if code in REFRESH and refreshes < 50:
                refreshes += 1
                links.forget_leader(partition)
                await asyncio.sleep(0.05)
                continue
            if code != ErrorCode.none:
                raise StateLogError(f"Fetch {self.topic}-{partition} at {offset}: {code.name}")
            hw = int(part.high_watermark)
            try:
                offset = reader.feed(part.records or b"", offset)
            except _BatchError as e:
                # The records before the bad batch in this answer were replayed already.
                error = CorruptBatchError(self.topic, partition, reader.position, CorruptRecordException(str(e)))
                if on_corrupt is None:
                    raise error from e
                on_corrupt(partition, error)
                return None
            counter[0] += reader.delivered
            reader.delivered = 0
            if offset >= hw:
                break
        self.aborted_transactions[partition] = reader.aborted
        self.open_transactions[partition] = reader.held
        if reader.held:
            log.warning("state partition %d: %d transaction(s) still open at offset %d (producer ids %s): "
                        "not kcoord's (those were completed by the fence); kept pending", partition,
                        len(reader.held), offset, sorted(reader.held))
        return offset

    async def tail(self, partition: int, from_offset: int, sink: RecordSink, *, poll_ms: int = 500) -> None:
        """Follow one partition from `from_offset` (read_uncommitted, markers visible, the
        same rules as load) until cancelled. A transaction that began before `from_offset`
        is not seen whole: start the tail where a load ended."""
        reader = _Reader(partition, sink)
        offset = from_offset
        backoff = 0.2
        while True:
            try:
                part = await self.links.fetch(partition, offset, poll_ms)
            except StateLogError as e:
                # A link that failed (the broker restarting, a leader moving): a follower
                # keeps following, as a consumer reconnects, until it is cancelled.
                log.debug("tail of %s-%d at %d: %s; retrying in %.1fs", self.topic, partition, offset, e, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            backoff = 0.2
            if part is None:
                continue
            if part.error_code in REFRESH:
                self.links.forget_leader(partition)
                await asyncio.sleep(0.2)
                continue
            if part.error_code != ErrorCode.none:
                raise StateLogError(f"Fetch {self.topic}-{partition} at {offset}: {part.error_code.name}")
            offset = reader.feed(part.records or b"", offset)


class _TxnReaderAdapter:
    """A TxnLogReader with _Reader's counters (the load's progress and its open/aborted
    figures): `held` is only kcoord's own held records; a client's open transaction is
    pending in the shard, not here."""

    def __init__(self, reader: TxnLogReader) -> None:
        self.reader = reader
        self.delivered = 0

    @property
    def held(self) -> dict[int, list[tuple[int, bytes, bytes | None]]]:
        return self.reader.held

    @property
    def aborted(self) -> int:
        return self.reader.aborted

    @property
    def position(self) -> int:
        return self.reader.position

    def feed(self, data: bytes, offset: int) -> int:
        return self.reader.feed(data, offset)


class _Reader:
    """Batches of one partition in offset order -> committed records to the sink."""

    def __init__(self, partition: int, sink: RecordSink) -> None:
        self.partition = partition
        self.sink = sink
        self.held: dict[int, list[tuple[int, bytes, bytes | None]]] = {}
        self.aborted = 0
        self.delivered = 0
        self.position = 0       # the next offset to replay, as feed goes (a bad batch starts there)

    def feed(self, data: bytes, offset: int) -> int:
        """Consume a fetch response's records from `offset`; returns the next offset."""
        p, sink = self.partition, self.sink
        self.position = offset
        for batch in iter_batches(data, allow_partial_tail=True):
            if batch.last_offset < offset:
                continue
            if batch.is_control_batch:
                held = self.held.pop(batch.producer_id, None)
                if held is not None:
                    if batch.control_type == ControlMarker.COMMIT:
                        for o, k, v in held:
                            sink(p, o, k, v)
                        self.delivered += len(held)
                    else:
                        self.aborted += 1
            elif batch.is_transactional:
                self.held.setdefault(batch.producer_id, []).extend(
                    (r.offset, r.key, r.value) for r in batch.records if r.offset >= offset)
            else:
                for r in batch.records:
                    if r.offset >= offset:
                        sink(p, r.offset, r.key, r.value)
                        self.delivered += 1
            offset = self.position = batch.next_offset
        return offset
