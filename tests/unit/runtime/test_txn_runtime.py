"""ShardRuntime's transactional part (the port of its transactional writes), over an in-memory partition of real
record batches (records.batch, as Kafka stores them): kcoord's own plain batches, clients'
transactional batches and the COMMIT/ABORT markers an upstream transaction coordinator writes.

What is pinned here:
- a marker landing between kcoord's writes moves its later batches, it does not reload;
- while a client's batch is appended (`exclusive_write`) no operation runs: they run after,
  in order, so replay order is log order;
- `caught_up` reads to the high watermark, applies markers (pending -> committed, or
  dropped) and puts kcoord's next offset at the log end;
- a reload (the `readers` load) rebuilds a client's pending offsets from the log, and a
  marker read later applies them;
- a client's transactional write is a runtime write (`run_transactional`): it answers its
  operation's response, raises its append's error (reloading when the outcome is unknown),
  and a marker reaches the shard through the runtime's `complete_transaction`.
"""
from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from coordinator.config import CoordinatorConfig
from coordinator.group import record_helpers as rh
from coordinator.group.errors import ApiError
from coordinator.group.offsets.txn_commit import TxnOffsetWrite
from coordinator.group.result import Result
from coordinator.group.shard import GroupCoordinatorShard
from coordinator.runtime.shard_runtime import ShardRuntime, ShardState
from coordinator.runtime.transactional_write import Appended, TxnAppendError
from records import encode_key, encode_value
from records.batch import ControlMarker, build_batch, build_control_batch

T = 1_700_000_000_000
PID, EPOCH = 4242, 0


class TxnLog:
    """One state partition: batches with Kafka's offsets; the raw reads of a txn-aware log."""

    topic = "__kcoord_txn_fake"
    txn_offsets_supported = True

    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self.next = 0
        self.hold: asyncio.Event | None = None

    def _add(self, batch: bytes, n: int) -> int:
        base = self.next
        self.batches.append(batch)
        self.next += n
        return base

    async def append(self, partition: int, records, timestamp_ms: int) -> int:
        records = list(records)
        if self.hold is not None:
            await self.hold.wait()
        return self._add(build_batch(records, base_offset=self.next, timestamp_ms=T), len(records))

    def client_batch(self, records) -> int:
        return self._add(build_batch(list(records), base_offset=self.next, timestamp_ms=T, producer_id=PID,
                                     producer_epoch=EPOCH, base_sequence=0, transactional=True), len(records))

    def marker(self, committed: bool) -> None:
        self._add(build_control_batch(ControlMarker.COMMIT if committed else ControlMarker.ABORT,
                                      base_offset=self.next, timestamp_ms=T, producer_id=PID,
                                      producer_epoch=EPOCH), 1)

    async def read_partition(self, partition: int, offset: int) -> tuple[bytes, int]:
        return b"".join(self.batches), self.next

    async def load(self, partitions, sink, on_loaded, progress=None, on_corrupt=None, abandoned=None,
                   readers=None) -> None:
        for p in partitions:
            reader = readers(p)
            assert reader.feed(b"".join(self.batches), 0) == self.next
            on_loaded(p, self.next)


def commit_record(group: str, partition: int, offset: int):
    return rh.offset_commit_record(group, "t", partition, offset=offset, leader_epoch=-1, metadata="",
                                   commit_timestamp=T)


def encoded(rec):
    return encode_key(rec.key), encode_value(rec.value, rec.value_version)


def committed(rt: ShardRuntime, group: str) -> dict[int, int]:
    return {p: o.offset for p, o in rt.shard.offsets.group(group).get("t", {}).items()}


def op_commit(group: str, partition: int, offset: int):
    return lambda shard, now: Result(records=[commit_record(group, partition, offset)], response=offset)


async def loaded(log: TxnLog) -> ShardRuntime:
    rt = ShardRuntime(0, lambda p: GroupCoordinatorShard(p, CoordinatorConfig()), log)
    rt.txn_log = log
    await rt.reload()
    assert rt.state is ShardState.ACTIVE
    return rt


def client_write(rt: ShardRuntime, log: TxnLog, group: str, partition: int, offset: int) -> None:
    rec = commit_record(group, partition, offset)
    base = log.client_batch([encoded(rec)])
    rt.txn.appended(TxnOffsetWrite(Result(records=[rec]), group, "txn", PID, EPOCH), base)


