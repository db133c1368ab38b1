"""kcoord authorizing forwarded requests itself (coordinator/security/forward_acl.py): the
actions each API needs, the API's own authorization error when everything it names is refused,
a closed connection otherwise; and the gateway's `_gate_allows` using it."""
from __future__ import annotations

import asyncio
import datetime
import uuid

from kio.schema.errors import ErrorCode

from coordinator.gateway.routes import build_routes
from coordinator.protocol import apis
from coordinator.protocol.apis import response_class
from coordinator.protocol.codec import decode_body
from coordinator.protocol.service import ClientInfo
from coordinator.security.acl import AclAuthorizer
from coordinator.security.acl_sources import parse_acl_text
from coordinator.security.forward_acl import ForwardAclGate, filter_metadata
from support.raw_client import encode_request, request_types

from ..gateway.test_connection_flow import connect, make_gateway, until

ACLS = """
ALLOW User:alice *        WRITE    TOPIC            PREFIXED orders.
ALLOW User:alice *        READ     TOPIC            LITERAL  orders.in
ALLOW User:alice 10.1.1.1 READ     TOPIC            LITERAL  local-only
ALLOW User:alice *        WRITE    TRANSACTIONAL_ID LITERAL  tx-1
ALLOW User:alice *        READ     GROUP            LITERAL  g
ALLOW User:alice *        CREATE   TOPIC            PREFIXED new.
DENY  User:alice *        WRITE    TOPIC            LITERAL  orders.audit
"""
ALICE = ClientInfo("c", "10.1.1.1", 5555, "bootstrap", principal="User:alice")
ALICE_ELSEWHERE = ClientInfo("c", "10.9.9.9", 5555, "bootstrap", principal="User:alice")
ORDERS_IN_ID = uuid.uuid4()


def gate() -> ForwardAclGate:
    return ForwardAclGate(AclAuthorizer(parse_acl_text(ACLS)),
                          topic_name_of=lambda tid: "orders.in" if tid == ORDERS_IN_ID else None)


def produce(*topics: str, acks: int = -1, txn: str | None = None, version: int = 9):
    m = request_types(apis.PRODUCE, version)
    return m.ProduceRequest(transactional_id=txn, acks=acks, timeout=datetime.timedelta(seconds=1), topic_data=tuple(
        m.TopicProduceData(name=t, partition_data=(m.PartitionProduceData(index=0, records=None),)) for t in topics))


def fetch(*topics, version: int = 12):
    m = request_types(apis.FETCH, version)
    made = tuple(m.FetchTopic(**({"topic": t} if isinstance(t, str) else {"topic_id": t}), partitions=(
        m.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                         log_start_offset=-1, partition_max_bytes=1024),)) for t in topics)
    return m.FetchRequest(cluster_id=None, replica_id=-1, max_wait=datetime.timedelta(milliseconds=100), min_bytes=1,
                          max_bytes=1024, isolation_level=0, session_id=0, session_epoch=-1, topics=made,
                          forgotten_topics_data=(), rack_id="")


def answered(api_key: int, version: int, body: bytes):
    assert isinstance(body, bytes), f"expected an answer, got {body!r}"
    return decode_body(response_class(api_key, version), body, 0)


def test_produce_needs_topic_write_and_transactional_id_write():
    g = gate()
    assert g.check_request(ALICE, 0, 9, produce("orders.new")) is True
    assert g.check_request(ALICE, 0, 9, produce("orders.new", "orders.x")) is True
    refused = answered(0, 9, g.check_request(ALICE, 0, 9, produce("payments")))
    assert [(t.name, [p.error_code for p in t.partition_responses]) for t in refused.responses] == [
        ("payments", [ErrorCode.topic_authorization_failed])]
    assert g.check_request(ALICE, 0, 9, produce("orders.audit")) is not True, "the DENY wins over the prefix"
    assert g.check_request(ALICE, 0, 9, produce("orders.new", "payments")) is False, "mixed: closed"
    assert g.check_request(ALICE, 0, 9, produce("payments", acks=0)) is False, "acks=0: no answer, closed"
    assert g.check_request(ALICE, 0, 9, produce("orders.new", txn="tx-1")) is True
    txn_refused = answered(0, 9, g.check_request(ALICE, 0, 9, produce("orders.new", txn="tx-2")))
    assert {p.error_code for t in txn_refused.responses for p in t.partition_responses} == {
        ErrorCode.transactional_id_authorization_failed}


def test_fetch_needs_topic_read_with_hosts_and_topic_ids():
    g = gate()
    assert g.check_request(ALICE, 1, 12, fetch("orders.in")) is True
    assert g.check_request(ALICE, 1, 12, fetch("orders.new")) is not True, "WRITE does not allow READ"
    assert g.check_request(ALICE, 1, 12, fetch("local-only")) is True
    refused = answered(1, 12, g.check_request(ALICE_ELSEWHERE, 1, 12, fetch("local-only")))
    assert [(t.topic, [p.error_code for p in t.partitions]) for t in refused.responses] == [
        ("local-only", [ErrorCode.topic_authorization_failed])]
    # an empty record set, not a null one: librdkafka refuses a null one (MessageSetSize -1)
    assert [p.records for t in refused.responses for p in t.partitions] == [b""]
    assert g.check_request(ALICE, 1, 13, fetch(ORDERS_IN_ID, version=13)) is True, "id resolved"
    assert g.check_request(ALICE, 1, 13, fetch(uuid.uuid4(), version=13)) is not True, "unknown id refused"


