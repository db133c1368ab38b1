"""The shard writer (coordinator/runtime/writer.py) over a process writer that answers with a
future, as the lean writer's `append` does: the batch is followed by a done-callback, not a
task, and the outcomes are those of an awaited append: landed at the predicted offset, failed
to the runtime, fenced, and a writer that raises at once fails the batch on a later turn. The
same outcomes over a writer's `append_then` (the lean writer's, through the state topic),
where a batch that landed releases its answers in the same call."""
from __future__ import annotations

import asyncio
from typing import Any

from coordinator.runtime.releases import Releases
from coordinator.runtime.state_log import ShardFenced
from coordinator.runtime.writer import ShardWriter

from .fakes import FakeStateTopic
from .test_runtime_parts import StubRuntime, add


class FutureWriter:
    """A process writer whose append returns a future the test completes (or raises)."""

    max_inflight = 1

    def __init__(self) -> None:
        self.appends: list[asyncio.Future[int]] = []
        self.raise_now: Exception | None = None

    def append(self, partition: int, records: Any, timestamp_ms: int) -> asyncio.Future[int]:
        if self.raise_now is not None:
            raise self.raise_now
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.appends.append(future)
        return future


async def turns(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_a_future_from_the_process_writer_lands_fails_or_fences_the_batch_like_an_awaited_append():
    async def main() -> None:
        rt = StubRuntime(FakeStateTopic(1))
        process = FutureWriter()
        writer = ShardWriter(rt, max_batch_bytes=100, append_overhead=0,   # type: ignore[arg-type]
                             partition_writer=process)
        first = add(writer, (b"k", b"1"))
        await turns()
        assert len(process.appends) == 1 and len(writer.inflight) == 1
        second = add(writer, (b"k", b"2"))
        await turns()
        assert len(process.appends) == 1, "one batch in flight: the next waits for the answer"
        process.appends[0].set_result(0)
        assert await asyncio.wait_for(first, 5) == 0
        await turns()
        assert len(process.appends) == 2, "the answer sends the next batch"
        process.appends[1].set_exception(RuntimeError("upstream refused"))
        await turns()
        assert [type(e) for e, _, _ in rt.failed] == [RuntimeError] and writer.write_failures == 1
        assert not second.done(), "the runtime answers the waiters of a failed write (fail)"
        writer.drop(RuntimeError("reloading"))
        add(writer, (b"k", b"3"))
        await turns()
        process.appends[2].set_exception(ShardFenced(0, "another owner"))
        await turns()
        assert len(rt.fenced) == 1 and writer.write_failures == 1, "a fence is no write failure"
        writer.drop(RuntimeError("unloaded"))
        process.raise_now = RuntimeError("refused at once")
        add(writer, (b"k", b"4"))
        await turns()
        assert [str(e) for e, _, _ in rt.failed][-1] == "refused at once" and writer.write_failures == 2
    asyncio.run(main())


def test_a_cancelled_write_fails_its_batch_and_the_shard_sends_again():
    """Nothing cancels the lean writer's futures today; if something did, the batch is a
    failed write (its waiters answered through the runtime, which reloads), not a batch kept
    in flight for ever with one batch allowed in flight."""
    async def main() -> None:
        rt = StubRuntime(FakeStateTopic(1))
        process = FutureWriter()
        writer = ShardWriter(rt, max_batch_bytes=100, append_overhead=0,   # type: ignore[arg-type]
                             partition_writer=process)
        add(writer, (b"k", b"1"))
        await turns()
        process.appends[0].cancel()
        await turns()
        assert [type(e).__name__ for e, _, _ in rt.failed] == ["StateLogError"] and not writer.inflight
        writer.drop(RuntimeError("reloading"))
        third = add(writer, (b"k", b"3"))
        await turns()
        assert len(process.appends) == 2, "the shard writes again"
        process.appends[1].set_result(writer.next_offset - 1)     # where it was predicted to land
        assert await asyncio.wait_for(third, 5) == writer.next_offset - 1

    asyncio.run(main())


class ThenWriter:
    """A process writer offering `append_then` (partition_writer.py): the test hands each
    append's outcome over, or the writer raises at once."""

    max_inflight = 1

    def __init__(self) -> None:
        self.thens: list[Any] = []
        self.raise_now: Exception | None = None

    def append(self, partition: int, records: Any, timestamp_ms: int) -> asyncio.Future[int]:
        raise AssertionError("append_then is offered: append is not used")

    def append_then(self, partition: int, records: Any, timestamp_ms: int, then: Any) -> None:
        if self.raise_now is not None:
            raise self.raise_now
        self.thens.append(then)


def _then_writer() -> tuple[StubRuntime, ThenWriter, ShardWriter]:
    """A shard's writer over a process writer offering `append_then`."""
    rt = StubRuntime(FakeStateTopic(1))
    process = ThenWriter()
    writer = ShardWriter(rt, max_batch_bytes=100, append_overhead=0,   # type: ignore[arg-type]
                         partition_writer=process)
    return rt, process, writer


def test_an_append_then_outcome_lands_the_batch_and_releases_its_answers_in_the_same_call():
    async def main() -> None:
        rt = StubRuntime(FakeStateTopic(1))
        process = ThenWriter()
        releases = Releases(0)
        writer = ShardWriter(rt, max_batch_bytes=100, append_overhead=0,   # type: ignore[arg-type]
                             partition_writer=process)
        first = add(writer, (b"k", b"1"))
        answer = releases.when_durable(first, "committed", 5)
        await turns()
        assert len(process.thens) == 1 and not answer.done()
        second = add(writer, (b"k", b"2"))
        await turns()
        assert len(process.thens) == 1, "one batch in flight: the next waits for the answer"
        process.thens[0](0, None)
        assert first.done() and first.result() == 0
        assert answer.done() and answer.result() == "committed", "released without a loop turn"
        assert len(process.thens) == 2, "the outcome sends the next batch"
        process.thens[1](-1, RuntimeError("upstream refused"))
        assert [type(e) for e, _, _ in rt.failed] == [RuntimeError] and writer.write_failures == 1
        assert not second.done(), "the runtime answers the waiters of a failed write (fail)"
        writer.drop(RuntimeError("reloading"))
        add(writer, (b"k", b"3"))
        await turns()
        process.thens[2](-1, ShardFenced(0, "another owner"))
        assert len(rt.fenced) == 1 and writer.write_failures == 1, "a fence is no write failure"
        writer.drop(RuntimeError("unloaded"))
        add(writer, (b"k", b"4"))
        await turns()
        process.thens[3](-1, asyncio.CancelledError())
        assert type(rt.failed[-1][0]).__name__ == "StateLogError" and not writer.inflight
        writer.drop(RuntimeError("reloading"))
        process.raise_now = RuntimeError("refused at once")
        add(writer, (b"k", b"5"))
        asyncio.get_running_loop().call_soon(writer.flush)
        await asyncio.sleep(0)
        failures = len(rt.failed)
        assert writer.inflight, "a writer that raises at once fails the batch on a later turn"
        await turns()
        assert len(rt.failed) == failures + 1 and str(rt.failed[-1][0]) == "refused at once"
    asyncio.run(main())


def test_an_append_then_batch_landing_past_its_predicted_offset_reloads_and_a_late_outcome_is_ignored():
    async def main() -> None:
        rt, process, writer = _then_writer()
        first = add(writer, (b"k", b"1"))
        await turns()
        process.thens[0](3, None)        # someone else wrote to the partition
        assert [(str(e), landed) for e, _, landed in rt.failed] == [("unexpected state topic offset", True)]
        assert not first.done(), "the runtime answers it (its records are in the log)"
        writer.drop(RuntimeError("reloading"), rt.failed[0][1], landed=True)
        second = add(writer, (b"k", b"2"))
        await turns()
        rt.generation += 1               # reloaded meanwhile: the outcome is no longer its
        writer.drop(RuntimeError("reloading"))
        process.thens[1](1, None)
        assert len(rt.failed) == 1 and second.exception() is not None and not writer.inflight
    asyncio.run(main())


def test_a_cancelled_awaiter_of_a_batch_leaves_it_to_land_and_the_writer_sends_the_next():
    """A task awaiting a batch's future directly and then cancelled is cancelled alone: the
    batch's future awaits shielded (releases.WriteDone), so it lands where predicted, and the
    writer sends the next batch."""
    async def main() -> None:
        rt, process, writer = _then_writer()
        first = add(writer, (b"k", b"1"))

        async def awaiting() -> None:
            await first

        task = asyncio.get_running_loop().create_task(awaiting())
        await turns()
        task.cancel()
        await turns()
        assert task.cancelled() and not first.done()
        add(writer, (b"k", b"2"))
        await turns()
        process.thens[0](0, None)           # the first batch landed where predicted
        assert first.result() == 0
        await turns()
        assert len(process.thens) == 2, "the next batch was never sent"

    asyncio.run(main())


class SendingWriter(ThenWriter):
    """A process writer that also offers `flush_before_send`: the flushes wait for the test's
    send (the lean writer's next request)."""

    def __init__(self) -> None:
        super().__init__()
        self.flushes: list[Any] = []
        self.records: list[Any] = []

    def flush_before_send(self, partition: int, flush: Any) -> None:
        self.flushes.append((partition, flush))

    def append_then(self, partition: int, records: Any, timestamp_ms: int, then: Any) -> None:
        self.records.append(list(records))
        super().append_then(partition, records, timestamp_ms, then)

    def send(self) -> None:
        flushes, self.flushes = self.flushes, []
        for _, flush in flushes:
            flush()


def test_a_writer_offering_flush_before_send_keeps_the_batch_open_until_its_send():
    """The shard's flush runs in the writer's send, not on a loop turn of its own: operations
    that arrive before that send join the open batch, and it lands as one batch."""
    async def main() -> None:
        rt = StubRuntime(FakeStateTopic(1))
        process = SendingWriter()
        writer = ShardWriter(rt, max_batch_bytes=100, append_overhead=0,   # type: ignore[arg-type]
                             partition_writer=process)
        first = add(writer, (b"k", b"1"))
        await turns()
        second = add(writer, (b"k", b"2"))
        await turns()
        assert not process.thens and [p for p, _ in process.flushes] == [0], "one flush, waiting for the send"
        assert first is second, "the later operation joined the open batch"
        process.send()
        assert process.records == [[(b"k", b"1"), (b"k", b"2")]] and len(writer.inflight) == 1
        third = add(writer, (b"k", b"3"))
        assert not process.flushes, "a batch in flight: the next is flushed when it lands"
        process.thens[0](0, None)
        assert first.result() == 0 and process.records[-1] == [(b"k", b"3")] and not third.done()
    asyncio.run(main())
