"""`authorizer=probe`: ask the upstream, on the client's own link, what the client may do
(upstream security), for clusters whose ACLs cannot be listed (MSK IAM, Confluent Cloud RBAC).

With SASL passthrough every client has its own upstream link, authenticated as the client. The
broker is the authority: kcoord sends it, on that link, the requests whose answers carry Kafka's
own verdicts, and caches them per (principal, client host, resource) for
``authorizer.probe.ttl.ms`` (default 30000), at most ``authorizer.probe.max.entries`` entries
(default 100000; past it the oldest go first):

- TOPIC and CLUSTER: Metadata v10 naming the topics, ``AllowAutoTopicCreation`` false,
  ``IncludeTopicAuthorizedOperations`` and ``IncludeClusterAuthorizedOperations``. A topic
  answered TOPIC_AUTHORIZATION_FAILED is refused everything; one answered
  UNKNOWN_TOPIC_OR_PARTITION (it does not exist, and the client may DESCRIBE it: Kafka checks
  DESCRIBE first) may be described only; otherwise its AuthorizedOperations are the verdicts.
- GROUP: DescribeGroups v5 with ``IncludeAuthorizedOperations``. GROUP_AUTHORIZATION_FAILED
  refuses everything; an answer without error gives the AuthorizedOperations (kcoord's groups do
  not exist upstream: Kafka describes them as Dead, and still fills the field); an answer whose
  error comes after Kafka's authorization (NOT_COORDINATOR: the link's broker is not the
  group's coordinator upstream; COORDINATOR_LOAD_IN_PROGRESS) proves DESCRIBE only.
- TRANSACTIONAL_ID: nothing reports it; refused (kcoord only asks it for forwarded
  transactions, which passthrough leaves to the upstream).

How it fits the synchronous `Authorizer` protocol: `authorize` only reads the cache (a verdict
not cached, or expired, is a refusal: fail closed). The asynchronous `prepare(client, actions)`
fills the cache first: the service awaits it before its checks when the authorizer has it
(`AuthorizationStage.prepare`, coordinator/service/authorization.py), and so does the
gateway's FindCoordinator; ALLOW_ALL and
`AclAuthorizer` have no `prepare`, so their paths do not change. A probe that fails (no link, the
link broke, an error answer, ``authorizer.probe.timeout.ms`` passed) caches nothing: the actions
are refused and the next request probes again.

The client's link is found through the gateway (`attach(gateway)`; the gateway's connections
expose ``peer``, ``listener_name`` and ``probe_upstream``), by the ClientInfo's address and
listener. ``super.users`` are allowed everything without a probe.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..aio import within
from ..protocol.apis import request_class
from .acl import OPERATION_CODES, SUPPORTED_OPERATIONS

if TYPE_CHECKING:
    from ..authz import Action
    from ..protocol.service import ClientInfo

log = logging.getLogger("kcoord.security.acl")

DEFAULT_TTL_MS = 30_000
DEFAULT_MAX_ENTRIES = 100_000
DEFAULT_TIMEOUT_MS = 10_000
METADATA, DESCRIBE_GROUPS = 3, 15
METADATA_VERSION = 10          # the last version with IncludeClusterAuthorizedOperations
DESCRIBE_GROUPS_VERSION = 5    # v6 answers GROUP_ID_NOT_FOUND for a group unknown upstream
CLUSTER_NAME = "kafka-cluster"
_NONE, _UNKNOWN_TOPIC, _TOPIC_AUTH, _GROUP_AUTH = 0, 3, 29, 30
_COORDINATOR_ERRORS = frozenset({14, 15, 16})   # load in progress, not available, not coordinator
_DESCRIBE = 1 << OPERATION_CODES["DESCRIBE"]
_NOT_REQUESTED = -2147483648
_NO_TOPIC_ID = uuid.UUID(int=0)


class ProbeChannel(Protocol):
    """The client's upstream link, as the gateway's connection offers it."""

    def probe_upstream(self, api_key: int, api_version: int, request: Any) -> Awaitable[Any]: ...


class ProbeFailed(RuntimeError):
    """A probe that gave no verdict."""


def _topic_bits(topic: Any) -> int:
    code = int(topic.error_code)
    if code == _TOPIC_AUTH:
        return 0
    ops = topic.topic_authorized_operations
    if code == _UNKNOWN_TOPIC or ops == _NOT_REQUESTED or ops is None:
        return _DESCRIBE
    return int(ops) | _DESCRIBE


def _group_bits(group: Any) -> int:
    code = int(group.error_code)
    if code == _GROUP_AUTH:
        return 0
    if code == _NONE:
        ops = group.authorized_operations
        return _DESCRIBE if ops is None or ops == _NOT_REQUESTED else int(ops) | _DESCRIBE
    if code in _COORDINATOR_ERRORS:
        return _DESCRIBE        # past Kafka's DESCRIBE check; nothing more is known
    raise ProbeFailed(f"DescribeGroups answered error {code} for group {group.group_id!r}")


class ProbeAuthorizer:
    """`coordinator.authz.Authorizer` whose verdicts are the upstream's, probed on the client's
    own link and cached (the module docstring)."""

    mode = "probe"
    ready = True

    def __init__(self, *, super_users: frozenset[str] = frozenset(), ttl_ms: int = DEFAULT_TTL_MS,
                 max_entries: int = DEFAULT_MAX_ENTRIES, timeout_ms: int = DEFAULT_TIMEOUT_MS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.super_users = super_users
        self.ttl_s = ttl_ms / 1000
        self.max_entries = max_entries
        self.timeout_s = timeout_ms / 1000
        self.clock = clock
        # (principal, host, resource type, name) -> (expires at, AuthorizedOperations bits)
        self._cache: dict[tuple[str, str, str, str], tuple[float, int]] = {}
        self._find: Callable[[ClientInfo], ProbeChannel | None] | None = None
        self._index: dict[tuple[str, int, str], Any] = {}
        self.probes = 0           # requests sent upstream (tests, an operator)
        self.failures = 0

    # ----------------------------------------------------------------- wiring
    def attach(self, gateway: Any) -> None:
        """Find clients' links among ``gateway.connections`` (each with ``peer``,
        ``listener_name`` and ``probe_upstream``)."""
        if self._find is not None:
            return
        index = self._index

        def find(client: ClientInfo) -> ProbeChannel | None:
            key = (client.host, client.port, client.listener)
            conn = index.get(key)
            if conn is None or conn.closing or (*conn.peer, conn.listener_name) != key:
                index.clear()
                for c in list(gateway.connections):
                    if not c.closing:
                        index[(*c.peer, c.listener_name)] = c
                conn = index.get(key)
            return conn
        self._find = find

    def attach_channels(self, find: Callable[[ClientInfo], ProbeChannel | None]) -> None:
        """Find links with ``find`` instead (tests; another gateway)."""
        self._find = find

    @property
    def attached(self) -> bool:
        return self._find is not None

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        self._cache.clear()
        self._index.clear()

    # ---------------------------------------------------------------- verdicts
    def _bits(self, principal: str, host: str, resource_type: str, name: str) -> int | None:
        entry = self._cache.get((principal, host, resource_type, name))
        if entry is None or entry[0] <= self.clock():
            return None
        return entry[1]

    def authorize(self, client: ClientInfo, actions: Sequence[Action]) -> list[bool]:
        principal, host = client.principal, client.host
        if principal in self.super_users:
            return [True] * len(actions)
        out = []
        for a in actions:
            bits = self._bits(principal, host, a.resource_type, a.name)
            code = OPERATION_CODES.get(a.operation)
            out.append(bits is not None and code is not None and a.operation in SUPPORTED_OPERATIONS.get(
                a.resource_type, ()) and bool(bits & (1 << code)))
        return out

    def _store(self, principal: str, host: str, resource_type: str, name: str, bits: int) -> None:
        cache = self._cache
        if len(cache) >= self.max_entries:
            now = self.clock()
            for key in [k for k, (expires, _) in cache.items() if expires <= now]:
                del cache[key]
            while len(cache) >= self.max_entries:
                del cache[next(iter(cache))]       # the oldest entry
        key = (principal, host, resource_type, name)
        cache.pop(key, None)                        # re-inserted last: the newest
        cache[key] = (self.clock() + self.ttl_s, bits)

    # ------------------------------------------------------------------ probing
    async def prepare(self, client: ClientInfo, actions: Sequence[Action]) -> None:
        """Probe what ``actions`` need and is not cached; never raises (a failure leaves the
        actions refused)."""
        principal, host = client.principal, client.host
        if principal in self.super_users or not actions:
            return
        topics: list[str] = []
        groups: list[str] = []
        cluster = False
        for a in actions:
            rt = a.resource_type
            if rt not in ("TOPIC", "GROUP", "CLUSTER") or self._bits(principal, host, rt, a.name) is not None:
                continue
            if rt == "TOPIC":
                if a.name not in topics:
                    topics.append(a.name)
            elif rt == "GROUP":
                if a.name not in groups:
                    groups.append(a.name)
            else:
                cluster = True
        if not (topics or groups or cluster):
            return
        channel = self._find(client) if self._find is not None else None
        if channel is None:
            self.failures += 1
            log.warning("authorizer=probe: no upstream link for %s at %s:%d on %s (not attached to the gateway, "
                        "or the connection is gone); refusing", principal, host, client.port, client.listener)
            return
        probes = []
        if topics or cluster:
            probes.append(self._probe_metadata(channel, principal, host, topics, cluster))
        if groups:
            probes.append(self._probe_groups(channel, principal, host, groups))
        try:
            await within(asyncio.gather(*probes), self.timeout_s)
        except Exception as e:      # fail closed: nothing (more) cached, the actions are refused
            self.failures += 1
            log.warning("authorizer=probe: probing the upstream for %s failed (%s); refusing",
                        principal, str(e) or type(e).__name__)

    async def _probe_metadata(self, channel: ProbeChannel, principal: str, host: str, topics: list[str],
                              cluster: bool) -> None:
        mod = __import__(request_class(METADATA, METADATA_VERSION).__module__, fromlist=["x"])
        request = mod.MetadataRequest(
            topics=tuple(mod.MetadataRequestTopic(topic_id=_NO_TOPIC_ID, name=t) for t in topics),
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=cluster, include_topic_authorized_operations=bool(topics))
        self.probes += 1
        response = await channel.probe_upstream(METADATA, METADATA_VERSION, request)
        answered = {t.name: t for t in response.topics}
        missing = [t for t in topics if t not in answered]
        if missing:
            raise ProbeFailed(f"Metadata did not answer topics {missing}")
        for name in topics:
            self._store(principal, host, "TOPIC", name, _topic_bits(answered[name]))
        if cluster:
            ops = response.cluster_authorized_operations
            self._store(principal, host, "CLUSTER", CLUSTER_NAME, 0 if ops == _NOT_REQUESTED else int(ops))

    async def _probe_groups(self, channel: ProbeChannel, principal: str, host: str, groups: list[str]) -> None:
        cls = request_class(DESCRIBE_GROUPS, DESCRIBE_GROUPS_VERSION)
        self.probes += 1
        response = await channel.probe_upstream(DESCRIBE_GROUPS, DESCRIBE_GROUPS_VERSION,
                                                cls(groups=tuple(groups), include_authorized_operations=True))
        answered = {g.group_id: g for g in response.groups}
        missing = [g for g in groups if g not in answered]
        if missing:
            raise ProbeFailed(f"DescribeGroups did not answer groups {missing}")
        for name in groups:
            self._store(principal, host, "GROUP", name, _group_bits(answered[name]))
