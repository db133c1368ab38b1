"""ApiVersions and FindCoordinator, answered by kcoord itself on a client connection.

Rules: ApiVersions is answered from the bodies the gateway built at start (per version), or
INVALID_REQUEST for client software names Kafka refuses (KIP-511). FindCoordinator GROUP
keys are answered here; with an authorizer each needs Group DESCRIBE (KafkaApis:
GROUP_AUTHORIZATION_FAILED per key from v4, for the request before). TRANSACTION keys are
forwarded (the node rewritten on the way back); when kcoord authorizes forwarded traffic
(the ForwardAclGate), each needs TransactionalId DESCRIBE first: refused keys are answered
here, the rest forwarded and the refusals added to upstream's answer. Both reach the
connection only through `LocalClient`.
"""
from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode

from ..authz import (
    ALLOW_ALL,
    DESCRIBE,
    TRANSACTIONAL_ID,
    Action,
    coordinator_keys_denied,
    refuse_coordinator_keys,
)
from ..authz import GROUP as GROUP_RESOURCE
from ..protocol.api_versions import (
    invalid_request_body,
    rebootstrap_body,
    rebootstrap_required,
    valid_client_software,
)
from ..protocol.codec import decode_response_frame, encode_body, encode_response_frame
from ..protocol.find_coordinator import (
    KEY_TYPE_GROUP,
    KEY_TYPE_TRANSACTION,
    MIN_BATCHED_VERSION,
    NO_NODE,
    group_coordinator_response,
    key_type_of,
    keys_of,
)
from ..protocol.framing import SIZE, body_offset, response_frame
from ..protocol.service import ClientInfo
from ..security.metrics import count_denied
from . import eager
from .forward import MergingPending, Pending
from .routes import Route

if TYPE_CHECKING:
    from .ports import ConnectionServices


class LocalClient(Protocol):
    """What the requests answered here use of their connection."""

    @property
    def gateway(self) -> ConnectionServices: ...

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    @property
    def listener(self) -> Any:
        """Its ListenerInfo (listeners.py): ``node_id`` None on the bootstrap listener."""

    @property
    def forward_gate(self) -> Any:
        """The gateway's forward gate as the connection took it (None: none)."""

    def parse(self, frame: bytes, route: Route, correlation_id: int) -> tuple[str | None, Any] | None: ...

    def answer(self, data: bytes) -> None: ...

    def forward(self, frame: bytes, pending: Pending | None) -> None: ...

    def request_info(self, client_id: str | None) -> ClientInfo: ...

    def serve_outcome(self, outcome: eager.Done | asyncio.Task, route: Route, correlation_id: int,
                      size: int) -> None:
        """Queue the answer of a call started with eager.start, now or when it finishes."""


def serve_api_versions(client: LocalClient, frame: bytes, route: Route, correlation_id: int) -> None:
    parsed = client.parse(frame, route, correlation_id)
    if parsed is None:
        return
    request = parsed[1]
    version = route.api_version
    if version >= 3 and not valid_client_software(request.client_software_name, request.client_software_version):
        body = invalid_request_body(version)
    elif rebootstrap_required(version, request, getattr(client.gateway.cluster, "cluster_id", None),
                              _node_id_here(client)):
        body = rebootstrap_body(version)
    else:
        body = client.gateway.api_versions_bodies[version]
    client.answer(response_frame(correlation_id, body, 0))


def _node_id_here(client: LocalClient) -> int | None:
    """The node id a client may name when it reaches this listener (KIP-1242): a broker
    listener's node; on the bootstrap listener, this instance's synthetic coordinator node in a
    kcoord cluster (FindCoordinator and Metadata name it at the bootstrap port,
    coordinator/cluster/node.py), else none (only the cluster id is checked)."""
    node_id = client.listener.node_id
    if node_id is not None:
        return node_id
    peers = getattr(client.gateway, "peers", None)
    own = peers.node_id() if peers is not None else -1
    return None if own < 0 else own


