"""Authorization of what the gateway answers or forwards itself (issue 13): FindCoordinator
(Group DESCRIBE per GROUP key, answered by kcoord; TransactionalId DESCRIBE per TRANSACTION key
when kcoord authorizes forwarded traffic), and forwarded Metadata answers filtered through
`forward_acl.filter_metadata` when the forward gate is on. Over a real ClientConnection with a
fake transport and a fake upstream link (tests/unit/gateway/test_sasl_connection.py)."""
from __future__ import annotations

import asyncio
import dataclasses
import uuid
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.authz import ALLOW_ALL
from coordinator.gateway.connection import ClientConnection
from coordinator.gateway.routes import build_routes
from coordinator.protocol import apis
from coordinator.protocol.apis import response_class
from coordinator.protocol.codec import decode_body
from coordinator.protocol.find_coordinator import Node
from coordinator.protocol.framing import body_offset
from coordinator.security.acl import AclAuthorizer
from coordinator.security.acl_probe import ProbeAuthorizer
from coordinator.security.acl_sources import parse_acl_text
from coordinator.security.forward_acl import ForwardAclGate
from support.raw_client import encode_request, request

from ..gateway.test_sasl_connection import FakeLink, connect, decoded, make_gateway

FC, MD, DG = apis.FIND_COORDINATOR, apis.METADATA, apis.DESCRIBE_GROUPS
HERE = "10.1.1.1"        # the fake transport's peer
ACLS = f"""
ALLOW User:ANONYMOUS {HERE} DESCRIBE GROUP            PREFIXED  open-
ALLOW User:ANONYMOUS *      READ     GROUP            LITERAL   reader
ALLOW User:ANONYMOUS *      DESCRIBE TRANSACTIONAL_ID LITERAL   txn-ok
ALLOW User:ANONYMOUS *      DESCRIBE TOPIC            PREFIXED  pub-
ALLOW User:ANONYMOUS *      READ     TOPIC            LITERAL   readable
"""
NODE = Node(7, "kcoord.example", 9094)
GAF, TIDAF, TAF = (int(ErrorCode.group_authorization_failed), int(ErrorCode.transactional_id_authorization_failed),
                   int(ErrorCode.topic_authorization_failed))


def gateway_for(authorizer: Any, gate: bool = False) -> Any:
    gateway = make_gateway(None)
    gateway.service.authorizer = authorizer       # what GroupCoordinatorService exposes
    gateway.api_versions = {apis.API_VERSIONS: (0, 4), FC: (0, 6), MD: (0, 12), apis.HEARTBEAT: (0, 4)}
    gateway.routes = build_routes(gateway.api_versions, {apis.HEARTBEAT})
    gateway.locate_group = lambda group_id, *rest: NODE      # type: ignore[method-assign]
    if gate:
        gateway.forward_gate = ForwardAclGate(authorizer)
    return gateway


def acls() -> AclAuthorizer:
    return AclAuthorizer(parse_acl_text(ACLS))


def find(cid: int, version: int, key_type: int, *keys: str) -> bytes:
    if version >= 4:
        fields: dict[str, Any] = {"key_type": key_type, "coordinator_keys": keys}
    else:
        fields = {"key": keys[0], **({"key_type": key_type} if version >= 1 else {})}
    return encode_request(FC, version, cid, request(FC, version, **fields))


async def turns_until(condition: Any) -> None:
    for _ in range(20):
        if condition():
            return
        await asyncio.sleep(0)       # one loop turn
    raise AssertionError("the condition never held")


async def settle(connection: ClientConnection, transport: Any) -> None:
    """Let the answer that waited for a probe reach the transport (a few loop turns, bounded)."""
    for task in [p.task for p in list(connection._queue) if getattr(p, "task", None) is not None]:
        await task
    for _ in range(20):
        if transport.frames():
            return
        await asyncio.sleep(0)       # one loop turn: the done callback, then its flush
    raise AssertionError("the answer never reached the client")


def coordinators(response: Any) -> list[tuple[str, int, int, str | None]]:
    return [(c.key, int(c.error_code), c.node_id, c.error_message) for c in response.coordinators]


# --- FindCoordinator(GROUP): Group DESCRIBE per key -----------------------------------------

