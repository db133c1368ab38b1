"""The gateway's view of the upstream cluster: a metadata cache refreshed in the background.

It holds the brokers (for the listener map and address rewriting), the leaders of the
state topic's partitions (FindCoordinator for groups) and an immutable MetadataImage of
every topic, published to subscribers whenever it changes (the group coordinator reacts
to new topics and partition counts, as Kafka's does through its metadata publisher).
Nothing is excluded: Kafka does not exclude internal topics from regex resolution.

It is also kcoord's watch on the upstream and on the state topic:
- Upstream down: the first failed refresh logs an ERROR and sets `kcoord_upstream_up` to 0;
  while it lasts, state-topic writes and loads are suspended (they fail at once, so group
  requests answer NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE) and FindCoordinator finds no
  coordinator. The first good refresh logs INFO and, if the state topic is still the one
  kcoord loaded (same topic id), resumes writes: nothing is reloaded.
- State topic: its presence and topic id are tracked once `manage_state_topic` names the
  owner of the state. If it disappears, changes topic id or gets the wrong partition count,
  kcoord logs an ERROR, counts
  `kcoord_state_topic_incidents_total{kind}`, and calls the owner's
  `state_topic_lost(reason)`: kcoord never serves state the log no longer holds. A missing
  topic is recreated (as Kafka auto-creates `__consumer_offsets`): for a fresh cluster,
  e.g. a memory-store upstream that restarted, that is what lets kcoord serve again, and a
  topic deleted behind kcoord's back is just as loud. Once the topic is present with the
  right partitions, the owner's `reload_all(reason)` reloads every shard from it; the loss
  ends (and `kcoord_state_topic_present` returns to 1) only once every shard is loaded.
- A failed write is not proof of anything: it only makes the watcher look at the topic at
  once. The metadata decides (missing, new topic id); the failed shard itself answers
  NOT_COORDINATOR and reloads with its own backoff (ShardRuntime).
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .. import metrics
from ..group.image import EMPTY_IMAGE, MetadataImage, TopicImage
from ..protocol.api_versions import Features, parse_upstream_api_versions
from ..protocol.apis import API_VERSIONS, CREATE_TOPICS, METADATA, intersect, kio_version_range, request_class
from .upstream_client import UpstreamClient, UpstreamError

if TYPE_CHECKING:
    from ..security.upstream import UpstreamSecurity

log = logging.getLogger("kcoord.gateway.cluster")

ZERO_UUID = uuid.UUID(int=0)
TOPIC_ALREADY_EXISTS = 36
UNKNOWN_TOPIC_OR_PARTITION = 3
DEFAULT_REFRESH_INTERVAL = 1.0   # seconds; new topics reach regex subscriptions within this
STILL_DOWN_LOG_INTERVAL = 60.0   # seconds between reminders while the upstream stays down
WRITE_ERROR_LOG_INTERVAL = 10.0  # seconds between state-topic write-failure ERROR lines
MISSING_REMINDER_INTERVAL = 60.0  # seconds between reminders that a missing topic is not recreated

# The watcher's metrics live with the others (coordinator/metrics.py).
UPSTREAM_UP = metrics.UPSTREAM_UP
UPSTREAM_OUTAGES = metrics.UPSTREAM_OUTAGES
STATE_TOPIC_PRESENT = metrics.STATE_TOPIC_PRESENT
STATE_TOPIC_INCIDENTS = metrics.STATE_TOPIC_INCIDENTS


@dataclass(frozen=True, slots=True)
class Broker:
    node_id: int
    host: str
    port: int
    rack: str | None


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """What one Metadata response says, before it is compared with the previous one."""

    brokers: Mapping[int, Broker]
    topics: Mapping[str, TopicImage]
    leaders: Mapping[str, Mapping[int, int]]      # topic -> partition -> leader (only live leaders)
    errors: Mapping[str, int] = dataclasses.field(default_factory=dict)   # listed with an error: name -> code


def snapshot_from_metadata(response: Any) -> ClusterSnapshot:
    brokers = {int(b.node_id): Broker(int(b.node_id), b.host, int(b.port), b.rack) for b in response.brokers}
    topics: dict[str, TopicImage] = {}
    leaders: dict[str, dict[int, int]] = {}
    errors: dict[str, int] = {}
    for t in response.topics:
        if t.error_code != 0 or t.name is None:
            if t.name is not None:
                errors[t.name] = int(t.error_code)
            continue
        partitions = sorted(t.partitions, key=lambda p: p.partition_index)
        racks = tuple(tuple(sorted({rack for r in p.replica_nodes if r in brokers
                                    for rack in (brokers[r].rack,) if rack is not None}))
                      for p in partitions)
        topic_id = getattr(t, "topic_id", None) or ZERO_UUID
        topics[t.name] = TopicImage(topic_id, t.name, len(partitions), racks)
        leaders[t.name] = {int(p.partition_index): int(p.leader_id) for p in partitions if p.leader_id >= 0}
    return ClusterSnapshot(brokers, topics, leaders, errors)


def _build(cls: type, **wanted: Any) -> Any:
    """An instance of a kio class at some version, setting only the fields it has."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in wanted.items() if k in names})


