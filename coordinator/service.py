"""GroupCoordinatorService: what the gateway calls for every group API.

It routes each group to the shard that owns it (`abs(javaHash(groupId)) % partitions`,
exactly Kafka's mapping), splits multi-group requests by shard, and turns shard-level
failures (loading, not active, write failed) into the per-API error Kafka would send.

Failure rules (issue 10):
- a shard whose log does not load fails alone: `start()` returns once every partition is
  loaded or failed, and raises only for whole-process problems (the state topic cannot be
  read at all). A failed shard's groups answer NOT_COORDINATOR, and
  `partition_available(p)` is False for it (the gateway answers FindCoordinator
  COORDINATOR_NOT_AVAILABLE for its groups); a loading shard is found, and its group APIs
  answer COORDINATOR_LOAD_IN_PROGRESS, as Kafka's;
- `state.load.skip.corrupt.offsets=P:O,...` is the operator's explicit way past a bad
  record; malformed entries fail the start (`SkipOffsetsError`);
- `state_topic_lost()` unloads every shard (their state is no longer backed by a log);
  `reload_all()` drops everything and reloads from the log (a fresh cluster), and says
  whether every shard is back (`wait_reloaded()` waits for the ones still retrying).

Transactional offset commits (issue 16, docs/transactions.md): with a state log that reads
its partitions raw (`enable_txn_offsets`), TxnOffsetCommit is appended as the client's
producer through the shard's `TxnShardPort`, AddOffsetsToTxn becomes AddPartitionsToTxn v3 of
the group's state partition on kcoord's link, and OffsetFetch reads the markers of a group
with open transactions before answering. TransactionalId WRITE is checked before the group.
"""
from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from . import authz
from .authz import ADD_OFFSETS_TO_TXN, ALLOW_ALL, Action, Authorizer, authorized_operations, denied_groups
from .config import CoordinatorConfig
from .connect_apis import CONNECT_APIS
from .group import error_responses, group_admin, offset_ops, regex_refresh
from .group.context import AuthorizedRequestContext
from .group.error_responses import ERROR_RESPONSES
from .group.errors import ApiError
from .group.hashing import partition_for
from .group.image import EMPTY_IMAGE, MetadataImage
from .group.kio_util import build, schema
from .group.regex import excluded_topics, resolve
from .group.result import Result
from .group.shard import GroupCoordinatorShard, RequestContext
from .group.timeutil import from_ms
from .group.txn_offset_commit import add_offsets_to_txn_error, add_offsets_to_txn_response
from .private_apis import PRIVATE_APIS
from .private_apis import TOPIC_CHECKS as PRIVATE_TOPIC_CHECKS
from .protocol.apis import (
    CONSUMER_GROUP_DESCRIBE,
    CONSUMER_GROUP_HEARTBEAT,
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    SYNC_GROUP,
    TXN_OFFSET_COMMIT,
)
from .protocol.connect_messages import CONNECT_GROUP_DESCRIBE
from .protocol.private_apis import PRIVATE_ERRORS
from .protocol.private_messages import CSA_HEARTBEAT
from .protocol.service import ClientInfo
from .runtime import metrics
from .runtime.shard_runtime import ShardRuntime, ShardState
from .runtime.state_log import CorruptBatchError, StateLog, StateTopicUnavailable
from .runtime.txn_offsets_log import ClientTxnAppender, add_offsets_to_txn, txn_offset_commit_request
from .security.audit import AuditLog
from .security.metrics import count_denied

log = logging.getLogger("kcoord.service")


class SkipOffsetsError(ValueError):
    """A `state.load.skip.corrupt.offsets` entry that is not `PARTITION:OFFSET`."""


def parse_skip_offsets(entries, partitions: int) -> dict[int, frozenset[int]]:
    """`("3:1200", "7:55")` -> {3: {1200}, 7: {55}}. Every entry must name a partition of the
    state topic and a non-negative offset: a typo must stop the start, not be ignored."""
    out: dict[int, set[int]] = defaultdict(set)
    for entry in entries:
        text = str(entry).strip()
        p, sep, o = text.partition(":")
        try:
            if not sep:
                raise ValueError
            partition, offset = int(p.strip()), int(o.strip())
        except ValueError:
            raise SkipOffsetsError(f"state.load.skip.corrupt.offsets: entry {text!r} is not "
                                   f"PARTITION:OFFSET (for example 3:1200)") from None
        if not 0 <= partition < partitions:
            raise SkipOffsetsError(f"state.load.skip.corrupt.offsets: entry {text!r} names partition "
                                   f"{partition}, but the state topic has partitions 0..{partitions - 1}")
        if offset < 0:
            raise SkipOffsetsError(f"state.load.skip.corrupt.offsets: entry {text!r} has a negative offset")
        out[partition].add(offset)
    return {p: frozenset(o) for p, o in out.items()}


@dataclass(frozen=True, slots=True)
class ServedApi:
    """One API the service answers: the registry entry (`GroupCoordinatorService.register_api`).

    ``advertised`` False answers the API without
    listing it in ApiVersions (a request refused cleanly instead of closing the connection).
    Its error response lives in error_responses.ERROR_RESPONSES and its group operation in
    authz.GROUP_OPERATIONS (a private API without groups lists none)."""

    api_key: int
    name: str                       # the metric label (Kafka's request name)
    versions: tuple[int, int]
    # A method name of the service (bound once, no extra call per request), or a callable
    # ``handler(service, ctx, request)`` for an API registered from outside.
    handler: str | Callable[..., Awaitable[Any]]
    advertised: bool = True


# Issue 16: TxnOffsetCommit and AddOffsetsToTxn are advertised, and AddOffsetsToTxn is answered
# here instead of forwarded (the upstream would add its own __consumer_offsets partition to the
# transaction). False: neither advertised, AddOffsetsToTxn forwarded, TxnOffsetCommit refused
# per partition (a state log without raw reads answers UNSUPPORTED_VERSION the same way).
TXN_OFFSETS_SERVED = True

