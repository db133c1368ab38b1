"""Which formula places groups on the state topic's partitions: the state topic's own word,
read once per process before any shard loads (docs/design/kafka-facts.md "Group placement").

Rules of this module:
- Kafka places a group on `Utils.abs(hashCode) % partitions` (hashing.KAFKA). kcoord before
  this module used `(hashCode & 0x7fffffff) % partitions` (hashing.LEGACY), which differs
  for every negative hash. A topic keeps the formula it was written with: switching a
  written topic would make half its groups look empty (acknowledged commits lost, from the
  client's view).
- The topic says which with its partitioner marker (records/partitioner_records.py, type
  1300): a fresh topic gets one at offset 0 of partition 0 before anything else is written.
  `decide`: every partition empty (ListOffsets LATEST 0; Tansu's wrong LATEST is still 0
  only for an empty partition) -> write a marker (acks=all). Then read partition 0 from its
  log start: the first record that is neither a control batch's nor a fence record
  (epoch_producers, written by every version before any group record of its shard) decides.
  A marker -> its formula (one this version does not know: refuse to start); a
  group record, or nothing -> LEGACY, with one WARNING.
- Why the first record: a marker is only written on an all-empty topic, and a process that
  writes anything else has decided first, i.e. read a non-empty partition 0 or written its
  marker; so on a topic first written by this version the record at its log start is a
  marker. Two processes racing both write one; the lowest offset decides for both. Each
  marker has a key of its own, so compaction never removes it. Deleting records of
  partition 0 (DeleteRecords, cleanup.policy delete) would lose it: kcoord never does.
- A reload after the topic was replaced (`before_reload`, the lifecycle's hook): a process
  routing with Kafka's formula marks the new topic if it is empty, before any shard of it
  loads, so the next start reads the same placement; a legacy process never marks (an
  unmarked topic stays legacy: the same placement again). A topic that now says another
  placement than the process routes with is an ERROR: a restart follows the topic.
- Bounded: the scan of partition 0 stops after `_SCAN_FETCHES` answers (a legacy topic
  holding fence records only would else be read to its end): then LEGACY.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i16, i32, i64

from records.batch import build_batch, iter_batches
from records.partitioner_records import is_partitioner_marker, marker_partitioner, marker_record

from ..group.hashing import KAFKA, LEGACY, PARTITIONERS, Partitioner
from ..runtime.epoch_producers import is_fence_record
from ..runtime.fenced_links import (
    LIST_OFFSETS,
    PRODUCE,
    REFRESH,
    StateLogError,
    UpstreamLinks,
    make_request,
    request_module,
)
from ..upstream.client import opener, parse_bootstrap

if TYPE_CHECKING:
    from ..security.upstream import UpstreamSecurity

log = logging.getLogger("kcoord.service")

_SCAN_FETCHES = 8
_ATTEMPTS = 20

__all__ = ["KAFKA", "LEGACY", "Partitioner", "before_reload", "decide", "legacy_warning", "topic_partitioner"]


def legacy_warning(topic: str) -> str:
    return (f"state topic {topic} has no partitioner marker: an earlier kcoord wrote it, placing groups with "
            "(hashCode & 0x7fffffff) % partitions, not Kafka's abs(hashCode) % partitions: kcoord keeps "
            "that placement for this topic (about half the groups sit on another partition than Kafka's "
            "coordinator would read them from). To move to Kafka's placement, copy it into a new state "
            "topic: `kcoord offsets load` re-partitions with Kafka's formula and marks the new topic")


async def decide(bootstrap: str | Sequence[tuple[str, int]], topic: str, partitions: int, *,
                 security: UpstreamSecurity | None = None, client_id: str = "kcoord-partitioner",
                 mark_fresh: bool = True) -> Partitioner:
    """The topic's partitioner (module rules); a fresh topic gets its marker first
    (``mark_fresh``). One WARNING for a legacy topic."""
    addresses = parse_bootstrap(bootstrap) if isinstance(bootstrap, str) else list(bootstrap)
    links = UpstreamLinks(addresses, topic, opener(security, client_id), request_timeout_s=30.0,
                          fetch_max_bytes=1024 * 1024)
    try:
        partitioner, fresh = await topic_partitioner(links, partitions, mark_fresh=mark_fresh)
    finally:
        links.close()
    if partitioner is LEGACY:
        log.warning("%s", legacy_warning(topic))
    else:
        log.info("state topic %s places groups with Kafka's formula%s", topic,
                 " (a new topic: marked so)" if fresh else "")
    return partitioner


def before_reload(bootstrap: str, topic: str, partitions: int, partitioner: Partitioner, *,
                  security: UpstreamSecurity | None = None) -> Callable[[], Awaitable[None]]:
    """The lifecycle's step before a reload of every shard (module rules)."""
    async def check() -> None:
        if partitioner is not KAFKA:
            return
        found = await decide(bootstrap, topic, partitions, security=security)
        if found is not partitioner:
            log.error("state topic %s now places groups with the %s formula, but this process routes them with "
                      "the %s one: restart kcoord so that it follows the topic", topic, found.name, partitioner.name)
    return check


