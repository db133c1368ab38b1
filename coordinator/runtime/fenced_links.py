"""The fenced state log's links to the upstream: one link per broker address, shared by every
shard, the state topic's leaders and the transaction coordinators (part of
fenced_state_log.py's `FencedStateLog`).

Rules:
- A link is opened on first use with the caller's `open_link` (TLS, SASL) and dropped on any
  failure of a request on it; the next request opens a new one.
- One open per address at a time: callers that find no link while one is being opened await
  that open (two opens would leave one link unclosed and its requests orphaned). A failed open
  fails all of them and is forgotten, so the next request tries again; a link whose open
  finishes after `close()` or `drop()` is closed, never kept.
- A request whose link fails raises `StateLogError`: its outcome is unknown.
- KIP-368: a link whose SASL session nears its end (`reauthentication_due`) is retired (its
  requests in flight finish) and the next request opens a new, freshly authenticated one.
- Leaders and coordinators are cached; a not-leader answer (`call_leader`, `fetch` callers)
  or NOT_COORDINATOR (`forget_coordinator`) forgets the cached one, and the next request
  finds it again from the metadata or FindCoordinator.
- Metadata never asks for auto-creation. A topic created a moment ago may be missing from a
  broker's metadata, or its partitions leaderless, for a moment (Kafka answers CreateTopics
  once the controller committed the topic; brokers learn it after):
  UNKNOWN_TOPIC_OR_PARTITION and LEADER_NOT_AVAILABLE are asked again with backoff for
  `metadata_wait_s`, then fail naming the topic.
- Requests are kcoord's own Kafka protocol at fixed versions (`VERSIONS`): transactions v1
  (Produce <= v11, EndTxn <= v4), which Kafka 4.x and Tansu both serve.
"""
from __future__ import annotations

import asyncio
import importlib
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from functools import partial
from typing import Any, Protocol

from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from ..protocol.apis import request_class

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS, END_TXN = 10, 22, 24, 26
CREATE_TOPICS, DESCRIBE_CONFIGS = 19, 32
VERSIONS = {PRODUCE: 9, FETCH: 12, LIST_OFFSETS: 7, METADATA: 9, FIND_COORDINATOR: 4,
            INIT_PRODUCER_ID: 4, ADD_PARTITIONS: 3, END_TXN: 3, CREATE_TOPICS: 5, DESCRIBE_CONFIGS: 4}

# Answers after which the partition's leader is looked up again.
REFRESH = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.leader_not_available,
                     ErrorCode.unknown_topic_or_partition, ErrorCode.fenced_leader_epoch,
                     ErrorCode.unknown_leader_epoch})
# Metadata answers for a topic its brokers do not know yet (created a moment ago), asked again.
NOT_YET_LISTED = frozenset({ErrorCode.unknown_topic_or_partition, ErrorCode.leader_not_available})
METADATA_WAIT_S = 5.0


class Link(Protocol):
    async def request(self, request: Any, timeout: float = ...) -> Any: ...

    def close(self) -> None: ...

    @property
    def closed(self) -> bool: ...


OpenLink = Callable[[Sequence[tuple[str, int]]], Awaitable[Link]]


class StateLogError(Exception):
    """A request of the fenced state log failed (not a fence): the write's outcome is unknown."""


class CoordinatorError(Exception):
    """FindCoordinator answered an error: retried by the caller like the request's own."""

    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


def _retrieved(task: asyncio.Task[Any]) -> None:
    """An open's error is its callers'; retrieved here too, so that an open nobody awaits any
    more (its callers cancelled) is not reported as an exception never retrieved."""
    if not task.cancelled():
        task.exception()


def make_request(api_key: int, **fields: Any) -> Any:
    return request_class(api_key, VERSIONS[api_key])(**fields)


def request_module(api_key: int) -> Any:
    return importlib.import_module(request_class(api_key, VERSIONS[api_key]).__module__)


def duration_ms(ms: int) -> i32Timedelta:
    return i32Timedelta.parse(timedelta(milliseconds=ms))