def test_transactions_init_producer_id_and_unknown_apis():
    g = gate()
    m = request_types(22, 4)

    def init(txn):
        return m.InitProducerIdRequest(transactional_id=txn, transaction_timeout=datetime.timedelta(seconds=60),
                                       producer_id=-1, producer_epoch=-1)
    assert g.check_request(ALICE, 22, 4, init("tx-1")) is True
    assert answered(22, 4, g.check_request(ALICE, 22, 4, init("tx-2"))).error_code == \
        ErrorCode.transactional_id_authorization_failed
    assert g.check_request(ALICE, 22, 4, init(None)) is True, "idempotence: WRITE on some topic"
    bob = ClientInfo("c", "10.1.1.1", 1, "bootstrap", principal="User:bob")
    assert answered(22, 4, g.check_request(bob, 22, 4, init(None))).error_code == \
        ErrorCode.cluster_authorization_failed
    e = request_types(26, 3)
    end = e.EndTxnRequest(transactional_id="tx-2", producer_id=1, producer_epoch=0, committed=True)
    assert answered(26, 3, g.check_request(ALICE, 26, 3, end)).error_code == \
        ErrorCode.transactional_id_authorization_failed
    a = request_types(25, 3)
    assert g.check_request(ALICE, 25, 3, a.AddOffsetsToTxnRequest(transactional_id="tx-1", producer_id=1,
                                                                  producer_epoch=0, group_id="g")) is True
    assert answered(25, 3, g.check_request(ALICE, 25, 3, a.AddOffsetsToTxnRequest(
        transactional_id="tx-1", producer_id=1, producer_epoch=0, group_id="other"))).error_code == \
        ErrorCode.group_authorization_failed
    assert g.check_request(ALICE, 9999, 0, object()) is False, "an API without a rule is never forwarded"
    assert g.check_request(ALICE, 30, 3, object()) is False, "CreateAcls needs Cluster ALTER"


def test_create_and_delete_topics():
    g = gate()
    c = request_types(apis.CREATE_TOPICS, 7)

    def create(*names):
        return c.CreateTopicsRequest(topics=tuple(c.CreatableTopic(name=n, num_partitions=1, replication_factor=1,
                                                                   assignments=(), configs=()) for n in names),
                                     timeout=datetime.timedelta(seconds=5), validate_only=False)
    assert g.check_request(ALICE, 19, 7, create("new.a")) is True
    refused = answered(19, 7, g.check_request(ALICE, 19, 7, create("other")))
    assert [(t.name, t.error_code) for t in refused.topics] == [("other", ErrorCode.topic_authorization_failed)]
    d = request_types(apis.DELETE_TOPICS, 5)
    deleted = answered(20, 5, g.check_request(ALICE, 20, 5, d.DeleteTopicsRequest(
        topic_names=("orders.in",), timeout=datetime.timedelta(seconds=5))))
    assert [(t.name, t.error_code) for t in deleted.responses] == [("orders.in", ErrorCode.topic_authorization_failed)]


def test_metadata_filter_hides_or_refuses_undescribable_topics():
    authorizer = AclAuthorizer(parse_acl_text(ACLS))
    m = __import__(response_class(3, 12).__module__, fromlist=["x"])

    def topic(name):
        return m.MetadataResponseTopic(error_code=ErrorCode.none, name=name, topic_id=uuid.uuid4(), is_internal=False,
                                       partitions=(), topic_authorized_operations=-2147483648)
    resp = m.MetadataResponse(throttle_time=datetime.timedelta(0), brokers=(), cluster_id="c", controller_id=1,
                              topics=(topic("orders.in"), topic("payments")))
    assert [t.name for t in filter_metadata(authorizer, ALICE, resp, named=False).topics] == ["orders.in"]
    named = filter_metadata(authorizer, ALICE, resp, named=True).topics
    assert [(t.name, t.error_code) for t in named] == [("orders.in", ErrorCode.none),
                                                       ("payments", ErrorCode.topic_authorization_failed)]


def test_the_gateway_answers_or_closes_with_the_request_gate():
    async def main():
        gateway = make_gateway()
        gateway.forward_gate = gate()
        gateway.api_versions = {**gateway.api_versions, apis.PRODUCE: (3, 9), apis.FETCH: (4, 12)}
        gateway.routes = build_routes(gateway.api_versions, set())
        connection, transport = connect(gateway)          # peer 10.1.1.1, ANONYMOUS until SASL
        connection.client_principal = lambda: "User:alice"    # type: ignore[method-assign]
        connection.data_received(encode_request(apis.PRODUCE, 9, 7, produce("payments")))
        await until(lambda: transport.correlation_ids() == [7], "the refused produce answered here")
        frame = b"".join(transport.written)
        body = frame[4 + 4 + 1:]        # size, correlation id, empty tagged fields (flexible header)
        resp = decode_body(response_class(0, 9), body, 0)
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.topic_authorization_failed
        assert not transport.aborted
        connection.data_received(encode_request(apis.FETCH, 12, 8, fetch("orders.in", "payments")))
        assert transport.aborted, "a mixed request closes the connection"
    asyncio.run(main())

