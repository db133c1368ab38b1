"""What keeps a `fencing=epoch` shard fenced while it is loaded (docs/design/fencing.md,
"fencing=epoch"): the barrier, the keep-alive, the refresh, and the start-up check.

Rules:
- Every write a shard makes for fencing is one fence record (epoch_producers.fence_record)
  appended through the shard's own writer (writer.ShardWriter): it lands at the offset the
  writer predicted, in the shard's log order, under the session's epoch and next sequence,
  so nothing else moves and no batch lands at an unpredicted offset.
- **Barrier** (after a client's transactional append): such a write, acknowledged.
- **Keep-alive**: a partition forgets an idle producer `producer.id.expiration.ms` after
  its last batch's timestamp, and then accepts any epoch and sequence for that id. Each
  shard writes a fence record every quarter of that expiry (6 h of the broker's 1 day):
  three missed keep-alives and any clock skew below 6 h still leave the producer known.
- **Refresh**: the transactional id expires `transactional.id.expiration.ms` after its last
  InitProducerId. Every quarter of that (42 h of the broker's 7 days) the shard re-inits its
  id with the KIP-360 fields before its next append (epoch_producers.mark_refresh), then
  writes a fence record, which is the new epoch's fence write.
- Timers are loop handles of the load generation that armed them, jittered by +-10 % so
  that a process's shards do not all write at once; a shard that was unloaded or reloaded
  stops at the next firing, and its next load arms new ones.
- The expirations come from the broker (DescribeConfigs of one broker) unless given; where
  the upstream does not answer, Kafka's defaults. The start-up check warns, naming the
  setting, where the fence itself could be lost: the state topic's replication factor
  below 3, `min.insync.replicas` below 2, `unclean.leader.election.enable` on. A cluster of
  one broker cannot do better (the embedded upstream, a laptop): that is said once at INFO.
"""
from __future__ import annotations

import asyncio
import logging
import random
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from .epoch_producers import EpochProducers, fence_record
from .fenced_links import DESCRIBE_CONFIGS, StateLogError, UpstreamLinks, make_request, request_module
from .shard_state import ShardState

log = logging.getLogger("kcoord.fenced_state_log")

# Kafka's broker defaults (TransactionLogConfig / TransactionStateManagerConfig).
PRODUCER_ID_EXPIRATION_MS = 86_400_000
TRANSACTIONAL_ID_EXPIRATION_MS = 604_800_000
SHARE = 0.25            # keep-alive and refresh at a quarter of their expiry
JITTER = 0.1
_TOPIC, _BROKER = 2, 4


class EpochUpkeeps:
    """The upkeep of every loaded shard of one state log."""

    def __init__(self, producers: EpochProducers, producer_id_expiration_ms: int | None,
                 transactional_id_expiration_ms: int | None) -> None:
        self.producers = producers
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.transactional_id_expiration_ms = transactional_id_expiration_ms
        self.shards: dict[int, ShardUpkeep] = {}
        self.warnings: list[str] = []

    @property
    def keep_alive_s(self) -> float:
        return (self.producer_id_expiration_ms or PRODUCER_ID_EXPIRATION_MS) * SHARE / 1000

    @property
    def refresh_s(self) -> float:
        return (self.transactional_id_expiration_ms or TRANSACTIONAL_ID_EXPIRATION_MS) * SHARE / 1000

    def start(self, rt: Any) -> None:
        """A shard finished loading (runtime/loader.py): arm its keep-alive and refresh."""
        old = self.shards.pop(rt.partition, None)
        if old is not None:
            old.stop()
        upkeep = self.shards[rt.partition] = ShardUpkeep(rt, self)
        upkeep.arm(False)
        upkeep.arm(True)

    def stop(self) -> None:
        shards, self.shards = self.shards, {}
        for upkeep in shards.values():
            upkeep.stop()

    async def barrier(self, partition: int) -> None:
        upkeep = self.shards.get(partition)
        if upkeep is not None and upkeep.current():
            await upkeep.write_fence()
            return
        # Not loaded through a runtime (a tool, a test): write directly.
        pid, epoch = self.producers.producer(partition) or (-1, -1)
        await self.producers.append(partition, [fence_record(partition, pid, epoch)], 0)

    # ------------------------------------------------------------- start-up
    async def read_upstream(self, links: UpstreamLinks) -> None:
        """Read the broker's expirations (unless given) and check the state topic's
        durability; an upstream that does not answer keeps the defaults, unchecked."""
        try:
            await self._read_upstream(links)
        except (StateLogError, KeyError, ValueError, AttributeError) as e:
            log.info("state topic %s: the upstream's configs could not be read (%s); fencing=epoch keeps "
                     "Kafka's default expirations and did not check the topic's durability", links.topic, e)

    async def _read_upstream(self, links: UpstreamLinks) -> None:
        if not links.brokers:
            await links.refresh_metadata()
        broker_id, address = min(links.brokers.items())
        module = request_module(DESCRIBE_CONFIGS)
        request = make_request(DESCRIBE_CONFIGS, resources=(
            module.DescribeConfigsResource(resource_type=i8(_BROKER), resource_name=str(broker_id),
                                           configuration_keys=("producer.id.expiration.ms",
                                                               "transactional.id.expiration.ms")),
            module.DescribeConfigsResource(resource_type=i8(_TOPIC), resource_name=links.topic,
                                           configuration_keys=("min.insync.replicas",
                                                               "unclean.leader.election.enable"))),
            include_synonyms=False, include_documentation=False)
        response = await links.call(address, request)
        configs: dict[str, str] = {}
        for result in response.results:
            if result.error_code == ErrorCode.none:
                configs.update((c.name, c.value) for c in result.configs if c.value is not None)
        if self.producer_id_expiration_ms is None and "producer.id.expiration.ms" in configs:
            self.producer_id_expiration_ms = int(configs["producer.id.expiration.ms"])
        if self.transactional_id_expiration_ms is None and "transactional.id.expiration.ms" in configs:
            self.transactional_id_expiration_ms = int(configs["transactional.id.expiration.ms"])
        self.warnings = durability_warnings(links.topic, len(links.brokers), min(links.replicas.values(), default=0),
                                            configs)
        for warning in self.warnings:
            log.warning("%s", warning)
        if len(links.brokers) == 1:
            log.info("state topic %s: the upstream has one broker, so the fence write lives on one node "
                     "(fencing=epoch is as durable as that broker's disk)", links.topic)