async def test_group_keys_need_group_describe_per_key_from_v4() -> None:
    connection, transport, link = connect(gateway_for(acls()))
    connection.data_received(find(1, 4, 0, "open-a", "closed", "reader"))
    assert link.sent == []                       # answered by kcoord
    # READ implies DESCRIBE (reader); the prefixed ACL covers open-a; nothing covers closed
    assert coordinators(decoded(transport, FC, 4)) == [
        ("open-a", 0, 7, None), ("closed", GAF, -1, "Group authorization failed."), ("reader", 0, 7, None)]


async def test_group_key_before_v4_refuses_the_request() -> None:
    connection, transport, _ = connect(gateway_for(acls()))
    connection.data_received(find(1, 3, 0, "closed"))
    connection.data_received(find(2, 0, 0, "open-x"))
    refused, allowed = decoded(transport, FC, 3, 0), decoded(transport, FC, 0, 1)
    assert (int(refused.error_code), refused.node_id, refused.host, refused.error_message) == (
        GAF, -1, "", "Group authorization failed.")
    assert (int(allowed.error_code), allowed.node_id, allowed.port) == (0, 7, 9094)


async def test_no_authorizer_answers_every_group_key() -> None:
    connection, transport, _ = connect(gateway_for(ALLOW_ALL))
    connection.data_received(find(1, 4, 0, "closed", "anything"))
    assert [c[:3] for c in coordinators(decoded(transport, FC, 4))] == [("closed", 0, 7), ("anything", 0, 7)]


# --- FindCoordinator(TRANSACTION): TransactionalId DESCRIBE with the forward gate ----------------

async def test_transaction_keys_are_forwarded_untouched_without_the_forward_gate() -> None:
    connection, transport, link = connect(gateway_for(acls()))
    frame = find(1, 4, 1, "txn-no")
    connection.data_received(frame)
    assert link.sent == [frame] and transport.frames() == []


async def test_refused_transaction_keys_are_answered_here_and_the_rest_forwarded() -> None:
    connection, transport, link = connect(gateway_for(acls(), gate=True))
    connection.data_received(find(1, 4, 1, "txn-no"))
    assert link.sent == []
    assert coordinators(decoded(transport, FC, 4)) == [
        ("txn-no", TIDAF, -1, "Transactional Id authorization failed.")]
    connection.data_received(find(2, 3, 1, "txn-no"))
    assert int(decoded(transport, FC, 3).error_code) == TIDAF and link.sent == []

    connection.data_received(find(3, 4, 1, "txn-ok", "txn-no"))
    (sent,) = link.sent
    forwarded = decode_body(type(request(FC, 4, key_type=1, coordinator_keys=())), sent, body_offset(sent, 2))
    assert forwarded.coordinator_keys == ("txn-ok",)     # the refused key never reaches upstream
    cls = response_class(FC, 4)
    coordinator = __import__(cls.__module__, fromlist=["x"]).Coordinator
    link.answer(connection, FC, 4, throttle_time=timedelta(0), coordinators=(
        coordinator(key="txn-ok", node_id=1, host="broker", port=9092, error_code=ErrorCode.none,
                    error_message=None),))
    merged = coordinators(decoded(transport, FC, 4))
    assert sorted(merged) == sorted([("txn-ok", 0, 1, None),
                                     ("txn-no", TIDAF, -1, "Transactional Id authorization failed.")])


# --- FindCoordinator with authorizer=probe: asked upstream on the client's own link ------------

async def test_probe_authorizer_asks_upstream_on_the_clients_link() -> None:
    probe = ProbeAuthorizer()
    gateway = gateway_for(probe)
    connection, transport, link = connect(gateway)
    assert not probe.attached
    connection.data_received(find(1, 4, 0, "g-allowed", "g-refused"))
    assert probe.attached                         # it found the gateway's connections here
    await turns_until(lambda: link.sent)
    (sent,) = link.sent                           # DescribeGroups v5, kcoord's own correlation id
    dg = decode_body(type(request(DG, 5, groups=(), include_authorized_operations=True)), sent, body_offset(sent, 2))
    assert dg.groups == ("g-allowed", "g-refused") and dg.include_authorized_operations
    assert transport.frames() == []              # the answer waits for the probe
    cls = response_class(DG, 5)
    described = __import__(cls.__module__, fromlist=["x"]).DescribedGroup
    pending = link.waiting[0]
    assert pending.correlation_id < 0
    link.answer(connection, DG, 5, throttle_time=timedelta(0), groups=(
        described(error_code=ErrorCode.none, group_id="g-allowed", group_state="Dead", protocol_type="",
                  protocol_data="", members=(), authorized_operations=(1 << 3) | (1 << 8)),
        described(error_code=ErrorCode.group_authorization_failed, group_id="g-refused", group_state="",
                  protocol_type="", protocol_data="", members=(), authorized_operations=-2147483648)))
    await settle(connection, transport)
    assert coordinators(decoded(transport, FC, 4)) == [
        ("g-allowed", 0, 7, None), ("g-refused", GAF, -1, "Group authorization failed.")]
    assert connection.held == 0        # the probe's answer was never the client's
    assert probe.probes == 1


