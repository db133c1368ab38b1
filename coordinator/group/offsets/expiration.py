"""Offset retention and group expiry (Kafka: `cleanupGroupMetadata`, every
offsets.retention.check.interval.ms), and offsets of deleted topics (`onTopicsDeleted`).

An offset expires when its group no longer consumes the topic and retention has passed
since its base time: the commit time, or, for an empty classic group, the time it
became empty (`OffsetExpirationConditionImpl`); a v1 record's expire timestamp wins.
A group whose offsets all expired and that may expire is tombstoned.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from .. import record_helpers as rh
from ..group_types import BaseTime, group_type
from ..result import Result, ScheduleTimer
from ..timers import EXPIRE_KEY as EXPIRE_TIMER

if TYPE_CHECKING:
    from ..context import OffsetsView

def _expiration_base(group) -> BaseTime | None:
    """`offsetExpirationCondition`: None means offsets of this group never expire now."""
    return group_type(group).offset_expiration_base(group)


def _should_expire(group) -> bool:
    return group_type(group).metadata_expires(group)


def cleanup(shard: OffsetsView, now_ms: int) -> Result:
    retention = shard.config.offsets_retention_ms
    records: list = []
    for group_id, group in list(shard.groups.items()):
        base = _expiration_base(group)
        offsets = shard.offsets.group(group_id)
        all_expired = True
        if base is None:
            all_expired = not offsets
        else:
            subscribed = group_type(group).subscribed_topics(group)
            for topic, partitions in offsets.items():
                for partition, o in partitions.items():
                    expired = topic not in subscribed and not shard.offsets.has_pending(group_id, topic, partition) \
                        and (now_ms >= o.expire_timestamp if o.expire_timestamp != -1
                             else now_ms - base(o) >= retention)
                    if expired:
                        records.append(rh.offset_tombstone(group_id, topic, partition))
                    else:
                        all_expired = False
        # Kafka: "We don't want to remove the group if there are ongoing transactions."
        if all_expired and _should_expire(group) and not shard.offsets.has_open_transactions(group_id):
            shard.log.info("[GroupId %s] Group has no committed offsets left and is empty; expiring it.", group_id)
            records.extend(group_type(group).tombstones(group))
    return Result(records=records, timers=[ScheduleTimer(EXPIRE_TIMER,
                                                         now_ms + shard.config.offsets_retention_check_interval_ms)])


def topics_deleted(shard: OffsetsView, topics: Iterable[str]) -> Result:
    """Offsets of topics deleted upstream are tombstoned for every group."""
    gone = set(topics)
    # Kafka's onPartitionsDeleted: committed offsets, and pending transactional ones.
    records = [rh.offset_tombstone(group_id, topic, p)
               for group_id, topic, p in shard.offsets.partitions_of_topics(gone)]
    return Result(records=records)
