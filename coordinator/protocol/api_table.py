"""The API table: one frozen row (`ApiSpec`) per API kcoord serves, and the table built from
the rows (`build_table`).

Rules of this module:
- A row says everything kcoord knows about one served API: key, name (the metric label,
  Kafka's request name), the versions answered, whether ApiVersions advertises them, the
  GROUP operation the client needs and how the request names its groups (Kafka's KafkaApis
  rules), the TransactionalId and Topic checks, the error response (error_responses.py),
  the handler that serves it and the shard operation that handler runs.
- A table is built once, by the wiring (coordinator/service/wiring.py), from the core rows
  (`CORE_APIS`) and the extensions' rows, passed explicitly:
  `build_table(CORE_APIS, CLIENT_ASSIGNOR_APIS, CONNECT_APIS)`. Nothing adds to a table once
  built (`without` and `replaced` return a new one); a key given twice is refused.
- The service's registry and authorization stage, the gateway's routes and the fuzzer's
  targets all read the rows: no other table of served APIs exists.
- A row names the first version that names topics by id (`topic_ids_from`): those versions
  are advertised only while the upstream's metadata maps topic ids to names
  (`without_topic_ids` takes them off a listing otherwise).
- The protocol layer knows the wire only: a core row names its handler, its topic check and
  its shard operation by method name, and the service's parts bind them; an extension row
  may give callables instead (coordinator/private_apis.py, coordinator/connect_apis.py).
"""
from __future__ import annotations

