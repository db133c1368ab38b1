"""CreateTopics validate_only in front of an upstream that creates what it is asked to
validate (Tansu 0.6): kcoord answers it as Kafka's controller does and forwards nothing
(coordinator/gateway/validate_only.py); in front of Kafka it is forwarded."""
from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest
from kio.schema.errors import ErrorCode

from coordinator.gateway.forward import MergingPending, Pending
from coordinator.gateway.produce_check import OFFSET_FOR_LEADER_EPOCH
from coordinator.gateway.routes import GUARD, Route
from coordinator.gateway.state_guard import Split
from coordinator.gateway.validate_only import answer, answered_here
from coordinator.protocol.apis import CREATE_TOPICS, request_class, request_header_version, response_header_version
from coordinator.protocol.codec import decode_response_frame

from .test_admin_limits import create_topics, decide, facts, framed

TANSU_KEYS = {0: (0, 11), 3: (0, 12), CREATE_TOPICS: (2, 7)}        # no OffsetForLeaderEpoch
KAFKA_KEYS = {**TANSU_KEYS, OFFSET_FOR_LEADER_EPOCH: (0, 4)}


def fields(result):  # type: ignore[no-untyped-def]
    return (result.name, result.error_code, result.error_message, result.num_partitions, result.replication_factor)


@pytest.mark.parametrize("version", [2, 3, 4])
def test_before_v5_an_answer_carries_name_code_and_message(version: int) -> None:
    request = create_topics([{"name": "new", "partitions": 7_000, "configs": {"retention.ms": "1000"}},
                             {"name": "old"}], version, validate_only=True)
    response = answer(request, version, facts(existing={"old": 2}))
    assert [(t.name, t.error_code, t.error_message) for t in response.topics] == [
        ("new", ErrorCode.none, None), ("old", ErrorCode.topic_already_exists, "Topic 'old' already exists.")]
    frame, _ = framed(CREATE_TOPICS, version, request)
    local = answered_here(frame, Pending(9, _route(version), len(frame)), _gateway(TANSU_KEYS, {"old": 2}))
    assert local is not None and decode_response_frame(CREATE_TOPICS, version, local)[1] == response


@pytest.mark.parametrize("version", [5, 6, 7])
def test_kafkas_answer_for_each_topic(version: int) -> None:
    request = create_topics([
        {"name": "new", "partitions": 7_000, "rf": 1, "configs": {"retention.ms": "1000", "cleanup.policy": "compact"}},
        {"name": "defaulted", "partitions": -1, "rf": -1},
        {"name": "assigned", "partitions": -1, "rf": -1, "assignments": [0, 1]},
        {"name": "old", "partitions": 1, "rf": 1},
    ], version, validate_only=True)
    response = answer(request, version, facts(existing={"old": 2}, default=3))
    assert [fields(t) for t in response.topics] == [
        ("new", ErrorCode.none, None, 7_000, 1),
        ("defaulted", ErrorCode.none, None, 3, 1),           # the upstream's num.partitions; rf: Kafka's default 1
        ("assigned", ErrorCode.none, None, 2, 1),            # the assignments' number and replica count
        ("old", ErrorCode.topic_already_exists, "Topic 'old' already exists.", -1, -1)]
    new = response.topics[0]
    assert [(c.name, c.value, c.config_source, c.read_only, c.is_sensitive) for c in new.configs] == [
        ("cleanup.policy", "compact", 1, False, False), ("retention.ms", "1000", 1, False, False)]
    assert new.topic_config_error_code == ErrorCode.none
    if version >= 7:
        ids = {t.topic_id for t in response.topics[:3]}
        assert len(ids) == 3 and uuid.UUID(int=0) not in ids
        assert response.topics[3].topic_id == uuid.UUID(int=0)


def test_a_null_config_value_is_invalid_config_and_old_versions_carry_no_counts() -> None:
    cls = request_class(CREATE_TOPICS, 4)
    m = __import__(cls.__module__, fromlist=["x"])
    request = cls(validate_only=True, timeout=create_topics([]).timeout, topics=(m.CreatableTopic(
        name="t", num_partitions=1, replication_factor=1, assignments=(),
        configs=(m.CreatableTopicConfig(name="a", value=None), m.CreatableTopicConfig(name="b", value=None))),))
    (result,) = answer(request, 4, facts()).topics
    assert (result.name, result.error_code, result.error_message) == (
        "t", ErrorCode.invalid_config, "Null value not supported for topic configs: a,b")
    assert not hasattr(result, "num_partitions")


def _route(version: int) -> Route:
    return Route(GUARD, CREATE_TOPICS, version, request_header_version(CREATE_TOPICS, version),
                 response_header_version(CREATE_TOPICS, version), version >= 5, request_class(CREATE_TOPICS, version),
                 guarded=True)


def _gateway(keys: dict, existing: dict[str, int] | None = None) -> SimpleNamespace:
    topics = {name: SimpleNamespace(name=name, num_partitions=n) for name, n in (existing or {}).items()}
    image = SimpleNamespace(topics_by_name=topics, topics_by_id={})
    return SimpleNamespace(cluster=SimpleNamespace(upstream_api_versions=keys, image=image, brokers={111: None}),
                           config=None)


def test_answered_here_in_front_of_tansu_and_forwarded_in_front_of_kafka() -> None:
    request = create_topics([{"name": "new", "partitions": 7_000}], validate_only=True)
    frame, _ = framed(CREATE_TOPICS, 7, request)
    pending = Pending(9, _route(7), len(frame))
    local = answered_here(frame, pending, _gateway(TANSU_KEYS))
    assert local is not None
    correlation_id, response = decode_response_frame(CREATE_TOPICS, 7, local)
    assert correlation_id == 9
    assert [fields(t) for t in response.topics] == [("new", ErrorCode.none, None, 7_000, 1)]
    assert answered_here(frame, pending, _gateway(KAFKA_KEYS)) is None
    assert answered_here(frame, pending, _gateway({})) is not None      # keys not known: never forwarded
    real, _ = framed(CREATE_TOPICS, 7, create_topics([{"name": "new", "partitions": 7_000}]))
    assert answered_here(real, pending, _gateway(TANSU_KEYS)) is None


def test_a_split_request_gets_its_refusals_merged_into_the_answer_made_here() -> None:
    request = create_topics([{"name": "wide", "partitions": 1, "rf": 9}, {"name": "new", "partitions": 2}],
                            validate_only=True)
    decision = decide(request)            # rf 9 over 3 brokers: answered by the guard, "new" forwarded
    assert isinstance(decision, Split)
    pending = MergingPending(9, _route(7), len(decision.frame), decision.merge)
    local = answered_here(decision.frame, pending, _gateway(TANSU_KEYS))
    assert local is not None
    _, response = decode_response_frame(CREATE_TOPICS, 7, local)
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("new", ErrorCode.none), ("wide", ErrorCode.invalid_replication_factor)]


def test_a_long_name_or_config_is_shortened_in_messages_so_the_answer_encodes() -> None:
    name = "\u00fc" * 10000                    # 20,000 bytes of UTF-8: the fuzzer's other long string
    request = create_topics([{"name": name}], 4, validate_only=True)
    frame, _ = framed(CREATE_TOPICS, 4, request)
    local = answered_here(frame, Pending(9, _route(4), len(frame)), _gateway(TANSU_KEYS, {name: 1}))
    assert local is not None
    (result,) = decode_response_frame(CREATE_TOPICS, 4, local)[1].topics
    assert result.name == name and result.error_code == ErrorCode.topic_already_exists
    assert len(result.error_message) < 300
