"""Authorization hooks: where a decision is asked for, not yet how it is made.

Two hooks, both off by default (everything allowed, as a Kafka broker without an authorizer):

- `Authorizer`, in the service (`GroupCoordinatorService(authorizer=...)`). kcoord serves the
  group APIs itself, so it must authorize them itself (Kafka: `KafkaApis` asks the
  authorizer before the group coordinator runs). Kafka's interface shape: a batch of
  `Action(operation, resource_type, name)` in, one verdict per action out. The service asks
  for the group-level action each API needs (its row's `group_operation` in the API table,
  coordinator/protocol/api_table.py; Kafka's rules):
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
  (`transactional_id_operation`), then Group READ, then (TxnOffsetCommit) Topic READ
  (`topic_operation`), in KafkaApis' order (kcoord appends the client's offsets with its own
  rights: without the TransactionalId check it would be a confused deputy). Kafka's ACL model and the
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

# Kafka's AclOperation names, defined with the API table's rows that ask for them.
from .protocol.api_table import DELETE, DESCRIBE, READ, WRITE, ApiSpec, Groups  # noqa: F401
from .protocol.service import ClientInfo

# Kafka's ResourceType names.
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

def transactional_id_denied(authorizer: Authorizer, client: ClientInfo, spec: ApiSpec, request) -> bool:
    """Whether the client may not act on the request's transactional id (asked before the
    group: the row's `transactional_id_operation`). False for APIs without one."""
    operation = spec.transactional_id_operation
    if operation is None:
        return False
    txn_id = request.transactional_id
    return not authorizer.authorize(client, (Action(operation, TRANSACTIONAL_ID, txn_id),))[0]


def denied_groups(authorizer: Authorizer, client: ClientInfo, spec: ApiSpec, version: int, request) -> set[str]:
    """The groups of this request the client may not act on (the row's `group_operation`)."""
    operation = spec.group_operation
    if operation is None:
        return set()        # an API without groups
    if spec.groups is Groups.ONE:     # the heartbeat path: one action, no list building
        group = request.group_id
        return set() if authorizer.authorize(client, (Action(operation, GROUP, group),))[0] else {group}
    groups = spec.group_ids_of(version, request)
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
