"""Exclusive writes by fencing on a real upstream (issue 14 point 2; Tansu and Kafka 4.3):
taking a shard fences its previous owner, a fenced owner's writes fail with ShardFenced and
are never applied by a loader, records are applied only once their transaction committed,
and a crash mid-transaction leaves a batch the next owner's fence aborts."""
from __future__ import annotations

import asyncio

import pytest

from coordinator.runtime.fenced_state_log import FencedStateLog
from coordinator.runtime.state_log import ShardFenced
from coordinator.runtime.state_topic import StateTopic

PARTITIONS = 2


async def _topic(upstream, names) -> str:
    """A new state topic, used at once: Kafka answers CreateTopics when its controller
    committed the topic and a broker's metadata may lag behind by a moment
    (UNKNOWN_TOPIC_OR_PARTITION); the fenced log's Metadata read waits for it (fenced_links.py)."""
    name = f"__kcoord_{names.topic()}"
    creator = StateTopic(upstream.bootstrap, name, PARTITIONS)
    try:
        await creator.ensure_topic()
    finally:
        await creator.stop()
    return name


def _log(upstream, topic: str, **kwargs) -> FencedStateLog:
    return FencedStateLog(upstream.bootstrap, topic, PARTITIONS, take_timeout_s=30.0, **kwargs)


async def _load(log: FencedStateLog, partition: int) -> tuple[list[tuple[int, bytes, bytes | None]], int]:
    seen: list[tuple[int, bytes, bytes | None]] = []
    ends: dict[int, int] = {}
    await log.load([partition], lambda p, o, k, v: seen.append((o, k, v)), lambda p, leo: ends.update({p: leo}))
    return seen, ends[partition]


async def _eventually(check, timeout: float = 20.0):
    """Await an async condition, bounded (Kafka writes TV1 markers after EndTxn answered)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await check()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s (last value {value!r})")
        await asyncio.sleep(0.05)


def test_a_takeover_fences_the_previous_owner_and_its_later_writes_are_never_applied(upstream, names):
    async def scenario():
        topic = await _topic(upstream, names)
        a, b, reader = _log(upstream, topic), _log(upstream, topic), _log(upstream, topic, take_on_load=False)
        try:
            seen, end = await _load(a, 0)                     # A takes the shard
            assert seen == [] and end == 0
            pid_a, epoch_a = a.producer(0)
            base1 = await a.append(0, [(b"k1", b"a1"), (b"k2", b"a2")], 1)
            assert base1 == 0
            base2 = await a.append(0, [(b"k3", b"a3")], 2)
            assert base2 == 3, "each committed batch is followed by one COMMIT marker offset"

            seen, end = await _load(b, 0)                     # B takes over: A is fenced
            assert [k for _, k, _ in seen] == [b"k1", b"k2", b"k3"]
            pid_b, epoch_b = b.producer(0)
            assert pid_b == pid_a and epoch_b > epoch_a

            with pytest.raises(ShardFenced):
                await a.append(0, [(b"zombie", b"z")], 3)
            with pytest.raises(ShardFenced):                  # stays fenced: not taken any more
                await a.append(0, [(b"zombie2", b"z")], 3)

            base3 = await b.append(0, [(b"k4", b"b4")], 4)
            assert base3 >= end

            async def committed_keys():     # TV1: the COMMIT marker lands after EndTxn answered
                got, _ = await _load(reader, 0)
                keys = [k for _, k, _ in got]
                return keys if b"k4" in keys else None

            keys = await _eventually(committed_keys)
            assert keys == [b"k1", b"k2", b"k3", b"k4"]
            assert b"zombie" not in keys and b"zombie2" not in keys
        finally:
            for log in (a, b, reader):
                await log.stop()

    asyncio.run(scenario())


def test_a_zombie_paused_between_produce_and_endtxn_is_fenced_and_its_batch_aborted(upstream, names):
    """The zombie's Produce landed before the fence: the fence aborts it, its EndTxn fails."""
    async def scenario():
        topic = await _topic(upstream, names)
        a, b, reader = _log(upstream, topic), _log(upstream, topic), _log(upstream, topic, take_on_load=False)
        produced, resume = asyncio.Event(), asyncio.Event()

        async def pause(partition: int) -> None:
            produced.set()
            await resume.wait()

        try:
            await _load(a, 1)
            await a.append(1, [(b"before", b"1")], 1)
            a.before_end_txn = pause
            write = asyncio.create_task(a.append(1, [(b"zombie", b"z")], 2))
            await asyncio.wait_for(produced.wait(), 30)

            seen, _ = await _load(reader, 1)              # not committed: not applied
            assert [k for _, k, _ in seen] == [b"before"]
            assert reader.open_transactions[1], "the zombie's batch is an open transaction"

            seen, _ = await _load(b, 1)                   # the fence aborts it
            assert [k for _, k, _ in seen] == [b"before"]
            assert b.aborted_transactions[1] == 1 and b.open_transactions[1] == {}

            resume.set()
            with pytest.raises(ShardFenced):
                await asyncio.wait_for(write, 30)
            await b.append(1, [(b"after", b"2")], 3)

            async def committed_keys():     # TV1: the COMMIT marker lands after EndTxn answered
                got, _ = await _load(reader, 1)
                keys = [k for _, k, _ in got]
                return keys if b"after" in keys else None

            assert await _eventually(committed_keys) == [b"before", b"after"]
        finally:
            resume.set()
            for log in (a, b, reader):
                await log.stop()

    asyncio.run(scenario())


