"""`kcoord offsets load`: copy an offsets log into kcoord's state topic, so that
`kcoord serve` answers for those groups as the original cluster would.

Each record goes to the partition kcoord (and Kafka) route its group to:
`partition_for(group_id, partitions)` (Kafka's Utils.abs(hashCode) % n). A production log
may have had another partition count, so records are re-partitioned, keeping each
group's order. An empty state topic first gets the partitioner marker (records/
partitioner_records.py), so `kcoord serve` routes with Kafka's formula there; a topic that
already holds records (--allow-non-empty) is loaded with the placement it says
(coordinator/service/partitioner.py: the legacy one for a topic an earlier kcoord wrote).
The source's own markers are not copied (they describe the source's placement).

Transactions are resolved while copying, because kcoord loads with a read-committed
consumer that sees no producer ids: a transactional offset commit is written, as a
plain record at the place of its COMMIT marker, only if Kafka's replay would
materialise it there (its record offset is later than the partition's current one,
docs/design/kafka-facts.md §2.4); aborted ones are dropped; an offset tombstone drops pending entries.
Transactions still open at the end of the log are reported and not copied.
"""
from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from coordinator.group.hashing import KAFKA, Partitioner
from ops.downgrade import group_of_key
from ops.logsource import LogBatch, OffsetsLogError
from records import (
    LegacyOffsetCommitKey,
    OffsetCommitKey,
    UnknownRecord,
    UnknownRecordTypeError,
    decode_key,
)
from records.batch import ControlMarker
from records.partitioner_records import is_partitioner_marker

log = logging.getLogger("kcoord.ops.load")

Out = tuple[int, bytes, bytes | None, int]     # target partition, key, value, timestamp


@dataclass
class LoadPlan:
    partitions: int
    records: int = 0
    committed_txn_records: int = 0
    dropped_txn_records: int = 0       # aborted, superseded or tombstoned
    open_txn_records: int = 0
    no_group: int = 0                  # unknown-type records without a readable group id
    partitioner: str = KAFKA.name      # the placement the state topic says
    by_partition: dict[int, int] = field(default_factory=lambda: defaultdict(int))

    def as_dict(self) -> dict:
        return {"partitions": self.partitions, "partitioner": self.partitioner, "records": self.records,
                "committed_transactional_records": self.committed_txn_records,
                "dropped_transactional_records": self.dropped_txn_records,
                "open_transaction_records_not_copied": self.open_txn_records,
                "unknown_type_records_without_group": self.no_group,
                "records_by_partition": {str(p): n for p, n in sorted(self.by_partition.items())}}


class _SourcePartition:
    """Transaction bookkeeping of one partition of the source log."""

    def __init__(self) -> None:
        self.last_offset: dict[tuple, int] = {}                  # (g, t, p) -> record offset
        self.pending: dict[int, dict[tuple, tuple]] = defaultdict(dict)   # pid -> (g,t,p) -> rec
        # pid -> group records of its open transaction (kcoord's own transactional writes,
        # several processes): copied at COMMIT, dropped at ABORT, never copied while open.
        self.held: dict[int, list[tuple]] = defaultdict(list)


def plan(batches: Iterable[LogBatch], partitions: int, result: LoadPlan, partitioner: Partitioner = KAFKA):
    """Yield (target partition, key, value, timestamp) in the order to write them."""
    place = partitioner.partition_for
    sources: dict[int, _SourcePartition] = defaultdict(_SourcePartition)
    for lb in batches:
        src, b = sources[lb.partition], lb.batch
        if b.is_control_batch:
            for rec in src.held.pop(b.producer_id, ()):
                if b.control_type == ControlMarker.COMMIT:
                    result.committed_txn_records += 1
                    yield _count(result, rec)
                else:
                    result.dropped_txn_records += 1
            pending = src.pending.pop(b.producer_id, {})
            for tp, (target, key, value, ts, offset) in pending.items():
                if b.control_type == ControlMarker.COMMIT and src.last_offset.get(tp, -1) < offset:
                    src.last_offset[tp] = offset
                    result.committed_txn_records += 1
                    yield _count(result, (target, key, value, ts))
                else:
                    result.dropped_txn_records += 1
            continue
        for r in b.records:
            key, value = bytes(r.key), None if r.value is None else bytes(r.value)
            if is_partitioner_marker(key):
                continue
            try:
                k = decode_key(key)
                group = getattr(k, "group", None) or getattr(k, "group_id", None)
            except UnknownRecordTypeError:
                k, group = None, group_of_key(UnknownRecord(int.from_bytes(key[:2], "big"), key, value))
            except ValueError as e:
                raise OffsetsLogError(lb.source, b.position, f"record key does not decode: {e}",
                                      r.offset) from None
            if group is None:
                result.no_group += 1
                target = lb.partition % partitions
            else:
                target = place(group, partitions)
            if isinstance(k, (OffsetCommitKey, LegacyOffsetCommitKey)):
                tp = (k.group, k.topic, k.partition)
                if b.is_transactional:
                    src.pending[b.producer_id][tp] = (target, key, value, r.timestamp, r.offset)
                    continue
                if value is None:
                    src.last_offset.pop(tp, None)
                    for entries in src.pending.values():
                        if entries.pop(tp, None) is not None:
                            result.dropped_txn_records += 1
                else:
                    src.last_offset[tp] = r.offset
            elif b.is_transactional:
                src.held[b.producer_id].append((target, key, value, r.timestamp))
                continue
            yield _count(result, (target, key, value, r.timestamp))
    result.open_txn_records = (sum(len(e) for s in sources.values() for e in s.pending.values())
                               + sum(len(e) for s in sources.values() for e in s.held.values()))


