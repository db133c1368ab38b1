"""FindCoordinator answers for GROUP keys, built here rather than asked of upstream.

Kafka picks a group's coordinator as the leader of the group's ``__consumer_offsets``
partition (KafkaApis.getCoordinator); the gateway does the same with the state-topic
partition ``service.partition_for(group_id)`` and names the gateway listener fronting
that leader. Unknown leader, or a shard the service cannot serve (not loaded, or failed
to load: ``service.partition_available(partition)`` is False; see Gateway.locate_group)
-> COORDINATOR_NOT_AVAILABLE with Node.noNode (-1, "", -1), as Kafka answers while the
coordinator's partition is not active.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from .apis import FIND_COORDINATOR, response_class

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
KEY_TYPE_SHARE = 2
MIN_BATCHED_VERSION = 4   # KIP-699: v4+ carries a list of CoordinatorKeys

_ZERO = timedelta(0)
# Errors.message(): the exception's default message, or the enum name for NONE.
_MESSAGES = {
    ErrorCode.none: "NONE",
    ErrorCode.coordinator_not_available: "The coordinator is not available.",
    ErrorCode.invalid_request: "This most likely occurs because of a request being malformed by the "
                               "client library or the message was sent to an incompatible broker. "
                               "See the broker logs for more details.",
}
_SHARE_MESSAGE = "share group coordinators (key type 2) are not served by this gateway"


@dataclass(frozen=True, slots=True)
class Node:
    node_id: int
    host: str
    port: int


NO_NODE = Node(-1, "", -1)


def key_type_of(request: Any) -> int:
    """v0 has no KeyType field: it always looks up a group."""
    return int(getattr(request, "key_type", KEY_TYPE_GROUP))


def keys_of(request: Any, version: int) -> tuple[str, ...]:
    return tuple(request.coordinator_keys) if version >= MIN_BATCHED_VERSION else (request.key,)


def group_coordinator_response(version: int, request: Any, locate: Callable[[str], Node | None]) -> Any:
    """The kio FindCoordinatorResponse at ``version`` for a non-TRANSACTION request.

    ``locate(group_id)`` returns the gateway node for the group, or None when the leader
    of its state partition is unknown.
    """
    key_type = key_type_of(request)
    answers: list[tuple[str, ErrorCode, Node, str | None]] = []
    for key in keys_of(request, version):
        if key_type == KEY_TYPE_GROUP:
            node = locate(key)
            if node is None:
                answers.append((key, ErrorCode.coordinator_not_available, NO_NODE, None))
            else:
                answers.append((key, ErrorCode.none, node, None))
        else:
            # SHARE (KIP-932) is not served; any other type is unknown to Kafka too
            # (CoordinatorType.forId throws InvalidRequestException).
            note = _SHARE_MESSAGE if key_type == KEY_TYPE_SHARE else f"unknown coordinator key type {key_type}"
            answers.append((key, ErrorCode.invalid_request, NO_NODE, note))
    cls = response_class(FIND_COORDINATOR, version)
    if version >= MIN_BATCHED_VERSION:
        coordinator = sys.modules[cls.__module__].Coordinator
        return cls(throttle_time=_ZERO, coordinators=tuple(
            coordinator(key=key, node_id=node.node_id, host=node.host, port=node.port,
                        error_code=error, error_message=note)
            for key, error, node, note in answers))
    _, error, node, first_note = answers[0]
    fields: dict[str, Any] = {"error_code": error, "node_id": node.node_id, "host": node.host, "port": node.port}
    if version >= 1:
        fields["throttle_time"] = _ZERO
        fields["error_message"] = first_note or _MESSAGES.get(error, error.name.upper())
    return cls(**fields)
