"""The runtime's fencing hook (issue 14 point 2), over an in-memory transactional log: a write
or a reload that raises ShardFenced answers every waiter NOT_COORDINATOR and unloads the shard
(no reload: a reload would take the shard back from its new owner); other write failures
still reload; a log whose appends take one more offset (the COMMIT marker) never looks like
a foreign write."""
from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from coordinator.runtime.shard_runtime import ShardState
from coordinator.runtime.state_log import ShardFenced

from .fakes import FakeStateTopic, UpstreamDown, group_in
from .test_shard_failures import commit, commit_errors, committed, fetch, service_for, until

PARTITIONS = 2


class FakeTransactionalLog(FakeStateTopic):
    """As FakeStateTopic, but each append is followed by a COMMIT marker that takes an offset
    (None in the log, never handed to the sink), and the log can fence its writer."""

    offsets_per_append = 1

    def __init__(self, partitions: int) -> None:
        super().__init__(partitions)
        self.fenced: set[int] = set()
        self.refuse_take: set[int] = set()

    async def load(self, partitions, sink, on_loaded, progress=None, on_corrupt=None, abandoned=None) -> None:
        self.load_calls += 1
        for p in sorted(partitions):
            if p in self.refuse_take:
                raise ShardFenced(p, "the shard is not assigned to this process")
            self.fenced.discard(p)
            for offset, entry in enumerate(list(self.logs[p])):
                if entry is not None:
                    sink(p, offset, *entry)
            on_loaded(p, len(self.logs[p]))
            await asyncio.sleep(0)

    async def append(self, partition: int, records, timestamp_ms: int) -> int:
        self.append_calls += 1
        if self.hold_writes is not None:
            await self.hold_writes.wait()
        if partition in self.fenced:
            raise ShardFenced(partition, "PRODUCER_FENCED")
        if self.down:
            raise UpstreamDown("upstream unreachable")
        log = self.logs[partition]
        base = len(log)
        log.extend(records)
        log.append(None)      # the COMMIT marker
        return base


async def started(log: FakeTransactionalLog):
    service = service_for(log)
    await service.start()
    return service


def test_a_fenced_write_answers_not_coordinator_and_unloads_without_reloading():
    async def main():
        log = FakeTransactionalLog(PARTITIONS)
        service = await started(log)
        group = group_in(0, PARTITIONS)
        assert commit_errors(await commit(service, group, "t", 0, 5)) == {ErrorCode.none}
        runtime = service.runtimes[0]
        seen: list[tuple[int, ShardFenced]] = []
        runtime.on_fenced = lambda p, e: seen.append((p, e))
        loads = log.load_calls

        log.fenced.add(0)                                  # another process took shard 0
        log.hold_writes = asyncio.Event()
        waiting = [asyncio.create_task(commit(service, group, "t", p, 10 + p)) for p in range(3)]
        await until(lambda: log.append_calls >= 2, "the write in flight")
        log.hold_writes.set()
        results = await asyncio.gather(*waiting)
        assert all(commit_errors(r) == {ErrorCode.not_coordinator} for r in results)
        await until(lambda: runtime.state is ShardState.UNLOADED, "the fenced shard unloaded")
        assert runtime.fenced is not None and [p for p, _ in seen] == [0]
        for _ in range(200):
            await asyncio.sleep(0)
        assert log.load_calls == loads, "a fenced shard must not reload (it would fence the new owner)"
        assert runtime.state is ShardState.UNLOADED
        assert (await fetch(service, group)).error_code == ErrorCode.not_coordinator
        # The other shard is untouched.
        other = group_in(1, PARTITIONS, prefix="o")
        assert commit_errors(await commit(service, other, "t", 0, 1)) == {ErrorCode.none}

        # Taken back later (the membership reassigns it): a load clears the fence.
        await runtime.reload()
        assert runtime.state is ShardState.ACTIVE and runtime.fenced is None
        assert committed(await fetch(service, group)) == {("t", 0): 5}
        service.close()

    asyncio.run(main())


def test_a_reload_refused_by_a_fence_unloads_instead_of_retrying():
    async def main():
        log = FakeTransactionalLog(PARTITIONS)
        service = await started(log)
        group = group_in(0, PARTITIONS)
        runtime = service.runtimes[0]
        log.down = True                                    # an ordinary write failure: reload
        log.refuse_take.add(0)                             # ... but the shard moved meanwhile
        assert commit_errors(await commit(service, group, "t", 0, 5)) == {ErrorCode.not_coordinator}
        await until(lambda: runtime.state is ShardState.UNLOADED, "unloaded by the refused take")
        attempts = runtime.reload_attempts
        for _ in range(200):
            await asyncio.sleep(0)
        assert runtime.reload_attempts == attempts == 1
        assert isinstance(runtime.fenced, ShardFenced)
        service.close()

    asyncio.run(main())


def test_an_ordinary_write_failure_still_reloads():
    async def main():
        log = FakeTransactionalLog(PARTITIONS)
        service = await started(log)
        group = group_in(0, PARTITIONS)
        runtime = service.runtimes[0]
        loads = log.load_calls
        log.down = True
        assert commit_errors(await commit(service, group, "t", 0, 5)) == {ErrorCode.not_coordinator}
        log.down = False
        await until(lambda: runtime.state is ShardState.ACTIVE and log.load_calls > loads, "reloaded")
        assert runtime.fenced is None
        service.close()

    asyncio.run(main())


def test_commit_markers_between_batches_are_expected_offsets_not_foreign_writes():
    async def main():
        log = FakeTransactionalLog(PARTITIONS)
        service = await started(log)
        group = group_in(0, PARTITIONS)
        runtime = service.runtimes[0]
        loads = log.load_calls
        assert commit_errors(await commit(service, group, "t", 0, 1)) == {ErrorCode.none}
        log.hold_writes = asyncio.Event()
        first = asyncio.create_task(commit(service, group, "t", 1, 2))
        await until(lambda: log.append_calls == 2, "second write in flight")
        burst = [asyncio.create_task(commit(service, group, "t", p, 20 + p)) for p in range(4)]
        for _ in range(20):
            await asyncio.sleep(0)
        log.hold_writes.set()
        results = await asyncio.gather(first, *burst)
        assert all(commit_errors(r) == {ErrorCode.none} for r in results)
        assert log.load_calls == loads, "no batch landed at an unexpected offset"
        assert runtime.state is ShardState.ACTIVE
        # record, marker, record, marker, 4 records, marker
        assert [e is None for e in log.logs[0]] == [False, True, False, True, False, False, False, False, True]
        assert runtime.next_offset == len(log.logs[0]), "the next batch starts after the last marker"
        await runtime.reload()
        assert committed(await fetch(service, group)) == {("t", 0): 20, ("t", 1): 21, ("t", 2): 22, ("t", 3): 23}
        service.close()

    asyncio.run(main())