class UpstreamLinks:
    def __init__(self, bootstrap: Sequence[tuple[str, int]], topic: str, open_link: OpenLink,
                 request_timeout_s: float, fetch_max_bytes: int) -> None:
        self.bootstrap = list(bootstrap)
        self.topic = topic
        self.open = open_link
        self.request_timeout_s = request_timeout_s
        self.fetch_max_bytes = fetch_max_bytes
        self.links: dict[tuple[str, int], Link] = {}
        self._opening: dict[tuple[str, int], asyncio.Task[Link]] = {}
        self.brokers: dict[int, tuple[str, int]] = {}
        self.leaders: dict[int, int] = {}
        self.replicas: dict[int, int] = {}      # partition -> replication factor
        self.coordinators: dict[str, tuple[str, int]] = {}
        self.metadata_wait_s = METADATA_WAIT_S

    def close(self) -> None:
        links, self.links = self.links, {}
        # An open in progress is not cancelled (a cancelled open could lose a link it had
        # just made): forgotten here, it closes its link when it lands (`_open`).
        self._opening.clear()
        for link in links.values():
            link.close()

    async def link(self, address: tuple[str, int]) -> Link:
        link = self.links.get(address)
        if link is not None and not link.closed and getattr(link, "reauthentication_due", False):
            link.retire()       # type: ignore[attr-defined]  # KIP-368: in-flight requests finish on it
            link = None
        if link is None or link.closed:
            opening = self._opening.get(address)
            if opening is None:
                opening = self._opening[address] = asyncio.get_running_loop().create_task(self._open(address))
                opening.add_done_callback(_retrieved)
            # Shielded: a caller cancelled does not cancel the open the others await.
            link = await asyncio.shield(opening)
        return link

    async def _open(self, address: tuple[str, int]) -> Link:
        this = asyncio.current_task()
        try:
            link = await self.open([address])
        finally:
            if self._opening.get(address) is this:
                del self._opening[address]
            else:
                this = None         # forgotten by close() or drop() meanwhile
        if this is None:
            link.close()
            raise StateLogError(f"link to {address[0]}:{address[1]} closed while it was opened")
        self.links[address] = link
        return link

    def drop(self, address: tuple[str, int] | None) -> None:
        if address is not None:
            self._opening.pop(address, None)    # its link is closed when it lands (`_open`)
            link = self.links.pop(address, None)
            if link is not None:
                link.close()

    def _forget(self, address: tuple[str, int], link: Link | None) -> None:
        """A request failed on ``link`` (None: its open failed): that link is closed and
        forgotten, but not a newer link or an open in progress for the address, which
        another caller may have started meanwhile (a failed open is forgotten by `_open`)."""
        if link is None:
            return
        if self.links.get(address) is link:
            del self.links[address]
        link.close()

    async def call(self, address: tuple[str, int], request: Any) -> Any:
        link = None
        try:
            link = self.links.get(address)
            # `link`'s checks, without its coroutine for an open link: a write per request.
            if link is None or link.closed or getattr(link, "reauthentication_due", False):
                link = None
                link = await self.link(address)
            return await link.request(request, self.request_timeout_s)
        except Exception as e:   # the link's own errors (UpstreamError), OSError, a timeout
            self._forget(address, link)
            raise StateLogError(f"{type(request).__name__} to {address[0]}:{address[1]}: {e}") from e

    def send(self, address: tuple[str, int], request: Any) -> asyncio.Future[Any]:
        """`call` as a future, without a coroutine or a Task when the link is open (the lean
        writer's request per write): the link's own future of the answer. Its failure is
        read with `failed`; the link it used is dropped, as `call` drops it; a link to open
        (or one without `send`) goes through `call` in a Task."""
        link = self.links.get(address)
        send = getattr(link, "send", None)
        if link is None or send is None or link.closed or getattr(link, "reauthentication_due", False):
            return asyncio.ensure_future(self.call(address, request))
        try:
            answer: asyncio.Future[Any] = send(request, self.request_timeout_s)
        except Exception as e:
            self._forget(address, link)
            failed = asyncio.get_running_loop().create_future()
            failed.set_exception(self.failed(address, request, e))
            return failed
        # The link this request used is dropped if it fails (`_forget`: not a newer one
        # another caller opened meanwhile); added before the caller's own callback.
        answer.add_done_callback(partial(self._answer_failed, address, link))
        return answer

    def _answer_failed(self, address: tuple[str, int], link: Link, answer: asyncio.Future[Any]) -> None:
        if answer.cancelled() or answer.exception() is not None:
            self._forget(address, link)

    def failed(self, address: tuple[str, int], request: Any, error: BaseException) -> StateLogError:
        """The error of a request `send` made: the outcome is unknown (its link was dropped
        when it failed, `_answer_failed`). A StateLogError is `call`'s (the Task's), as is."""
        if isinstance(error, StateLogError):
            return error
        return StateLogError(f"{type(request).__name__} to {address[0]}:{address[1]}: {error}")

    async def bootstrap_call(self, request: Any) -> Any:
        errors = []
        for address in list(self.brokers.values()) + self.bootstrap:
            try:
                return await self.call(address, request)
            except StateLogError as e:
                errors.append(str(e))
        raise StateLogError("no upstream broker answered: " + "; ".join(errors[-3:]))

    async def refresh_metadata(self, partition: int | None = None) -> None:
        """Brokers, leaders and replication of the topic; a topic not listed yet (or
        `partition` without a leader) is asked again until `metadata_wait_s` (module rules)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.metadata_wait_s
        delay = 0.05
        while True:
            missing = await self._read_metadata(partition)
            if missing is None:
                return
            if loop.time() + delay > deadline:
                raise StateLogError(f"state topic {self.topic} not ready in the upstream's metadata after "
                                    f"{self.metadata_wait_s:g}s: {missing}")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)

    async def _read_metadata(self, partition: int | None) -> str | None:
        """One Metadata answer applied; what is not there yet (NOT_YET_LISTED), or None."""
        m = request_module(METADATA)
        response = await self.bootstrap_call(make_request(
            METADATA, topics=(m.MetadataRequestTopic(name=TopicName(self.topic)),),
            allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False))
        self.brokers = {int(b.node_id): (b.host, int(b.port)) for b in response.brokers}
        for t in response.topics:
            if t.name != self.topic:
                continue
            if t.error_code in NOT_YET_LISTED:
                return t.error_code.name.upper()
            if t.error_code != ErrorCode.none:
                raise StateLogError(f"state topic {self.topic}: metadata error {t.error_code.name}")
            self.leaders = {int(p.partition_index): int(p.leader_id) for p in t.partitions}
            self.replicas = {int(p.partition_index): len(p.replica_nodes) for p in t.partitions}
            if not t.partitions:
                return "no partitions listed"
            if partition is not None and self.leaders.get(partition, -1) < 0:
                return f"no leader for partition {partition}"
            return None
        return "UNKNOWN_TOPIC_OR_PARTITION (not in the answer)"

    async def leader(self, partition: int) -> tuple[str, int]:
        leader = self.leaders.get(partition, -1)
        if leader < 0 or leader not in self.brokers:
            await self.refresh_metadata(partition)
            leader = self.leaders.get(partition, -1)
            if leader not in self.brokers:
                raise StateLogError(f"state topic {self.topic} partition {partition} has no leader")
        return self.brokers[leader]

    def forget_leader(self, partition: int) -> None:
        self.leaders.pop(partition, None)

    async def coordinator(self, txn_id: str) -> tuple[str, int]:
        address = self.coordinators.get(txn_id)
        if address is not None:
            return address
        response = await self.bootstrap_call(make_request(FIND_COORDINATOR, key_type=i8(1),
                                                          coordinator_keys=(txn_id,)))
        c = response.coordinators[0]
        if c.error_code != ErrorCode.none:
            raise CoordinatorError(c.error_code)
        address = self.coordinators[txn_id] = (c.host, int(c.port))
        return address

    def forget_coordinator(self, transactional_id: str) -> None:
        self.coordinators.pop(transactional_id, None)

    async def call_leader(self, partition: int, request: Any) -> Any:
        """Send `request` (a Produce of one partition) to the partition's leader; a
        not-leader answer forgets the cached leader so that a resend finds the new one."""
        response = await self.call(await self.leader(partition), request)
        try:
            code = response.responses[0].partition_responses[0].error_code
        except (AttributeError, IndexError):
            code = ErrorCode.none
        if code in REFRESH:
            self.forget_leader(partition)
        return response

    async def call_transaction_coordinator(self, transactional_id: str, request: Any) -> Any:
        """Send `request` to the transaction coordinator of `transactional_id`. Raises
        StateLogError if none answers."""
        try:
            address = await self.coordinator(transactional_id)
        except CoordinatorError as e:
            raise StateLogError(f"FindCoordinator(transaction {transactional_id!r}): {e.code.name}") from e
        return await self.call(address, request)

    async def fetch(self, partition: int, offset: int, max_wait_ms: int) -> Any:
        """One Fetch of the partition from `offset`, read_uncommitted (markers visible); None
        when the answer holds no partition (Tansu to max_wait 0 on an empty partition)."""
        m = request_module(FETCH)
        request = make_request(
            FETCH, cluster_id=None, replica_id=BrokerId(-1), max_wait=duration_ms(max_wait_ms),
            min_bytes=i32(0 if max_wait_ms <= 50 else 1), max_bytes=i32(self.fetch_max_bytes),
            isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1),
            topics=(m.FetchTopic(topic=TopicName(self.topic), partitions=(m.FetchPartition(
                partition=i32(partition), current_leader_epoch=i32(-1), fetch_offset=i64(offset),
                last_fetched_epoch=i32(-1), log_start_offset=i64(-1),
                partition_max_bytes=i32(self.fetch_max_bytes)),)),),
            forgotten_topics_data=(), rack_id="")
        response = await self.call(await self.leader(partition), request)
        if response.error_code != ErrorCode.none:
            raise StateLogError(f"Fetch {self.topic}-{partition}: {response.error_code.name}")
        if not response.responses or not response.responses[0].partitions:
            return None
        return response.responses[0].partitions[0]

    async def log_start(self, partition: int) -> int:
        """The partition's log start offset; a leader that moved (or is not known yet, on a
        topic created a moment ago) is looked up again, a bounded number of times."""
        m = request_module(LIST_OFFSETS)
        request = make_request(
            LIST_OFFSETS, replica_id=BrokerId(-1), isolation_level=i8(0), topics=(m.ListOffsetsTopic(
                name=TopicName(self.topic), partitions=(m.ListOffsetsPartition(
                    partition_index=i32(partition), current_leader_epoch=i32(-1), timestamp=i64(-2)),)),))
        for _ in range(50):
            response = await self.call(await self.leader(partition), request)
            part = response.topics[0].partitions[0]
            if part.error_code not in REFRESH:
                break
            self.forget_leader(partition)
            await asyncio.sleep(0.05)
        if part.error_code != ErrorCode.none:
            raise StateLogError(f"ListOffsets {self.topic}-{partition}: {part.error_code.name}")
        return int(part.offset)