def test_records_are_applied_only_after_append_returned(upstream, names):
    async def scenario():
        topic = await _topic(upstream, names)
        writer, reader = _log(upstream, topic), _log(upstream, topic, take_on_load=False)
        produced, resume = asyncio.Event(), asyncio.Event()

        async def pause(partition: int) -> None:
            produced.set()
            await resume.wait()

        try:
            await _load(writer, 0)
            writer.before_end_txn = pause
            write = asyncio.create_task(writer.append(0, [(b"x", b"1"), (b"y", b"2")], 1))
            await asyncio.wait_for(produced.wait(), 30)
            seen, end = await _load(reader, 0)
            assert seen == [] and end == 2, "the batch is in the log but not applied"
            assert not write.done()
            resume.set()
            base = await asyncio.wait_for(write, 30)
            assert base == 0

            async def applied():
                got, _ = await _load(reader, 0)
                return [k for _, k, _ in got] == [b"x", b"y"]

            await _eventually(applied)
        finally:
            resume.set()
            await writer.stop()
            await reader.stop()

    asyncio.run(scenario())


def test_load_after_a_crash_mid_transaction_skips_the_batch_the_new_owner_aborted(upstream, names):
    async def scenario():
        topic = await _topic(upstream, names)
        crashed = _log(upstream, topic, transaction_timeout_ms=600_000)
        produced = asyncio.Event()

        async def crash(partition: int) -> None:
            produced.set()
            await asyncio.Event().wait()          # never sends EndTxn

        await _load(crashed, 0)
        await crashed.append(0, [(b"durable", b"1")], 1)
        crashed.before_end_txn = crash
        write = asyncio.create_task(crashed.append(0, [(b"lost", b"2")], 2))
        await asyncio.wait_for(produced.wait(), 30)
        write.cancel()                            # the process dies: links closed, no EndTxn
        await asyncio.gather(write, return_exceptions=True)
        await crashed.stop()

        owner = _log(upstream, topic)
        try:
            seen, end = await _load(owner, 0)
            assert [k for _, k, _ in seen] == [b"durable"]
            assert owner.aborted_transactions[0] == 1 and owner.open_transactions[0] == {}
            # offsets: durable(0) COMMIT(1) lost(2) ABORT(3)
            assert end == 4
            assert await owner.append(0, [(b"next", b"3")], 3) == 4
        finally:
            await owner.stop()

    asyncio.run(scenario())


def test_two_coordinator_services_on_one_state_topic_the_later_one_fences_the_earlier(upstream, names):
    """The runtime over FencedStateLog: process B's load fences process A; A's next commit is
    answered NOT_COORDINATOR and its shard unloads (no reload); B serves; a fresh owner loads
    exactly what B acknowledged, nothing of A's after the fence."""
    from kio.schema.errors import ErrorCode

    from coordinator.runtime.shard_runtime import ShardState
    from unit.runtime.fakes import group_in
    from unit.runtime.test_shard_failures import commit, commit_errors, committed, fetch, service_for

    async def scenario():
        topic = await _topic(upstream, names)
        logs = [_log(upstream, topic) for _ in range(3)]
        services = []
        try:
            group = group_in(0, PARTITIONS)
            a = service_for(logs[0])
            await a.start()
            services.append(a)
            assert commit_errors(await commit(a, group, "t", 0, 5)) == {ErrorCode.none}

            b = service_for(logs[1])
            await b.start()
            services.append(b)
            assert committed(await fetch(b, group)) == {("t", 0): 5}

            fenced: list[int] = []
            a.runtimes[0].on_fenced = lambda p, e: fenced.append(p)
            assert commit_errors(await commit(a, group, "t", 0, 99)) == {ErrorCode.not_coordinator}
            assert a.runtimes[0].state is ShardState.UNLOADED and fenced == [0]
            assert (await fetch(a, group)).error_code == ErrorCode.not_coordinator

            assert commit_errors(await commit(b, group, "t", 0, 7)) == {ErrorCode.none}
            assert commit_errors(await commit(b, group, "t", 1, 8)) == {ErrorCode.none}
            assert b.runtimes[0].state is ShardState.ACTIVE, "commit markers did not look like foreign writes"

            c = service_for(logs[2])
            await c.start()
            services.append(c)
            assert committed(await fetch(c, group)) == {("t", 0): 7, ("t", 1): 8}
        finally:
            for s in services:
                s.close()
            for log in logs:
                await log.stop()

    asyncio.run(scenario())
