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

Parts, each an object of its own: the link to the upstream (metadata_link.py) and the
state-topic watch (state_topic_watch.py); this module keeps the cache, the refresh loop and
the upstream's health.
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
from ..aio import within
from ..group.image import EMPTY_IMAGE, MetadataImage, TopicImage
from ..protocol.api_versions import Features
from ..protocol.apis import CREATE_TOPICS, METADATA, request_class
from ..upstream.client import UpstreamClient, UpstreamError
from .metadata_link import MetadataLink, build
from .state_topic_watch import STATE_TOPIC_INCIDENTS, STATE_TOPIC_PRESENT, StateTopicWatch

if TYPE_CHECKING:
    from ..security.upstream import UpstreamSecurity

log = logging.getLogger("kcoord.gateway.cluster")

ZERO_UUID = uuid.UUID(int=0)
TOPIC_ALREADY_EXISTS = 36
DEFAULT_REFRESH_INTERVAL = 1.0   # seconds; new topics reach regex subscriptions within this
STILL_DOWN_LOG_INTERVAL = 60.0   # seconds between reminders while the upstream stays down

# The watcher's metrics live with the others (coordinator/metrics.py).
UPSTREAM_UP = metrics.UPSTREAM_UP
UPSTREAM_OUTAGES = metrics.UPSTREAM_OUTAGES
__all__ = ["STATE_TOPIC_INCIDENTS", "STATE_TOPIC_PRESENT", "Broker", "ClusterSnapshot", "ClusterView",
           "snapshot_from_metadata"]


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
    cluster_id: str | None = None                 # the upstream's, as its Metadata says (v2+)


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
    return ClusterSnapshot(brokers, topics, leaders, errors, getattr(response, "cluster_id", None))


def _build(cls: type, **wanted: Any) -> Any:
    """An instance of a kio class at some version, setting only the fields it has."""
