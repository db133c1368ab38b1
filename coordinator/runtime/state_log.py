"""The state-topic port: what the runtime needs of the log that backs its shards.

`ShardRuntime` and `GroupCoordinatorService` depend on this Protocol, never on a Kafka client.
`state_topic.StateTopic` implements it on the upstream cluster; tests use an in-memory log
(tests/unit/runtime/fakes.py). A replacement implements the same four operations:

- `append(partition, records, timestamp_ms)`, awaited -> base offset: ONE batch,
  acknowledged by the log before the await returns (a response is released only after its
  records are durable). A coroutine or a future (state_topic.py returns its writer's).
  Raises on failure; the runtime then answers NOT_COORDINATOR and reloads the shard.
- `load(partitions, sink, on_loaded, ...)`: replay each partition from its start to its
  end, calling `sink(partition, offset, key, value)` for every record and
  `on_loaded(partition, log_end_offset)` when one is done. A batch that cannot be read
  (CRC, compression) stops only its partition (`on_corrupt(partition, CorruptBatchError)`).
  Only committed data is replayed: a transactional writer's aborted records and its control
  markers never reach `sink` (Kafka's coordinator loads `__consumer_offsets` read_committed).
- `tail(partition, from_offset, sink)`: follow one partition from an offset, handing each
  record appended after it to `sink` as it arrives, until cancelled (a standby keeping a
  shard warm).
- `topic` and `partitions`: the log's name (for messages and the `offsets show` hint) and
  its partition count (one shard per partition).
- optional `offsets_per_append` (default 0): offsets an append takes beyond its records. A
  transactional writer (fenced_state_log.FencedStateLog) commits each batch with a COMMIT
  marker, one offset more, and says 1 here so the runtime predicts the next base offset.
- `append` and `load` may raise `ShardFenced`: another process owns the shard now; the
  runtime fails the waiters with NOT_COORDINATOR and unloads the shard instead of reloading.
- optional, for a log with owners (several processes): `takeover`, the `Fence` step a
  shard's load runs before replaying its partition, and `load(..., fence=)`, which runs it
  per partition first ("fence, then load"; runtime/loader.py).

A transactional writer (exactly-once offsets) replaces `append` with writes inside
a producer transaction; a marker-aware loader replaces `load`. Nothing else changes.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

# (partition, offset, key bytes, value bytes or None)
RecordSink = Callable[[int, int, bytes, bytes | None], None]
# A load's takeover step for one partition: make this process its only writer (raises ShardFenced).
Fence = Callable[[int], Awaitable[Any]]


class CorruptBatchError(Exception):
    """A record batch of the state topic that cannot be read; ``offset`` is the first offset
    of the partition not replayed (the bad batch starts there or after it)."""

    def __init__(self, topic: str, partition: int, offset: int, error: BaseException) -> None:
        super().__init__(f"the record batch of state topic {topic} partition {partition} at or after offset "
                         f"{offset} cannot be read: {type(error).__name__}: {error}")
        self.topic, self.partition, self.offset, self.error = topic, partition, offset, error

# The state topic's configuration, for creation and for recreation by the cluster view: what
# Kafka gives __consumer_offsets (GroupCoordinatorService.groupMetadataTopicConfigs). Compacted,
# the producer's compression kept, and 100 MiB segments (offsets.topic.segment.bytes) instead of
# the cluster's 1 GiB: only closed segments are cleaned, so smaller segments let the cleaner
# reclaim superseded commits sooner and keep a reload short. Segment time and the dirty ratio
# stay the cluster's (7 days, 0.5), as they do for __consumer_offsets.
OFFSETS_TOPIC_SEGMENT_BYTES = 100 * 1024 * 1024
TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "producer",
                 "segment.bytes": str(OFFSETS_TOPIC_SEGMENT_BYTES)}


class StateTopicUnavailable(Exception):
    """The state log is not to be written or read now: missing, or suspended while the
    cluster view cannot vouch for it (``StateTopic.suspend``)."""


class TopicAuthorizationFailed(Exception):
    """The upstream refuses kcoord's principal Write on the state topic
    (TOPIC_AUTHORIZATION_FAILED): an operator's grant is missing, not a passing failure."""


class ShardFenced(Exception):
    """Another process took this shard: a newer producer epoch of the shard's transactional
    id fenced this one (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, ...), or the shard is no
    longer assigned here. A write failure like any other for the waiters (NOT_COORDINATOR),
    but the runtime unloads the shard instead of reloading it."""

    def __init__(self, partition: int, reason: str) -> None:
        super().__init__(f"state partition {partition} fenced: {reason}")
        self.partition = partition
        self.reason = reason


class StateLog(Protocol):
    @property
    def topic(self) -> str: ...

    @property
    def partitions(self) -> int: ...

    def append(self, partition: int, records: Iterable[tuple[bytes, bytes | None]],
               timestamp_ms: int) -> Awaitable[int]: ...

    async def load(self, partitions: Iterable[int], sink: RecordSink,
                   on_loaded: Callable[[int, int], None],
                   progress: Callable[[int, int], None] | None = None,
                   on_corrupt: Callable[[int, CorruptBatchError], None] | None = None,
                   abandoned: Callable[[int], bool] | None = None) -> None: ...

    async def tail(self, partition: int, from_offset: int, sink: RecordSink) -> None: ...
