"""aiokafka fetching with KIP-848 group membership: `Kip848Consumer`.

aiokafka does not speak KIP-848. Here its `AIOKafkaConsumer` is used without a group id,
with partitions `assign()`ed by a `ConsumerMember` (members/consumer.py) that runs the
KIP-848 heartbeat through `MemberDriver`.

Rules:
- The library owns the offsets. aiokafka would commit an `assign()`ed consumer's offsets
  as a simple group (generation -1, member ""), which a non-empty consumer group refuses.
  So commits are OffsetCommit v9 carrying the member id and member epoch (KIP-848;
  KIP-1251 checks the epoch per partition), and the start offsets are OffsetFetch v9
  with the same.
- Revoke: pause the partitions (no record of them is handed out any more), commit their
  positions, and only then drop them from the assignment and let the member acknowledge.
  Lost partitions (fencing) are dropped without a commit: they may be someone else's.
- A new partition starts at its committed offset, or at `auto_offset_reset` if none.
- Records are handed out only for partitions the member owns at that moment.
- The application hears of changes through a `RebalanceListener` (Kafka's
  ConsumerRebalanceListener, in aiokafka's TopicPartition terms), awaited before the
  member reports to the coordinator: `on_partitions_assigned` before any record of the
  new partitions is handed out; `on_partitions_revoked` once none is handed out any more
  and their positions are committed (Kafka's auto-commit also commits before its
  onPartitionsRevoked); `on_partitions_lost` (fencing) without a commit.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.offset_commit.v9 import request as oc
from kio.schema.offset_fetch.v9 import request as of
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i64

from .assignor import PartitionAssignor, Partitions
from .consumer import ConsumerMember
from .driver import Listener, MemberDriver

log = logging.getLogger("members.aiokafka")


class CommitFailed(Exception):
    pass


class RebalanceListener:
    """The application's rebalance callbacks; override what you need."""

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None: ...

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None: ...

    async def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        await self.on_partitions_revoked(lost)      # Kafka's default for onPartitionsLost