# What this coordinator serves, at Kafka 4.3's versions (reference §3.1).
SERVED_APIS: tuple[ServedApi, ...] = (
    ServedApi(JOIN_GROUP, "JoinGroup", (0, 9), "_join_group"),
    ServedApi(HEARTBEAT, "Heartbeat", (0, 4), "_classic_heartbeat"),
    ServedApi(LEAVE_GROUP, "LeaveGroup", (0, 5), "_leave_group"),
    ServedApi(SYNC_GROUP, "SyncGroup", (0, 5), "_sync_group"),
    ServedApi(OFFSET_COMMIT, "OffsetCommit", (2, 10), "_offset_commit"),
    ServedApi(OFFSET_FETCH, "OffsetFetch", (1, 10), "_offset_fetch"),
    ServedApi(DESCRIBE_GROUPS, "DescribeGroups", (0, 6), "_describe_groups"),
    ServedApi(LIST_GROUPS, "ListGroups", (0, 5), "_list_groups"),
    ServedApi(DELETE_GROUPS, "DeleteGroups", (0, 2), "_delete_groups"),
    ServedApi(OFFSET_DELETE, "OffsetDelete", (0, 0), "_offset_delete"),
    ServedApi(CONSUMER_GROUP_HEARTBEAT, "ConsumerGroupHeartbeat", (0, 1),
              "_heartbeat"),
    ServedApi(CONSUMER_GROUP_DESCRIBE, "ConsumerGroupDescribe", (0, 1),
              "_consumer_describe"),
    ServedApi(TXN_OFFSET_COMMIT, "TxnOffsetCommit", (0, 5), "_txn_offset_commit",
              advertised=TXN_OFFSETS_SERVED),
    # Transactions v1 (issue 16): kcoord answers AddOffsetsToTxn itself (the upstream would add
    # its own __consumer_offsets partition): AddPartitionsToTxn v3 of the group's state
    # partition to the client's transaction coordinator, on kcoord's link.
    ServedApi(ADD_OFFSETS_TO_TXN, "AddOffsetsToTxn", (0, 4), "_add_offsets_to_txn",
              advertised=TXN_OFFSETS_SERVED),
)
ERROR_RESPONSES.setdefault(ADD_OFFSETS_TO_TXN, add_offsets_to_txn_error)
API_VERSIONS: dict[int, tuple[int, int]] = {a.api_key: a.versions for a in SERVED_APIS if a.advertised}