async def topic_partitioner(links: UpstreamLinks, partitions: int, *,
                            mark_fresh: bool = True) -> tuple[Partitioner, bool]:
    """(the partitioner, whether this call found the topic empty and marked it)."""
    await links.refresh_metadata()
    fresh = False
    if mark_fresh and not any(await log_ends(links, partitions)):
        await write_marker(links, KAFKA)
        fresh = True
    named = await first_marker(links)
    if named is None:
        return LEGACY, fresh
    if named not in PARTITIONERS:
        # A later kcoord's placement: guessing would serve its groups from the wrong shards.
        raise StateLogError(f"state topic {links.topic} places groups with partitioner {named!r}, which this "
                            f"kcoord does not know (it knows {', '.join(sorted(PARTITIONERS))}): run the "
                            "kcoord version that wrote it")
    return PARTITIONERS[named], fresh


async def log_ends(links: UpstreamLinks, partitions: int) -> list[int]:
    """ListOffsets LATEST of every partition, one request per leader."""
    m = request_module(LIST_OFFSETS)
    for _ in range(_ATTEMPTS):
        by_leader: dict[tuple[str, int], list[int]] = defaultdict(list)
        for p in range(partitions):
            by_leader[await links.leader(p)].append(p)
        ends: dict[int, int] = {}
        retry = False
        for address, parts in by_leader.items():
            response = await links.call(address, make_request(
                LIST_OFFSETS, replica_id=BrokerId(-1), isolation_level=i8(0), topics=(m.ListOffsetsTopic(
                    name=TopicName(links.topic), partitions=tuple(m.ListOffsetsPartition(
                        partition_index=i32(p), current_leader_epoch=i32(-1), timestamp=i64(-1))
                        for p in parts)),)))
            for t in response.topics:
                for part in t.partitions:
                    if part.error_code in REFRESH:
                        links.forget_leader(int(part.partition_index))
                        retry = True
                    elif part.error_code != ErrorCode.none:
                        raise StateLogError(f"ListOffsets {links.topic}-{part.partition_index}: "
                                            f"{part.error_code.name}")
                    else:
                        ends[int(part.partition_index)] = int(part.offset)
        if not retry and len(ends) == partitions:
            return [ends[p] for p in range(partitions)]
        await asyncio.sleep(0.1)
        await links.refresh_metadata()
    raise StateLogError(f"ListOffsets {links.topic}: no usable answer for every partition")


async def write_marker(links: UpstreamLinks, partitioner: Partitioner) -> int:
    """Append a marker to partition 0 (a plain batch, acks=all); its offset."""
    m = request_module(PRODUCE)
    batch = build_batch([marker_record(partitioner.name)], timestamp_ms=int(time.time() * 1000))
    request = make_request(PRODUCE, transactional_id=None, acks=i16(-1), timeout=timedelta(seconds=30),
                           topic_data=(m.TopicProduceData(name=TopicName(links.topic), partition_data=(
                               m.PartitionProduceData(index=i32(0), records=batch),)),))
    for _ in range(_ATTEMPTS):
        response = await links.call_leader(0, request)
        answer = response.responses[0].partition_responses[0]
        if answer.error_code == ErrorCode.none:
            return int(answer.base_offset)
        if answer.error_code not in REFRESH:
            raise StateLogError(f"writing the partitioner marker to {links.topic}-0: {answer.error_code.name}")
        await asyncio.sleep(0.1)
    raise StateLogError(f"writing the partitioner marker to {links.topic}-0: no leader accepted it")


async def first_marker(links: UpstreamLinks) -> str | None:
    """The partitioner named by partition 0's first record that is not a control batch's or a
    fence record; None when that record is anything else or there is none."""
    offset = await links.log_start(0)
    for _ in range(_SCAN_FETCHES):
        part = await links.fetch(0, offset, 100)
        if part is None:
            continue
        if part.error_code in REFRESH:
            links.forget_leader(0)
            continue
        if part.error_code != ErrorCode.none:
            raise StateLogError(f"Fetch {links.topic}-0 at {offset}: {part.error_code.name}")
        if offset >= int(part.high_watermark):
            return None
        data = part.records or b""
        for batch in iter_batches(data):
            offset = batch.next_offset
            if batch.is_control_batch:
                continue
            for record in batch.records:
                key = None if record.key is None else bytes(record.key)
                if is_fence_record(key):
                    continue
                if is_partitioner_marker(key):
                    return marker_partitioner(key, None if record.value is None else bytes(record.value))
                return None
    return None
