"""The API table: one row per API the group coordinator service answers, and the registry
built from the rows.

Rules of this module:
- A row (`ServedApi`) says what ApiVersions advertises, what is answered, by which handler,
  and under which metric name (Kafka's request name). The gateway reads `api_versions` and
  `answered_versions` once, at its start: every API is registered before that.
- `SERVED_APIS` is Kafka 4.3's group APIs at Kafka 4.3's versions. The client-assignor
  and connect extensions (coordinator/private_apis.py, coordinator/connect_apis.py)
  register their rows through the same `ApiRegistry.register`, and only when enabled.
- An API registered twice is a programming error, refused at once.
- A row's error response lives in error_responses.ERROR_RESPONSES and its group operation in
  authz.GROUP_OPERATIONS (a private API without groups lists none).
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..authz import ADD_OFFSETS_TO_TXN
from ..group.error_responses import ERROR_RESPONSES
from ..group.offsets.txn_commit import add_offsets_to_txn_error
from ..protocol.apis import (
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


@dataclass(frozen=True, slots=True)
class ServedApi:
    """One API the service answers: the registry entry (`ApiRegistry.register`).

    ``advertised`` False answers the API without listing it in ApiVersions (a request refused
    cleanly instead of closing the connection)."""

    api_key: int
    name: str                       # the metric label (Kafka's request name)
    versions: tuple[int, int]
    # A method name of one of the service's handler parts (group_apis.GroupApis,
    # transactions.Transactions; bound once, no extra call per request), or a callable
    # ``handler(service, ctx, request)`` for an API registered from outside.
    handler: str | Callable[..., Awaitable[Any]]
    advertised: bool = True


# TxnOffsetCommit and AddOffsetsToTxn are advertised, and AddOffsetsToTxn is answered here
# instead of forwarded (the upstream would add its own __consumer_offsets partition to the
# transaction; docs/design/transactions.md). False: neither advertised, AddOffsetsToTxn forwarded,
# TxnOffsetCommit refused per partition (a state log without raw reads answers
# UNSUPPORTED_VERSION the same way).
TXN_OFFSETS_SERVED = True

# What this coordinator serves, at Kafka 4.3's versions.
SERVED_APIS: tuple[ServedApi, ...] = (
    ServedApi(JOIN_GROUP, "JoinGroup", (0, 9), "join_group"),
    ServedApi(HEARTBEAT, "Heartbeat", (0, 4), "heartbeat"),
    ServedApi(LEAVE_GROUP, "LeaveGroup", (0, 5), "leave_group"),
    ServedApi(SYNC_GROUP, "SyncGroup", (0, 5), "sync_group"),
    ServedApi(OFFSET_COMMIT, "OffsetCommit", (2, 10), "offset_commit"),
    ServedApi(OFFSET_FETCH, "OffsetFetch", (1, 10), "offset_fetch"),
    ServedApi(DESCRIBE_GROUPS, "DescribeGroups", (0, 6), "describe_groups"),
    ServedApi(LIST_GROUPS, "ListGroups", (0, 5), "list_groups"),
    ServedApi(DELETE_GROUPS, "DeleteGroups", (0, 2), "delete_groups"),
    ServedApi(OFFSET_DELETE, "OffsetDelete", (0, 0), "offset_delete"),
    ServedApi(CONSUMER_GROUP_HEARTBEAT, "ConsumerGroupHeartbeat", (0, 1), "consumer_group_heartbeat"),
    ServedApi(CONSUMER_GROUP_DESCRIBE, "ConsumerGroupDescribe", (0, 1), "consumer_group_describe"),
    ServedApi(TXN_OFFSET_COMMIT, "TxnOffsetCommit", (0, 5), "txn_offset_commit",
              advertised=TXN_OFFSETS_SERVED),
    # Transactions v1: kcoord answers AddOffsetsToTxn itself (the upstream would add its own
    # __consumer_offsets partition): AddPartitionsToTxn v3 of the group's state partition to
    # the client's transaction coordinator, on kcoord's link (docs/design/transactions.md).
    ServedApi(ADD_OFFSETS_TO_TXN, "AddOffsetsToTxn", (0, 4), "add_offsets_to_txn",
              advertised=TXN_OFFSETS_SERVED),
)
ERROR_RESPONSES.setdefault(ADD_OFFSETS_TO_TXN, add_offsets_to_txn_error)
API_VERSIONS: dict[int, tuple[int, int]] = {a.api_key: a.versions for a in SERVED_APIS if a.advertised}

Handler = Callable[[Any, Any], Awaitable[Any]]


class ApiRegistry:
    """The served APIs: what ApiVersions advertises (`api_versions`), what is answered
    (`answered_versions`), the bound handler and the metric name of each key."""

    def __init__(self, resolve: Callable[[ServedApi], Handler]) -> None:
        self._resolve = resolve       # a row's handler, bound to the part that serves it
        self.apis: dict[int, ServedApi] = {}
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.answered_versions: dict[int, tuple[int, int]] = {}
        self.handlers: dict[int, Handler] = {}
        self.names: dict[int, str] = {}

    def register(self, api: ServedApi) -> None:
        if api.api_key in self.apis:
            raise ValueError(f"API {api.name} ({api.api_key}) is registered twice")
        self.apis[api.api_key] = api
        self.answered_versions[api.api_key] = api.versions
        if api.advertised:
            self.api_versions[api.api_key] = api.versions
        self.handlers[api.api_key] = self._resolve(api)
        self.names[api.api_key] = api.name

    def withdraw(self, api_key: int) -> None:
        """Neither advertise nor answer ``api_key`` (the gateway then forwards it upstream)."""
        for registry in (self.api_versions, self.answered_versions, self.apis, self.handlers, self.names):
            registry.pop(api_key, None)

    def unadvertise(self, api_key: int) -> None:
        """Answer ``api_key`` without listing it in ApiVersions."""
        self.api_versions.pop(api_key, None)