class GroupCoordinatorService:
    def __init__(self, config: CoordinatorConfig, state_topic: StateLog,
                 make_shard: Callable[[int], GroupCoordinatorShard] | None = None,
                 authorizer: Authorizer = ALLOW_ALL, audit: AuditLog | None = None) -> None:
        self.config = config
        self.authorizer = authorizer
        # An authorizer that asks elsewhere first (authorizer=probe: security/acl_probe.py) has
        # an async `prepare(client, actions)`, awaited before its synchronous verdicts.
        self._prepare_hook: Callable[[ClientInfo, list[Action]], Awaitable[None]] | None = getattr(
            authorizer, "prepare", None)
        self._candidates: dict[Any, Any] = {}     # regex -> topics it matches in the image (key None)
        self.audit = audit       # the audit log of group mutations (security/audit.py), or None
        self.state_topic = state_topic
        # The served-API registry: what ApiVersions advertises, what is answered, and how.
        self.apis: dict[int, ServedApi] = {}
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.answered_versions: dict[int, tuple[int, int]] = {}
        self._handlers: dict[int, Callable[[RequestContext, Any], Awaitable[Any]]] = {}
        self._names: dict[int, str] = {}
        for api in SERVED_APIS:
            self.register_api(api)
        if config.consumer_client_assignors_enabled:
            # Issue 17: kcoord's private client-assignor APIs 32700-32702 (seed 000), advertised
            # and routed only when enabled (coordinator/private_apis.py).
            for key, name, versions, handler in PRIVATE_APIS:
                self.register_api(ServedApi(key, name, versions, handler))
        if config.connect_groups_enabled:
            # Issue 18: the connect group APIs 32703-32706 (seed 001), advertised and routed only
            # when enabled (coordinator/connect_apis.py).
            for key, name, versions, handler in CONNECT_APIS:
                self.register_api(ServedApi(key, name, versions, handler))
        self._partitions: dict[str, int] = {}
        self._latency: dict[int, Any] = {}
        self._counted: dict[tuple[int, Any], Any] = {}
        self.image: MetadataImage = EMPTY_IMAGE
        self._members_counted_at = float("-inf")
        self._member_total = 0
        self._make_shard = make_shard or (lambda p: GroupCoordinatorShard(p, self.config, self.image))
        skip = parse_skip_offsets(config.state_load_skip_corrupt_offsets, config.state_topic_partitions)
        for p, offsets in sorted(skip.items()):
            log.warning("state.load.skip.corrupt.offsets: partition %d offsets %s will be skipped IF they "
                        "fail to load", p, sorted(offsets))
        self.runtimes = [ShardRuntime(p, self._new_shard, state_topic,
                                      write_timeout_ms=config.offsets_commit_timeout_ms,
                                      skip_offsets=skip.get(p, frozenset()))
                         for p in range(config.state_topic_partitions)]
        # Issue 16: TxnOffsetCommit needs a state log that reads its partitions raw with the
        # marker-aware reader and can append as the client's producer (fenced_state_log);
        # without one it answers UNSUPPORTED_VERSION (and is not advertised).
        self.txn_appender: ClientTxnAppender | None = None
        # One process reads its log raw with the marker-aware loader TxnOffsetCommit needs
        # unless the operator falls back (`--config txn_offsets=false`: aiokafka's
        # read_committed consumer, TxnOffsetCommit not served). The fenced log of several
        # processes (--instance-id) always reads raw.
        enable = getattr(state_topic, "enable_txn_offsets", None) if config.txn_offsets else None
        if enable is not None and not getattr(state_topic, "txn_offsets_supported", False):
            enable(functools.partial(_open_upstream, getattr(state_topic, "security", None), "kcoord-txn"))
        if getattr(state_topic, "txn_offsets_supported", False):
            self.txn_appender = ClientTxnAppender(state_topic.topic, state_topic.call_leader,  # type: ignore[attr-defined]
                                                  request_timeout_ms=config.offsets_commit_timeout_ms)
            for rt in self.runtimes:
                rt.txn_log = state_topic
        else:
            # Not served here: neither advertised nor answered, and AddOffsetsToTxn is
            # forwarded upstream as it was before issue 16 (TxnOffsetCommit then answers
            # UNSUPPORTED_VERSION, never applied outside its transaction).
            self.api_versions.pop(TXN_OFFSET_COMMIT, None)
            for registry in (self.api_versions, self.answered_versions, self.apis, self._handlers, self._names):
                registry.pop(ADD_OFFSETS_TO_TXN, None)
        # start() and reload_all() each replay every partition: never two at once.
        self._load_lock: asyncio.Lock | None = None
        # Several processes (issue 14, coordinator/cluster/node.py): the shards assigned to
        # this instance (None: every shard, one process), and the membership lease, checked
        # before any response is released (None: no lease, one process).
        self.owned: set[int] | None = None
        self.serving: Callable[[], bool] | None = None

    def register_api(self, api: ServedApi) -> None:
        """Add an API to the registry (before the gateway starts: it reads `api_versions` and
        `answered_versions` once). A private API registers itself the same way."""
        if api.api_key in self.apis:
            raise ValueError(f"API {api.name} ({api.api_key}) is registered twice")
        self.apis[api.api_key] = api
        self.answered_versions[api.api_key] = api.versions
        if api.advertised:
            self.api_versions[api.api_key] = api.versions
        handler = api.handler
        self._handlers[api.api_key] = (getattr(self, handler) if isinstance(handler, str)
                                       else functools.partial(handler, self))
        self._names[api.api_key] = api.name

    def _new_shard(self, partition: int) -> GroupCoordinatorShard:
        shard = self._make_shard(partition)
        shard.image = self.image
        shard.heartbeat_policy.member_count = self.total_members
        if self.authorizer is not ALLOW_ALL:
            regex_refresh.require_topic_filter(shard)   # regexes resolve with a member's rights
        return shard

    def total_members(self) -> int:
        """Members across all shards, recounted at most twice a second (the heartbeat policy
        spreads its budget over every member of the process)."""
        now = time.monotonic()
        if now - self._members_counted_at > 0.5:
            self._members_counted_at = now
            self._member_total = sum(len(g.members) for rt in self.runtimes for g in rt.shard.groups.values())
        return self._member_total

    # -------------------------------------------------------------- lifecycle
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
    def enter_cluster_mode(self, serving: Callable[[], bool], load_grace_ms: int) -> None:
        """Serve only the shards the membership assigns (`take`/`release`), and answer
        nothing once the membership lease has run out (`serving()` False). A shard loaded
        here arms its members' session timers `load_grace_ms` later than the load: members
        of a shard that just moved may not have found the new owner yet (issue 14 §3)."""
        self.owned = set()
        self.serving = serving
        for rt in self.runtimes:
            rt.load_grace_ms = load_grace_ms
            rt.unload("not assigned to this kcoord instance")

    def take(self, partitions: Collection[int]) -> None:
        """Load newly assigned shards, each on its own with bounded backoff. The state log's
        load takes the shard first (fenced_state_log: InitProducerId fences the previous
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

        def progress(records: int, done: int) -> None:
            log.info("loading state topic %s: %d records replayed, %d/%d partitions loaded",
                     self.state_topic.topic, records, done, len(served))

        if not served:
            return

        # A shard whose record fails to load (or whose batch cannot be read) turns FAILED
        # and its partition is no longer read; the load of the others goes on.
        extra: dict[str, Any] = ({"readers": lambda p: by_partition[p].load_reader(p)}
                                 if self.txn_appender is not None else {})
        await self.state_topic.load(by_partition, lambda p, o, k, v: by_partition[p].replay_raw(o, k, v),
                                    lambda p, leo: by_partition[p].finish_load(leo), progress,
                                    on_corrupt=lambda p, e: by_partition[p].batch_unreadable(p, e),
                                    abandoned=lambda p: by_partition[p].load_abandoned(p), **extra)
        failed = [rt for rt in served if rt.state is ShardState.FAILED]
        log.info("loaded %d state partitions in %.2fs", len(served) - len(failed),
                 time.monotonic() - started)
        if failed:
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
        COORDINATOR_LOAD_IN_PROGRESS (14; ShardRuntime.check_active), which clients retry
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
        self.image = image
        for rt in self.runtimes:
            if rt.state is ShardState.ACTIVE:
                timers = rt.shard.on_metadata_update(image, rt.clock())
                if timers:
                    rt.submit(_with_timers(timers))
            else:
                rt.shard.image = image

    def shards(self):
        return [rt.shard for rt in self.runtimes]

    # --------------------------------------------------------------- routing
    def partition_for(self, group_id: str) -> int:
        # Java's String.hashCode in Python costs ~1 µs per character: remember the answer.
        partition = self._partitions.get(group_id)
        if partition is None:
            if len(self._partitions) >= 100_000:
                self._partitions.clear()
            partition = self._partitions[group_id] = partition_for(group_id, self.config.state_topic_partitions)
        return partition

    def runtime_for(self, group_id: str) -> ShardRuntime:
        return self.runtimes[self.partition_for(group_id)]

    async def handle(self, api_key: int, api_version: int, request: Any, client: ClientInfo) -> Any:
        handler = self._handlers[api_key]
        started = time.perf_counter()
        if self.authorizer is ALLOW_ALL:
            ctx = RequestContext(api_version=api_version, client_id=client.client_id or "",
                                 client_host=f"/{client.host}")
            response = await handler(ctx, request)
        else:
            response = await self._authorized(handler, api_key, api_version, request, client)
        # labels() takes a lock and builds a key on every call: keep the children.
        seconds = self._latency.get(api_key)
        if seconds is None:
            seconds = self._latency[api_key] = metrics.REQUEST_SECONDS.labels(api=self._names[api_key])
        seconds.observe(time.perf_counter() - started)
        error = getattr(response, "error_code", None)
        counter = self._counted.get((api_key, error))
        if counter is None:
            counter = self._counted[(api_key, error)] = metrics.REQUESTS.labels(
                api=self._names[api_key], error=_error_name(response))
        counter.inc()
        serving = self.serving
        if serving is not None and not serving():
            # Several processes: the membership lease ran out (a pause, a partition), so the
            # shards may belong to another instance by now. Nothing computed from this
            # state is released, not even a heartbeat (issue 14 §3).
            return ERROR_RESPONSES[api_key](api_version, ApiError(
                ErrorCode.not_coordinator, "This kcoord instance's cluster membership lease ran out; "
                "find the coordinator again."), request)
        if self.audit is not None:
            self.audit.record(api_key, request, response, client)
        return response

    async def _authorized(self, handler, api_key: int, api_version: int, request: Any, client: ClientInfo) -> Any:
        """The authorization hook (coordinator/authz.py), Kafka's KafkaApis rules: a
        single-group request the client may not act on gets its error response; a multi-group
        one answers the denied groups with the error and serves the rest; ListGroups lists
        only what it may see; then the topic-level checks of the API (`_TOPIC_CHECKS`) and
        AuthorizedOperations when asked."""
        if self._prepare_hook is not None:
            await self._prepare_hook(client, self._needed_actions(api_key, api_version, request))
        # KafkaApis asks TransactionalId WRITE before the group (TxnOffsetCommit,
        # AddOffsetsToTxn): TRANSACTIONAL_ID_AUTHORIZATION_FAILED on everything.
        if authz.transactional_id_denied(self.authorizer, client, api_key, request):
            count_denied(self._names[api_key], authz.TRANSACTIONAL_ID, 1)
            return ERROR_RESPONSES[api_key](api_version, ApiError(ErrorCode.transactional_id_authorization_failed),
                                            request)
        denied = denied_groups(self.authorizer, client, api_key, request)
        if denied:
            count_denied(self._names[api_key], authz.GROUP, len(denied))
        if api_key == LIST_GROUPS:
            response = await handler(RequestContext(api_version, client.client_id or "", f"/{client.host}"), request)
            await self._prepare(client, [Action(authz.DESCRIBE, authz.GROUP, g.group_id) for g in response.groups])
            return self._visible_groups(response, client)
        multi = api_key in _MULTI_GROUP or (api_key == OFFSET_FETCH and api_version >= 8)
        if denied and not multi:
            return ERROR_RESPONSES[api_key](api_version, ApiError(ErrorCode.group_authorization_failed), request)
        ctx = RequestContext(api_version, client.client_id or "", f"/{client.host}",
                             frozenset(denied) if denied else frozenset()) if api_key not in _HEARTBEATS \
            else AuthorizedRequestContext(api_version, client.client_id or "", f"/{client.host}",
                                          frozenset(denied) if denied else frozenset(), self._topic_filter(client))
        check = _TOPIC_CHECKS.get(api_key)
        if check is not None:
            return await check(self, handler, ctx, request, client)
        response = await handler(ctx, request)
        if api_key == DESCRIBE_GROUPS and getattr(request, "include_authorized_operations", False):
            response = self._with_authorized_operations(response, client)
        return response

    def _topic_filter(self, client: ClientInfo) -> Callable[[Collection[str]], frozenset[str]]:
        """The client's DESCRIBE filter for regex resolution (KAFKA-18813; regex_refresh.py)."""
        authorizer = self.authorizer

        def describable(names: Collection[str]) -> frozenset[str]:
            ordered = list(names)
            verdicts = authorizer.authorize(client, [Action(authz.DESCRIBE, authz.TOPIC, n) for n in ordered])
            return frozenset(n for n, ok in zip(ordered, verdicts) if ok)
        return describable

    async def _prepare(self, client: ClientInfo, actions: list[Action]) -> None:
        if self._prepare_hook is not None and actions:
            await self._prepare_hook(client, actions)

    def _needed_actions(self, api_key: int, api_version: int, request: Any) -> list[Action]:
        """The resources this request's checks read, for `prepare` (an authorizer=probe
        probes per resource, so one action per resource is enough; answers' topics and
        groups are prepared where they are known)."""
        operation = authz.GROUP_OPERATIONS.get(api_key)
        actions = [Action(operation, authz.GROUP, g) for g in authz.group_ids_of(api_key, request)] \
            if operation is not None else []
        if api_key in authz.TRANSACTIONAL_ID_OPERATIONS:
            actions.append(Action(authz.TRANSACTIONAL_ID_OPERATIONS[api_key], authz.TRANSACTIONAL_ID,
                                  request.transactional_id))
        if api_key == LIST_GROUPS:
            actions.append(Action(authz.DESCRIBE, authz.CLUSTER, authz.CLUSTER_NAME))
        elif api_key in (OFFSET_COMMIT, OFFSET_DELETE, TXN_OFFSET_COMMIT):
            actions.extend(Action(authz.READ, authz.TOPIC, n) for t in request.topics
                           if (n := self._topic_name(t)) is not None)
        elif api_key == OFFSET_FETCH:
            lists = [request.topics] if api_version < 8 else [g.topics for g in request.groups]
            actions.extend(Action(authz.DESCRIBE, authz.TOPIC, n) for topics in lists if topics
                           for t in topics if (n := self._topic_name(t)) is not None)
        elif api_key in _HEARTBEATS:
            actions.extend(Action(authz.DESCRIBE, authz.TOPIC, n) for n in request.subscribed_topic_names or ())
            # The topics a regex resolution may give this member (KAFKA-18813): resolution
            # runs later, in a timer, with this member's filter (regex_refresh.py), so its
            # verdicts are probed at every heartbeat of a regex group and stay fresh.
            regexes = set(getattr(self.runtime_for(request.group_id).shard.groups.get(request.group_id),
                                  "regex_subscribers", ()))
            regex = getattr(request, "subscribed_topic_regex", None)
            if regex:
                regexes.add(regex)
            for r in regexes:
                actions.extend(Action(authz.DESCRIBE, authz.TOPIC, n) for n in self._regex_candidates(r))
        return actions

    def _regex_candidates(self, regex: str) -> frozenset[str]:
        """The topics ``regex`` matches in the current image (remembered per image)."""
        image = self.image
        cache = self._candidates
        if cache.get(None) is not image:
            cache.clear()
            cache[None] = image
        found = cache.get(regex)
        if found is None:
            try:
                found = resolve(regex, image.topics_by_name, excluded_topics(self.config))
            except ApiError:
                found = frozenset()        # the handler answers INVALID_REGULAR_EXPRESSION
            if len(cache) < 10_000:
                cache[regex] = found
        return found

    def _visible_groups(self, response: Any, client: ClientInfo) -> Any:
        """Kafka's ListGroups: every group with DESCRIBE on the cluster, else only the groups
        the client may DESCRIBE."""
        if self.authorizer.authorize(client, [Action(authz.DESCRIBE, authz.CLUSTER, authz.CLUSTER_NAME)])[0]:
            return response
        groups = response.groups
        verdicts = self.authorizer.authorize(client, [Action(authz.DESCRIBE, authz.GROUP, g.group_id) for g in groups])
        visible = tuple(g for g, ok in zip(groups, verdicts) if ok)
        if len(visible) < len(groups):
            count_denied(self._names[LIST_GROUPS], authz.GROUP, len(groups) - len(visible))
        return dataclasses.replace(response, groups=visible)

    def _with_authorized_operations(self, response: Any, client: ClientInfo) -> Any:
        """AuthorizedOperations of each described group served without error (Kafka fills it
        only for those)."""
        return dataclasses.replace(response, groups=tuple(
            dataclasses.replace(g, authorized_operations=authorized_operations(self.authorizer, client, g.group_id))
            if g.error_code == ErrorCode.none else g for g in response.groups))

    # ---------------------------------------------------- topic authorization
    def _topic_name(self, topic: Any) -> str | None:
        """A request or response topic's name; a topic id (v10+) is resolved through the
        metadata image (None if unknown: the handler answers UNKNOWN_TOPIC_ID)."""
        name = getattr(topic, "name", None)
        if name is not None:
            return name
        topic_id = getattr(topic, "topic_id", None)
        found = self.image.topics_by_id.get(topic_id) if topic_id is not None else None
        return found.name if found is not None else None

    def _refused_topics(self, client: ClientInfo, api_key: int, operation: str, topics) -> set[int]:
        """Indexes of the topics (named or by id) the client may not perform ``operation`` on.
        A topic id the image does not know is not refused here (the handler answers it)."""
        names = [(i, self._topic_name(t)) for i, t in enumerate(topics)]
        known = [(i, n) for i, n in names if n is not None]
        if not known:
            return set()
        verdicts = self.authorizer.authorize(client, [Action(operation, authz.TOPIC, n) for _, n in known])
        refused = {i for (i, _), ok in zip(known, verdicts) if not ok}
        if refused:
            count_denied(self._names[api_key], authz.TOPIC, len(refused))
        return refused

    async def _commit_topics(self, handler, ctx: RequestContext, req, client: ClientInfo, api_key: int,
                             api: str, prefix: str):
        """OffsetCommit and OffsetDelete: Topic READ per topic. Refused topics answer
        TOPIC_AUTHORIZATION_FAILED per partition and are left out of what the handler sees;
        answers come back in request order. A commit left with no topic is not run (Kafka's
        KafkaApis); an offset deletion is (its group-level checks still apply)."""
        refused = self._refused_topics(client, api_key, authz.READ, req.topics)
        if not refused:
            return await handler(ctx, req)
        mod = schema(api, ctx.api_version)
        part_cls, topic_cls = getattr(mod, f"{prefix}ResponsePartition"), getattr(mod, f"{prefix}ResponseTopic")
        allowed = tuple(t for i, t in enumerate(req.topics) if i not in refused)
        response = None
        if allowed or api_key == OFFSET_DELETE:
            response = await handler(ctx, dataclasses.replace(req, topics=allowed))
        served: dict[Any, list] = defaultdict(list)
        for t in (response.topics if response is not None else ()):
            served[_topic_key(t)].append(t)
        out = []
        for i, t in enumerate(req.topics):
            if i in refused:
                out.append(build(topic_cls, name=getattr(t, "name", None), topic_id=getattr(t, "topic_id", None),
                                 partitions=tuple(build(part_cls, partition_index=p.partition_index,
                                                        error_code=ErrorCode.topic_authorization_failed)
                                                  for p in t.partitions)))
            else:
                answers = served.get(_topic_key(t))
                if answers:
                    out.append(answers.pop(0))
        out.extend(t for rest in served.values() for t in rest)
        if response is None:
            return build(getattr(mod, f"{prefix}Response"), throttle_time=from_ms(0), error_code=ErrorCode.none,
                         topics=tuple(out))
        return dataclasses.replace(response, topics=tuple(out))

    async def _check_offset_commit(self, handler, ctx, req, client):
        return await self._commit_topics(handler, ctx, req, client, OFFSET_COMMIT, "offset_commit", "OffsetCommit")

    async def _check_txn_offset_commit(self, handler, ctx, req, client):
        return await self._commit_topics(handler, ctx, req, client, TXN_OFFSET_COMMIT, "txn_offset_commit",
                                         "TxnOffsetCommit")

    async def _check_offset_delete(self, handler, ctx, req, client):
        return await self._commit_topics(handler, ctx, req, client, OFFSET_DELETE, "offset_delete", "OffsetDelete")

    def _fetch_filter(self, client: ClientInfo, topics):
        """(topics to fetch, refused named topics) of one group of an OffsetFetch."""
        if topics is None:
            return None, ()
        refused = self._refused_topics(client, OFFSET_FETCH, authz.DESCRIBE, topics)
        if not refused:
            return topics, ()
        return (tuple(t for i, t in enumerate(topics) if i not in refused),
                tuple(t for i, t in enumerate(topics) if i in refused))

    def _fetch_merge(self, client: ClientInfo, mod, version: int, requested, refused, topics) -> tuple:
        """One group's fetched topics after authorization: fetch-all keeps only the topics
        the client may DESCRIBE (silently, as Kafka); named topics it may not describe answer
        TOPIC_AUTHORIZATION_FAILED per partition, in request order."""
        if requested is None:
            drop = self._refused_topics(client, OFFSET_FETCH, authz.DESCRIBE, topics)
            # An id the image no longer knows cannot be checked: it is not shown either.
            drop |= {i for i, t in enumerate(topics) if self._topic_name(t) is None}
            return tuple(t for i, t in enumerate(topics) if i not in drop) if drop else tuple(topics)
        if not refused:
            return tuple(topics)
        suffix = "s" if version >= 8 else ""
        part_cls = getattr(mod, f"OffsetFetchResponsePartition{suffix}")
        topic_cls = getattr(mod, f"OffsetFetchResponseTopic{suffix}")
        refused_keys = {_topic_key(t) for t in refused}
        served: dict[Any, list] = defaultdict(list)
        for t in topics:
            served[_topic_key(t)].append(t)
        out = []
        for t in requested:
            key = _topic_key(t)
            if key in refused_keys:
                out.append(build(topic_cls, name=getattr(t, "name", None), topic_id=getattr(t, "topic_id", None),
                                 partitions=tuple(build(part_cls, partition_index=p, committed_offset=-1,
                                                        committed_leader_epoch=-1, metadata="",
                                                        error_code=ErrorCode.topic_authorization_failed)
                                                  for p in t.partition_indexes)))
            elif served.get(key):
                out.append(served[key].pop(0))
        out.extend(t for rest in served.values() for t in rest)
        return tuple(out)

    async def _check_offset_fetch(self, handler, ctx: RequestContext, req, client: ClientInfo):
        """OffsetFetch: Topic DESCRIBE (KafkaApis), every version, each group of v8+."""
        version = ctx.api_version
        mod = schema("offset_fetch", version)
        if version < 8:
            allowed, refused = self._fetch_filter(client, req.topics)
            response = await handler(ctx, dataclasses.replace(req, topics=allowed) if refused else req)
            if getattr(response, "error_code", ErrorCode.none) != ErrorCode.none:
                return response
            if req.topics is None:
                await self._prepare(client, [Action(authz.DESCRIBE, authz.TOPIC, n) for t in response.topics
                                             if (n := self._topic_name(t)) is not None])
            return dataclasses.replace(response, topics=self._fetch_merge(client, mod, version, req.topics, refused,
                                                                          response.topics))
        original = req.groups
        split = [self._fetch_filter(client, g.topics) if g.group_id not in ctx.denied_groups else (g.topics, ())
                 for g in original]
        if any(refused for _, refused in split):
            req = dataclasses.replace(req, groups=tuple(
                dataclasses.replace(g, topics=allowed) if refused else g
                for g, (allowed, refused) in zip(original, split)))
        response = await handler(ctx, req)
        await self._prepare(client, [Action(authz.DESCRIBE, authz.TOPIC, n)
                                     for g, answer in zip(original, response.groups) if g.topics is None
                                     for t in answer.topics if (n := self._topic_name(t)) is not None])
        groups = []
        for g, (_, refused), answer in zip(original, split, response.groups):
            if answer.error_code != ErrorCode.none or g.group_id in ctx.denied_groups:
                groups.append(answer)
                continue
            groups.append(dataclasses.replace(answer, topics=self._fetch_merge(
                client, mod, version, g.topics, refused, answer.topics)))
        return dataclasses.replace(response, groups=tuple(groups))

    async def _check_consumer_heartbeat(self, handler, ctx: RequestContext, req, client: ClientInfo):
        """ConsumerGroupHeartbeat: DESCRIBE on every topic of SubscribedTopicNames, else the
        request answers TOPIC_AUTHORIZATION_FAILED (KAFKA-18813). A steady heartbeat sends
        no names and costs nothing more."""
        names = req.subscribed_topic_names
        if names:
            verdicts = self.authorizer.authorize(client, [Action(authz.DESCRIBE, authz.TOPIC, n) for n in names])
            if not all(verdicts):
                count_denied(self._names[CONSUMER_GROUP_HEARTBEAT], authz.TOPIC, verdicts.count(False))
                return error_responses.consumer_group_heartbeat(
                    ctx.api_version, ApiError(ErrorCode.topic_authorization_failed), req)
        return await handler(ctx, req)

    async def _check_consumer_describe(self, handler, ctx: RequestContext, req, client: ClientInfo):
        """ConsumerGroupDescribe: a described group whose members' assigned or target topics
        are not all describable answers TOPIC_AUTHORIZATION_FAILED and nothing else
        (KAFKA-18813); AuthorizedOperations filled when asked."""
        response = await handler(ctx, req)
        await self._prepare(client, [Action(authz.DESCRIBE, authz.TOPIC, tp.topic_name) for g in response.groups
                                     for m in g.members for a in (m.assignment, m.target_assignment)
                                     for tp in a.topic_partitions])
        mod = schema("consumer_group_describe", ctx.api_version)
        include = req.include_authorized_operations
        groups = []
        for g in response.groups:
            if g.error_code != ErrorCode.none:
                groups.append(g)
                continue
            topics = sorted({tp.topic_name for m in g.members for a in (m.assignment, m.target_assignment)
                             for tp in a.topic_partitions})
            if topics:
                verdicts = self.authorizer.authorize(client, [Action(authz.DESCRIBE, authz.TOPIC, t) for t in topics])
                if not all(verdicts):
                    count_denied(self._names[CONSUMER_GROUP_DESCRIBE], authz.TOPIC, verdicts.count(False))
                    groups.append(error_responses.described_consumer_group_error(mod, g.group_id, ApiError(
                        ErrorCode.topic_authorization_failed, TOPIC_DESCRIBE_REFUSED)))
                    continue
            if include:
                g = dataclasses.replace(g, authorized_operations=authorized_operations(self.authorizer, client,
                                                                                       g.group_id))
            groups.append(g)
        return dataclasses.replace(response, groups=tuple(groups))

    def _by_shard(self, group_ids) -> dict[ShardRuntime, list[str]]:
        out: dict[ShardRuntime, list[str]] = defaultdict(list)
        for gid in group_ids:
            out[self.runtime_for(gid)].append(gid)
        return out

    # -------------------------------------------------------------- handlers
    async def _one_group(self, api_key: int, ctx: RequestContext, req, op):
        """A single-group API: the shard's answer, or the API's error response
        (error_responses.py) when the shard cannot serve it."""
        try:
            return await self.runtime_for(req.group_id).run(op)
        except ApiError as e:
            return ERROR_RESPONSES[api_key](ctx.api_version, e, req)

    async def _heartbeat(self, ctx: RequestContext, req):
        # _one_group written out: the steady heartbeat is the hot path, one coroutine less.
        try:
            return await self.runtime_for(req.group_id).run(
                lambda shard, now: shard.consumer_group_heartbeat(ctx, req, now))
        except ApiError as e:
            return error_responses.consumer_group_heartbeat(ctx.api_version, e, req)

    async def _join_group(self, ctx: RequestContext, req):
        return await self._one_group(JOIN_GROUP, ctx, req, lambda shard, now: shard.join_group(ctx, req, now))

    async def _sync_group(self, ctx: RequestContext, req):
        return await self._one_group(SYNC_GROUP, ctx, req, lambda shard, now: shard.sync_group(ctx, req, now))

    async def _classic_heartbeat(self, ctx: RequestContext, req):
        try:
            return await self.runtime_for(req.group_id).run(lambda shard, now: shard.heartbeat(ctx, req, now))
        except ApiError as e:
            if e.code == ErrorCode.coordinator_load_in_progress:
                # Kafka answers a classic Heartbeat NONE while the group's partition loads
                # ("The group is still loading, so blindly respond", GroupCoordinatorService
                # .heartbeat): the load re-arms every member's session timer anyway, and
                # aiokafka treats COORDINATOR_LOAD_IN_PROGRESS in a Heartbeat as fatal (its
                # heartbeat task dies; the member is expired or leaves after a restart).
                e = ApiError(ErrorCode.none)
            return ERROR_RESPONSES[HEARTBEAT](ctx.api_version, e, req)

    async def _leave_group(self, ctx: RequestContext, req):
        return await self._one_group(LEAVE_GROUP, ctx, req, lambda shard, now: shard.leave_group(ctx, req, now))

    async def _consumer_describe(self, ctx: RequestContext, req):
        mod = schema("consumer_group_describe", ctx.api_version)
        include = req.include_authorized_operations
        described = await self._per_group(req.group_ids, lambda shard, gid: group_admin.describe_consumer_group(
            shard, mod, gid, include), lambda gid, e: error_responses.described_consumer_group_error(mod, gid, e),
            ctx.denied_groups)
        return mod.ConsumerGroupDescribeResponse(throttle_time=from_ms(0), groups=tuple(described))

    async def _describe_groups(self, ctx: RequestContext, req):
        mod = schema("describe_groups", ctx.api_version)
        include = getattr(req, "include_authorized_operations", False)
        described = await self._per_group(req.groups, lambda shard, gid: group_admin.describe_group(
            shard, mod, ctx.api_version, gid, include), lambda gid, e: error_responses.described_group_error(
            mod, gid, e), ctx.denied_groups)
        return build(mod.DescribeGroupsResponse, throttle_time=from_ms(0), groups=tuple(described))

    async def _per_group(self, group_ids, describe, on_error, denied: frozenset[str] = frozenset()) -> list:
        """Run a read of several groups shard by shard; answers keep the request's order.
        Groups in ``denied`` (authorization) answer GROUP_AUTHORIZATION_FAILED unread."""
        answers: dict[str, Any] = {}
        order = list(group_ids)
        if denied:
            refused = ApiError(ErrorCode.group_authorization_failed)
            answers.update((g, on_error(g, refused)) for g in order if g in denied)
            group_ids = [g for g in order if g not in denied]

        async def one(rt: ShardRuntime, gids: list[str]) -> None:
            try:
                results = await rt.run(lambda shard, now: Result(response=[describe(shard, g) for g in gids]))
                answers.update(zip(gids, results))
            except ApiError as e:
                answers.update((g, on_error(g, e)) for g in gids)

        await asyncio.gather(*(one(rt, gids) for rt, gids in self._by_shard(group_ids).items()))
        return [answers[g] for g in order]

    async def _list_groups(self, ctx: RequestContext, req):
        mod = schema("list_groups", ctx.api_version)
        groups: list = []
        error = ErrorCode.none
        for rt in self.runtimes:
            try:
                resp = await rt.run(lambda shard, now: shard.list_groups(ctx, req, now))
                groups.extend(resp.groups)
            except ApiError as e:
                if e.code == ErrorCode.not_coordinator:
                    # Kafka's listGroups asks only its active partitions and maps
                    # NOT_COORDINATOR to an empty list: a failed or unloaded shard is left out
                    # instead of failing every listing.
                    continue
                error = e.code  # Kafka reports a loading coordinator rather than a partial list
        return build(mod.ListGroupsResponse, throttle_time=from_ms(0), error_code=error, groups=tuple(groups))

    async def _delete_groups(self, ctx: RequestContext, req):
        mod = schema("delete_groups", ctx.api_version)
        results: dict[str, Any] = {}

        async def one(rt: ShardRuntime, gids: list[str]) -> None:
            sub = type(req)(groups_names=tuple(g for g in gids if g))
            try:
                resp = await rt.run(lambda shard, now: shard.delete_groups(ctx, sub, now))
                results.update((r.group_id, r) for r in resp.results)
            except ApiError as e:
                results.update((g, error_responses.deletable_group_error(mod, g, e.code)) for g in gids)

        for g in ctx.denied_groups:
            results[g] = error_responses.deletable_group_error(mod, g, ErrorCode.group_authorization_failed)
        allowed = [g for g in req.groups_names if g not in ctx.denied_groups]
        await asyncio.gather(*(one(rt, gids) for rt, gids in self._by_shard(allowed).items()))
        out = [results.get(g) or error_responses.deletable_group_error(mod, g, ErrorCode.invalid_group_id)
               for g in req.groups_names]
        return build(mod.DeleteGroupsResponse, throttle_time=from_ms(0), results=tuple(out))

    async def _offset_commit(self, ctx: RequestContext, req):
        return await self._one_group(OFFSET_COMMIT, ctx, req, lambda shard, now: shard.offset_commit(ctx, req, now))

    async def _txn_offset_commit(self, ctx: RequestContext, req):
        appender = self.txn_appender
        if appender is None:
            return error_responses.txn_offset_commit(ctx.api_version, ApiError(
                ErrorCode.unsupported_version, "TxnOffsetCommit needs the fenced state log (docs/transactions.md)"),
                req)
        rt = self.runtime_for(req.group_id)
        try:
            return await txn_offset_commit_request(rt, appender, ctx, req, rt.write_timeout_s)
        except ApiError as e:
            return error_responses.txn_offset_commit(ctx.api_version, e, req)

    async def _add_offsets_to_txn(self, ctx: RequestContext, req):
        if self.txn_appender is None:
            return add_offsets_to_txn_response(ctx.api_version, ErrorCode.unsupported_version)
        if not req.group_id:
            # Kafka adds __consumer_offsets-k for any group id; an empty one has no coordinator.
            return add_offsets_to_txn_response(ctx.api_version, ErrorCode.invalid_group_id)
        code = await add_offsets_to_txn(self.state_topic, req, self.state_topic.topic,  # type: ignore[arg-type]
                                        self.partition_for(req.group_id), ctx.api_version,
                                        self.config.offsets_commit_timeout_ms / 1000)
        return add_offsets_to_txn_response(ctx.api_version, code)

    async def _offset_delete(self, ctx: RequestContext, req):
        return await self._one_group(OFFSET_DELETE, ctx, req, lambda shard, now: shard.offset_delete(ctx, req, now))

    async def _read_markers(self, group_ids) -> None:
        """Before OffsetFetch answers a group with open transactions, read the markers written
        into its state partition since (issue 16). Kafka's transaction coordinator completes a
        transaction only after WriteTxnMarkers reached the group coordinator, which applies
        the marker then: after EndTxn returns, every OffsetFetch sees the outcome. kcoord
        learns of markers by reading the partition, so it reads them here: the same
        read-your-writes, without a fetch loop per shard. If the read fails, the answer comes
        from memory (require_stable then answers UNSTABLE_OFFSET_COMMIT, which clients retry)."""
        if self.txn_appender is None:
            return
        runtimes = {self.runtime_for(g) for g in group_ids}
        for rt in runtimes:
            if any(rt.shard.offsets.has_open_transactions(g) for g in group_ids):
                try:
                    await rt.read_markers()
                except Exception as e:
                    log.debug("shard %d: markers not read before OffsetFetch: %s", rt.partition, e)

    async def _offset_fetch(self, ctx: RequestContext, req):
        mod = schema("offset_fetch", ctx.api_version)
        await self._read_markers([req.group_id] if ctx.api_version < 8 else [g.group_id for g in req.groups])
        if ctx.api_version < 8:
            return await self._one_group(OFFSET_FETCH, ctx, req, lambda shard, now: shard.offset_fetch(ctx, req, now))

        def one(shard, g):
            try:
                # MemberId and MemberEpoch exist from v9 (KIP-848); v8 is multi-group without them.
                topics = offset_ops.fetch_group(shard, ctx.api_version, mod, g.group_id, g.topics,
                                                req.require_stable, getattr(g, "member_id", None),
                                                getattr(g, "member_epoch", -1))
                return build(mod.OffsetFetchResponseGroup, group_id=g.group_id, topics=tuple(topics),
                             error_code=ErrorCode.none)
            except ApiError as e:
                return error_responses.fetch_group_error(mod, g.group_id, e.code)

        by_id = {g.group_id: g for g in req.groups}
        groups = await self._per_group([g.group_id for g in req.groups], lambda shard, gid: one(shard, by_id[gid]),
                                       lambda gid, e: error_responses.fetch_group_error(mod, gid, e.code),
                                       ctx.denied_groups)
        return build(mod.OffsetFetchResponse, throttle_time=from_ms(0), groups=tuple(groups))


