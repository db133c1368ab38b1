"""The shards' lifecycle: load at start, reload, loss of the state topic, and in cluster
mode taking and releasing shards (docs/user/reliability.md, docs/user/cluster.md).

Rules of this module:
- A shard whose log does not load fails alone: `start()` returns once every partition is
  loaded or failed, and raises only for whole-process problems (the state topic cannot be
  read at all). A failed shard's groups answer NOT_COORDINATOR, and
  `partition_available(p)` is False for it (the gateway answers FindCoordinator
  COORDINATOR_NOT_AVAILABLE for its groups); a loading shard is found, and its group APIs
  answer COORDINATOR_LOAD_IN_PROGRESS, as Kafka's.
- `state_topic_lost()` unloads every shard (their state is no longer backed by a log);
  `reload_all()` drops everything and reloads from the log (a fresh cluster), and says
  whether every shard is back (`wait_reloaded()` waits for the ones still retrying).
- `start()` and `reload_all()` each replay every partition: never two at once.
- In cluster mode (coordinator/cluster/node.py) only the shards the membership assigns are
  loaded (`take`) and served (`served`); a released shard drops its state, and the new
  owner loads it from the log.
"""
from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Awaitable, Callable, Collection
from typing import Any

from .. import metrics
from ..group.image import MetadataImage
from ..group.result import Result
from ..group.shard import GroupCoordinatorShard
from ..runtime.shard_runtime import ShardRuntime, ShardState
from ..runtime.state_log import CorruptBatchError, StateLog, StateTopicUnavailable

log = logging.getLogger("kcoord.service")