def test_a_marker_between_kcoord_writes_moves_later_batches_without_reloading():
    async def main():
        log = TxnLog()
        rt = await loaded(log)
        await rt.run(op_commit("g", 0, 1))
        log.marker(True)                        # a client's transaction ends meanwhile
        await rt.run(op_commit("g", 0, 2))      # lands one offset later than predicted
        assert rt.state is ShardState.ACTIVE and rt.reload_attempts == 0
        assert rt.next_offset == log.next
        await rt.run(op_commit("g", 0, 3))
        assert rt.state is ShardState.ACTIVE and committed(rt, "g") == {0: 3}
    asyncio.run(main())


def test_operations_wait_while_a_client_batch_is_appended_and_run_in_order_after():
    async def main():
        log = TxnLog()
        rt = await loaded(log)
        order: list[str] = []
        async with rt.txn.exclusive_write():
            waiting = asyncio.ensure_future(rt.run(lambda shard, now: (order.append("op"), Result(response=1))[1]))
            await asyncio.sleep(0.01)
            assert order == [], "no operation runs during the exclusive append"
            order.append("append")
        assert await asyncio.wait_for(waiting, 5) == 1
        assert order == ["append", "op"]
    asyncio.run(main())


def test_caught_up_applies_markers_and_moves_the_next_offset_to_the_log_end():
    async def main():
        log = TxnLog()
        rt = await loaded(log)
        await rt.run(op_commit("g", 0, 5))
        async with rt.txn.exclusive_write():
            reader, end = await rt.txn.caught_up()
            assert end == log.next
            client_write(rt, log, "g", 0, 10)
        assert rt.shard.offsets.has_open_transactions("g") and committed(rt, "g") == {0: 5}
        log.marker(True)
        await rt.read_markers()
        assert not rt.shard.offsets.has_open_transactions("g") and committed(rt, "g") == {0: 10}
        assert rt.next_offset == log.next
        # kcoord's next write follows the marker: no reload.
        await rt.run(op_commit("g", 1, 1))
        assert rt.state is ShardState.ACTIVE and rt.reload_attempts == 0
    asyncio.run(main())


def test_an_abort_marker_drops_the_pending_offsets():
    async def main():
        log = TxnLog()
        rt = await loaded(log)
        async with rt.txn.exclusive_write():
            await rt.txn.caught_up()
            client_write(rt, log, "g", 0, 10)
        log.marker(False)
        await rt.read_markers()
        assert committed(rt, "g") == {} and not rt.shard.offsets.has_open_transactions("g")
    asyncio.run(main())


def test_a_reload_rebuilds_pending_offsets_and_a_later_marker_applies_them():
    async def main():
        log = TxnLog()
        rt = await loaded(log)
        await rt.run(op_commit("g", 0, 5))
        async with rt.txn.exclusive_write():
            await rt.txn.caught_up()
            client_write(rt, log, "g", 0, 10)
        # A restart (kill -9) before the marker: the new runtime reads the log.
        fresh = await loaded(log)
        assert fresh.shard.offsets.has_open_transactions("g") and committed(fresh, "g") == {0: 5}
        log.marker(True)
        await fresh.read_markers()
        assert committed(fresh, "g") == {0: 10}
        # The same outcome from a load that sees the marker.
        again = await loaded(log)
        assert committed(again, "g") == {0: 10} and not again.shard.offsets.has_open_transactions("g")
    asyncio.run(main())


def test_a_plain_commit_newer_in_the_log_wins_over_the_committed_transaction():
    """Kafka's replayEndTransactionMarker keeps the most recent offset in the log."""
    async def main():
        log = TxnLog()
        rt = await loaded(log)
        async with rt.txn.exclusive_write():
            await rt.txn.caught_up()
            client_write(rt, log, "g", 0, 10)
        await rt.run(op_commit("g", 0, 7))          # after the client's batch in the log
        log.marker(True)
        await rt.read_markers()
        assert committed(rt, "g") == {0: 7}
        again = await loaded(log)
        assert committed(again, "g") == {0: 7}
    asyncio.run(main())


def test_a_foreign_data_batch_in_the_gap_still_reloads():
    """Only markers may make kcoord's batch land late; a record someone else wrote there is
    not in memory, so the shard reloads to take it in (as before issue 16)."""
    async def main():
        log = TxnLog()
        rt = await loaded(log)
        await rt.run(op_commit("g", 0, 1))
        foreign = commit_record("g", 1, 99)
        log._add(build_batch([encoded(foreign)], base_offset=log.next, timestamp_ms=T), 1)
        await rt.run(op_commit("g", 0, 2))

        async def reloaded() -> None:
            while not (rt.reload_attempts >= 1 and rt.state is ShardState.ACTIVE):
                await asyncio.sleep(0.01)
        await asyncio.wait_for(reloaded(), 5)
        assert committed(rt, "g") == {0: 2, 1: 99}
    asyncio.run(main())


