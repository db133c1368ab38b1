"""GroupCoordinatorService: what the gateway calls for every group API. It composes the
service's parts and runs each request through them.

Rules of this module:
- Wiring only: it builds the parts from the configuration and the state log, and each part
  gets only the collaborators it needs (the runtimes, the router, a callable), never the
  service itself. The one exception is an extension's handler given as a callable in its row
  (client-assignor and connect APIs): it is called as ``handler(service, ctx, request)`` and
  may use `runtime_for`, `partition_for`, `runtimes` and `authorizer`.
- The API table is built here, once: the core rows plus the extensions' rows, passed as an
  explicit argument (`extensions`; by default the ones the configuration enables,
  `enabled_extensions`). No module adds to another's table at import.
- `handle` is the one door: the handler from the API table (apis.py), run directly under
  ALLOW_ALL or through the authorization stage (authorization.py); then (`_release`) the
  request metrics, the cluster lease check and the audit log. `starters` are the same door
  without a coroutine for the single-group APIs under ALLOW_ALL: the shard operation is
  started at once (the runtime's `start`) and `_release` runs when its answer may leave.
  Nothing computed from a shard's state is released once the membership lease ran out
  (docs/user/cluster.md, the safety argument).
- The steady heartbeat passes here on every request: no extra call, attribute hop or
  allocation may be added to `handle` or `starters` without measuring it (docs/measurements/benchmarks.md).
"""
from __future__ import annotations

import asyncio
import bisect
import functools
import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from .. import metrics
from ..authz import ALLOW_ALL, Authorizer
from ..config import CoordinatorConfig
from ..connect_apis import CONNECT_ROWS
from ..gateway.fresh_topics import FreshTopics
from ..group.errors import ApiError
from ..group.hashing import KAFKA, Partitioner
from ..group.image import EMPTY_IMAGE, MetadataImage
from ..group.modern.consumer import regex_refresh
from ..group.shard import GroupCoordinatorShard, RequestContext
from ..private_apis import CLIENT_ASSIGNOR_ROWS
from ..protocol.api_table import CORE_APIS, ApiSpec, ApiTable, build_table
from ..protocol.apis import ADD_OFFSETS_TO_TXN, TXN_OFFSET_COMMIT
from ..protocol.error_responses import ErrorResponse
from ..protocol.private_apis import PRIVATE_ERRORS
from ..protocol.service import ClientInfo
from ..runtime.answer import Answer
from ..runtime.coordinator_runtime import start_call
from ..runtime.partition_writer import LogWriter
from ..runtime.shard_runtime import ShardRuntime
from ..runtime.state_log import StateLog
from ..security.audit import AuditLog
from . import group_configs
from .apis import ApiRegistry, Handler
from .authorization import AuthorizationStage
from .envelope import ENVELOPE_ROWS
from .group_apis import GroupApis
from .lifecycle import ShardLifecycle
from .routing import ShardRouter
from .skip_list import parse_skip_offsets
from .streams_apis import STREAMS_ROWS
from .transactions import Transactions

log = logging.getLogger("kcoord.service")

# The rows `starters` serves without a coroutine: the single-group handler (no handler named)
# and the ConsumerGroupHeartbeat's, which is the same written out (group_apis.py).
_STARTED_HANDLERS = (None, "consumer_group_heartbeat")
Starter = Callable[[int, Any, ClientInfo], Any]
_bisect_left = bisect.bisect_left    # the request latency's bucket (metrics_unlocked.HistogramChild)
_CONTEXTS_KEPT = 4096     # request contexts the starters keep (one per connection), cleared when full


def enabled_extensions(config: CoordinatorConfig) -> tuple[tuple[ApiSpec, ...], ...]:
    """The extensions' rows the configuration enables: kcoord's private client-assignor APIs
    32700-32702 (docs/design/client-assignors.md) and the connect group APIs 32703-32706
    (docs/design/connect-groups.md). Off, their keys are neither advertised nor routed. The
    streams group APIs 88, 89 and 93 are always on, as in Kafka 4.4 (streams_apis.py), and so
    is the Envelope 58 another kcoord instance sends (answered, never advertised: envelope.py)."""
    return tuple(rows for enabled, rows in ((config.consumer_client_assignors_enabled, CLIENT_ASSIGNOR_ROWS),
                                            (config.connect_groups_enabled, CONNECT_ROWS),
                                            (True, STREAMS_ROWS), (True, ENVELOPE_ROWS)) if enabled)


