"""Absurd admin requests and corrupt record batches through the gateway, raw, in front of
Tansu and Kafka 4.3: kcoord answers them with Kafka's errors and the upstream keeps serving
(gateway/admin_limits.py, gateway/produce_check.py)."""
from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from gateway_helpers import STATE_TOPIC, LoopThread, RunningGateway, start_gateway
from kio.schema.errors import ErrorCode

from coordinator.config import CoordinatorConfig
from coordinator.gateway.admin_limits import TOO_MANY_PARTITIONS, TOO_MANY_RECORDS
from coordinator.protocol import apis
from support.names import TestNames
from support.raw_client import call, create_topics_request, partition_count, request_types
from support.tansu import TansuBroker
from support.wait import wait_until


def test_fifty_million_partitions_are_refused_on_every_topic_and_the_upstream_keeps_serving(
        gateway: RunningGateway, names: TestNames) -> None:
    huge, small = names.topic(), names.topic()
    for validate_only in (True, False):
        response = call(gateway.bootstrap, apis.CREATE_TOPICS, 7,
                        create_topics_request([(huge, 50_000_000, 1), (small, 1, 1)], validate_only))
        assert sorted((t.name, t.error_code, t.error_message) for t in response.topics) == sorted([
            (huge, ErrorCode.policy_violation, TOO_MANY_PARTITIONS),
            (small, ErrorCode.policy_violation, TOO_MANY_PARTITIONS)])
    # Nothing was forwarded (the small topic can be created now), and the upstream serves.
    response = call(gateway.bootstrap, apis.CREATE_TOPICS, 7, create_topics_request([(small, 1, 1)]))
    assert [(t.name, t.error_code) for t in response.topics] == [(small, ErrorCode.none)]
    wait_until(lambda: partition_count(gateway.bootstrap, small) == 1, 30, message=f"{small} in Metadata")


def test_absurd_create_partitions_and_replication_factor_are_answered_here(
        gateway: RunningGateway, names: TestNames) -> None:
    topic, wide = names.topic(), names.topic()
    response = call(gateway.bootstrap, apis.CREATE_TOPICS, 7, create_topics_request([(topic, 1, 1), (wide, 1, 99)]))
    results = {t.name: t for t in response.topics}
    assert results[topic].error_code == ErrorCode.none, results[topic]
    brokers = len(gateway.gateway.cluster.brokers)
    assert (results[wide].error_code, results[wide].error_message) == (
        ErrorCode.invalid_replication_factor,
        f"Unable to replicate the partition 99 time(s): The target replication factor of 99 cannot be reached "
        f"because only {brokers} broker(s) are registered or some brokers have all their log directories "
        f"cordoned.")
    if apis.CREATE_PARTITIONS not in gateway.gateway.api_versions:
        pytest.skip("the replication-factor half passed; Tansu 0.6 does not serve CreatePartitions, so the "
                    "gateway does not route it")
    version = min(3, gateway.gateway.api_versions[apis.CREATE_PARTITIONS][1])
    m = request_types(apis.CREATE_PARTITIONS, version)
    grown = call(gateway.bootstrap, apis.CREATE_PARTITIONS, version, m.CreatePartitionsRequest(
        timeout=timedelta(seconds=30), validate_only=False,
        topics=(m.CreatePartitionsTopic(name=topic, count=50_000_000, assignments=None),)))
    assert [(r.name, r.error_code, r.error_message) for r in grown.results] == [
        (topic, ErrorCode.policy_violation, TOO_MANY_PARTITIONS)]
    assert wait_until(lambda: partition_count(gateway.bootstrap, topic), 30, message=f"{topic} in Metadata") == 1


