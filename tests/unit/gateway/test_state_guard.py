"""The state topic through the gateway: refused, split, or allowed and logged (state_guard.py)."""
from __future__ import annotations

import sys
import uuid
from datetime import timedelta

import pytest
from kio.schema.errors import ErrorCode

from coordinator.gateway.state_guard import (
    ALTER_CONFIGS, DELETE_RECORDS, Allowed, Close, Local, Split, StateTopicGuard,
)
from coordinator.protocol.apis import (
    CREATE_PARTITIONS, CREATE_TOPICS, DELETE_TOPICS, PRODUCE, request_class, request_header_version,
    response_class,
)
from coordinator.protocol.codec import BodyError, decode_body, decode_response_frame, encode_body, encode_response_frame
from coordinator.protocol.framing import RequestHeader, frame, request_body_offset

STATE = "__kcoord_offsets"
STATE_ID = uuid.uuid4()
OTHER_ID = uuid.uuid4()
ZERO = timedelta(0)


def guard(exists: bool = True) -> StateTopicGuard:
    return StateTopicGuard(STATE, lambda: STATE_ID, lambda: exists)


def framed(api_key: int, version: int, body: object) -> tuple[bytes, int]:
    head = RequestHeader(api_key, version, 5, "t").encode(request_header_version(api_key, version))
    data = frame(head + encode_body(body))
    return data, request_body_offset(data, request_header_version(api_key, version))[1]


def module(cls: type):  # type: ignore[no-untyped-def]
    return sys.modules[cls.__module__]


def produce(version: int, topics: list[tuple[object, list[int]]], acks: int = -1) -> tuple[bytes, int]:
    cls = request_class(PRODUCE, version)
    m = module(cls)
    data = tuple(m.TopicProduceData(partition_data=tuple(m.PartitionProduceData(index=p, records=b"r" * 9)
                                                         for p in parts),
                                    **({"topic_id": key} if version >= 13 else {"name": key}))
                 for key, parts in topics)
    return framed(PRODUCE, version, cls(transactional_id=None, acks=acks, timeout=ZERO, topic_data=data))


def test_produce_to_other_topics_is_forwarded_unchanged() -> None:
    data, offset = produce(9, [("orders", [0, 1])])
    assert guard().produce(data, 9, offset) == (-1, None)


def test_produce_only_to_the_state_topic_is_answered_with_kafkas_error() -> None:
    for version in (3, 8, 9):
        data, offset = produce(version, [(STATE, [0, 4])])
        acks, decision = guard().produce(data, version, offset)
        assert isinstance(decision, Local), decision
        (topic,) = decision.response.responses
        assert topic.name == STATE and [p.index for p in topic.partition_responses] == [0, 4]
        assert {p.error_code for p in topic.partition_responses} == {ErrorCode.invalid_topic_exception}
        if version >= 8:
            assert topic.partition_responses[0].error_message == f"Cannot append to internal topic {STATE}"
        # It encodes and decodes at the request's version (what the client reads).
        back = decode_response_frame(PRODUCE, version, encode_response_frame(PRODUCE, version, 5, decision.response))
        assert back[1].responses[0].partition_responses[1].base_offset == -1


def test_mixed_produce_is_split_and_the_answer_merged() -> None:
    data, offset = produce(9, [("orders", [0]), (STATE, [2])])
    _, decision = guard().produce(data, 9, offset)
    assert isinstance(decision, Split)
    forwarded = decode_body(request_class(PRODUCE, 9), decision.frame, request_body_offset(decision.frame, 2)[1])
    assert [t.name for t in forwarded.topic_data] == ["orders"]
    assert decision.frame[4:offset] == data[4:offset]   # header (correlation id) unchanged
    m = module(response_class(PRODUCE, 9))
    upstream = response_class(PRODUCE, 9)(throttle_time=ZERO, responses=(m.TopicProduceResponse(
        name="orders", partition_responses=(m.PartitionProduceResponse(
            index=0, error_code=ErrorCode.none, base_offset=41, log_append_time=None, log_start_offset=0,
            record_errors=(), error_message=None),)),))
    correlation_id, merged = decode_response_frame(PRODUCE, 9, decision.merge(
        encode_response_frame(PRODUCE, 9, 5, upstream)))
    assert correlation_id == 5
    assert [(t.name, t.partition_responses[0].error_code) for t in merged.responses] == [
        ("orders", ErrorCode.none), (STATE, ErrorCode.invalid_topic_exception)]