class ShardLifecycle:
    """Loads, reloads, unloads, takes and releases the shard runtimes of one process."""

    def __init__(self, runtimes: list[ShardRuntime], state_topic: StateLog, raw_reads: bool = False) -> None:
        self.runtimes = runtimes
        self.state_topic = state_topic
        # Load with the marker-aware raw readers (transactions.py): set once the service knows
        # whether its state log serves transactional offsets.
        self.raw_reads = raw_reads
        # The shards assigned to this instance (None: every shard, one process).
        self.owned: set[int] | None = None
        self._load_lock: asyncio.Lock | None = None
        # Run before a reload of every shard (the process wiring sets it: service/partitioner.py
        # `before_reload`, which marks a replaced, empty state topic before any shard loads it).
        self.before_reload: Callable[[], Awaitable[Any]] | None = None
        self._members_counted_at = float("-inf")
        self._member_total = 0

    def total_members(self) -> int:
        """Members across all shards, recounted at most twice a second (the heartbeat policy
        spreads its budget over every member of the process)."""
        now = time.monotonic()
        if now - self._members_counted_at > 0.5:
            self._members_counted_at = now
            # Copies: a scrape reaches this on prometheus_client's thread (the heartbeat policy's
            # handed_out_ms, coordinator/metrics.py), while the event loop changes the dicts.
            self._member_total = sum(len(g.members) for rt in self.runtimes for g in list(rt.shard.groups.values()))
        return self._member_total

    def _lock(self) -> asyncio.Lock:
        if self._load_lock is None:
            self._load_lock = asyncio.Lock()
        return self._load_lock

    async def start(self, missing_topic_wait_s: float = 0.0) -> None:
        """Load every shard. Returns when each one is ACTIVE or FAILED (a record that does not
        load fails its own shard only); raises if the state topic cannot be read at all.

        A state topic that does not exist yet is waited for up to ``missing_topic_wait_s``:
        one created a moment ago (by kcoord at start) reaches the broker's metadata a little
        later, and a large one (thousands of partitions) takes seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + missing_topic_wait_s
        delay = 0.05
        while True:
            try:
                async with self._lock():
                    await self._load_all()
                return
            except StateTopicUnavailable as e:
                if loop.time() + delay > deadline:
                    raise
                log.warning("state topic %s is not readable yet (%s); retrying for up to %.0fs",
                            self.state_topic.topic, e, max(0.0, deadline - loop.time()))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    # ------------------------------------------------------- several processes
    def enter_cluster_mode(self, load_grace_ms: int) -> None:
        """Serve only the shards the membership assigns (`take`/`release`). A shard loaded
        here arms its members' session timers `load_grace_ms` later than the load: members
        of a shard that just moved may not have found the new owner yet (docs/user/cluster.md)."""
        self.owned = set()
        for rt in self.runtimes:
            rt.load_grace_ms = load_grace_ms
            rt.unload("not assigned to this kcoord instance")

    def take(self, partitions: Collection[int]) -> None:
        """Load newly assigned shards, each on its own with bounded backoff. Each load fences
        first (runtime/loader.py: "fence, then load"; today InitProducerId fences the previous
        owner); while loading its groups answer COORDINATOR_LOAD_IN_PROGRESS, as Kafka's."""
        assert self.owned is not None, "take() is for cluster mode"
        for p in sorted(partitions):
            self.owned.add(p)
            rt = self.runtimes[p]
            rt.cancel_reload()
            rt.begin_load()
            rt.start_reload()

    def release(self, partitions: Collection[int], reason: str) -> None:
        """Stop serving shards given to another instance: pending requests answer
        NOT_COORDINATOR and the in-memory state is dropped (the new owner loads the log)."""
        assert self.owned is not None, "release() is for cluster mode"
        for p in sorted(partitions):
            self.owned.discard(p)
            self.runtimes[p].unload(reason)

    def served(self) -> list[ShardRuntime]:
        owned = self.owned
        return self.runtimes if owned is None else [rt for rt in self.runtimes if rt.partition in owned]

    async def _load_all(self) -> None:
        started = time.monotonic()
        served = self.served()
        for rt in served:
            rt.cancel_reload()
            rt.begin_load()
        by_partition = {rt.partition: rt for rt in served}
        if not served:
            return
        progress = LoadProgress(self.state_topic.topic, len(served), started)

        # A shard whose record fails to load (or whose batch cannot be read) turns FAILED
        # and its partition is no longer read; the load of the others goes on.
        # Each shard's load steps: its fence first (a log with owners), then the replay, with
        # the marker-aware reader when clients' transactions share the partition.
        extra: dict[str, Any] = ({"readers": lambda p: by_partition[p].load_reader(p)}
                                 if self.raw_reads else {})
        fence = served[0].loader.fence      # one state log, one fence step for every shard
        if fence is not None:
            extra["fence"] = fence
        try:
            await self.state_topic.load(by_partition, lambda p, o, k, v: by_partition[p].replay_raw(o, k, v),
                                        lambda p, leo: by_partition[p].finish_load(leo), progress,
                                        on_corrupt=lambda p, e: by_partition[p].batch_unreadable(p, e),
                                        abandoned=lambda p: by_partition[p].load_abandoned(p), **extra)
        finally:
            progress.close()
        failed = [rt for rt in served if rt.state is ShardState.FAILED]
        log.info("loaded %d state partitions of %s in %.2fs: %d records replayed", len(served) - len(failed),
                 self.state_topic.topic, time.monotonic() - started, progress.records)
        if failed:
            self._report_failed(failed)

    def _report_failed(self, failed: list[ShardRuntime]) -> None:
        # The skip list names records that reach the decoder; an unreadable batch does not.
        skippable = [rt for rt in failed if rt.failed_offset is not None
                     and not isinstance(rt.load_error, CorruptBatchError)]
        unreadable = [rt for rt in failed if isinstance(rt.load_error, CorruptBatchError)]
        log.error("%d of %d state partitions of %s FAILED to load and do not serve (NOT_COORDINATOR): "
                  "%s. Kafka also fails such a partition; inspect it with `kcoord offsets show`%s%s",
                  len(failed), len(self.runtimes), self.state_topic.topic,
                  ", ".join(f"partition {rt.partition} at offset {rt.failed_offset}" for rt in failed),
                  "; to skip a bad record, restart with --config state.load.skip.corrupt.offsets="
                  + ",".join(f"{rt.partition}:{rt.failed_offset}" for rt in skippable) if skippable else "",
                  "; partitions " + ", ".join(str(rt.partition) for rt in unreadable) + " hold a record "
                  "batch that cannot be read (CRC or compression), which the skip list cannot name"
                  if unreadable else "")

    def partition_available(self, partition: int) -> bool:
        """Whether FindCoordinator names a coordinator for this state-topic partition: True
        while its shard serves or loads, False once it failed or was unloaded (the gateway
        then answers COORDINATOR_NOT_AVAILABLE for its groups).

        A LOADING shard counts as available, as in Kafka: FindCoordinator looks only at the
        partition's leader, and the group APIs of a coordinator still loading answer
        COORDINATOR_LOAD_IN_PROGRESS (ShardRuntime.check_active), which clients retry
        against the same coordinator. One attribute read: FindCoordinator is frequent."""
        state = self.runtimes[partition].state
        return state is ShardState.ACTIVE or state is ShardState.LOADING

    def failed_partitions(self) -> dict[int, int | None]:
        """Partitions whose load failed on a record -> that record's offset."""
        return {rt.partition: rt.failed_offset for rt in self.runtimes
                if rt.state is ShardState.FAILED and rt.load_error is not None}

    def state_topic_lost(self, reason: str) -> None:
        """The state topic is gone (deleted, or a write failed for good). Every shard answers
        its pending requests NOT_COORDINATOR, drops its in-memory state (which no log backs
        any more: it must never be served) and stays unavailable until `reload_all`. Kafka
        unloads a coordinator partition whose log it no longer leads the same way."""
        log.error("STATE TOPIC LOST: %s (%s). Dropping the in-memory state of all %d shards; group "
                  "APIs answer NOT_COORDINATOR until the topic is back and reloaded",
                  self.state_topic.topic, reason, len(self.runtimes))
        metrics.STATE_TOPIC_INCIDENTS.labels(kind="lost").inc()
        for rt in self.runtimes:
            rt.unload(reason)

    async def reload_all(self, reason: str) -> bool:
        """Drop all in-memory state and reload every shard from the log (the topic came back,
        e.g. with a new topic id: a fresh cluster). True once every shard is loaded (ACTIVE,
        or FAILED on a record of its own). False if the log could not be read: each shard not
        yet loaded then retries on its own with a bounded backoff, and `wait_reloaded()`
        says when they are back. The caller must not report recovery before that."""
        log.error("RELOADING ALL %d shards from state topic %s: %s. All in-memory group state is "
                  "dropped; pending requests answer NOT_COORDINATOR", len(self.runtimes),
                  self.state_topic.topic, reason)
        metrics.STATE_TOPIC_INCIDENTS.labels(kind="reload").inc()
        for rt in self.runtimes:
            rt.unload(reason)
        async with self._lock():
            try:
                if self.before_reload is not None:
                    await self.before_reload()
                await self._load_all()
            except Exception as e:
                pending = [rt for rt in self.runtimes if rt.state is ShardState.LOADING]
                log.error("reload of state topic %s failed (%r); %d shards retry on their own with "
                          "backoff", self.state_topic.topic, e, len(pending))
                for rt in pending:
                    rt.start_reload()
                return False
        return self.all_loaded()

    def all_loaded(self) -> bool:
        """Every shard served here is ACTIVE or FAILED on a record (a failure no reload changes)."""
        return all(rt.state is ShardState.ACTIVE or (rt.state is ShardState.FAILED and rt.load_error is not None)
                   for rt in self.served())

    async def wait_reloaded(self) -> bool:
        """Wait for the shards' own reload retries to end; returns `all_loaded()`. A retry
        ends when its shard loaded, failed on a record, or was unloaded or closed."""
        tasks = [t for t in (rt._reload_task for rt in self.runtimes) if t is not None and not t.done()]
        if tasks:
            await asyncio.wait(tasks)
        return self.all_loaded()

    def close(self) -> None:
        for rt in self.runtimes:
            rt.close()

    def on_metadata_update(self, image: MetadataImage) -> None:
        """Each active shard reacts to the new image (its timer changes are applied as an
        operation); an inactive one only keeps it for its next load."""
        for rt in self.runtimes:
            if rt.state is ShardState.ACTIVE:
                timers = rt.shard.on_metadata_update(image, rt.clock())
                if timers:
                    rt.submit(_with_timers(timers))
            else:
                rt.shard.image = image