def test_a_batch_with_a_bad_crc_gets_corrupt_message_and_the_other_partition_is_stored(
        gateway: RunningGateway, names: TestNames) -> None:
    """In front of Tansu kcoord checks the CRC (Tansu would store the batch); in front of
    Kafka, Kafka answers it: either way the client reads CORRUPT_MESSAGE."""
    topic = names.topic()
    created = call(gateway.bootstrap, apis.CREATE_TOPICS, 7, create_topics_request([(topic, 2, 1)]))
    assert created.topics[0].error_code == ErrorCode.none
    wait_until(lambda: partition_count(gateway.bootstrap, topic) == 2, 30, message=f"{topic} in Metadata")
    good = _records(b"good")
    corrupt = bytearray(_records(b"bad"))
    corrupt[-1] ^= 0xFF
    m = request_types(apis.PRODUCE, 9)
    body = m.ProduceRequest(transactional_id=None, acks=-1, timeout=timedelta(seconds=10), topic_data=(
        m.TopicProduceData(name=topic, partition_data=(m.PartitionProduceData(index=0, records=good),
                                                       m.PartitionProduceData(index=1, records=bytes(corrupt)))),))
    # One broker upstream (both fixtures): its gateway port leads every partition.
    (address,) = gateway.loop.call(gateway.gateway.node_addresses).values()
    response = wait_until(lambda: _stored(call(address, apis.PRODUCE, 9, body)), 30,
                          message="both partitions led")
    assert response == {0: ErrorCode.none, 1: ErrorCode.corrupt_message}


_NOT_READY = {ErrorCode.not_leader_or_follower, ErrorCode.leader_not_available, ErrorCode.unknown_topic_or_partition}


def _stored(response):  # type: ignore[no-untyped-def]
    """partition -> error code, once no partition waits for its leader (Kafka answers that
    before it looks at the records)."""
    codes = {p.index: p.error_code for t in response.responses for p in t.partition_responses}
    return None if _NOT_READY & set(codes.values()) else codes


def _records(value: bytes) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 16)
    builder.append(0, timestamp=int(time.time() * 1000), key=None, value=value, headers=[])
    return bytes(builder.build())


@pytest.fixture(scope="module")
def guarded(gw_loop: LoopThread, gw_tansu: TansuBroker) -> Iterator[RunningGateway]:
    """A gateway whose PLAINTEXT listener caps a topic at 3 partitions and whose anonymous
    principal may create 4 partitions per second (gateway/safeguards.py)."""
    running = start_gateway(gw_loop, gw_tansu.bootstrap, config=CoordinatorConfig(state_topic=STATE_TOPIC), security={
        "listener.name.plaintext.safeguard.topic.max.partitions": "3",
        "principal.User:ANONYMOUS.safeguard.controller.mutation.rate": "4"})
    yield running
    running.close()


def test_a_listener_safeguard_and_a_principal_mutation_rate_refuse_with_their_answers(
        guarded: RunningGateway, names: TestNames) -> None:
    wide, first, second, third = names.topic(), names.topic(), names.topic(), names.topic()
    for validate_only in (True, False):
        response = call(guarded.bootstrap, apis.CREATE_TOPICS, 7, create_topics_request([(wide, 4, 1)], validate_only))
        assert [(t.error_code, t.error_message) for t in response.topics] == [(
            ErrorCode.policy_violation, f"kcoord safeguard safeguard.topic.max.partitions (listener PLAINTEXT): "
                                        f"topic {wide} asks for 4 partitions, at most 3")]
    # 3 + 3 + 3 partitions at 4 per second (a bucket of 4): the first two are created (the
    # second takes the bucket 2 into debt), the third waits with THROTTLING_QUOTA_EXCEEDED.
    response = call(guarded.bootstrap, apis.CREATE_TOPICS, 7, create_topics_request([(first, 3, 1), (second, 3, 1),
                                                                              (third, 3, 1)]))
    codes = {t.name: t.error_code for t in response.topics}
    assert codes == {first: ErrorCode.none, second: ErrorCode.none, third: ErrorCode.throttling_quota_exceeded}
    assert response.throttle_time.total_seconds() > 0


def test_an_alter_configs_of_over_ten_thousand_keys_is_answered_here(gateway: RunningGateway,
                                                                    names: TestNames) -> None:
    if apis.INCREMENTAL_ALTER_CONFIGS not in gateway.gateway.api_versions:
        pytest.skip("this upstream does not serve IncrementalAlterConfigs: the gateway does not route it")
    m = request_types(apis.INCREMENTAL_ALTER_CONFIGS, 1)
    topic = names.topic()
    response = call(gateway.bootstrap, apis.INCREMENTAL_ALTER_CONFIGS, 1, m.IncrementalAlterConfigsRequest(
        validate_only=False, resources=(m.AlterConfigsResource(resource_type=2, resource_name=topic, configs=tuple(
            m.AlterableConfig(name=f"x.{i}", config_operation=0, value="1") for i in range(10_001))),)))
    assert [(r.resource_name, r.error_code, r.error_message) for r in response.responses] == [
        (topic, ErrorCode.policy_violation, TOO_MANY_RECORDS)]
