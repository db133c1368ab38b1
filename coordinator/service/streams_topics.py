"""Creating a streams group's internal topics (repartition, changelog) on the heartbeat path,
as Kafka 4.4's KafkaApis does after `streamsGroupHeartbeat` (`AutoTopicCreationManager
.createStreamsInternalTopics`), through kcoord's own link to the upstream.

Rules of this module:
- kcoord creates only what the member's principal may create: the caller checks CREATE on the
  CLUSTER, else on each TOPIC, before it asks (streams_apis.py); a refused topic is never
  sent, the member's MISSING_INTERNAL_TOPICS status says "Unauthorized to CREATE on topics …".
- The CreateTopics request runs in the background: the heartbeat is answered at once (Kafka
  sends it to the controller and does not wait either). A topic already being created, or
  whose creation failed and is remembered, is not asked again (Kafka's back-off). The others
  a heartbeat misses go in one CreateTopics, as Kafka sends them, so Kafka's per-request
  bounds below judge them together: never a slice of them, which would let a topology
  create, a few requests apart, what Kafka refuses. Past `MAX_IN_FLIGHT` topics in flight
  they wait for a later heartbeat, whole.
- A creation that fails (an error code other than TOPIC_ALREADY_EXISTS, or no answer) is
  remembered per topic until its deadline, twice the group's heartbeat interval (Kafka's
  `timeoutMs`), and appended to the MISSING_INTERNAL_TOPICS status as "; Creation failed:
  topic (message)." by the caller. The cache is bounded (`MAX_ERRORS`, oldest dropped).
- The request obeys the bounds the gateway puts on a client's CreateTopics (Kafka's controller
  limits, gateway/admin_limits.py: at most 10,000 partitions and 10,000 records per request,
  valid partition counts and replication factors): a topology asking for more is refused
  here with Kafka's message, remembered like any failed creation, never sent upstream.
- The link is opened with kcoord's upstream credentials (the fenced state log's link opener,
  or the state log's bootstrap and TLS/SASL) on first use and again after it was lost;
  kcoord's principal needs CREATE on the internal topics it creates (docs/user/streams-groups.md).
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from ..gateway.admin_limits import ClusterFacts, check_create_topics
from ..gateway.fresh_topics import FreshTopics
from ..group.image import EMPTY_IMAGE, MetadataImage
from ..group.streams.topic_names import CreatableTopic
from ..protocol.messages import schema

log = logging.getLogger("kcoord.streams")

MAX_IN_FLIGHT = 10_000       # Kafka's partitions per request: more topics are refused in one request anyway
MAX_ERRORS = 10_000
CREATE_TOPICS_VERSION = 5      # the first with the cluster's default replication factor (-1, KIP-464) and configs
REQUEST_TIMEOUT_S = 30.0

# () -> a connected link with `request(kio_request, timeout)` and `closed`
OpenLink = Callable[[], Awaitable[Any]]


class InternalTopicCreator:
    """The internal topics of streams groups, created through one upstream link (module rules)."""

    def __init__(self, open_link: OpenLink | None, image: Callable[[], MetadataImage] = lambda: EMPTY_IMAGE,
                 clock: Callable[[], float] = time.monotonic, on_created: Callable[[], None] = lambda: None,
                 fresh: FreshTopics | None = None) -> None:
        self._open = open_link
        self._on_created = on_created      # called once a request created at least one topic
        # The process's just-created topics (gateway/fresh_topics.py): the gateway holds a
        # ListOffsets of theirs until the broker has their logs (gateway/list_offsets_hold.py).
        self._fresh = fresh
        self._image = image
        self._clock = clock
        self._link: Any = None
        self._connecting: asyncio.Lock | None = None
        self.in_flight: set[str] = set()
        self.errors: dict[str, tuple[str, float]] = {}      # topic -> (message, deadline in seconds)
        self._tasks: set[asyncio.Task] = set()

    def create(self, topics: Iterable[CreatableTopic], timeout_ms: int) -> None:
        """Ask for ``topics`` in the background; what fails is remembered for ``timeout_ms``."""
        now = self._clock()
        wanted = [t for t in topics if t.name not in self.in_flight and not self._backing_off(t.name, now)]
        if not wanted or (self.in_flight and len(self.in_flight) + len(wanted) > MAX_IN_FLIGHT):
            return
        self.in_flight.update(t.name for t in wanted)
        task = asyncio.get_running_loop().create_task(self._create(wanted, timeout_ms))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _backing_off(self, name: str, now: float) -> bool:
        found = self.errors.get(name)
        return found is not None and found[1] > now

    def failures(self, names: Collection[str]) -> list[tuple[str, str]]:
        """(topic, message) of the remembered failures of ``names`` that have not expired."""
        now = self._clock()
        out = []
        for name in sorted(names):
            found = self.errors.get(name)
            if found is not None:
                if found[1] > now:
                    out.append((name, found[0]))
                else:
                    del self.errors[name]
        return out

    async def _create(self, topics: Sequence[CreatableTopic], timeout_ms: int) -> None:
        counts: dict[str, int] = {}
        try:
            answers = await self._request(topics, counts)
        except Exception as e:  # noqa: BLE001 - any failure of the link is a failed creation, remembered
            log.warning("streams internal topics %s not created: %s", ", ".join(t.name for t in topics), e)
            answers = {t.name: (ErrorCode.unknown_server_error, str(e) or type(e).__name__) for t in topics}
        finally:
            self.in_flight.difference_update(t.name for t in topics)
        created = [name for name, (code, _) in answers.items() if code == ErrorCode.none]
        if created:
            if self._fresh is not None:
                # The count asked, else (-1: the broker's default) the one the answer gives.
                asked = {t.name: t.partitions for t in topics}
                self._fresh.add((name, asked[name] if asked[name] > 0 else counts.get(name, 0)) for name in created)
            self._on_created()
        deadline = self._clock() + timeout_ms / 1000
        for name, (code, message) in answers.items():
            if code in (ErrorCode.none, ErrorCode.topic_already_exists):
                self.errors.pop(name, None)
                continue
            if len(self.errors) >= MAX_ERRORS:
                self.errors.pop(next(iter(self.errors)))
            self.errors[name] = (message or code.name, deadline)

    async def _request(self, topics: Sequence[CreatableTopic],
                       counts: dict[str, int]) -> dict[str, tuple[ErrorCode, str | None]]:
        """Each asked topic's (error, message); ``counts`` gets the partition count the answer
        gives a topic. Only the names asked are read: a hostile upstream naming others would
        otherwise mark any topic just created (gateway/fresh_topics.py)."""
        request = self._build(topics)
        image = self._image()
        refusal = check_create_topics(request, ClusterFacts(broker_count=0, partitions=lambda name: (
            t.num_partitions if (t := image.topics_by_name.get(name)) is not None else None)))
        if refusal is not None and refusal.whole is not None:
            return {t.name: refusal.whole for t in topics}
        answers: dict[str, tuple[ErrorCode, str | None]] = {}
        if refusal is not None and refusal.entries:
            answers = {request.topics[i].name: e for i, e in refusal.entries.items()}
            request = dataclasses.replace(request, topics=tuple(
                t for i, t in enumerate(request.topics) if i not in refusal.entries))
        if request.topics:
            link = await self._connected()
            response = await link.request(request, REQUEST_TIMEOUT_S + 5)
            asked = {t.name for t in request.topics}
            for t in response.topics:
                if t.name in asked:
                    answers[t.name] = (ErrorCode(int(t.error_code)), t.error_message)
                    counts[t.name] = max(0, int(t.num_partitions))
        for t in topics:
            answers.setdefault(t.name, (ErrorCode.unknown_server_error, "no answer for the topic"))
        return answers

    def _build(self, topics: Sequence[CreatableTopic]) -> Any:
        module = schema("create_topics", CREATE_TOPICS_VERSION, "request")
        return module.CreateTopicsRequest(topics=tuple(module.CreatableTopic(
            name=t.name, num_partitions=t.partitions, replication_factor=t.replication_factor, assignments=(),
            configs=tuple(module.CreatableTopicConfig(name=k, value=v) for k, v in t.configs)) for t in topics),
            timeout=timedelta(seconds=REQUEST_TIMEOUT_S), validate_only=False)

    async def _connected(self) -> Any:
        if self._open is None:
            raise RuntimeError("kcoord has no upstream link to create topics with (its state log is not on a cluster)")
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._link is None or self._link.closed:
                self._link = await self._open()
            return self._link

    def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._link is not None:
            self._link.close()
            self._link = None


def link_opener(state_log: Any) -> OpenLink | None:
    """kcoord's upstream link, from its state log: the fenced log's own opener (its links carry
    kcoord's TLS/SASL), else the plain log's bootstrap and TLS/SASL; None for a log that is not
    on a cluster (tests' in-memory logs)."""
    links = getattr(state_log, "links", None)
    opener, bootstrap = getattr(links, "open", None), getattr(links, "bootstrap", None)
    if opener is not None and bootstrap:
        addresses = list(bootstrap)

        async def open_fenced() -> Any:
            return await opener(addresses)
        return open_fenced
    bootstrap = getattr(state_log, "bootstrap", None)
    if not isinstance(bootstrap, str) or not bootstrap:
        return None
    plain = [(h, int(p)) for h, _, p in (a.strip().rpartition(":") for a in bootstrap.split(","))]
    security = getattr(state_log, "security", None)

    async def open_link() -> Any:
        from ..upstream.client import UpstreamClient
        return await UpstreamClient.connect(plain, client_id="kcoord-streams", security=security)
    return open_link