_KAFKA_ERRORS = frozenset(e.value for e in ErrorCode)

# The heartbeats that subscribe to topics: key 68 and its client-assignor variant 32700 (key
# 68 v1's body plus ClientAssignors). Both check DESCRIBE on their topic names and resolve
# their regexes with the member's rights (KAFKA-18813; AuthorizedRequestContext).
_HEARTBEATS = frozenset({CONSUMER_GROUP_HEARTBEAT, CSA_HEARTBEAT})
# Multi-group APIs (OffsetFetch is one from v8): denied groups are answered per entry.
_MULTI_GROUP = frozenset({DESCRIBE_GROUPS, CONSUMER_GROUP_DESCRIBE, DELETE_GROUPS, CONNECT_GROUP_DESCRIBE})

# The topic-level checks each API makes after its group check (KafkaApis; KAFKA-18813).
_TOPIC_CHECKS: dict[int, Callable[..., Awaitable[Any]]] = {
    OFFSET_COMMIT: GroupCoordinatorService._check_offset_commit,
    OFFSET_DELETE: GroupCoordinatorService._check_offset_delete,
    TXN_OFFSET_COMMIT: GroupCoordinatorService._check_txn_offset_commit,
    OFFSET_FETCH: GroupCoordinatorService._check_offset_fetch,
    CONSUMER_GROUP_HEARTBEAT: GroupCoordinatorService._check_consumer_heartbeat,
    CONSUMER_GROUP_DESCRIBE: GroupCoordinatorService._check_consumer_describe,
    **PRIVATE_TOPIC_CHECKS,
}
TOPIC_DESCRIBE_REFUSED = "The described group uses topics that the client is not authorized to describe."


def _topic_key(topic: Any) -> Any:
    name = getattr(topic, "name", None)
    return name if name is not None else getattr(topic, "topic_id", None)



async def _open_upstream(security: Any, client_id: str, addresses):
    """A kio link to the upstream with kcoord's TLS/SASL (the state topic's raw reads and
    clients' transactional appends, issue 16); the runtime may not import the gateway."""
    from .gateway.upstream_client import UpstreamClient
    return await UpstreamClient.connect(addresses, client_id=client_id, security=security)


def _with_timers(timers: list) -> Callable[[GroupCoordinatorShard, int], Result]:
    """An operation that only applies timer changes (a metadata update's)."""
    return lambda shard, now: Result(timers=timers)


def _error_name(response: Any) -> str:
    code = getattr(response, "error_code", None)
    if code is None:
        return "none"
    name = getattr(code, "name", None)
    if name is not None:
        return name
    # The private APIs (issue 17) carry their code as a plain int16: 32700/32701 are kcoord's own.
    return PRIVATE_ERRORS.get(code) or (ErrorCode(code).name if code in _KAFKA_ERRORS else str(code))