class Kip848Consumer:
    def __init__(self, bootstrap: str, group_id: str, topics: Sequence[str], *,
                 assignors: Sequence[PartitionAssignor] = (), server_assignor: str | None = None,
                 instance_id: str | None = None, rebalance_timeout_ms: int = 60_000,
                 auto_offset_reset: str = "earliest", client_id: str = "kcoord-members",
                 listener: RebalanceListener | None = None, **aiokafka: Any) -> None:
        self.group_id = group_id
        self.listener = listener or RebalanceListener()
        self.member = ConsumerMember(group_id, topics, assignors=assignors, server_assignor=server_assignor,
                                     instance_id=instance_id, rebalance_timeout_ms=rebalance_timeout_ms)
        self.driver = MemberDriver(self.member, bootstrap, _Rebalance(self), client_id=client_id)
        self.auto_offset_reset = auto_offset_reset
        self.consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                         auto_offset_reset=auto_offset_reset, client_id=client_id, **aiokafka)
        self.owned: set[TopicPartition] = set()
        self._next: dict[TopicPartition, int] = {}     # offset after the last record handed out
        self._names: dict[uuid.UUID, str] = {}
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def member_id(self) -> str:
        return self.member.member_id

    async def start(self) -> None:
        await self.consumer.start()
        self._task = asyncio.create_task(self.driver.run(self._stop), name=f"kip848-{self.member_id}")

    async def stop(self) -> None:
        """Leave the group (revoking and committing first), then stop fetching."""
        self._stop.set()
        if self._task is not None:
            await self._task
        await self.consumer.stop()

    def assignment(self) -> set[TopicPartition]:
        return set(self.owned)

    async def getmany(self, timeout_ms: int = 100) -> dict[TopicPartition, list[Any]]:
        if self._task is not None and self._task.done():
            self._task.result()            # a fatal group error surfaces here
        if not self.owned:
            await asyncio.sleep(timeout_ms / 1000)   # nothing assigned: aiokafka would raise
            return {}
        batches = await self.consumer.getmany(timeout_ms=timeout_ms)
        # Owned now, not when the fetch started: a partition revoked meanwhile is dropped,
        # and its records do not count as consumed (its commit already happened).
        out = {tp: records for tp, records in batches.items() if tp in self.owned and records}
        for tp, records in out.items():
            self._next[tp] = records[-1].offset + 1
        return out

    async def commit(self, partitions: set[TopicPartition] | None = None) -> None:
        """Commit, for `partitions` (default: everything owned), the offset after the last
        record handed out by `getmany` (aiokafka's own position may be ahead of it: records
        of a partition revoked during a fetch are fetched but never handed out)."""
        todo = sorted(self.owned if partitions is None else partitions)
        positions = {tp: self._next[tp] for tp in todo if tp in self._next}
        if not positions:
            return
        topics: dict[str, list[oc.OffsetCommitRequestPartition]] = {}
        for tp, offset in positions.items():
            topics.setdefault(tp.topic, []).append(oc.OffsetCommitRequestPartition(
                partition_index=i32(tp.partition), committed_offset=i64(offset), committed_leader_epoch=i32(-1),
                committed_metadata=""))
        response = await self.driver._call(oc.OffsetCommitRequest(
            group_id=GroupId(self.group_id), generation_id_or_member_epoch=i32(self.member.member_epoch),
            member_id=self.member_id, group_instance_id=self.member.instance_id,
            topics=tuple(oc.OffsetCommitRequestTopic(name=TopicName(t), partitions=tuple(ps))
                         for t, ps in topics.items())))
        failed = [(t.name, p.partition_index, p.error_code) for t in response.topics for p in t.partitions
                  if p.error_code != 0]
        if failed:
            raise CommitFailed(f"OffsetCommit v9 of {self.group_id} (member {self.member_id}, epoch "
                               f"{self.member.member_epoch}) refused: {failed[:5]}")

    # ---------------------------------------------------------------- rebalance
    async def _tps(self, partitions: Partitions) -> set[TopicPartition]:
        unknown = [t for t in partitions if t not in self._names]
        if unknown:
            meta = await self.driver._call(MetadataRequest(
                topics=tuple(MetadataRequestTopic(topic_id=t, name=None) for t in unknown),
                allow_auto_topic_creation=False, include_topic_authorized_operations=False))
            for t in meta.topics:
                if t.name is not None:
                    self._names[t.topic_id] = t.name
        return {TopicPartition(self._names[t], p) for t, ps in partitions.items() if t in self._names for p in ps}

    async def _assigned(self, partitions: Partitions) -> None:
        new = await self._tps(partitions) - self.owned
        committed = await self._committed(new)
        log.debug("member %s epoch %d: assigned %s, committed offsets %s", self.member_id,
                  self.member.member_epoch, sorted(new), committed)
        for tp in new:
            offset = committed.get(tp, -1)
            if offset >= 0:
                self._next[tp] = offset
        await self._reassign(self.owned | new)
        if new:
            await self.listener.on_partitions_assigned(set(new))
        self.owned |= new

    async def _revoked(self, partitions: Partitions, commit: bool) -> None:
        gone = await self._tps(partitions) & self.owned
        if not gone:
            return
        self.owned -= gone                  # no record of them is handed out any more
        self.consumer.pause(*gone)
        if commit:
            try:
                await self.commit(gone)
            except CommitFailed as e:
                # The partitions go anyway (the coordinator is waiting for them); their
                # records since the last commit will be read again by the next owner.
                log.warning("%s", e)
        for tp in gone:
            self._next.pop(tp, None)
        await self._reassign(self.owned)
        if commit:
            await self.listener.on_partitions_revoked(set(gone))
        else:
            await self.listener.on_partitions_lost(set(gone))

    async def _reassign(self, partitions: set[TopicPartition]) -> None:
        """aiokafka's `assign()` forgets every position, also of the partitions kept: each
        one is sought again, to the offset after its last record handed out, or for a new
        partition without a committed offset to `auto_offset_reset`."""
        self.consumer.assign(sorted(partitions))
        for tp in partitions:
            offset = self._next.get(tp)
            if offset is not None:
                self.consumer.seek(tp, offset)
            elif self.auto_offset_reset == "latest":
                await self.consumer.seek_to_end(tp)
            else:
                await self.consumer.seek_to_beginning(tp)

    async def _committed(self, tps: set[TopicPartition]) -> dict[TopicPartition, int]:
        if not tps:
            return {}
        topics: dict[str, list[int]] = {}
        for tp in tps:
            topics.setdefault(tp.topic, []).append(tp.partition)
        response = await self.driver._call(of.OffsetFetchRequest(groups=(of.OffsetFetchRequestGroup(
            group_id=GroupId(self.group_id), member_id=self.member_id, member_epoch=i32(self.member.member_epoch),
            topics=tuple(of.OffsetFetchRequestTopics(name=TopicName(t),
                                                     partition_indexes=tuple(i32(p) for p in sorted(ps)))
                         for t, ps in topics.items())),), require_stable=True))
        group = response.groups[0]
        if group.error_code != 0:
            raise CommitFailed(f"OffsetFetch v9 of {self.group_id}: error {group.error_code}")
        return {TopicPartition(t.name, p.partition_index): p.committed_offset
                for t in group.topics for p in t.partitions if p.error_code == 0}


class _Rebalance(Listener):
    def __init__(self, owner: Kip848Consumer) -> None:
        self.owner = owner

    async def on_assign(self, partitions: Partitions) -> None:
        await self.owner._assigned(partitions)

    async def on_revoke(self, partitions: Partitions) -> None:
        await self.owner._revoked(partitions, commit=True)

    async def on_lost(self, partitions: Partitions) -> None:
        await self.owner._revoked(partitions, commit=False)