def test_markers_are_read_on_their_own_while_transactions_are_open(monkeypatch):
    """Nobody asks (no OffsetFetch, no TxnOffsetCommit): the shard still applies the marker
    within its poll interval, so metrics and expiry follow the log; the poll then stops."""
    from coordinator.runtime import txn_writes
    monkeypatch.setattr(txn_writes, "MARKER_POLL_S", 0.01)

    async def main():
        log = TxnLog()
        rt = await loaded(log)
        async with rt.txn.exclusive_write():
            await rt.txn.caught_up()
            client_write(rt, log, "g", 0, 10)
        log.marker(True)

        async def applied() -> None:
            while committed(rt, "g") != {0: 10}:
                await asyncio.sleep(0.01)
        await asyncio.wait_for(applied(), 5)
        await asyncio.wait_for(rt._marker_poll, 5)     # nothing open: the poll ended
        assert not rt.shard.offsets.open_transactions
    asyncio.run(main())


# ------------------------------------------- the second and third kinds of write
def client_op(group: str, partition: int, offset: int, response: str = "ok"):
    """A transactional operation: the client's records and its producer, as the group's
    TxnOffsetCommit returns them."""
    rec = commit_record(group, partition, offset)
    return lambda shard, now: TxnOffsetWrite(Result(records=[rec], response=response), group, "txn", PID, EPOCH)


def test_a_transactional_write_runs_in_the_runtime_and_a_marker_is_applied_as_its_own_kind():
    async def main():
        log = TxnLog()
        rt = await loaded(log)
        await rt.run(op_commit("g", 0, 5))
        appended: list[tuple[int, int]] = []

        async def append(write, records, base_sequence, timestamp_ms, known_end):
            assert known_end == log.next, "the append is told the log end read before it"
            appended.append((base_sequence, len(records)))
            return Appended(log.client_batch(records), duplicate=False)

        assert await rt.run_transactional(client_op("g", 0, 10), append) == "ok"
        assert appended == [(0, 1)] and rt.next_offset == log.next
        assert rt.shard.offsets.has_open_transactions("g") and committed(rt, "g") == {0: 5}
        markers: list[tuple[int, bool, int]] = []
        complete = rt.complete_transaction
        rt.complete_transaction = lambda *a: (markers.append(a), complete(*a))[1]   # type: ignore[method-assign]
        log.marker(True)
        await rt.read_markers()
        assert markers == [(PID, True, log.next - 1)], "the marker reached the shard through the runtime"
        assert committed(rt, "g") == {0: 10}
        await rt.run(op_commit("g", 1, 1))
        assert rt.state is ShardState.ACTIVE and rt.reload_attempts == 0
    asyncio.run(main())


def test_a_refused_transactional_append_raises_its_error_and_an_unknown_outcome_reloads():
    async def main():
        log = TxnLog()
        rt = await loaded(log)

        async def lost(write, records, base_sequence, timestamp_ms, known_end):
            raise TxnAppendError(ErrorCode.coordinator_not_available, "no answer", resync=True)

        with pytest.raises(ApiError) as refused:
            await rt.run_transactional(client_op("g", 0, 10), lost)
        assert refused.value.code is ErrorCode.coordinator_not_available
        assert rt.state is ShardState.FAILED, "an unknown outcome reloads when the write order is released"

        async def reloaded() -> None:
            while rt.state is not ShardState.ACTIVE:
                await asyncio.sleep(0.01)
        await asyncio.wait_for(reloaded(), 5)

        async def duplicate(write, records, base_sequence, timestamp_ms, known_end):
            return Appended(known_end - 1, duplicate=True)

        await rt.run(op_commit("g", 0, 1))
        with pytest.raises(ApiError) as dup:
            await rt.run_transactional(client_op("g", 0, 11), duplicate)
        assert dup.value.code is ErrorCode.coordinator_load_in_progress
        assert not rt.shard.offsets.has_open_transactions("g"), "a duplicate is not ours: nothing pending"
    asyncio.run(main())


def test_a_transactional_operation_that_writes_nothing_answers_without_the_append():
    async def main():
        rt = await loaded(TxnLog())

        async def never(*a):
            raise AssertionError("nothing to append")

        refused = lambda shard, now: TxnOffsetWrite(Result(response="refused"), "g", "txn", PID, EPOCH)  # noqa: E731
        assert await rt.run_transactional(refused, never) == "refused"
    asyncio.run(main())