def test_acks_zero_produce_to_the_state_topic_closes() -> None:
    data, offset = produce(9, [(STATE, [0])], acks=0)
    acks, decision = guard().produce(data, 9, offset)
    assert acks == 0 and isinstance(decision, Close) and "acks=0" in decision.reason


def test_produce_v13_matches_the_state_topic_by_id() -> None:
    data, offset = produce(13, [(STATE_ID, [1]), (OTHER_ID, [0])])
    _, decision = guard().produce(data, 13, offset)
    assert isinstance(decision, Split)
    forwarded = decode_body(request_class(PRODUCE, 13), decision.frame, request_body_offset(decision.frame, 2)[1])
    assert [t.topic_id for t in forwarded.topic_data] == [OTHER_ID]
    # Without a known id nothing matches (the zero UUID never does).
    blind = StateTopicGuard(STATE, lambda: None, lambda: True)
    assert blind.produce(data, 13, offset)[1] is None


def _admin(api_key: int, version: int, **fields: object) -> tuple[object, bytes, int]:
    request = request_class(api_key, version)(**fields)
    data, offset = framed(api_key, version, request)
    return request, data, offset


def test_delete_topics_by_name_and_by_id_get_topic_authorization_failed() -> None:
    request, data, offset = _admin(DELETE_TOPICS, 4, topic_names=(STATE,), timeout=ZERO)
    decision = guard().admin(DELETE_TOPICS, 4, request, data, offset)
    assert isinstance(decision, Local)
    assert [(r.name, r.error_code) for r in decision.response.responses] == [
        (STATE, ErrorCode.topic_authorization_failed)]
    m = module(request_class(DELETE_TOPICS, 6))
    request, data, offset = _admin(DELETE_TOPICS, 6, timeout=ZERO, topics=(
        m.DeleteTopicState(name=None, topic_id=STATE_ID), m.DeleteTopicState(name="orders", topic_id=None)))
    decision = guard().admin(DELETE_TOPICS, 6, request, data, offset)
    assert isinstance(decision, Split)
    forwarded = decode_body(request_class(DELETE_TOPICS, 6), decision.frame, request_body_offset(decision.frame, 2)[1])
    assert [t.name for t in forwarded.topics] == ["orders"]
    rm = module(response_class(DELETE_TOPICS, 6))
    upstream = response_class(DELETE_TOPICS, 6)(throttle_time=ZERO, responses=(rm.DeletableTopicResult(
        name="orders", topic_id=OTHER_ID, error_code=ErrorCode.none, error_message=None),))
    _, merged = decode_response_frame(DELETE_TOPICS, 6, decision.merge(encode_response_frame(DELETE_TOPICS, 6, 5,
                                                                                              upstream)))
    assert [(r.topic_id, r.error_code) for r in merged.responses] == [
        (OTHER_ID, ErrorCode.none), (STATE_ID, ErrorCode.topic_authorization_failed)]