def _count(result: LoadPlan, item: Out) -> Out:
    result.records += 1
    result.by_partition[item[0]] += 1
    return item


async def _prepare(bootstrap: str, topic: str, partitions: int) -> None:
    from aiokafka.client import AIOKafkaClient

    from coordinator.runtime.state_topic import StateTopic
    from ops.live import Retry

    await StateTopic(bootstrap, topic, partitions).ensure_topic()
    client = AIOKafkaClient(bootstrap_servers=bootstrap, client_id="kcoord-offsets-load")
    await client.bootstrap()
    try:
        md = await client.fetch_all_metadata()
        have = md.partitions_for_topic(topic) or set()
        retry = Retry(30.0, sleep=lambda _: None)
        while not have:      # just created: the broker's metadata names the topic a moment later
            try:
                await asyncio.sleep(retry.wait(f"the state topic {topic} in the metadata"))
            except TimeoutError:
                break
            md = await client.fetch_all_metadata()
            have = md.partitions_for_topic(topic) or set()
        if len(have) != partitions:
            raise OffsetsLogError(topic, None, f"the state topic has {len(have)} partitions; "
                                               f"kcoord serve --state-partitions {partitions} needs "
                                               f"{partitions}")
    finally:
        await client.close()


def _check_empty(bootstrap: str, topic: str) -> None:
    from ops.live import TopicReader
    from ops.logsource import Problems

    if next(iter(TopicReader(bootstrap, topic).read(Problems())), None) is not None:
        raise OffsetsLogError(topic, None, "the state topic already holds records; loading would "
                                           "merge two logs (use --allow-non-empty to do it anyway)")


def write(bootstrap: str, topic: str, items: Iterable[Out], timeout: float = 60.0) -> None:
    """Produce in order. Not idempotent on purpose: Kafka's loader treats any batch with a
    producer id as transactional (its offsets would stay pending), and kcoord's own writes
    carry none either. One request in flight per connection keeps each partition's order."""
    from confluent_kafka import Producer

    failures: list[str] = []

    def delivered(err, msg) -> None:
        if err is not None:
            failures.append(f"partition {msg.partition()}: {err}")

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False,
                         "acks": "all", "max.in.flight.requests.per.connection": 1,
                         "linger.ms": 20, "batch.size": 1 << 20,
                         "client.id": "kcoord-offsets-load"})
    for n, (p, key, value, ts) in enumerate(items):
        while True:
            try:
                producer.produce(topic, key=key, value=value, partition=p, timestamp=ts,
                                 on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        if n % 10_000 == 0:
            producer.poll(0)
        if failures:
            break
    remaining = producer.flush(timeout)
    if failures or remaining:
        raise OffsetsLogError(topic, None, f"the load failed: {remaining} records undelivered; "
                                           f"{'; '.join(failures[:5])}")


def load(batches: Iterable[LogBatch], bootstrap: str, topic: str, partitions: int, *,
         allow_non_empty: bool = False) -> LoadPlan:
    asyncio.run(_prepare(bootstrap, topic, partitions))
    if not allow_non_empty:
        _check_empty(bootstrap, topic)
    from coordinator.service.partitioner import decide

    # Marks an empty topic (before any record lands), else reads what the topic says.
    partitioner = asyncio.run(decide(bootstrap, topic, partitions, client_id="kcoord-offsets-load"))
    result = LoadPlan(partitions, partitioner=partitioner.name)
    write(bootstrap, topic, plan(batches, partitions, result, partitioner))
    if result.open_txn_records:
        log.warning("%d transactional offset commits belong to transactions the log leaves open; "
                    "they were not copied", result.open_txn_records)
    return result
