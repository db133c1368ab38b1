"""The group coordinator's shard runtime: the generic runtime bound to `GroupCoordinatorShard`.

Rules:
- This module is the only part of `coordinator/runtime/` that knows group shards and their
  record types: it supplies the runtime's `ShardProtocol` (shard_protocol.py) for them —
  how to build a shard, replay a log into it (`BulkReplay`), serialize its records
  (`records.encode_records`), which errors mean bad bytes, how a client's
  transactional write replays (`replay_pending`), and the rebalance counts a write adds.
- Everything else lives in the runtime's parts, each stating its own rules:
  coordinator_runtime.py (state machine, the three kinds of write, fail/fence/unload),
  writer.py (batches, offset prediction, the writes in flight), partition_writer.py (the
  process's writer every shard's batches go to), loader.py (fence, load, reload with
  backoff, skip list), timer_table.py (timers), parked.py (parked joins and syncs),
  txn_writes.py and transactional_write.py (clients' transactional writes and the markers
  tail), shard_state.py (the states).
- The names importers used from here before the cut are re-exported unchanged.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from records import (
    ConsumerGroupMetadataKey,
    GroupMetadataKey,
    OffsetCommitKey,
    RecordDecodeError,
    UnknownRecordVersionError,
    encode_records,
)
from records.codec import EncodedRecords

from .. import metrics
from ..group.bulk_replay import BulkReplay
from ..group.modern.consumer.group import IllegalStateError
from ..group.offsets.txn_commit import TxnOffsetWrite, replay_pending
from ..group.result import Result
from ..group.shard import GroupCoordinatorShard
from .coordinator_runtime import CoordinatorRuntime, release_when_durable, wall_ms
from .loader import RELOAD_BACKOFF_MAX_S, RELOAD_BACKOFF_MIN_S, RELOAD_LOG_INTERVAL_S
from .partition_writer import PartitionWriter
from .shard_protocol import BadRecordHook, ShardProtocol
from .shard_state import ShardState
from .state_log import StateLog
from .txn_writes import MARKER_POLL_S
from .writer import WRITE_ERROR_LOG_INTERVAL_S, Batch

__all__ = [
    "MARKER_POLL_S", "RELOAD_BACKOFF_MAX_S", "RELOAD_BACKOFF_MIN_S", "RELOAD_LOG_INTERVAL_S",
    "WRITE_ERROR_LOG_INTERVAL_S", "Batch", "Operation", "ShardRuntime", "ShardState", "group_shards",
    "release_when_durable", "serialize_records", "wall_ms",
]

Operation = Callable[[GroupCoordinatorShard, int], Result]

_CONSUMER_REBALANCES = metrics.REBALANCES.labels(type="consumer")
_CLASSIC_REBALANCES = metrics.REBALANCES.labels(type="classic")
_OFFSET_COMMITS = metrics.OFFSET_COMMITS.labels()


def _count_records(records: Sequence[Any]) -> None:
    """What Kafka's coordinator metrics count in the records written: a new group epoch
    (ConsumerGroupMetadata) or a classic generation with members (GroupMetadata) is a
    rebalance; an offset commit record is a committed offset (offset-commit-count, counted
    once per batch). Only results with records get here, so a steady heartbeat pays nothing."""
    if records.__class__ is EncodedRecords:
        # A durable OffsetCommit's records (records.codec.EncodedRecords): offset commits with
        # a value each, counted without a look at each.
        # inc()'s one line in place (metrics_unlocked.CounterChild): a call per commit fewer.
        _OFFSET_COMMITS.value += len(records)
        return
    commits = 0
    for r in records:
        key = r.key.__class__
        if key is OffsetCommitKey:
            # A test and an int's increment, not `commits += <bool>`: an int plus a bool takes
            # the interpreter's generic addition, an int plus an int its specialised one.
            if r.value is not None:
                commits += 1
        elif key is ConsumerGroupMetadataKey and r.value is not None:
            _CONSUMER_REBALANCES.inc()
        elif key is GroupMetadataKey and r.value is not None and r.value.members:
            _CLASSIC_REBALANCES.inc()
    if commits:
        _OFFSET_COMMITS.inc(commits)


# The codec's own loop, not a function calling it: the runtime serializes every fresh result
# through this, and a wrapper's frame was a call per operation for nothing.
serialize_records: Callable[[Sequence[Any]], list[tuple[bytes, bytes | None]]] = encode_records


def _new_load(shard: GroupCoordinatorShard, topic: str, partition: int, on_error: BadRecordHook) -> BulkReplay:
    return BulkReplay(shard, topic=topic, partition=partition, on_error=on_error)


def _replay_transactional(shard: GroupCoordinatorShard, write: TxnOffsetWrite, base_offset: int) -> int:
    replay_pending(shard, write, base_offset)
    _count_records(write.result.records)
    return len(write.result.records)


def group_shards(make_shard: Callable[[int], GroupCoordinatorShard]) -> ShardProtocol:
    """The runtime's view of group coordinator shards built by `make_shard`."""
    return ShardProtocol(
        make_shard=make_shard,
        new_load=_new_load,
        serialize=serialize_records,
        records_written=_count_records,
        decode_errors=(RecordDecodeError, UnknownRecordVersionError, IllegalStateError),
        replay_transactional=_replay_transactional,
        open_transactions=lambda shard: bool(shard.offsets.open_transactions),
        describe=lambda shard: f"{len(shard.groups)} groups",
    )


class ShardRuntime(CoordinatorRuntime):
    """One group coordinator shard's runtime (the service builds one per state partition)."""

    def __init__(self, partition: int, make_shard: Callable[[int], GroupCoordinatorShard],
                 state_topic: StateLog, *, write_timeout_ms: int = 5000,
                 max_batch_bytes: int = 4 * 1024 * 1024, clock: Callable[[], int] = wall_ms,
                 skip_offsets: frozenset[int] = frozenset(),
                 sleep: Callable[[float], Any] = asyncio.sleep,
                 partition_writer: PartitionWriter | None = None) -> None:
        super().__init__(partition, group_shards(make_shard), state_topic, write_timeout_ms=write_timeout_ms,
                         max_batch_bytes=max_batch_bytes, clock=clock, skip_offsets=skip_offsets, sleep=sleep,
                         partition_writer=partition_writer)
