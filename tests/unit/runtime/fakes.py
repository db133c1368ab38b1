"""An in-memory state topic for runtime tests: per-partition logs of raw (key, value)
records, an upstream that can be taken down, and writes that can be held.

`load` and `append` behave like `coordinator.runtime.state_topic.StateTopic`'s: load
replays each partition from offset 0 and reports its end offset; append writes one batch
and returns its base offset. With `down` set both raise, as StateTopic does when it cannot
reach the cluster.
"""
from __future__ import annotations

import asyncio
from collections.abc import Iterable

from coordinator.group.hashing import partition_for
from coordinator.runtime.fenced_reads import CorruptRecordException
from coordinator.runtime.state_topic import CorruptBatchError
from records import OffsetCommitKey, OffsetCommitValue, encode_key, encode_value


class UpstreamDown(ConnectionError):
    pass


class FakeStateTopic:
    topic = "__kcoord_fake"

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.logs: dict[int, list[tuple[bytes, bytes | None]]] = {p: [] for p in range(partitions)}
        self.down = False
        self.hold_writes: asyncio.Event | None = None   # set: writes proceed; None: never held
        self.hold_loads: asyncio.Event | None = None    # set: loads proceed; None: never held
        self.fail_writes: BaseException | None = None   # every append raises this (after the callback)
        self.corrupt: dict[int, int] = {}   # partition -> offset of a batch the loader cannot read
        self.records_read = 0
        self.load_calls = 0
        self.append_calls = 0
        # As StateTopic: the cluster view's hook for failed appends, and its suspension.
        self.on_write_error = None
        self.suspended: str | None = None

    def suspend(self, reason: str) -> None:
        self.suspended = reason

    def resume(self) -> None:
        self.suspended = None

    async def load(self, partitions: Iterable[int], sink, on_loaded, progress=None,
                   on_corrupt=None, abandoned=None) -> None:
        self.load_calls += 1
        self.records_read = 0
        if self.hold_loads is not None:
            await self.hold_loads.wait()
        if self.down:
            raise UpstreamDown("upstream unreachable")
        for p in sorted(partitions):
            for offset, (key, value) in enumerate(list(self.logs[p])):
                if abandoned is not None and abandoned(p):
                    break
                if offset == self.corrupt.get(p):
                    error = CorruptBatchError(self.topic, p, offset, CorruptRecordException("Invalid CRC"))
                    if on_corrupt is None:
                        raise error
                    on_corrupt(p, error)
                    break
                self.records_read += 1
                sink(p, offset, key, value)
            else:
                on_loaded(p, len(self.logs[p]))
            await asyncio.sleep(0)

    async def append(self, partition: int, records, timestamp_ms: int) -> int:
        self.append_calls += 1
        if self.hold_writes is not None:
            await self.hold_writes.wait()
        error = self.fail_writes or (UpstreamDown("upstream unreachable") if self.down else None)
        if error is not None:
            if self.on_write_error is not None:
                self.on_write_error(partition, error)
            raise error
        log = self.logs[partition]
        base = len(log)
        log.extend(records)
        return base

    async def tail(self, partition: int, from_offset: int, sink) -> None:
        """As StateTopic.tail: follow one partition from an offset until cancelled."""
        offset = from_offset
        while True:
            log = self.logs[partition]
            while offset < len(log):
                key, value = log[offset]
                sink(partition, offset, key, value)
                offset += 1
            await asyncio.sleep(0)

    # ------------------------------------------------------------- log helpers
    def partition_of(self, group: str) -> int:
        return partition_for(group, self.partitions)

    def commit(self, group: str, topic: str, partition: int, offset: int) -> tuple[int, int]:
        """Append a valid OffsetCommit record; returns (state partition, log offset)."""
        p = self.partition_of(group)
        key = encode_key(OffsetCommitKey(group=group, topic=topic, partition=partition))
        value = encode_value(OffsetCommitValue(offset=offset, metadata="", commit_timestamp=1), 3)
        self.logs[p].append((key, value))
        return p, len(self.logs[p]) - 1

    def bad_commit(self, group: str, topic: str, partition: int, version: int = 99) -> tuple[int, int]:
        """An OffsetCommit key whose value claims an unknown version (issue 10's record)."""
        p = self.partition_of(group)
        key = encode_key(OffsetCommitKey(group=group, topic=topic, partition=partition))
        good = encode_value(OffsetCommitValue(offset=7, metadata="", commit_timestamp=1), 3)
        self.logs[p].append((key, version.to_bytes(2, "big") + good[2:]))
        return p, len(self.logs[p]) - 1


def group_in(partition: int, partitions: int, prefix: str = "g", avoid: Iterable[int] = ()) -> str:
    """A group id that hashes to `partition`."""
    for i in range(100_000):
        gid = f"{prefix}-{i}"
        if partition_for(gid, partitions) == partition:
            return gid
    raise AssertionError("no group id found")


def group_not_in(partitions: int, excluded: Iterable[int], prefix: str = "ok") -> str:
    excluded = set(excluded)
    for i in range(100_000):
        gid = f"{prefix}-{i}"
        if partition_for(gid, partitions) not in excluded:
            return gid
    raise AssertionError("no group id found")