import dataclasses
import enum
import itertools
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from . import error_responses as er
from .api_keys import (
    ADD_OFFSETS_TO_TXN,
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
from .error_responses import ErrorResponse

# Kafka's AclOperation names of the checks a row asks for (coordinator/authz.py).
READ, DESCRIBE, DELETE, WRITE = "READ", "DESCRIBE", "DELETE", "WRITE"


class Groups(enum.Enum):
    """How a request names the groups its GROUP check is asked for."""

    NONE = "none"        # no group: no group check
    ONE = "one"          # `group_id`: refused, the API's error response answers, unrun
    MANY = "many"        # several (`ApiSpec.group_ids`): refused ones answer in their entry
    LISTED = "listed"    # none named; the answer lists only the groups the client may see


@dataclass(frozen=True, slots=True)
class ApiSpec:
    """One served API (see the module's rules)."""

    api_key: int
    name: str                       # the metric label (Kafka's request name)
    versions: tuple[int, int]
    error_response: ErrorResponse   # builder(version, error, request), error_responses.py
    # A method name of one of the service's handler parts (coordinator/service/group_apis.py
    # GroupApis, transactions.py Transactions), a callable ``handler(service, ctx, request)``,
    # or None: the single-group handler running `shard_operation` on the group's shard.
    handler: str | Callable[..., Awaitable[Any]] | None = None
    # The method of the group coordinator shard the handler runs (coordinator/group/shard.py),
    # None for an API served outside the shards (transactions).
    shard_operation: str | None = None
    advertised: bool = True         # False: answered, but not listed in ApiVersions
    group_operation: str | None = None          # on the GROUP resource (None: no group check)
    groups: Groups = Groups.ONE
    many_groups_from: int = 0       # MANY: the first version naming several groups (before: ONE)
    group_ids: Callable[[Any], list[str]] | None = None   # MANY: the groups a request names
    transactional_id_operation: str | None = None  # on `transactional_id`, asked before the group
    # On each TOPIC the request names in `topics` (per group from `many_groups_from`), after the group.
    topic_operation: str | None = None
    # The topic-level check after the group's: a method name of the service's TopicChecks
    # (coordinator/service/topic_checks.py) or ``check(topic_checks, handler, ctx, request,
    # client)``; None: no topic check.
    topic_check: str | Callable[..., Awaitable[Any]] | None = None
    # A heartbeat subscribing to topics: DESCRIBE on their names, and its regexes resolved
    # with the member's rights (KAFKA-18813).
    subscribes: bool = False
    # Its state lives in the group coordinator: never forwarded upstream, even where not
    # served (AddOffsetsToTxn is forwarded when kcoord does not serve it).
    owned: bool = True
    # The first version that names topics by id (OffsetCommit/OffsetFetch v10, TxnOffsetCommit
    # v6): it can be served only while the upstream's metadata maps topic ids to names
    # (`without_topic_ids`); None: the API never names topics by id.
    topic_ids_from: int | None = None

    def names_many(self, version: int) -> bool:
        """Whether a request at ``version`` names several groups (answered per group)."""
        return self.groups is Groups.MANY and version >= self.many_groups_from

    def group_ids_of(self, version: int, request: Any) -> list[str]:
        """The groups a request names (a LISTED API names none: its answer is filtered)."""
        if self.groups is Groups.ONE or (self.groups is Groups.MANY and version < self.many_groups_from):
            return [request.group_id]
        if self.groups is Groups.MANY and self.group_ids is not None:
            return self.group_ids(request)
        return []


class ApiTable(Mapping[int, ApiSpec]):
    """The rows of the served APIs by key, frozen, in the order given."""

    __slots__ = ("_rows",)

    def __init__(self, rows: Iterable[ApiSpec]) -> None:
        by_key: dict[int, ApiSpec] = {}
        for spec in rows:
            if spec.api_key in by_key:
                raise ValueError(f"API {spec.name} ({spec.api_key}) is in the API table twice")
            by_key[spec.api_key] = spec
        self._rows = MappingProxyType(by_key)

    def __getitem__(self, api_key: int) -> ApiSpec:
        return self._rows[api_key]

    def __iter__(self) -> Iterator[int]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def __repr__(self) -> str:
        return f"ApiTable({', '.join(s.name for s in self._rows.values())})"

    def advertised(self) -> dict[int, tuple[int, int]]:
        """What ApiVersions lists for the served APIs."""
        return {k: s.versions for k, s in self._rows.items() if s.advertised}

    def answered(self) -> dict[int, tuple[int, int]]:
        """The versions answered (advertised or not)."""
        return {k: s.versions for k, s in self._rows.items()}

    def without(self, *api_keys: int) -> ApiTable:
        """The table without these APIs (the gateway then forwards them, unless owned)."""
        return ApiTable(s for k, s in self._rows.items() if k not in api_keys)

    def replaced(self, api_key: int, **changes: Any) -> ApiTable:
        """The table with one row changed (e.g. ``advertised=False``)."""
        return ApiTable(dataclasses.replace(s, **changes) if k == api_key else s for k, s in self._rows.items())


def without_topic_ids(versions: Mapping[int, tuple[int, int]],
                      rows: Mapping[int, ApiSpec]) -> dict[int, tuple[int, int]]:
    """``versions`` (an ApiVersions listing) for an upstream whose metadata does not map topic
    ids to names: each row that names topics by id from some version stops below it. A
    client then names topics by name, as it does with a Kafka broker that lists no such
    version; a request at a higher version would find no topic id it names (UNKNOWN_TOPIC_ID)."""
    out = dict(versions)
    for api_key, (low, high) in versions.items():
        spec = rows.get(api_key)
        first = spec.topic_ids_from if spec is not None else None
        if first is not None and high >= first:
            if low < first:
                out[api_key] = (low, first - 1)
            else:
                del out[api_key]
    return out


def build_table(core: Iterable[ApiSpec], *extensions: Iterable[ApiSpec]) -> ApiTable:
    """The table of ``core``'s rows and each extension's, in that order."""
    return ApiTable(itertools.chain(core, *extensions))


def _describe_groups_ids(request: Any) -> list[str]:
    return list(request.groups)


def group_ids_field(request: Any) -> list[str]:
    """The groups of a describe request naming them in `group_ids` (ConsumerGroupDescribe,
    ConnectGroupDescribe)."""
    return list(request.group_ids)


def _delete_groups_ids(request: Any) -> list[str]:
    return list(request.groups_names)


def _offset_fetch_ids(request: Any) -> list[str]:
    return [g.group_id for g in request.groups]


# Kafka's group APIs at Kafka 4.4's versions, with KafkaApis' authorization rules (the versions kio
# lacks, DeleteGroups v3 and TxnOffsetCommit v6, come from coordinator/protocol/messages).
# TxnOffsetCommit and AddOffsetsToTxn are served only with a state log that reads raw
# (docs/design/transactions.md): otherwise the wiring unadvertises the first and drops the
# second, which the gateway then forwards.
CORE_APIS: tuple[ApiSpec, ...] = (
    ApiSpec(OFFSET_COMMIT, "OffsetCommit", (2, 10), er.offset_commit, shard_operation="offset_commit",
            group_operation=READ, topic_operation=READ, topic_check="offset_commit", topic_ids_from=10),
    ApiSpec(OFFSET_FETCH, "OffsetFetch", (1, 10), er.offset_fetch, "offset_fetch", shard_operation="offset_fetch",
            group_operation=DESCRIBE, groups=Groups.MANY, many_groups_from=8, group_ids=_offset_fetch_ids,
            topic_operation=DESCRIBE, topic_check="offset_fetch", topic_ids_from=10),
    ApiSpec(JOIN_GROUP, "JoinGroup", (0, 9), er.join_group, shard_operation="join_group", group_operation=READ),
    ApiSpec(HEARTBEAT, "Heartbeat", (0, 4), er.heartbeat, "heartbeat", shard_operation="heartbeat",
            group_operation=READ),
    ApiSpec(LEAVE_GROUP, "LeaveGroup", (0, 5), er.leave_group, shard_operation="leave_group", group_operation=READ),
    ApiSpec(SYNC_GROUP, "SyncGroup", (0, 5), er.sync_group, shard_operation="sync_group", group_operation=READ),
    ApiSpec(DESCRIBE_GROUPS, "DescribeGroups", (0, 6), er.describe_groups, "describe_groups",
            shard_operation="describe_groups", group_operation=DESCRIBE, groups=Groups.MANY,
            group_ids=_describe_groups_ids),
    ApiSpec(LIST_GROUPS, "ListGroups", (0, 5), er.list_groups, "list_groups", shard_operation="list_groups",
            group_operation=DESCRIBE, groups=Groups.LISTED),
    # TransactionalId WRITE first, then Group READ, then Topic READ, in KafkaApis' order. v6
    # (KIP-1319) names topics by id only.
    ApiSpec(TXN_OFFSET_COMMIT, "TxnOffsetCommit", (0, 6), er.txn_offset_commit, "txn_offset_commit",
            group_operation=READ, transactional_id_operation=WRITE, topic_operation=READ,
            topic_check="txn_offset_commit", topic_ids_from=6),
    # Transactions v1: kcoord answers AddOffsetsToTxn itself (the upstream would add its own
    # __consumer_offsets partition): AddPartitionsToTxn v3 of the group's state partition to
    # the client's transaction coordinator, on kcoord's link (docs/design/transactions.md).
    ApiSpec(ADD_OFFSETS_TO_TXN, "AddOffsetsToTxn", (0, 4), er.add_offsets_to_txn, "add_offsets_to_txn",
            group_operation=READ, transactional_id_operation=WRITE, owned=False),
    # v3 (KIP-1331) adds a per-group ErrorMessage, which Kafka 4.4 leaves null unless a streams
    # topology-description plugin fails (GROUP_DELETION_FAILED); kcoord has no such plugin.
    ApiSpec(DELETE_GROUPS, "DeleteGroups", (0, 3), er.delete_groups, "delete_groups",
            shard_operation="delete_groups", group_operation=DELETE, groups=Groups.MANY,
            group_ids=_delete_groups_ids),
    ApiSpec(OFFSET_DELETE, "OffsetDelete", (0, 0), er.offset_delete, shard_operation="offset_delete",
            group_operation=DELETE, topic_operation=READ, topic_check="offset_delete"),
    ApiSpec(CONSUMER_GROUP_HEARTBEAT, "ConsumerGroupHeartbeat", (0, 1), er.consumer_group_heartbeat,
            "consumer_group_heartbeat", shard_operation="consumer_group_heartbeat", group_operation=READ,
            topic_check="consumer_group_heartbeat", subscribes=True),
    ApiSpec(CONSUMER_GROUP_DESCRIBE, "ConsumerGroupDescribe", (0, 1), er.consumer_group_describe,
            "consumer_group_describe", shard_operation="consumer_group_describe", group_operation=DESCRIBE,
            groups=Groups.MANY, group_ids=group_ids_field, topic_check="consumer_group_describe"),
)
CORE_TABLE = ApiTable(CORE_APIS)
