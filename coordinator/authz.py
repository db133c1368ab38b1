"""Authorization hooks: where a decision is asked for, not yet how it is made.

Two hooks, both off by default (everything allowed, as a Kafka broker without an authorizer):

- `Authorizer`, in the service (`GroupCoordinatorService(authorizer=...)`). kcoord serves the
  group APIs itself, so it must authorize them itself (Kafka: `KafkaApis` asks the
  authorizer before the group coordinator runs). Kafka's interface shape: a batch of
  `Action(operation, resource_type, name)` in, one verdict per action out. The service asks
  for the group-level action each API needs (`GROUP_OPERATIONS`, Kafka's rules):
  - denied on a single-group API: the API's error response with GROUP_AUTHORIZATION_FAILED;
  - denied for some groups of a multi-group API (DescribeGroups, ConsumerGroupDescribe,
    OffsetFetch v8+, DeleteGroups): those groups' entries carry the error, the rest are served;
  - ListGroups lists only the groups the client may DESCRIBE (Kafka filters the same way).
  Topic-level checks come in the service the way KafkaApis makes them: Topic READ per
  committed (and offset-deleted) topic, Topic DESCRIBE per fetched one (fetch-all drops the
  others silently), DESCRIBE on ConsumerGroupHeartbeat's SubscribedTopicNames, and
  ConsumerGroupDescribe fails a group whose assigned topics are not all describable
  (KAFKA-18813). `authorized_operations` fills AuthorizedOperations. The transactional APIs
  (TxnOffsetCommit, AddOffsetsToTxn) check TransactionalId WRITE first
  (`TRANSACTIONAL_ID_OPERATIONS`), then Group READ, then (TxnOffsetCommit) Topic READ
  (`TOPIC_OPERATIONS`), in KafkaApis' order. Kafka's ACL model and the
  ACL sources (`authorizer=file|upstream|probe`) are in coordinator/security/acl*.py. An
  authorizer may also have an async `prepare(client, actions)` (authorizer=probe), which the
  service and the gateway's FindCoordinator await before asking for verdicts.
- `ForwardGate`, in the gateway (`Gateway(forward_gate=...)`): asked before a request is
  forwarded upstream. Forwarded traffic normally keeps the client's own identity upstream
  (SASL passthrough), so the upstream's ACLs apply; when kcoord terminates authentication
  itself, forwarded requests run as kcoord's principal and must be checked here instead
  (the confused deputy). A denied request closes the connection with a WARNING naming the
  principal and the API. A gate that also has `check_forward` (`RequestGate`:
  coordinator/security/forward_acl.py) is asked that instead, with the ClientInfo and the
  request frame, and may answer the request itself (the API's authorization error).

`ClientInfo.principal` says who asks (`User:ANONYMOUS` until authentication exists).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .protocol import apis
from .protocol.connect_messages import CONNECT_GROUP_DESCRIBE
from .protocol.service import ClientInfo

# Kafka's AclOperation and ResourceType names.
READ, DESCRIBE, DELETE, WRITE = "READ", "DESCRIBE", "DELETE", "WRITE"
GROUP, TOPIC, CLUSTER, TRANSACTIONAL_ID = "GROUP", "TOPIC", "CLUSTER", "TRANSACTIONAL_ID"
CLUSTER_NAME = "kafka-cluster"
# Kafka's AclOperation codes of the operations a GROUP reports in AuthorizedOperations.
GROUP_REPORTED_OPERATIONS: tuple[tuple[str, int], ...] = (
    ("READ", 3), ("DELETE", 6), ("DESCRIBE", 8), ("DESCRIBE_CONFIGS", 10), ("ALTER_CONFIGS", 11))


@dataclass(frozen=True, slots=True)
class Action:
    operation: str
    resource_type: str
    name: str


class Authorizer(Protocol):
    def authorize(self, client: ClientInfo, actions: Sequence[Action]) -> list[bool]:
        """One verdict per action, in order."""
        ...


class ForwardGate(Protocol):
    def allow_forward(self, client_host: str, listener: str, api_key: int, api_version: int) -> bool:
        """Whether this request may be forwarded upstream."""
        ...


class RequestGate(Protocol):
    """A ForwardGate that sees who asks and what: True forwards, False closes the connection,
    bytes is a response body (at the request's version) answered instead of forwarding."""

    def check_forward(self, client: ClientInfo, api_key: int, api_version: int, frame: bytes,
                      header_version: int) -> bool | bytes:
        ...


class AllowAll:
    def authorize(self, client: ClientInfo, actions: Sequence[Action]) -> list[bool]:
        return [True] * len(actions)


ALLOW_ALL = AllowAll()

# AddOffsetsToTxn (Kafka's ApiKeys 25): the gateway intercepts it for transactions v1.
ADD_OFFSETS_TO_TXN = 25

# The operation on the GROUP resource each group API needs (Kafka's KafkaApis rules).
GROUP_OPERATIONS: dict[int, str] = {
    apis.JOIN_GROUP: READ, apis.SYNC_GROUP: READ, apis.HEARTBEAT: READ, apis.LEAVE_GROUP: READ,
    apis.CONSUMER_GROUP_HEARTBEAT: READ, apis.OFFSET_COMMIT: READ, apis.TXN_OFFSET_COMMIT: READ,
    apis.OFFSET_FETCH: DESCRIBE, apis.DESCRIBE_GROUPS: DESCRIBE, apis.CONSUMER_GROUP_DESCRIBE: DESCRIBE,
    apis.LIST_GROUPS: DESCRIBE, apis.DELETE_GROUPS: DELETE, apis.OFFSET_DELETE: DELETE,
    ADD_OFFSETS_TO_TXN: READ,
}

# The operation on the TRANSACTIONAL_ID resource, checked BEFORE the group (KafkaApis'
# handleTxnOffsetCommitRequest and handleAddOffsetsToTxnRequest: "authorize for the
# transactionalId and the consumer group"; the producer id needs no check of its own, it is
# implied by the transactional id). Refused: TRANSACTIONAL_ID_AUTHORIZATION_FAILED, on every
# partition of a TxnOffsetCommit, as AddOffsetsToTxn's error code. kcoord appends the
# client's offsets with its own rights, so skipping this would make it a confused deputy.
TRANSACTIONAL_ID_OPERATIONS: dict[int, str] = {apis.TXN_OFFSET_COMMIT: WRITE, ADD_OFFSETS_TO_TXN: WRITE}

# The operation on each TOPIC a request names, checked AFTER the group, per topic (refused:
# TOPIC_AUTHORIZATION_FAILED on that topic's partitions). TxnOffsetCommit: Topic READ, as
# OffsetCommit; AddOffsetsToTxn names no topic.
TOPIC_OPERATIONS: dict[int, str] = {
    apis.OFFSET_COMMIT: READ, apis.OFFSET_DELETE: READ, apis.TXN_OFFSET_COMMIT: READ, apis.OFFSET_FETCH: DESCRIBE,
}


def group_ids_of(api_key: int, request) -> list[str]:
    """The groups a request names (ListGroups names none: it is filtered instead)."""
    if api_key == apis.DESCRIBE_GROUPS:
        return list(request.groups)
    if api_key == apis.CONSUMER_GROUP_DESCRIBE or api_key == CONNECT_GROUP_DESCRIBE:
        return list(request.group_ids)
    if api_key == apis.DELETE_GROUPS:
        return list(request.groups_names)
    if api_key == apis.OFFSET_FETCH and getattr(request, "groups", None) is not None:
        return [g.group_id for g in request.groups]
    if api_key == apis.LIST_GROUPS:
        return []
    return [request.group_id]


# APIs naming one group in `group_id` (OffsetFetch only before v8: checked below).
_SINGLE_GROUP = frozenset({apis.JOIN_GROUP, apis.SYNC_GROUP, apis.HEARTBEAT, apis.LEAVE_GROUP,
                           apis.CONSUMER_GROUP_HEARTBEAT, apis.OFFSET_COMMIT, apis.TXN_OFFSET_COMMIT,
                           apis.OFFSET_DELETE, ADD_OFFSETS_TO_TXN})


def transactional_id_denied(authorizer: Authorizer, client: ClientInfo, api_key: int, request) -> bool:
    """Whether the client may not act on the request's transactional id (asked before the
    group: `TRANSACTIONAL_ID_OPERATIONS`). False for APIs without one."""
    operation = TRANSACTIONAL_ID_OPERATIONS.get(api_key)
    if operation is None:
        return False
    txn_id = request.transactional_id
    return not authorizer.authorize(client, (Action(operation, TRANSACTIONAL_ID, txn_id),))[0]


def denied_groups(authorizer: Authorizer, client: ClientInfo, api_key: int, request) -> set[str]:
    """The groups of this request the client may not act on."""
    operation = GROUP_OPERATIONS.get(api_key)
    if operation is None:
        return set()        # an API without groups (a private API registered in the service)
    if api_key in _SINGLE_GROUP:     # the heartbeat path: one action, no list building
        group = request.group_id
        return set() if authorizer.authorize(client, (Action(operation, GROUP, group),))[0] else {group}
    groups = group_ids_of(api_key, request)
    if not groups:
        return set()
    verdicts = authorizer.authorize(client, [Action(operation, GROUP, g) for g in groups])
    return {g for g, ok in zip(groups, verdicts) if not ok}


def authorized_operations(authorizer: Authorizer, client: ClientInfo, group_id: str) -> int:
    """Kafka's AuthorizedOperations of a group: one bit (1 << AclOperation code) per operation
    the client may perform on it."""
    verdicts = authorizer.authorize(client, [Action(op, GROUP, group_id) for op, _ in GROUP_REPORTED_OPERATIONS])
    return sum(1 << code for (_, code), ok in zip(GROUP_REPORTED_OPERATIONS, verdicts) if ok)


def coordinator_keys_denied(authorizer: Authorizer, client: ClientInfo, key_type: int, keys: Sequence[str]) -> set[str]:
    """FindCoordinator (Kafka's KafkaApis): GROUP keys (type 0) need Group DESCRIBE (refused:
    GROUP_AUTHORIZATION_FAILED), TRANSACTION keys (1) TransactionalId DESCRIBE (refused:
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED), per key from v4, for the whole request before.
    For the gateway's FindCoordinator path, which answers GROUP keys itself."""
    resource = GROUP if key_type == 0 else TRANSACTIONAL_ID if key_type == 1 else None
    if resource is None or not keys:
        return set()
    verdicts = authorizer.authorize(client, [Action(DESCRIBE, resource, k) for k in keys])
    return {k for k, ok in zip(keys, verdicts) if not ok}


# Kafka's messages of the FindCoordinator refusals (Errors.message()).
_REFUSAL_MESSAGES = {30: "Group authorization failed.", 53: "Transactional Id authorization failed."}


def refuse_coordinator_keys(version: int, response: Any, denied: set[str], code: Any) -> Any:
    """A FindCoordinator response with ``denied`` keys answered ``code`` and no node (v4+: per
    key; before: the request's one key)."""
    message = _REFUSAL_MESSAGES.get(int(code))
    if version >= 4:
        return dataclasses.replace(response, coordinators=tuple(
            dataclasses.replace(c, error_code=code, error_message=message, node_id=-1, host="", port=-1)
            if c.key in denied else c for c in response.coordinators))
    fields: dict[str, Any] = {"error_code": code, "node_id": -1, "host": "", "port": -1}
    if version >= 1:
        fields["error_message"] = message
    return dataclasses.replace(response, **fields)