class ClusterView:
    def __init__(self, bootstrap: Sequence[tuple[str, int]], state_topic: str, *,
                 refresh_interval: float = DEFAULT_REFRESH_INTERVAL, request_timeout: float = 10.0,
                 client_id: str = "kcoord-gateway", security: UpstreamSecurity | None = None) -> None:
        if not bootstrap:
            raise ValueError("at least one upstream bootstrap address is needed")
        self.bootstrap = tuple(bootstrap)
        self.state_topic = state_topic
        self.refresh_interval = refresh_interval
        self.request_timeout = request_timeout
        self.client_id = client_id
        # TLS/SASL of the metadata/admin link (None: PLAINTEXT). A SASL session with a
        # lifetime (KIP-368) is renewed by reconnecting before it ends (_connected).
        self.security = security
        self.upstream_api_versions: dict[int, tuple[int, int]] = {}
        self.upstream_features = Features()
        self._image = EMPTY_IMAGE
        self._snapshot = ClusterSnapshot({}, {}, {})
        self._subscribers: list[Callable[[MetadataImage], None]] = []
        self._broker_subscribers: list[Callable[[Mapping[int, Broker]], None]] = []
        self._client: UpstreamClient | None = None
        self._connect_lock = asyncio.Lock()
        self._refresh_wanted = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.started = False
        # Upstream health, as the refresh loop sees it.
        self.upstream_up = True
        self._down_since = 0.0
        self._down_logged = 0.0
        self._down_error = ""
        # Something happened to the upstream since the state topic was last seen as kcoord
        # loaded it (an outage, a dropped connection): a missing topic then means a fresh
        # cluster rather than a deletion behind kcoord's back. Only the log line differs.
        self._disturbed = False
        # State-topic lifecycle; active once manage_state_topic() named the owner.
        self._owner: Any = None
        self._writer: Any = None
        self._expected_partitions = 0
        self._state_configs: Mapping[str, str] = {}
        self._recreate = True
        self._loaded_id: uuid.UUID | None = None     # the topic id the owner's state came from
        self._lost: str | None = None                # why the owner's state is void, until reloaded
        self._lost_kind = ""
        self._recovery: asyncio.Task[None] | None = None
        self._write_error_logged = float("-inf")
        self._write_errors_suppressed = 0
        # Set after every refresh (answered or not): a recovery waiting for the operator or
        # for its shards re-checks the topic then, instead of being restarted per refresh.
        self._changed = asyncio.Event()

    # --- public view ------------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        return self._image

    @property
    def brokers(self) -> Mapping[int, Broker]:
        return self._snapshot.brokers

    def subscribe(self, callback: Callable[[MetadataImage], None]) -> None:
        """``callback(image)`` after every change; ``cluster.image`` is the current one."""
        self._subscribers.append(callback)

    def subscribe_brokers(self, callback: Callable[[Mapping[int, Broker]], None]) -> None:
        self._broker_subscribers.append(callback)

    def partition_leader(self, topic: str, partition: int) -> int | None:
        leaders = self._snapshot.leaders.get(topic)
        return None if leaders is None else leaders.get(partition)

    def state_partition_leader(self, partition: int) -> int | None:
        """Leader of the state topic's ``partition`` (the group coordinator's node), if known.

        None while the upstream is down or the state topic is lost: FindCoordinator then
        answers COORDINATOR_NOT_AVAILABLE, as Kafka does while no coordinator can serve."""
        if not self.upstream_up or self._lost is not None:
            return None
        return self.partition_leader(self.state_topic, partition)

    @property
    def state_topic_id(self) -> uuid.UUID | None:
        """The topic id under which the upstream lists the state topic now (None if it does
        not list it, or gives no ids). The gateway matches requests that name topics by id
        (Produce v13, DeleteTopics v6) against it."""
        topic = self._snapshot.topics.get(self.state_topic)
        if topic is None or topic.topic_id == ZERO_UUID:
            return None
        return topic.topic_id

    @property
    def state_topic_available(self) -> bool:
        """The upstream answers and lists the state topic kcoord's state was loaded from."""
        return self.upstream_up and self._lost is None and self.state_topic in self._snapshot.topics

    @property
    def state_topic_lost(self) -> str | None:
        """Why the state kcoord held is void (until every shard reloaded), or None."""
        return self._lost

    def manage_state_topic(self, owner: Any, writer: Any, partitions: int,
                           configs: Mapping[str, str], *, recreate: bool = True) -> None:
        """Watch the state topic for ``owner`` (the GroupCoordinatorService): on loss call
        ``owner.state_topic_lost(reason)``, on return ``await owner.reload_all(reason)``.
        ``writer`` (the StateTopic) is suspended while the log cannot be trusted. Call it
        after the state topic exists; its current topic id is the one the state loads from."""
        self._owner, self._writer = owner, writer
        self._expected_partitions = partitions
        self._state_configs = dict(configs)
        self._recreate = recreate
        self._loaded_id = self.state_topic_id
        present = self.state_topic in self._snapshot.topics
        STATE_TOPIC_PRESENT.set(1 if present else 0)
        log.info("state topic %s: topic id %s, %d partitions expected; missing topics are %s",
                 self.state_topic, self._loaded_id or "unknown", partitions,
                 "recreated" if recreate else "reported, not recreated")
        if hasattr(writer, "on_write_error"):
            writer.on_write_error = self.state_write_failed

    def state_write_failed(self, partition: int, error: BaseException) -> None:
        """A state-topic append failed (called by the StateTopic). Counted, logged (rate-
        limited) and the topic checked at once; nothing is dropped here.

        No write error proves the topic is gone. aiokafka marks UnknownTopicOrPartition
        retriable (a batch expires with it during a slow leader move), and an authorization
        failure concerns kcoord's principal, not the log. Only the metadata decides
        (`_track_state_topic`: missing, new topic id); the shard whose write failed answers
        NOT_COORDINATOR and reloads with its own backoff, as Kafka fails only the
        coordinator partition whose append failed."""
        from ..runtime.state_topic import StateTopicUnavailable
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
        self.request_refresh()

    def request_refresh(self) -> None:
        """Refresh soon (coalesced), e.g. after a CreateTopics passed through the gateway."""
        self._refresh_wanted.set()

    # --- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Reads upstream's ApiVersions and a first Metadata, then refreshes in the background."""
        if self.started:
            return
        response = await self._call(_build(request_class(API_VERSIONS, 3),
                                           client_software_name="kcoord", client_software_version="0.1.0"))
        if response.error_code == 35:   # broker older than ApiVersions v3: retry at its highest
            highest = max((k.max_version for k in response.api_keys if k.api_key == API_VERSIONS), default=0)
            response = await self._call(_build(request_class(API_VERSIONS, min(highest, 2))))
        if response.error_code != 0:
            raise UpstreamError(f"upstream ApiVersions failed with error {int(response.error_code)}")
        self.upstream_api_versions, self.upstream_features = parse_upstream_api_versions(response)
        await self.refresh()
        UPSTREAM_UP.set(1)
        self._task = asyncio.get_running_loop().create_task(self._refresh_loop(), name="kcoord-cluster-refresh")
        self.started = True

    async def close(self) -> None:
        self._closed = True
        self._changed.set()
        for task in (self._recovery,):
            if task is not None and not task.done():
                task.cancel()
                try:
                    await task
                except (asyncio.CancelledError, Exception):
                    pass
        self._recovery = None
        if self._task is not None:
            # Python 3.11's wait_for drops a cancellation that arrives as the request it
            # waits on completes (fixed in 3.12): cancel until the loop has really ended.
            while not self._task.done():
                self._task.cancel()
                await asyncio.wait({self._task}, timeout=1.0)
            if not self._task.cancelled() and self._task.exception() is not None:
                log.debug("refresh loop ended with %r", self._task.exception())
            self._task = None
        if self._client is not None:
            self._client.close()
            self._client = None
        self.started = False

    # --- refresh ----------------------------------------------------------------------

    async def refresh(self) -> MetadataImage:
        """One Metadata round trip now; publishes what changed."""
        version = self._version_for(METADATA, preferred=12)
        request = _build(request_class(METADATA, version), topics=None, allow_auto_topic_creation=False,
                         include_cluster_authorized_operations=False, include_topic_authorized_operations=False)
        response = await self._call(request)
        snapshot = snapshot_from_metadata(response)
        self._apply(snapshot)
        self._track_state_topic(snapshot)
        return self._image

    def _apply(self, snapshot: ClusterSnapshot) -> None:
        previous, self._snapshot = self._snapshot, snapshot
        if snapshot.brokers != previous.brokers:
            for callback in list(self._broker_subscribers):
                _call_safely(callback, snapshot.brokers)
        if snapshot.topics != previous.topics:
            by_id = {t.topic_id: t for t in snapshot.topics.values() if t.topic_id != ZERO_UUID}
            self._image = MetadataImage(self._image.version + 1, MappingProxyType(dict(snapshot.topics)),
                                        MappingProxyType(by_id))
            for on_image in list(self._subscribers):
                _call_safely(on_image, self._image)

    async def _refresh_loop(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._refresh_wanted.wait(), self.refresh_interval)
            except TimeoutError:
                pass
            self._refresh_wanted.clear()
            try:
                await self.refresh()
                self._upstream_answered()
            except (UpstreamError, OSError) as e:
                self._upstream_failed(str(e) or type(e).__name__)
            except Exception as e:   # a bug must not stop the refreshes for good
                log.exception("upstream metadata refresh failed (will retry)")
                self._upstream_failed(repr(e))

    # --- upstream health --------------------------------------------------------------

    def _upstream_failed(self, error: str) -> None:
        self._changed.set()
        now = time.monotonic()
        self._down_error = error
        if self.upstream_up:
            self.upstream_up = False
            self._disturbed = True
            self._down_since = self._down_logged = now
            UPSTREAM_UP.set(0)
            UPSTREAM_OUTAGES.inc()
            log.error("upstream %s is unreachable: %s. Until it answers again, group requests answer "
                      "COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR, FindCoordinator finds no coordinator, "
                      "and forwarded requests close their client's connection; retrying every %.1fs",
                      self._upstream_names(), error, self.refresh_interval)
            if self._writer is not None:
                self._writer.suspend(f"the upstream is unreachable ({error})")
        elif now - self._down_logged >= STILL_DOWN_LOG_INTERVAL:
            self._down_logged = now
            log.warning("upstream %s still unreachable after %.0fs: %s",
                        self._upstream_names(), now - self._down_since, error)

    def _upstream_answered(self) -> None:
        if not self.upstream_up:
            self.upstream_up = True
            UPSTREAM_UP.set(1)
            log.info("upstream %s answers again after %.1fs unreachable (last error: %s)",
                     self._upstream_names(), time.monotonic() - self._down_since, self._down_error)
            # Trust nothing from before: the state topic check below runs on a fresh answer.
            self._track_state_topic(self._snapshot)

    def _upstream_names(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self.bootstrap)

    # --- state topic lifecycle --------------------------------------------------------

    def _track_state_topic(self, snapshot: ClusterSnapshot) -> None:
        """Compare what the upstream lists now with the topic the state was loaded from."""
        self._changed.set()
        if self._owner is None or self._closed or not self.upstream_up:
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
        if self._closed or (self._recovery is not None and not self._recovery.done()):
            return
        self._recovery = asyncio.get_running_loop().create_task(self._recover(), name="kcoord-state-topic-recovery")

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
                if not self.upstream_up:
                    raise UpstreamError("the upstream is unreachable")
                topic = self._snapshot.topics.get(name)
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
                    await self.ensure_topic(name, self._expected_partitions, self._state_configs)
                    created = self._snapshot.topics.get(name)
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
                    if self.upstream_up and not self._is_state_topic(seen):
                        continue            # gone or replaced: recreate / reload that one
                    raise UpstreamError(f"the shards have not reloaded from state topic {name} "
                                        f"(topic id {seen or 'unknown'})")
                if self.state_topic_id not in (seen, None) or self.state_topic not in self._snapshot.topics:
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
        topic = self._snapshot.topics.get(self.state_topic)
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
                if self._closed or not self.upstream_up or not self._is_state_topic(seen):
                    return False
        finally:
            loaded.cancel()

    # --- admin helpers ----------------------------------------------------------------

    async def ensure_topic(self, name: str, partitions: int, configs: Mapping[str, str]) -> None:
        """CreateTopics; an existing topic is fine. Raises UpstreamError on any other error."""
        version = self._version_for(CREATE_TOPICS, preferred=7)
        cls = request_class(CREATE_TOPICS, version)
        module = sys.modules[cls.__module__]
        topic = module.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=-1, assignments=(),
            configs=tuple(module.CreatableTopicConfig(name=k, value=v) for k, v in sorted(configs.items())))
        timeout = timedelta(seconds=self.request_timeout)
        response = await self._call(cls(topics=(topic,), timeout=timeout, validate_only=False),
                                    timeout=self.request_timeout + 5)
        for result in response.topics:
            if result.error_code not in (0, TOPIC_ALREADY_EXISTS):
                raise UpstreamError(f"CreateTopics {result.name!r} failed: error {int(result.error_code)} "
                                    f"{getattr(result, 'error_message', None) or ''}".rstrip())
        await self.refresh()

    async def wait_for_leaders(self, topic: str, timeout: float = 30.0) -> TopicImage:
        """Waits until ``topic`` exists and every partition has a leader; returns its image."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                await self.refresh()
            except UpstreamError as e:
                log.debug("refresh while waiting for leaders of %s failed: %s", topic, e)
            image = self._image.topics_by_name.get(topic)
            leaders = self._snapshot.leaders.get(topic, {})
            if image is not None and image.num_partitions > 0 and len(leaders) == image.num_partitions:
                return image
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"topic {topic!r}: partitions without a leader after {timeout}s "
                                   f"({len(leaders)} of {image.num_partitions if image else 0} led)")
            await asyncio.sleep(min(0.1, remaining))

    # --- plumbing ---------------------------------------------------------------------

    def _version_for(self, api_key: int, preferred: int) -> int:
        known = kio_version_range(api_key)
        upstream = self.upstream_api_versions.get(api_key)
        assert known is not None
        both = intersect(upstream, (known[0], min(known[1], preferred))) if upstream else None
        if both is None:
            raise UpstreamError(f"upstream supports no usable version of API {api_key} (it has {upstream})")
        return both[1]

    async def _call(self, request: Any, timeout: float | None = None) -> Any:
        client = await self._connected()
        try:
            return await client.request(request, timeout or self.request_timeout)
        except UpstreamError:
            client.close()
            raise

    async def _connected(self) -> UpstreamClient:
        async with self._connect_lock:
            if self._client is not None and self._client.lost is not None:
                # The upstream dropped the connection: it may have restarted, so a state topic
                # that is missing on the next answer is more likely a fresh cluster.
                self._disturbed = True
                log.info("connection to the upstream broke (%s); reconnecting", self._client.lost)
                self._client = None
            if self._client is not None and not self._client.closed and self._client.reauthentication_due:
                # KIP-368: the SASL session nears its lifetime. A new, freshly authenticated
                # link replaces this one, which closes once its requests are answered.
                log.debug("SASL session with %s:%d nears its lifetime (%d ms): reconnecting",
                          *self._client.address, self._client.session_lifetime_ms)
                self._client.retire()
                self._client = None
            if self._client is None or self._client.closed:
                known = [(b.host, b.port) for b in self._snapshot.brokers.values()]
                candidates = list(dict.fromkeys([*self.bootstrap, *known]))
                self._client = await UpstreamClient.connect(candidates, self.client_id, security=self.security)
            return self._client


def _call_safely(callback: Callable[[Any], None], value: Any) -> None:
    try:
        callback(value)
    except Exception:
        log.exception("cluster subscriber %r failed", callback)