async def test_probe_without_a_link_fails_closed() -> None:
    probe = ProbeAuthorizer()
    connection, transport, link = connect(gateway_for(probe))
    connection.link = None
    connection.data_received(find(1, 4, 0, "g"))
    await settle(connection, transport)
    assert coordinators(decoded(transport, FC, 4))[0][:2] == ("g", GAF)
    assert probe.failures == 1


# --- forwarded Metadata, filtered when kcoord authorizes forwarded traffic ---------------------

def _metadata_answer(connection: ClientConnection, link: FakeLink, version: int, names: list[str],
                     cluster_ops: int | None = None) -> None:
    cls = response_class(MD, version)
    mod = __import__(cls.__module__, fromlist=["x"])
    partition = mod.MetadataResponsePartition(error_code=ErrorCode.none, partition_index=0, leader_id=1,
                                              leader_epoch=0, replica_nodes=(1,), isr_nodes=(1,),
                                              offline_replicas=())
    topics = tuple(mod.MetadataResponseTopic(error_code=ErrorCode.none, name=n, topic_id=uuid.uuid4(),
                                             is_internal=False, partitions=(partition,),
                                             topic_authorized_operations=-1) for n in names)
    fields: dict[str, Any] = dict(throttle_time=timedelta(0), brokers=(
        mod.MetadataResponseBroker(node_id=1, host="broker", port=9092, rack=None),),
        cluster_id="c", controller_id=1, topics=topics)
    if cluster_ops is not None:
        fields["cluster_authorized_operations"] = cluster_ops
    link.answer(connection, MD, version, **fields)


def metadata(cid: int, version: int, topics: list[str] | None, ops: bool = False) -> bytes:
    mod = __import__(type(request(MD, version, topics=None, allow_auto_topic_creation=False,
                                  include_topic_authorized_operations=False)).__module__, fromlist=["x"])
    named = None if topics is None else tuple(
        dataclasses.replace(mod.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name=t)) for t in topics)
    return encode_request(MD, version, cid, request(MD, version, topics=named, allow_auto_topic_creation=False,
                                                    include_topic_authorized_operations=ops))


async def test_forwarded_metadata_hides_topics_the_client_may_not_describe() -> None:
    connection, transport, link = connect(gateway_for(acls(), gate=True))
    connection.data_received(metadata(1, 12, None))
    assert len(link.sent) == 1
    _metadata_answer(connection, link, 12, ["pub-a", "secret", "readable"])
    answer = decoded(transport, MD, 12)
    assert [t.name for t in answer.topics] == ["pub-a", "readable"]     # an all-topics request: left out


async def test_forwarded_metadata_refuses_named_topics_and_recomputes_operations() -> None:
    connection, transport, link = connect(gateway_for(acls(), gate=True))
    connection.data_received(metadata(1, 12, ["secret", "readable"], ops=True))
    _metadata_answer(connection, link, 12, ["secret", "readable"])
    secret, readable = decoded(transport, MD, 12).topics
    assert (secret.name, int(secret.error_code), secret.partitions) == ("secret", TAF, ())
    assert secret.topic_id in (None, uuid.UUID(int=0))      # the zero id (kio decodes it as None)
    assert int(readable.error_code) == 0 and len(readable.partitions) == 1
    # the client's own operations (READ 3, DESCRIBE 8), not what upstream computed for kcoord
    assert readable.topic_authorized_operations == (1 << 3) | (1 << 8)


async def test_metadata_is_not_filtered_without_the_forward_gate() -> None:
    connection, transport, link = connect(gateway_for(acls()))
    connection.data_received(metadata(1, 12, None))
    _metadata_answer(connection, link, 12, ["pub-a", "secret"])
    assert [t.name for t in decoded(transport, MD, 12).topics] == ["pub-a", "secret"]
