"""The gateway's view of the upstream cluster: a metadata cache refreshed in the background.

It holds the brokers (for the listener map and address rewriting), the leaders of the
state topic's partitions (FindCoordinator for groups) and an immutable MetadataImage of
every topic, published to subscribers whenever it changes (the group coordinator reacts
to new topics and partition counts, as Kafka's does through its metadata publisher).
Nothing is excluded: Kafka does not exclude internal topics from regex resolution.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from types import MappingProxyType
from typing import Any

from ..protocol.api_versions import Features, parse_upstream_api_versions
from ..protocol.apis import API_VERSIONS, CREATE_TOPICS, METADATA, intersect, kio_version_range, request_class
from ..group.image import EMPTY_IMAGE, MetadataImage, TopicImage
from .upstream_client import UpstreamClient, UpstreamError

log = logging.getLogger("kcoord.gateway.cluster")

ZERO_UUID = uuid.UUID(int=0)
TOPIC_ALREADY_EXISTS = 36
DEFAULT_REFRESH_INTERVAL = 1.0   # seconds; new topics reach regex subscriptions within this


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


def snapshot_from_metadata(response: Any) -> ClusterSnapshot:
    brokers = {int(b.node_id): Broker(int(b.node_id), b.host, int(b.port), b.rack) for b in response.brokers}
    topics: dict[str, TopicImage] = {}
    leaders: dict[str, dict[int, int]] = {}
    for t in response.topics:
        if t.error_code != 0 or t.name is None:
            continue
        partitions = sorted(t.partitions, key=lambda p: p.partition_index)
        racks = tuple(
            tuple(sorted({brokers[r].rack for r in p.replica_nodes if r in brokers and brokers[r].rack is not None}))
            for p in partitions)
        topic_id = getattr(t, "topic_id", None) or ZERO_UUID
        topics[t.name] = TopicImage(topic_id, t.name, len(partitions), racks)
        leaders[t.name] = {int(p.partition_index): int(p.leader_id) for p in partitions if p.leader_id >= 0}
    return ClusterSnapshot(brokers, topics, leaders)


def _build(cls: type, **wanted: Any) -> Any:
    """An instance of a kio class at some version, setting only the fields it has."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in wanted.items() if k in names})


class ClusterView:
    def __init__(self, bootstrap: Sequence[tuple[str, int]], state_topic: str, *,
                 refresh_interval: float = DEFAULT_REFRESH_INTERVAL, request_timeout: float = 10.0,
                 client_id: str = "kcoord-gateway") -> None:
        if not bootstrap:
            raise ValueError("at least one upstream bootstrap address is needed")
        self.bootstrap = tuple(bootstrap)
        self.state_topic = state_topic
        self.refresh_interval = refresh_interval
        self.request_timeout = request_timeout
        self.client_id = client_id
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
        self._failing = False
        self.started = False

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
        """Leader of the state topic's ``partition`` (the group coordinator's node), if known."""
        return self.partition_leader(self.state_topic, partition)

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
        self._task = asyncio.get_running_loop().create_task(self._refresh_loop(), name="kcoord-cluster-refresh")
        self.started = True

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
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
        self._apply(snapshot_from_metadata(response))
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
            for callback in list(self._subscribers):
                _call_safely(callback, self._image)

    async def _refresh_loop(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._refresh_wanted.wait(), self.refresh_interval)
            except asyncio.TimeoutError:
                pass
            self._refresh_wanted.clear()
            try:
                await self.refresh()
                if self._failing:
                    log.info("upstream metadata refresh works again")
                self._failing = False
            except (UpstreamError, OSError) as e:
                if not self._failing:
                    log.warning("upstream metadata refresh failed (will retry): %s", e)
                self._failing = True
            except Exception:   # a bug must not stop the refreshes for good
                log.exception("upstream metadata refresh failed (will retry)")
                self._failing = True

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
            if self._client is None or self._client.closed:
                known = [(b.host, b.port) for b in self._snapshot.brokers.values()]
                candidates = list(dict.fromkeys([*self.bootstrap, *known]))
                self._client = await UpstreamClient.connect(candidates, self.client_id)
            return self._client


def _call_safely(callback: Callable[[Any], None], value: Any) -> None:
    try:
        callback(value)
    except Exception:
        log.exception("cluster subscriber %r failed", callback)