def _with_timers(timers: list) -> Callable[[GroupCoordinatorShard, int], Result]:
    """An operation that only applies timer changes (a metadata update's)."""
    return lambda shard, now: Result(timers=timers)


class LoadProgress:
    """The progress of one load, for a person reading the start-up: the summary line at the
    end says it all for a short load; a load still running after ``LONG_LOAD_S`` gets a
    progress bar on a terminal (tqdm on stderr), or an INFO line every ``LONG_LOAD_S``
    elsewhere (a log file, a journal); each step is at DEBUG."""

    LONG_LOAD_S = 2.0

    def __init__(self, topic: str, partitions: int, started: float) -> None:
        self.topic = topic
        self.partitions = partitions
        self.started = started
        self.records = 0
        self.done = 0
        self._bar: Any = None
        self._next_line = started + self.LONG_LOAD_S

    def __call__(self, records: int, done: int) -> None:
        self.records, self.done = records, done
        log.debug("loading state topic %s: %d records replayed, %d/%d partitions loaded",
                  self.topic, records, done, self.partitions)
        now = time.monotonic()
        if now - self.started < self.LONG_LOAD_S:
            return
        if self._bar is None and sys.stderr.isatty():
            from tqdm import tqdm
            self._bar = tqdm(total=self.partitions, unit="partition", desc=f"loading {self.topic}", leave=False)
        if self._bar is not None:
            self._bar.update(done - self._bar.n)
            self._bar.set_postfix(records=records, refresh=False)
        elif now >= self._next_line:
            self._next_line = now + self.LONG_LOAD_S
            log.info("loading state topic %s: %d records replayed, %d/%d partitions loaded",
                     self.topic, records, done, self.partitions)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
