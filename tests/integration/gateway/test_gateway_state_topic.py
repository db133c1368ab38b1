"""The state topic through the gateway, with real clients over Tansu: produce and delete
refused with Kafka's errors, alterations of its partitions refused, Metadata shows it
internal, everything else still forwarded (state_guard.py)."""
from __future__ import annotations

import logging
import socket
import sys
import time
from datetime import timedelta

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from coordinator.protocol import apis
from gateway_helpers import STATE_TOPIC, RunningGateway
from support.names import TestNames
from support.raw_client import assert_closed, call, encode_request, request, request_types
from support.tansu import TansuBroker

INVALID_TOPIC_EXCEPTION = 17
TOPIC_AUTHORIZATION_FAILED = 29
DELETE_RECORDS = 21
INCREMENTAL_ALTER_CONFIGS = 44
DESCRIBE_TOPIC_PARTITIONS = 75


def _records(value: bytes) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 16)
    builder.append(0, timestamp=int(time.time() * 1000), key=None, value=value, headers=[])
    return bytes(builder.build())


def _produce_request(topics: list[str], acks: int = -1):  # type: ignore[no-untyped-def]
    cls = type(request(apis.PRODUCE, 9, transactional_id=None, acks=acks, timeout=timedelta(0), topic_data=()))
    m = sys.modules[cls.__module__]
    return cls(transactional_id=None, acks=acks, timeout=timedelta(seconds=10), topic_data=tuple(
        m.TopicProduceData(name=t, partition_data=(m.PartitionProduceData(index=0, records=_records(b"v")),))
        for t in topics))


def _delivered(bootstrap: str, topic: str) -> KafkaError | None:
    """Produce one message with librdkafka; the delivery report's error (None = stored)."""
    reports: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 20000, "retries": 2})
    producer.produce(topic, value=b"x", partition=0, on_delivery=lambda err, msg: reports.append(err))
    assert producer.flush(30) == 0, "delivery report not received within 30 s"
    assert len(reports) == 1
    return reports[0]


def test_produce_to_the_state_topic_gets_invalid_topic_and_other_topics_still_work(
        gateway: RunningGateway, names: TestNames) -> None:
    error = _delivered(gateway.bootstrap, STATE_TOPIC)
    assert error is not None and error.code() == KafkaError.TOPIC_EXCEPTION, error
    other = names.topic()
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    admin.create_topics([NewTopic(other, 1, 1)], operation_timeout=30)[other].result(30)
    assert _delivered(gateway.bootstrap, other) is None


def test_mixed_produce_appends_the_other_topic_and_refuses_the_state_topic(
        gateway: RunningGateway, names: TestNames) -> None:
    other = names.topic()
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    admin.create_topics([NewTopic(other, 1, 1)], operation_timeout=30)[other].result(30)
    response = call(("127.0.0.1", gateway.port), apis.PRODUCE, 9, _produce_request([other, STATE_TOPIC]))
    by_name = {t.name: t.partition_responses[0] for t in response.responses}
    assert set(by_name) == {other, STATE_TOPIC}
    assert by_name[other].error_code == 0 and by_name[other].base_offset >= 0
    refused = by_name[STATE_TOPIC]
    assert refused.error_code == INVALID_TOPIC_EXCEPTION
    assert refused.error_message == f"Cannot append to internal topic {STATE_TOPIC}"


def test_acks_zero_produce_to_the_state_topic_closes_the_connection(gateway: RunningGateway) -> None:
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as sock:
        sock.sendall(encode_request(apis.PRODUCE, 9, 1, _produce_request([STATE_TOPIC], acks=0)))
        assert_closed(sock)


def test_delete_topics_is_refused_and_the_topic_stays(gateway: RunningGateway, gw_tansu: TansuBroker,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="kcoord.gateway")
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    with pytest.raises(KafkaException) as refused:
        admin.delete_topics([STATE_TOPIC], operation_timeout=30)[STATE_TOPIC].result(30)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    upstream = AdminClient({"bootstrap.servers": gw_tansu.bootstrap})
    assert STATE_TOPIC in upstream.list_topics(timeout=10).topics
    line = next(r.getMessage() for r in caplog.records if "refused for the state topic" in r.getMessage())
    assert "delete_topics" in line and "from 127.0.0.1:" in line and STATE_TOPIC in line, line