def durability_warnings(topic: str, brokers: int, replication_factor: int, configs: dict[str, str]) -> list[str]:
    """What makes a fence write losable, named by setting; nothing for a one-broker
    cluster, which cannot do better."""
    if brokers <= 1:
        return []
    out = []
    why = "a fence write acknowledged on too few replicas can be lost, and a zombie's write accepted after it"
    if 0 < replication_factor < 3:
        out.append(f"state topic {topic}: replication factor {replication_factor} < 3 ({why})")
    isr = configs.get("min.insync.replicas")
    if isr is not None and int(isr) < 2:
        out.append(f"state topic {topic}: min.insync.replicas={isr} < 2 ({why})")
    if configs.get("unclean.leader.election.enable", "false").lower() == "true":
        out.append(f"state topic {topic}: unclean.leader.election.enable=true ({why})")
    return out


class ShardUpkeep:
    """One loaded shard's fence writes, through its runtime's writer."""

    def __init__(self, rt: Any, upkeeps: EpochUpkeeps) -> None:
        self.rt = rt
        self.upkeeps = upkeeps
        self.generation = rt.generation
        self.handles: dict[bool, asyncio.TimerHandle] = {}
        self.tasks: set[asyncio.Task] = set()
        self.writes = 0

    def current(self) -> bool:
        rt = self.rt
        return rt.generation == self.generation and rt.state is ShardState.ACTIVE

    def stop(self) -> None:
        for handle in self.handles.values():
            handle.cancel()
        self.handles.clear()

    def arm(self, refresh: bool) -> None:
        every = self.upkeeps.refresh_s if refresh else self.upkeeps.keep_alive_s
        delay = every * random.uniform(1 - JITTER, 1 + JITTER)
        self.handles[refresh] = asyncio.get_running_loop().call_later(delay, self._due, refresh)

    def _due(self, refresh: bool) -> None:
        self.handles.pop(refresh, None)
        if not self.current():
            return
        if refresh:
            self.upkeeps.producers.mark_refresh(self.rt.partition)
        task = asyncio.get_running_loop().create_task(self._write(refresh))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _write(self, refresh: bool) -> None:
        try:
            await self.write_fence()
        except Exception as e:      # the writer answered the failure (reload or unload)
            log.warning("state partition %d: the %s write failed: %s", self.rt.partition,
                        "refresh" if refresh else "keep-alive", e)
        if self.current():
            self.arm(refresh)

    async def write_fence(self) -> None:
        """Append one fence record through the shard's writer; returns once acknowledged."""
        rt = self.rt
        writer = rt.writer
        pid, epoch = self.upkeeps.producers.producer(rt.partition) or (-1, -1)
        key, value = fence_record(rt.partition, pid, epoch)
        size = len(key) + len(value)
        batch = writer.batch_for(size)
        writer.next_offset += 1
        batch.records.append((key, value))
        batch.size += size
        done = batch.done
        writer.schedule_flush()
        self.writes += 1
        # Shielded: the batch is shared with other operations' records, and a cancelled task
        # awaiting it directly would cancel it for all of them.
        await asyncio.shield(done)