def test_create_partitions_refused_and_create_topics_only_while_missing() -> None:
    m = module(request_class(CREATE_PARTITIONS, 3))
    request, data, offset = _admin(CREATE_PARTITIONS, 3, timeout=ZERO, validate_only=False, topics=(
        m.CreatePartitionsTopic(name=STATE, count=60, assignments=None),))
    decision = guard().admin(CREATE_PARTITIONS, 3, request, data, offset)
    assert isinstance(decision, Local)
    assert decision.response.results[0].error_code == ErrorCode.topic_authorization_failed
    m = module(request_class(CREATE_TOPICS, 7))
    topic = m.CreatableTopic(name=STATE, num_partitions=1, replication_factor=1, assignments=(), configs=())
    request, data, offset = _admin(CREATE_TOPICS, 7, timeout=ZERO, validate_only=False, topics=(topic,))
    assert guard(exists=True).admin(CREATE_TOPICS, 7, request, data, offset) is None   # upstream: already exists
    decision = guard(exists=False).admin(CREATE_TOPICS, 7, request, data, offset)
    assert isinstance(decision, Local)
    result = decision.response.topics[0]
    assert result.name == STATE and result.error_code == ErrorCode.topic_authorization_failed
    decode_response_frame(CREATE_TOPICS, 7, encode_response_frame(CREATE_TOPICS, 7, 1, decision.response))


def test_delete_records_gets_invalid_topic_per_partition() -> None:
    m = module(request_class(DELETE_RECORDS, 2))
    request, data, offset = _admin(DELETE_RECORDS, 2, timeout=ZERO, topics=(m.DeleteRecordsTopic(
        name=STATE, partitions=(m.DeleteRecordsPartition(partition_index=3, offset=10),)),))
    decision = guard().admin(DELETE_RECORDS, 2, request, data, offset)
    assert isinstance(decision, Local) and decision.note == f"Cannot delete records of internal topic {STATE}"
    partition = decision.response.topics[0].partitions[0]
    assert (partition.partition_index, partition.low_watermark, partition.error_code) == (
        3, -1, ErrorCode.invalid_topic_exception)


def test_alter_configs_on_the_state_topic_is_allowed_and_noted() -> None:
    m = module(request_class(ALTER_CONFIGS, 2))
    resource = m.AlterConfigsResource(resource_type=2, resource_name=STATE, configs=(
        m.AlterableConfig(name="retention.ms", value="1"),))
    request, data, offset = _admin(ALTER_CONFIGS, 2, resources=(resource,), validate_only=False)
    decision = guard().admin(ALTER_CONFIGS, 2, request, data, offset)
    assert isinstance(decision, Allowed) and STATE in decision.note
    other = m.AlterConfigsResource(resource_type=2, resource_name="orders", configs=())
    request, data, offset = _admin(ALTER_CONFIGS, 2, resources=(other,), validate_only=False)
    assert guard().admin(ALTER_CONFIGS, 2, request, data, offset) is None


def test_a_produce_above_the_walk_bound_is_walked_within_a_bound_and_guarded_as_any_other() -> None:
    """The walk runs on the event loop, so a Produce above max_decoded_request_bytes is read
    within produce_check.MAX_NAMED_PARTITIONS topics, partitions and tagged fields first, then
    walked: one cut short is refused as a walked one is (nothing goes up unwalked). It is never
    decoded (~3 times the frame): one naming the state topic closes the connection."""
    data, offset = produce(9, [("orders", [0, 1])])
    broken = frame(data[4:-3])                      # the last partition's records cut short
    small = StateTopicGuard(STATE, lambda: STATE_ID, lambda: True, max_walked_frame=len(broken) - 1)
    for g in (small, guard()):
        with pytest.raises(BodyError):
            g.produce(broken, 9, offset)
    named, named_offset = produce(9, [(STATE, [0])])
    small = StateTopicGuard(STATE, lambda: STATE_ID, lambda: True, max_walked_frame=len(named) - 1)
    assert isinstance(guard().produce(named, 9, named_offset)[1], Local)
    acks, decision = small.produce(named, 9, named_offset)
    assert isinstance(decision, Close) and "state topic's name or id" in decision.reason


def test_the_state_topic_id_bytes_are_computed_once_per_id() -> None:
    """Review item 20: Produce v13 asked for UUID.bytes on every request."""
    ids = [STATE_ID]
    g = StateTopicGuard(STATE, lambda: ids[0], lambda: True)
    first = g._topic_id_bytes()
    assert first == STATE_ID.bytes and g._topic_id_bytes() is first
    ids[0] = OTHER_ID
    assert g._topic_id_bytes() == OTHER_ID.bytes
