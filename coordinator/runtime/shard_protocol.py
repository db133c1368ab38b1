"""What the runtime needs of a shard type (Kafka: `CoordinatorShard` + `CoordinatorShardBuilder`).

Rules:
- The runtime (coordinator_runtime.py and its parts) is generic: it knows no group, no
  record type and no record codec. Everything it needs of a kind of shard is listed here
  and supplied by the shard type's binding (the group coordinator's is shard_runtime.py).
- `CoordinatorShard` is the shard object itself: it answers operations with a `Result`,
  replays a fresh result at its offset, answers due timers and is told when its load ended.
- `ShardProtocol` holds the type-level parts: how to build an empty shard, how to replay a
  log into it (the bulk load), how to serialize a result's records, what a record whose
  bytes are bad raises, and the metrics a write of records counts.
- Operations and timers return `Result` (coordinator/group/result.py), the one output shape.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..group.result import Result


class CoordinatorShard(Protocol):
    """One shard's in-memory state machine (replayed from its partition of the state topic)."""

    unknown_record_types: Mapping[Any, int]

    def apply(self, result: Result, offset: int) -> None:
        """Replay a fresh result's records as if read at `offset` (the next operation sees them)."""
        ...

    def on_timer(self, key: tuple, payload: Any, now_ms: int) -> Result: ...

    def on_loaded(self, now_ms: int) -> list:
        """The load ended: the timers the loaded state needs (sessions, rebalance deadlines)."""
        ...

    def replay_end_transaction(self, producer_id: int, committed: bool, offset: int) -> None:
        """A client's transaction marker read from the partition (COMMIT or ABORT)."""
        ...


class BulkLoad(Protocol):
    """Replays a partition's records into a fresh shard (today `group.bulk_replay.BulkReplay`)."""

    def add(self, key: bytes, value: bytes | None, offset: int, producer_id: int = -1) -> None: ...

    def end_transaction(self, producer_id: int, committed: bool) -> None: ...

    def flush(self) -> None: ...


# on_error(error, source, position, offset): raise to fail the load, return to skip the record.
BadRecordHook = Callable[[Exception, object, object, int], None]


@dataclass(frozen=True, slots=True)
class ShardProtocol:
    make_shard: Callable[[int], Any]
    # (shard, topic, partition, on_error) -> the bulk load replaying into that shard
    new_load: Callable[[Any, str, int, BadRecordHook], BulkLoad]
    # a result's records -> [(key bytes, value bytes or None)], in order
    serialize: Callable[[Sequence[Any]], list[tuple[bytes, bytes | None]]]
    # counted when a fresh result with records is replayed (e.g. rebalances)
    records_written: Callable[[Sequence[Any]], None]
    # errors that mean "these bytes are bad" (logged without a traceback at a failed load)
    decode_errors: tuple[type[BaseException], ...]
    # (shard, client's transactional write, base offset) -> records appended; replays them pending
    replay_transactional: Callable[[Any, Any, int], int]
    # shard -> whether clients' transactions are open (the markers tail polls while so)
    open_transactions: Callable[[Any], bool]
    # shard -> what a load line says about it ("12 groups")
    describe: Callable[[Any], str]
