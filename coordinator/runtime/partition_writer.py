"""The process's writer: the one door every shard's batches go through to the state log
(Kafka: `PartitionWriter`, which `CoordinatorRuntime` appends each partition's batches with;
docs/design/kafka-facts.md §1.3).

Rules:
- One writer per process serves every shard: a shard's `ShardWriter` (writer.py) hands it
  each closed batch with `append` and learns where the batch landed.
- `max_inflight` is how many batches of one partition the writer accepts before the first
  is acknowledged. The shard writer keeps at most that many in flight, each at its
  predicted offset; the writer must acknowledge one partition's appends in the order it
  received them (an idempotent producer's sequence numbers give that order upstream).
- A write fails by raising, as `StateLog.append` does (state_log.py); `ShardFenced` means
  another process owns the shard.
- A writer may also offer `append_then(partition, records, timestamp_ms, then)`: the same
  append, its outcome handed to ``then(base_offset, None)`` or ``then(-1, error)`` exactly
  once, never from inside the call (a refusal is handed over on a later loop turn, as an
  awaited failure is), and no awaitable returned. The shard's writer uses it where it is
  offered (None: not offered): the lean writer calls it from the callback that reads the
  broker's answer, so no future and no loop turn lie between the answer and the batch.
- A writer may also offer `flush_before_send(partition, flush)`: it calls `flush` (the shard
  writer's, which appends its batch) in the turn it next sends a request that can carry that
  partition's batch, and the shard's writer schedules its flush there instead of on a loop
  turn of its own: the batch stays open, taking operations, while the writer could not send
  it anyway (lean_writer.py).
- `LogWriter` is today's writer: each batch is one `StateLog.append`, one batch in flight per
  shard. Where a log coalesces several shards' batches into one request (lean_writer.py:
  one ProduceRequest per broker), that happens below this port.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from .state_log import StateLog

# An append's outcome, handed over once: (base offset, None), or (-1, the failure).
Written = Callable[[int, "BaseException | None"], None]


class PartitionWriter(Protocol):
    @property
    def max_inflight(self) -> int: ...

    def append(self, partition: int, records: Sequence[tuple[bytes, bytes | None]],
               timestamp_ms: int) -> Awaitable[int]:
        """Append `records` as one batch to `partition`: awaited, its base offset once
        acknowledged (a coroutine, or a future the writer completes)."""
        ...


class LogWriter:
    """Each batch is one append of the state log, one batch in flight per shard."""

    max_inflight = 1
    append: Callable[[int, Sequence[tuple[bytes, bytes | None]], int], Awaitable[int]]
    append_then: Callable[[int, Sequence[tuple[bytes, bytes | None]], int, Written], None] | None
    flush_before_send: Callable[[int, Callable[[], None]], None] | None

    def __init__(self, log: StateLog) -> None:
        self.log = log
        # The log's own append, not a coroutine awaiting it: one coroutine fewer to create
        # and to resume per batch (end to end, a batch often holds one commit).
        self.append = log.append
        # The log's append_then where it has one (the state topic's, through the lease gate).
        self.append_then = getattr(log, "append_then", None)
        # The log's flush_before_send where it has one (the state topic's: it sends nothing).
        self.flush_before_send = getattr(log, "flush_before_send", None)
