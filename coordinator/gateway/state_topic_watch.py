"""The watch on the state topic (ClusterView's part): is the log kcoord's state came from
still the one the upstream lists?

Rules (the module docstring of cluster.py tells the whole story):
- It decides from the metadata only (`track`, after every refresh): missing, a new topic
  id, or the wrong partition count. A failed write proves nothing; it only asks the view
  for a refresh at once (`write_failed`).
- On loss it suspends the writer and calls the owner's `state_topic_lost(reason)`, then
  one recovery task per loss recreates a missing topic (unless recreation is off) and
  reloads every shard (`owner.reload_all`); the loss ends only once every shard is loaded.
- It owns its state (owner, writer, loaded topic id, the loss, the recovery task); it
  reads the view's snapshot, health and admin calls through the view it is given.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from .. import metrics
from ..upstream.client import UpstreamError

if TYPE_CHECKING:
    from ..group.image import TopicImage

log = logging.getLogger("kcoord.gateway.cluster")

ZERO_UUID = uuid.UUID(int=0)
UNKNOWN_TOPIC_OR_PARTITION = 3
WRITE_ERROR_LOG_INTERVAL = 10.0  # seconds between state-topic write-failure ERROR lines
MISSING_REMINDER_INTERVAL = 60.0  # seconds between reminders that a missing topic is not recreated

STATE_TOPIC_PRESENT = metrics.STATE_TOPIC_PRESENT
STATE_TOPIC_INCIDENTS = metrics.STATE_TOPIC_INCIDENTS


class Listing(Protocol):
    """What one Metadata answer says of the topics (cluster.ClusterSnapshot)."""

    @property
    def topics(self) -> Mapping[str, TopicImage]: ...

    @property
    def errors(self) -> Mapping[str, int]: ...


class WatchedView(Protocol):
    """What the watch uses of its cluster view (cluster.ClusterView)."""

    state_topic: str
    upstream_up: bool

    @property
    def snapshot(self) -> Listing: ...

    @property
    def state_topic_id(self) -> uuid.UUID | None: ...

    async def ensure_topic(self, name: str, partitions: int, configs: Mapping[str, str]) -> None: ...

    def request_refresh(self) -> None: ...


class StateTopicWatch:
    def __init__(self, view: WatchedView) -> None:
        self._view = view
        self.state_topic = view.state_topic
        self._closed = False
        # Something happened to the upstream since the state topic was last seen as kcoord
        # loaded it (an outage, a dropped connection): a missing topic then means a fresh
        # cluster rather than a deletion behind kcoord's back. Only the log line differs.
        self._disturbed = False
        # Active once manage() named the owner.
        self._owner: Any = None
        self._writer: Any = None
        self._expected_partitions = 0
        self._state_configs: Mapping[str, str] = {}
        self._recreate = True
        self._loaded_id: uuid.UUID | None = None     # the topic id the owner's state came from
        self._lost: str | None = None                # why the owner's state is void, until reloaded
        self._lost_kind = ""
        self.recovery: asyncio.Task[None] | None = None
        self._write_error_logged = float("-inf")
        self._write_errors_suppressed = 0
        # Set after every refresh (answered or not): a recovery waiting for the operator or
        # for its shards re-checks the topic then, instead of being restarted per refresh.
        self._changed = asyncio.Event()

    @property
    def lost(self) -> str | None:
        """Why the state kcoord held is void (until every shard reloaded), or None."""
        return self._lost

    def disturbed(self) -> None:
        """The upstream went away or dropped the link: a missing topic may be a fresh cluster."""
        self._disturbed = True

    def upstream_failed(self, error: str, first: bool) -> None:
        """A refresh failed; ``first`` of an outage: the writer is suspended for it."""
        self._changed.set()
        if first:
            self._disturbed = True
            if self._writer is not None:
                self._writer.suspend(f"the upstream is unreachable ({error})")

    async def close(self) -> None:
        self._closed = True
        self._changed.set()
        task, self.recovery = self.recovery, None
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass

    def manage(self, owner: Any, writer: Any, partitions: int,
                           configs: Mapping[str, str], *, recreate: bool = True) -> None:
        """Watch the state topic for ``owner`` (the GroupCoordinatorService): on loss call
        ``owner.state_topic_lost(reason)``, on return ``await owner.reload_all(reason)``.
        ``writer`` (the StateTopic) is suspended while the log cannot be trusted. Call it
        after the state topic exists; its current topic id is the one the state loads from."""
        self._owner, self._writer = owner, writer
        self._expected_partitions = partitions
        self._state_configs = dict(configs)
        self._recreate = recreate
        self._loaded_id = self._view.state_topic_id
        present = self.state_topic in self._view.snapshot.topics
        STATE_TOPIC_PRESENT.set(1 if present else 0)
        log.info("state topic %s: topic id %s, %d partitions expected; missing topics are %s",
                 self.state_topic, self._loaded_id or "unknown", partitions,
                 "recreated" if recreate else "reported, not recreated")
        if hasattr(writer, "on_write_error"):
            writer.on_write_error = self.write_failed

    def write_failed(self, partition: int, error: BaseException) -> None:
        """A state-topic append failed (called by the StateTopic). Counted, logged (rate-
        limited) and the topic checked at once; nothing is dropped here.

        No write error proves the topic is gone. Kafka's clients treat UnknownTopicOrPartition
        as retriable (a batch expires with it during a slow leader move), and an authorization
        failure concerns kcoord's principal, not the log. Only the metadata decides
        (`track`: missing, new topic id); the shard whose write failed answers
        NOT_COORDINATOR and reloads with its own backoff, as Kafka fails only the
        coordinator partition whose append failed."""
        from ..runtime.state_log import StateTopicUnavailable
        if isinstance(error, StateTopicUnavailable):
            return          # refused here on purpose; the reason was logged when suspended
        STATE_TOPIC_INCIDENTS.labels(kind="write_failed").inc()
        now = time.monotonic()
        if now - self._write_error_logged >= WRITE_ERROR_LOG_INTERVAL:
            self._write_error_logged = now
            suppressed, self._write_errors_suppressed = self._write_errors_suppressed, 0
            log.error("state topic %s: write to partition %d failed: %r; checking the topic upstream "
                      "(further write failures within %.0fs are only counted in "
                      "kcoord_state_topic_incidents_total{kind=\"write_failed\"})%s",
                      self.state_topic, partition, error, WRITE_ERROR_LOG_INTERVAL,
                      f" ({suppressed} similar failures not logged)" if suppressed else "")
        else:
            self._write_errors_suppressed += 1
        self._view.request_refresh()


    def track(self, snapshot: Listing) -> None:
        """Compare what the upstream lists now with the topic the state was loaded from."""
        self._changed.set()
        if self._owner is None or self._closed or not self._view.upstream_up:
            return
        name = self.state_topic
        topic = snapshot.topics.get(name)
        if topic is None:
            error = snapshot.errors.get(name)
            if error is not None and error != UNKNOWN_TOPIC_OR_PARTITION:
                return      # listed with a transient error (no leader yet...): not proof of absence
            STATE_TOPIC_PRESENT.set(0)
            if self._lost is None:
                cause = ("after kcoord lost the upstream for a while: it came back with empty storage, "
                         "a fresh cluster" if self._disturbed else
                         "while the upstream stayed reachable: it was deleted behind kcoord's back "
                         "(protect it with upstream ACLs)")
                self._lose("missing", f"state topic {name} (topic id {self._loaded_id or 'unknown'}) is gone "
                                      f"from the upstream {cause}")
            self._start_recovery()
            return
        if self._expected_partitions and topic.num_partitions != self._expected_partitions:
            STATE_TOPIC_PRESENT.set(0)
            if self._lost_kind != "wrong_partitions":
                self._lose("wrong_partitions",
                           f"state topic {name} (topic id {topic.topic_id}) has {topic.num_partitions} partitions "
                           f"upstream, kcoord needs {self._expected_partitions}; kcoord cannot serve until an "
                           f"operator deletes it (kcoord then recreates it empty) or restarts kcoord with "
                           f"--state-partitions {topic.num_partitions}")
            return
        seen = topic.topic_id if topic.topic_id != ZERO_UUID else None
        replaced = seen is not None and self._loaded_id is not None and seen != self._loaded_id
        if replaced and self._lost is None:
            self._lose("new_topic_id", f"state topic {name} now has topic id {seen}, not {self._loaded_id} "
                                       f"that kcoord loaded from: the log kcoord's state came from is gone "
                                       f"(a fresh cluster, or the topic was deleted and recreated)")
        if self._lost is not None:
            self._start_recovery()
            return
        STATE_TOPIC_PRESENT.set(1)
        self._disturbed = False
        if self._writer is not None and getattr(self._writer, "suspended", None):
            self._writer.resume()

    def _lose(self, kind: str, reason: str) -> None:
        self._lost, self._lost_kind = reason, kind
        STATE_TOPIC_INCIDENTS.labels(kind=kind).inc()
        STATE_TOPIC_PRESENT.set(0)
        log.error("%s. kcoord drops the group state it holds and answers every group request with "
                  "NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE until it has reloaded from the state topic.",
                  reason)
        if self._writer is not None:
            self._writer.suspend(reason)
        lost = getattr(self._owner, "state_topic_lost", None)
        if lost is None:
            log.error("the group coordinator cannot drop its state (no state_topic_lost)")
            return
        try:
            lost(reason)
        except Exception:
            log.exception("state_topic_lost(%r) failed", reason)

    def _start_recovery(self) -> None:
        if self._closed or (self.recovery is not None and not self.recovery.done()):
            return
        self.recovery = asyncio.get_running_loop().create_task(self._recover(), name="kcoord-state-topic-recovery")

    async def _recover(self) -> None:
        """Recreate a missing state topic, then reload every shard from the topic upstream.
        Retries with backoff until every shard is loaded again; only then is the loss over.

        One task per loss (``_start_recovery`` starts no second one): what it waits for (an
        operator creating the topic, shards retrying their load) it re-checks after each
        refresh, and each condition is logged once, not once per refresh."""
        delay = 0.2
        name = self.state_topic
        last_error = ""
        missing_since: float | None = None
        reminded = 0.0
        while self._lost is not None and not self._closed:
            try:
                if not self._view.upstream_up:
                    raise UpstreamError("the upstream is unreachable")
                topic = self._view.snapshot.topics.get(name)
                if topic is None:
                    if not self._recreate:
                        now = time.monotonic()
                        if missing_since is None:
                            missing_since = reminded = now
                            log.error("state topic %s is missing and recreation is off "
                                      "(--no-state-topic-recreate): create it with %d partitions "
                                      "(cleanup.policy=compact) for kcoord to serve again; kcoord "
                                      "checks on every refresh and reminds every %.0fs", name,
                                      self._expected_partitions, MISSING_REMINDER_INTERVAL)
                        elif now - reminded >= MISSING_REMINDER_INTERVAL:
                            reminded = now
                            log.warning("state topic %s still missing after %.0fs; recreation is off",
                                        name, now - missing_since)
                        await self._next_refresh()
                        continue
                    await self._view.ensure_topic(name, self._expected_partitions, self._state_configs)
                    created = self._view.snapshot.topics.get(name)
                    STATE_TOPIC_INCIDENTS.labels(kind="recreated").inc()
                    log.error("state topic %s recreated with %d partitions, topic id %s: kcoord serves again "
                              "from an empty log; the group state from before (topic id %s) is gone",
                              name, self._expected_partitions, created.topic_id if created else "unknown",
                              self._loaded_id or "unknown")
                    continue
                if missing_since is not None:
                    log.warning("state topic %s is present again (topic id %s) after %.0fs missing",
                                name, topic.topic_id, time.monotonic() - missing_since)
                    missing_since = None
                if self._lost_kind == "wrong_partitions" and topic.num_partitions != self._expected_partitions:
                    return      # an operator's job; logged by _lose. A change restarts recovery.
                seen = topic.topic_id if topic.topic_id != ZERO_UUID else None
                reason = (f"state topic {name} reloaded from topic id {seen or 'unknown'} "
                          f"(kcoord had loaded topic id {self._loaded_id or 'unknown'}) after: {self._lost}")
                log.warning("reloading every shard from state topic %s, topic id %s (was %s)",
                            name, seen or "unknown", self._loaded_id or "unknown")
                reload_all = getattr(self._owner, "reload_all", None)
                if reload_all is None:
                    log.error("the group coordinator cannot reload (no reload_all): restart kcoord")
                    return
                if self._writer is not None:
                    self._writer.resume()   # the reload reads it, and reloaded shards write at once
                # False: the load failed and the shards retry on their own (ShardRuntime's
                # backoff). The state is not trusted until they are back: wait for them, or
                # for the topic to change under the reload (then start over).
                loaded = await reload_all(reason)
                if loaded is False and not await self._wait_for_shards(seen):
                    if self._view.upstream_up and not self._is_state_topic(seen):
                        continue            # gone or replaced: recreate / reload that one
                    raise UpstreamError(f"the shards have not reloaded from state topic {name} "
                                        f"(topic id {seen or 'unknown'})")
                if self._view.state_topic_id not in (seen, None) or self.state_topic not in self._view.snapshot.topics:
                    continue                # replaced or gone again meanwhile: start over
                self._loaded_id = seen
                self._lost, self._lost_kind = None, ""
                self._disturbed = False
                STATE_TOPIC_PRESENT.set(1)
                log.warning("every shard reloaded from state topic %s (topic id %s); serving again",
                            name, seen or "unknown")
                return
            except asyncio.CancelledError:
                raise
            except Exception as e:
                if self._writer is not None and self._lost is not None:
                    self._writer.suspend(self._lost)
                # One ERROR per distinct failure: an upstream that stays down would otherwise
                # log one line per retry.
                (log.error if str(e) != last_error else log.debug)(
                    "state topic %s: recovery failed (%s); retrying every %.1fs at most", name, e, 5.0)
                last_error = str(e)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    def _is_state_topic(self, topic_id: uuid.UUID | None) -> bool:
        """The upstream lists the state topic, under ``topic_id`` when both ids are known."""
        topic = self._view.snapshot.topics.get(self.state_topic)
        return topic is not None and (topic_id is None or topic.topic_id in (topic_id, ZERO_UUID))

    async def _next_refresh(self) -> None:
        """Returns after the next refresh, answered or not (or at close)."""
        self._changed.clear()
        await self._changed.wait()

    async def _wait_for_shards(self, seen: uuid.UUID | None) -> bool:
        """Wait until the owner's shards are loaded again (``owner.wait_reloaded()``: True
        when every shard serves or failed on a record of its own). False as soon as the
        upstream goes away or the topic is gone or replaced: the caller starts over."""
        wait = getattr(self._owner, "wait_reloaded", None)
        if wait is None:
            return False
        loaded = asyncio.ensure_future(wait())
        try:
            while True:
                refreshed = asyncio.ensure_future(self._next_refresh())
                done, _ = await asyncio.wait({loaded, refreshed}, return_when=asyncio.FIRST_COMPLETED)
                refreshed.cancel()
                if loaded in done:
                    return bool(loaded.result())
                if self._closed or not self._view.upstream_up or not self._is_state_topic(seen):
                    return False
        finally:
            loaded.cancel()