class ClusterView:
    """The metadata cache and its refresh loop; composes the link (metadata_link.py) and
    the state-topic watch (state_topic_watch.py), and watches the upstream's health."""

    def __init__(self, bootstrap: Sequence[tuple[str, int]], state_topic: str, *,
                 refresh_interval: float = DEFAULT_REFRESH_INTERVAL, request_timeout: float = 10.0,
                 client_id: str = "kcoord-gateway", security: UpstreamSecurity | None = None) -> None:
        if not bootstrap:
            raise ValueError("at least one upstream bootstrap address is needed")
        self.bootstrap = tuple(bootstrap)
        self.state_topic = state_topic
        self.refresh_interval = refresh_interval
        self.request_timeout = request_timeout
        self._image = EMPTY_IMAGE
        self._snapshot = ClusterSnapshot({}, {}, {})
        self._subscribers: list[Callable[[MetadataImage], None]] = []
        self._broker_subscribers: list[Callable[[Mapping[int, Broker]], None]] = []
        # TLS/SASL of the metadata/admin link (None: PLAINTEXT). A SASL session with a
        # lifetime (KIP-368) is renewed by reconnecting before it ends (metadata_link.py).
        self.security = security
        self.watch = StateTopicWatch(self)
        self.link = MetadataLink(self.bootstrap, request_timeout=request_timeout, client_id=client_id,
                                 security=security, on_broken=self.watch.disturbed,
                                 known=lambda: [(b.host, b.port) for b in self._snapshot.brokers.values()])
        self._refresh_wanted = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.started = False
        # Upstream health, as the refresh loop sees it.
        self.upstream_up = True
        self._down_since = 0.0
        self._down_logged = 0.0
        self._down_error = ""

    # --- public view ------------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        return self._image

    @property
    def snapshot(self) -> ClusterSnapshot:
        """What the latest Metadata answer said."""
        return self._snapshot

    @property
    def cluster_id(self) -> str | None:
        """The upstream's cluster id (kcoord's Metadata answers pass it on to clients)."""
        return self._snapshot.cluster_id

    @property
    def brokers(self) -> Mapping[int, Broker]:
        return self._snapshot.brokers

    @property
    def upstream_api_versions(self) -> dict[int, tuple[int, int]]:
        """The upstream's ApiVersions (api key -> (min, max)), as the link read them."""
        return self.link.upstream_api_versions

    @upstream_api_versions.setter
    def upstream_api_versions(self, versions: dict[int, tuple[int, int]]) -> None:
        self.link.upstream_api_versions = versions

    @property
    def upstream_features(self) -> Features:
        return self.link.upstream_features

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
        if not self.upstream_up or self.watch.lost is not None:
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
        return self.upstream_up and self.watch.lost is None and self.state_topic in self._snapshot.topics

    @property
    def state_topic_lost(self) -> str | None:
        """Why the state kcoord held is void (until every shard reloaded), or None."""
        return self.watch.lost

    def manage_state_topic(self, owner: Any, writer: Any, partitions: int,
                           configs: Mapping[str, str], *, recreate: bool = True) -> None:
        """The state-topic watch (StateTopicWatch.manage) for ``owner``."""
        self.watch.manage(owner, writer, partitions, configs, recreate=recreate)

    def state_write_failed(self, partition: int, error: BaseException) -> None:
        """A state-topic append failed (StateTopicWatch.write_failed)."""
        self.watch.write_failed(partition, error)

    def request_refresh(self) -> None:
        """Refresh soon (coalesced), e.g. after a CreateTopics passed through the gateway."""
        self._refresh_wanted.set()

    # --- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Reads upstream's ApiVersions and a first Metadata, then refreshes in the background."""
        if self.started:
            return
        await self.link.read_api_versions()
        await self.refresh()
        UPSTREAM_UP.set(1)
        self._task = asyncio.get_running_loop().create_task(self._refresh_loop(), name="kcoord-cluster-refresh")
        self.started = True

    async def close(self) -> None:
        await self.watch.close()
        if self._task is not None:
            # Python 3.11's wait_for drops a cancellation that arrives as the request it
            # waits on completes (fixed in 3.12): cancel until the loop has really ended.
            while not self._task.done():
                self._task.cancel()
                await asyncio.wait({self._task}, timeout=1.0)
            if not self._task.cancelled() and self._task.exception() is not None:
                log.debug("refresh loop ended with %r", self._task.exception())
            self._task = None
        self.link.close()
        self.started = False

    # --- refresh ----------------------------------------------------------------------

    async def refresh(self) -> MetadataImage:
        """One Metadata round trip now; publishes what changed."""
        version = self.link.version_for(METADATA, preferred=12)
        request = build(request_class(METADATA, version), topics=None, allow_auto_topic_creation=False,
                        include_cluster_authorized_operations=False, include_topic_authorized_operations=False)
        response = await self.link.call(request)
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

    def _track_state_topic(self, snapshot: ClusterSnapshot) -> None:
        self.watch.track(snapshot)

    async def _refresh_loop(self) -> None:
        while True:
            try:
                await within(self._refresh_wanted.wait(), self.refresh_interval)   # keeps the cancel that stops it
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
        now = time.monotonic()
        self._down_error = error
        if self.upstream_up:
            self.upstream_up = False
            self._down_since = self._down_logged = now
            UPSTREAM_UP.set(0)
            UPSTREAM_OUTAGES.inc()
            log.error("upstream %s is unreachable: %s. Until it answers again, group requests answer "
                      "COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR, FindCoordinator finds no coordinator, "
                      "and forwarded requests close their client's connection; retrying every %.1fs",
                      self._upstream_names(), error, self.refresh_interval)
            self.watch.upstream_failed(error, first=True)
            return
        self.watch.upstream_failed(error, first=False)
        if now - self._down_logged >= STILL_DOWN_LOG_INTERVAL:
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

    # --- admin helpers ----------------------------------------------------------------

    async def ensure_topic(self, name: str, partitions: int, configs: Mapping[str, str]) -> None:
        """CreateTopics; an existing topic is fine. Raises UpstreamError on any other error."""
        version = self.link.version_for(CREATE_TOPICS, preferred=7)
        cls = request_class(CREATE_TOPICS, version)
        module = sys.modules[cls.__module__]
        topic = module.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=-1, assignments=(),
            configs=tuple(module.CreatableTopicConfig(name=k, value=v) for k, v in sorted(configs.items())))
        timeout = timedelta(seconds=self.request_timeout)
        response = await self.link.call(cls(topics=(topic,), timeout=timeout, validate_only=False),
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


    # --- for tests that look inside ----------------------------------------------------

    @property
    def _recovery(self) -> asyncio.Task[None] | None:
        return self.watch.recovery

    @property
    def _client(self) -> UpstreamClient | None:
        return self.link.client


def _call_safely(callback: Callable[[Any], None], value: Any) -> None:
    try:
        callback(value)
    except Exception:
        log.exception("cluster subscriber %r failed", callback)