def serve_find_coordinator(client: LocalClient, frame: bytes, route: Route, correlation_id: int) -> None:
    parsed = client.parse(frame, route, correlation_id)
    if parsed is None:
        return
    client_id, request = parsed
    version = route.api_version
    gateway = client.gateway
    if key_type_of(request) == KEY_TYPE_TRANSACTION:
        gate_authorizer = getattr(client.forward_gate, "authorizer", None)
        if gate_authorizer is not None:
            denied = coordinator_keys_denied(gate_authorizer, client.request_info(client_id), KEY_TYPE_TRANSACTION,
                                             keys_of(request, version))
            if denied:
                _transaction_keys_denied(client, frame, route, correlation_id, request, denied)
                return
        client.forward(frame, Pending(correlation_id, route, len(frame)))   # node rewritten on the way back
        return
    authorizer: Any = getattr(gateway.service, "authorizer", ALLOW_ALL)
    if authorizer is not ALLOW_ALL and getattr(authorizer, "attached", True) is False:
        authorizer.attach(gateway)     # authorizer=probe: it finds clients' links here
    if authorizer is ALLOW_ALL:
        response = group_coordinator_response(version, request, gateway.locate_group)
        client.answer(response_frame(correlation_id, encode_body(response), route.response_header_version))
        return
    info = client.request_info(client_id)
    # An authorizer may probe upstream first (acl_probe.py): then the call waits.
    outcome = eager.start(_authorized(gateway, authorizer, info, version, request), client.loop)
    client.serve_outcome(outcome, route, correlation_id, 0)


async def _authorized(gateway: ConnectionServices, authorizer: Any, info: ClientInfo, version: int,
                      request: Any) -> Any:
    keys = keys_of(request, version)
    prepare = getattr(authorizer, "prepare", None)
    if prepare is not None:     # an authorizer that asks upstream first (authorizer=probe)
        await prepare(info, [Action(DESCRIBE, GROUP_RESOURCE, k) for k in keys])
    denied = coordinator_keys_denied(authorizer, info, KEY_TYPE_GROUP, keys)
    response = group_coordinator_response(version, request, gateway.locate_group)
    if not denied:
        return response
    count_denied("FindCoordinator", GROUP_RESOURCE, len(denied))
    return refuse_coordinator_keys(version, response, denied, ErrorCode.group_authorization_failed)


def _transaction_keys_denied(client: LocalClient, frame: bytes, route: Route, correlation_id: int, request: Any,
                             denied: set[str]) -> None:
    """TRANSACTION keys refused TransactionalId DESCRIBE: answered here when every key is
    refused (or before v4, one key per request); else the rest is forwarded and the
    refusals added to upstream's answer."""
    version = route.api_version
    count_denied("FindCoordinator", TRANSACTIONAL_ID, len(denied))
    keys = keys_of(request, version)
    code = ErrorCode.transactional_id_authorization_failed
    if version < MIN_BATCHED_VERSION or all(k in denied for k in keys):
        response = refuse_coordinator_keys(version, group_coordinator_response(
            version, dataclasses.replace(request, key_type=KEY_TYPE_GROUP), lambda _: NO_NODE), denied, code)
        client.answer(response_frame(correlation_id, encode_body(response), route.response_header_version))
        return
    offset = body_offset(frame, route.request_header_version)
    payload = bytes(frame[4:offset]) + encode_body(dataclasses.replace(
        request, coordinator_keys=tuple(k for k in keys if k not in denied)))
    refusals = refuse_coordinator_keys(version, group_coordinator_response(
        version, dataclasses.replace(request, key_type=KEY_TYPE_GROUP,
                                     coordinator_keys=tuple(k for k in keys if k in denied)),
        lambda _: NO_NODE), denied, code).coordinators

    def merge(answer: bytes) -> bytes:
        cid, response = decode_response_frame(route.api_key, version, answer)
        return encode_response_frame(route.api_key, version, cid, dataclasses.replace(
            response, coordinators=tuple(response.coordinators) + tuple(refusals)))
    client.forward(SIZE.pack(len(payload)) + payload, MergingPending(correlation_id, route, len(frame), merge))