def test_alter_configs_of_the_state_topic_is_forwarded_and_logged(gateway: RunningGateway,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    versions = gateway.gateway.api_versions.get(INCREMENTAL_ALTER_CONFIGS)
    if versions is None:
        pytest.skip("the upstream does not support IncrementalAlterConfigs")
    caplog.set_level(logging.WARNING, logger="kcoord.gateway")
    m = request_types(INCREMENTAL_ALTER_CONFIGS, versions[1])
    body = request(INCREMENTAL_ALTER_CONFIGS, versions[1], validate_only=True, resources=(m.AlterConfigsResource(
        resource_type=2, resource_name=STATE_TOPIC, configs=(m.AlterableConfig(
            name="retention.ms", config_operation=0, value="604800000"),)),))
    response = call(("127.0.0.1", gateway.port), INCREMENTAL_ALTER_CONFIGS, versions[1], body)
    assert [r.resource_name for r in response.responses] == [STATE_TOPIC]   # upstream's answer, forwarded
    line = next(r.getMessage() for r in caplog.records if "on the state topic" in r.getMessage())
    assert "incremental_alter_configs" in line and "allowed" in line and "from 127.0.0.1:" in line, line


def test_create_partitions_of_the_state_topic_is_refused(gateway: RunningGateway, gw_tansu: TansuBroker) -> None:
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    with pytest.raises(KafkaException) as refused:
        admin.create_partitions([NewPartitions(STATE_TOPIC, 10)], operation_timeout=30)[STATE_TOPIC].result(30)
    # Tansu 0.6 has no CreatePartitions, so the gateway does not advertise it and librdkafka
    # refuses before sending (the answer itself is covered in tests/unit/gateway).
    advertised = apis.CREATE_PARTITIONS in gateway.gateway.api_versions
    expected = KafkaError.TOPIC_AUTHORIZATION_FAILED if advertised else KafkaError._UNSUPPORTED_FEATURE
    assert refused.value.args[0].code() == expected, refused.value
    upstream = AdminClient({"bootstrap.servers": gw_tansu.bootstrap})
    assert len(upstream.list_topics(STATE_TOPIC, timeout=10).topics[STATE_TOPIC].partitions) == 3


def test_delete_records_of_the_state_topic_gets_invalid_topic(gateway: RunningGateway) -> None:
    versions = gateway.gateway.api_versions.get(DELETE_RECORDS)
    if versions is None:
        pytest.skip("the upstream does not support DeleteRecords, so the gateway does not forward it")
    version = versions[1]
    m = request_types(DELETE_RECORDS, version)
    body = request(DELETE_RECORDS, version, timeout=timedelta(seconds=5), topics=(m.DeleteRecordsTopic(
        name=STATE_TOPIC, partitions=(m.DeleteRecordsPartition(partition_index=1, offset=-1),)),))
    response = call(("127.0.0.1", gateway.port), DELETE_RECORDS, version, body)
    partition = response.topics[0].partitions[0]
    assert (response.topics[0].name, partition.partition_index, partition.error_code) == (
        STATE_TOPIC, 1, INVALID_TOPIC_EXCEPTION)


def test_metadata_shows_the_state_topic_internal(gateway: RunningGateway) -> None:
    metadata = call(("127.0.0.1", gateway.port), apis.METADATA, 12, request(
        apis.METADATA, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    internal = {t.name: t.is_internal for t in metadata.topics}
    assert internal[STATE_TOPIC] is True
    assert not any(flag for name, flag in internal.items() if name != STATE_TOPIC)


def test_delete_topics_v6_by_topic_id_is_refused(gateway: RunningGateway, gw_tansu: TansuBroker) -> None:
    topic_id = gateway.loop.call(gateway.gateway.state_topic_id)
    assert topic_id is not None, "the gateway does not know the state topic's id"
    m = request_types(apis.DELETE_TOPICS, 6)
    body = request(apis.DELETE_TOPICS, 6, timeout=timedelta(seconds=10),
                   topics=(m.DeleteTopicState(name=None, topic_id=topic_id),))
    response = call(("127.0.0.1", gateway.port), apis.DELETE_TOPICS, 6, body)
    assert [(r.topic_id, r.error_code) for r in response.responses] == [(topic_id, TOPIC_AUTHORIZATION_FAILED)]
    upstream = AdminClient({"bootstrap.servers": gw_tansu.bootstrap})
    assert STATE_TOPIC in upstream.list_topics(timeout=10).topics


def test_describe_topic_partitions_shows_the_state_topic_internal(gateway: RunningGateway) -> None:
    if gateway.gateway.api_versions.get(DESCRIBE_TOPIC_PARTITIONS) is None:
        pytest.skip("the upstream does not support DescribeTopicPartitions")
    m = request_types(DESCRIBE_TOPIC_PARTITIONS, 0)
    body = request(DESCRIBE_TOPIC_PARTITIONS, 0, topics=(m.TopicRequest(name=STATE_TOPIC),),
                   response_partition_limit=100, cursor=None)
    response = call(("127.0.0.1", gateway.port), DESCRIBE_TOPIC_PARTITIONS, 0, body)
    (topic,) = response.topics
    assert topic.name == STATE_TOPIC and topic.error_code == 0 and topic.is_internal is True