class GroupCoordinatorService:
    def __init__(self, config: CoordinatorConfig, state_topic: StateLog,
                 make_shard: Callable[[int], GroupCoordinatorShard] | None = None,
                 authorizer: Authorizer = ALLOW_ALL, audit: AuditLog | None = None,
                 extensions: Sequence[Iterable[ApiSpec]] | None = None,
                 partitioner: Partitioner = KAFKA) -> None:
        # partitioner: the group placement the state topic says (service/partitioner.py `decide`).
        self.config = config
        self.authorizer = authorizer
        self.audit = audit       # the audit log of group mutations (security/audit.py), or None
        self.state_topic = state_topic
        self.image: MetadataImage = EMPTY_IMAGE
        self._make_shard = make_shard or (lambda p: GroupCoordinatorShard(p, self.config, self.image))
        skip = parse_skip_offsets(config.state_load_skip_corrupt_offsets, config.state_topic_partitions)
        for p, offsets in sorted(skip.items()):
            log.warning("state.load.skip.corrupt.offsets: partition %d offsets %s will be skipped IF they "
                        "fail to load", p, sorted(offsets))
        # The lifecycle counts members over the runtimes each new shard's heartbeat policy
        # asks about: it exists before them, over the same list.
        self.runtimes: list[ShardRuntime] = []
        self.lifecycle = ShardLifecycle(self.runtimes, state_topic)
        # One writer per process: every shard's batches go through it (runtime/partition_writer.py).
        self.writer = LogWriter(state_topic)
        self.runtimes.extend(ShardRuntime(p, self._new_shard, state_topic,
                                          write_timeout_ms=config.offsets_commit_timeout_ms,
                                          skip_offsets=skip.get(p, frozenset()),
                                          partition_writer=self.writer)
                             for p in range(config.state_topic_partitions))
        self.router = ShardRouter(self.runtimes, config.state_topic_partitions, partitioner)
        self.partition_for = self.router.partition_for
        self.runtime_for = self.router.runtime_for
        self.partition_available = self.lifecycle.partition_available
        self.transactions = Transactions(config, state_topic, self.router, self.runtimes)
        self.lifecycle.raw_reads = self.transactions.served
        self.group_apis = GroupApis(self.router, self.transactions.read_markers)

        # The API table: the core rows and the extensions' (coordinator/protocol/api_table.py).
        table = build_table(CORE_APIS, *(enabled_extensions(config) if extensions is None else extensions))
        if not self.transactions.served:
            # Neither advertised nor answered here, and AddOffsetsToTxn is forwarded upstream
            # (TxnOffsetCommit then answers UNSUPPORTED_VERSION, never applied outside its
            # transaction; transactions.py).
            table = table.without(ADD_OFFSETS_TO_TXN).replaced(TXN_OFFSET_COMMIT, advertised=False)
        self.table: ApiTable = table
        # The served-API registry: the rows bound to their handlers.
        self.registry = registry = ApiRegistry(table.values(), self._bind)
        self.apis, self.api_versions, self.answered_versions = (
            registry.apis, registry.api_versions, registry.answered_versions)
        self._handlers, self._names = registry.handlers, registry.names
        self._authorization = AuthorizationStage(authorizer, registry.apis, config, lambda: self.image,
                                                 self.runtime_for)
        self._contexts: dict[int, tuple[ClientInfo, RequestContext]] = {}   # the starters', by id(client)
        self._starters: dict[int, Starter] = {
            spec.api_key: self._starter(spec) for spec in table.values()
            if spec.shard_operation is not None and spec.handler in _STARTED_HANDLERS}
        self._latency: dict[int, Any] = {}
        self._counted: dict[int | tuple[int, Any], Any] = {}
        # The membership lease, checked before any response is released: a cluster member's
        # (coordinator/cluster/node.py) or a watched plain serve's (coordinator/cluster/solo.py).
        # None: no lease (an unwatched plain serve, the embedded broker's own process).
        self.serving: Callable[[], bool] | None = None
        # The other kcoord instances that own some groups' shards (cluster/peers.py Peers),
        # set by the cluster wiring (clustered.py); None in a single process. The per-group
        # config requests ask them (group_config_peers.py).
        self.group_config_peers: Any = None
        # Ask the gateway's metadata view to refresh soon (set by the shell: cli.py), e.g. once
        # kcoord created a streams group's internal topics, so the group sees them at once
        # instead of at the next periodic refresh (Kafka's coordinator sees them in the same
        # metadata image its controller publishes).
        self.request_metadata_refresh: Callable[[], None] = lambda: None
        # The topics this process just created (gateway/fresh_topics.py): the internal-topic
        # creator writes it (streams_topics.py), the gateway's connections read it to hold a
        # ListOffsets whose partition has no log yet (gateway/list_offsets_hold.py).
        self.fresh_topics = FreshTopics()

    def _bind(self, spec: ApiSpec) -> Handler:
        handler = spec.handler
        if handler is None:
            return self.group_apis.one_group(spec)
        if not isinstance(handler, str):
            return functools.partial(handler, self)
        part = self.group_apis if hasattr(self.group_apis, handler) else self.transactions
        return getattr(part, handler)

    def register_api(self, spec: ApiSpec) -> None:
        """Add a row to the table and the registry (before the gateway starts: it reads
        `api_versions` and `answered_versions` once)."""
        self.registry.register(spec)
        self.table = build_table(self.table.values(), (spec,))
        self._starters.pop(spec.api_key, None)

    def _new_shard(self, partition: int) -> GroupCoordinatorShard:
        shard = self._make_shard(partition)
        shard.image = self.image
        shard.heartbeat_policy.member_count = self.lifecycle.total_members
        if self.authorizer is not ALLOW_ALL:
            regex_refresh.require_topic_filter(shard)   # regexes resolve with a member's rights
        return shard

    # -------------------------------------------------------------- requests
    async def handle(self, api_key: int, api_version: int, request: Any, client: ClientInfo) -> Any:
        handler = self._handlers[api_key]
        started = time.perf_counter()
        if self.authorizer is ALLOW_ALL:
            ctx = RequestContext(api_version=api_version, client_id=client.client_id or "",
                                 client_host=f"/{client.host}")
            response = await handler(ctx, request)
        else:
            response = await self._authorization.authorized(handler, api_key, api_version, request, client)
        return self._release(None, api_key, api_version, request, client, started, response)

    def _release(self, respond: ErrorResponse | None, api_key: int, api_version: int, request: Any,
                 client: ClientInfo, started: float, response: Any, error: BaseException | None = None) -> Any:
        """What every answer passes before it leaves: the request metrics, the membership
        lease and the audit log. A started request's operation that failed (``error``) with
        a shard-level failure (ApiError) leaves as the API's error response (``respond``);
        anything else is raised, and the caller closes the connection, as when `handle`
        raises. An answer that waited for its write comes here through `_release_written`."""
        if error is not None:
            if respond is None or not isinstance(error, ApiError):
                raise error
            response = respond(api_version, error, request)
        # labels() takes a lock and builds a key on every call: keep the children.
        seconds = self._latency.get(api_key)
        if seconds is None:
            seconds = self._latency[api_key] = metrics.REQUEST_SECONDS.labels(api=self._names[api_key])
        # observe()'s two lines (metrics_unlocked.HistogramChild), without the call.
        elapsed = time.perf_counter() - started
        seconds.sum += elapsed
        seconds.counts[_bisect_left(seconds.bounds, elapsed)] += 1
        error = getattr(response, "error_code", None)
        # An answer without a top-level error code (most of them): keyed by the API alone.
        counter = self._counted.get(api_key if error is None else (api_key, error))
        if counter is None:
            counter = self._counted[api_key if error is None else (api_key, error)] = metrics.REQUESTS.labels(
                api=self._names[api_key], error=_error_name(response))
        counter.value += 1     # inc()'s one line (metrics_unlocked.CounterChild), without the call
        serving = self.serving
        if serving is not None and not serving():
            # Several processes: the membership lease ran out (a pause, a partition), so the
            # shards may belong to another instance by now. Nothing computed from this
            # state is released, not even a heartbeat (docs/user/cluster.md, the safety argument).
            return self.apis[api_key].error_response(api_version, ApiError(
                ErrorCode.not_coordinator, "This kcoord instance's cluster membership lease ran out; "
                "find the coordinator again."), request)
        if self.audit is not None:
            self.audit.record(api_key, request, response, client)
        return response

    # ------------------------------------------------- requests without a coroutine
    @property
    def starters(self) -> Mapping[int, Starter]:
        """`handle` without a coroutine, by API key, for the single-group APIs that run one
        shard operation: ``start(api_version, request, client)`` returns the answer, or,
        when it waits, the runtime's `Answer` of it (its write; released by the answer's
        ``release`` as it completes) or a future (a parked JoinGroup/SyncGroup). The gateway
        completes its ordered answers from that one's done-callback: no Task, and for a
        write no future, per operation. Only under ALLOW_ALL (the authorization stage is a coroutine); an API
        not listed goes through `handle`."""
        return self._starters if self.authorizer is ALLOW_ALL else {}

    def _starter(self, spec: ApiSpec) -> Starter:
        """The single-group handler (group_apis.py ``one_group``) with `handle`'s tail."""
        operation, respond, api_key = spec.shard_operation or "", spec.error_response, spec.api_key
        runtime_for, release, finish, contexts = self.router.runtime_for, self._release, self._finish, self._contexts

        def start(api_version: int, req: Any, client: ClientInfo) -> Any:
            started = time.perf_counter()
            # The context is frozen and the gateway keeps one ClientInfo per connection: build
            # it once per client and version (a frozen dataclass's fields cost a setattr each).
            # The entry holds the client, so its id names no other object while it is kept.
            entry = contexts.get(id(client))
            if entry is not None and entry[0] is client and entry[1].api_version == api_version:
                ctx = entry[1]
            else:
                ctx = RequestContext(api_version=api_version, client_id=client.client_id or "",
                                     client_host=f"/{client.host}")
                if len(contexts) >= _CONTEXTS_KEPT:
                    contexts.clear()
                contexts[id(client)] = (client, ctx)
            try:
                answer = start_call(runtime_for(req.group_id), operation, ctx, req)
            except ApiError as e:
                answer = respond(api_version, e, req)
            else:
                if answer.__class__ is Answer:
                    # Waits for its write: released by the answer itself when it completes,
                    # in the write's callback (runtime/answer.py), with no future of our own.
                    # The request's values ride on the answer: no functools.partial per
                    # request (a C object built, then called through C), nor a closure to
                    # unpack them: `_release_written` takes them as they ride.
                    answer.release = _release_written
                    answer.args = (self, respond, api_key, api_version, req, client, started)
                    return answer
                if isinstance(answer, asyncio.Future):   # a parked JoinGroup/SyncGroup, or a Task
                    waiting = answer.get_loop().create_future()
                    answer.add_done_callback(functools.partial(finish, waiting, respond, api_key, api_version,
                                                               req, client, started))
                    return waiting
            return release(respond, api_key, api_version, req, client, started, answer)
        return start

    def _finish(self, released: asyncio.Future, respond: ErrorResponse, api_key: int, api_version: int, request: Any,
                client: ClientInfo, started: float, answer: asyncio.Future) -> None:
        """A started request that waited on an asyncio future (parked, or behind a client's
        transactional append) finished: release its answer into ``released``."""
        if released.done():
            return
        if answer.cancelled():
            released.cancel()
            return
        error = answer.exception()
        try:
            released.set_result(self._release(respond, api_key, api_version, request, client, started,
                                              None if error is not None else answer.result(), error))
        except Exception as e:  # noqa: BLE001 - the caller closes the connection, as when `handle` raises
            released.set_exception(e)

    async def serve_group_configs(self, api_key: int, api_version: int, request: Any, client: ClientInfo) -> Any:
        """The GROUP resources of DescribeConfigs, AlterConfigs, IncrementalAlterConfigs and
        ListConfigResources (service/group_configs.py; the gateway splits them out). The
        lease rule of `handle` holds: nothing read from a shard is released without it."""
        response = await group_configs.serve(self, api_key, api_version, request, client)
        serving = self.serving
        if serving is not None and not serving():
            raise ApiError(ErrorCode.not_coordinator, "This kcoord instance's cluster membership lease ran out")
        return response

    def on_metadata_update(self, image: MetadataImage) -> None:
        self.image = image
        self.lifecycle.on_metadata_update(image)

    # ------------------------------------------------------------- lifecycle
    async def start(self, missing_topic_wait_s: float = 0.0) -> None:
        await self.lifecycle.start(missing_topic_wait_s)

    def enter_cluster_mode(self, serving: Callable[[], bool], load_grace_ms: int) -> None:
        """Serve only the shards the membership assigns (`take`/`release`), and answer
        nothing once the membership lease has run out (`serving()` False)."""
        self.serving = serving
        self.lifecycle.enter_cluster_mode(load_grace_ms)

    @property
    def owned(self) -> set[int] | None:
        """The shards assigned to this instance (None: every shard, one process)."""
        return self.lifecycle.owned

    @owned.setter
    def owned(self, partitions: set[int] | None) -> None:
        self.lifecycle.owned = partitions

    def take(self, partitions: Collection[int]) -> None:
        self.lifecycle.take(partitions)

    def release(self, partitions: Collection[int], reason: str) -> None:
        self.lifecycle.release(partitions, reason)

    def served(self) -> list[ShardRuntime]:
        return self.lifecycle.served()

    def failed_partitions(self) -> dict[int, int | None]:
        return self.lifecycle.failed_partitions()

    def state_topic_lost(self, reason: str) -> None:
        self.lifecycle.state_topic_lost(reason)

    async def reload_all(self, reason: str) -> bool:
        return await self.lifecycle.reload_all(reason)

    def all_loaded(self) -> bool:
        return self.lifecycle.all_loaded()

    async def wait_reloaded(self) -> bool:
        return await self.lifecycle.wait_reloaded()

    def total_members(self) -> int:
        return self.lifecycle.total_members()

    def close(self) -> None:
        self.lifecycle.close()

    def shards(self) -> list[GroupCoordinatorShard]:
        return [rt.shard for rt in self.runtimes]


_KAFKA_ERRORS = frozenset(e.value for e in ErrorCode)


def _release_written(args: tuple[GroupCoordinatorService, ErrorResponse, int, int, Any, ClientInfo, float],
                     response: Any, error: BaseException | None) -> Any:
    """`GroupCoordinatorService._release` of an answer that waited for its write: the
    runtime's Answer calls it as its ``release`` with the request's values it carries
    (``args``: the service, respond, api_key, api_version, request, client, started), so a
    waiting call needs no closure of its own. It calls `_release` rather than repeating its
    lines: the lease check and the audit stay in one place, at about 0.5 % of a durable
    commit (bench/callgrind_gateway_heartbeat.py; docs/measurements/cpu-per-commit.md)."""
    svc, respond, api_key, api_version, request, client, started = args
    return svc._release(respond, api_key, api_version, request, client, started, response, error)


def _error_name(response: Any) -> str:
    code = getattr(response, "error_code", None)
    if code is None:
        return "none"
    name = getattr(code, "name", None)
    if name is not None:
        return name
    # The client-assignor APIs carry their code as a plain int16: 32700/32701 are kcoord's own.
    return PRIVATE_ERRORS.get(code) or (ErrorCode(code).name if code in _KAFKA_ERRORS else str(code))
