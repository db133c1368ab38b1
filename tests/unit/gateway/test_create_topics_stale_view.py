"""A CreateTopics entry for a topic kcoord's metadata view says exists is still checked by
Kafka's per-topic rules (admin_limits.check_create_topics): the view lags a DeleteTopics by
up to one refresh, and Tansu 0.6 creates a deleted topic with whatever count it is sent
(num_partitions beside explicit assignments, 2**31 - 1 of them, made it abort allocating
(2**31 - 1) x 96 bytes for its next Metadata answer: fuzz/README.md). An invalid one gets
Kafka's answer for an existing topic and is not forwarded; a valid one is forwarded."""
from __future__ import annotations

import sys

import pytest
from kio.schema.errors import ErrorCode

from coordinator.gateway.admin_limits import check_create_topics
from coordinator.gateway.state_guard import Local, Split
from coordinator.protocol.apis import CREATE_TOPICS, request_class, request_header_version, response_class
from coordinator.protocol.codec import decode_body, decode_response_frame, encode_response_frame
from coordinator.protocol.framing import request_body_offset

from .test_admin_limits import ZERO, create_topics, decide, facts

I32_MAX = 2**31 - 1
EXISTS = (ErrorCode.topic_already_exists, "Topic 'old' already exists.")


@pytest.mark.parametrize("topic", [
    {"partitions": I32_MAX, "rf": -1, "assignments": [0]},     # what the fuzzer sent after a DeleteTopics
    {"partitions": 50_000_000, "rf": -1, "assignments": [0]},
    {"partitions": -1, "rf": 32767, "assignments": [0]},
    {"partitions": -1, "rf": -1, "assignments": [I32_MAX]},
    {"partitions": 1, "rf": 32767},                               # Tansu's Metadata allocates a list per replica
    {"partitions": -(2**31), "rf": 1},
])
def test_an_invalid_topic_the_view_knows_gets_topic_already_exists_and_is_not_forwarded(topic: dict) -> None:
    request = create_topics([{"name": "old", **topic}])
    assert check_create_topics(request, facts(existing={"old": 1})).entries == {0: EXISTS}  # type: ignore[union-attr]
    decision = decide(request, f=facts(existing={"old": 1}))
    assert isinstance(decision, Local), decision
    assert [(t.name, t.error_code, t.error_message) for t in decision.response.topics] == [("old", *EXISTS)]
    # The same topic unknown to the view gets the rule's own answer.
    (code, _), = check_create_topics(request, facts()).entries.values()   # type: ignore[union-attr]
    assert code != ErrorCode.topic_already_exists


def test_a_valid_topic_the_view_knows_is_forwarded_and_the_invalid_one_beside_it_is_not() -> None:
    request = create_topics([{"name": "old", "partitions": I32_MAX, "rf": -1, "assignments": [0]},
                             {"name": "known", "partitions": 3, "rf": 1}])
    decision = decide(request, f=facts(existing={"old": 1, "known": 3}))
    assert isinstance(decision, Split), decision
    forwarded = decode_body(request_class(CREATE_TOPICS, 7), decision.frame,
                            request_body_offset(decision.frame, request_header_version(CREATE_TOPICS, 7))[1])
    assert [t.name for t in forwarded.topics] == ["known"]
    m = sys.modules[response_class(CREATE_TOPICS, 7).__module__]
    upstream = response_class(CREATE_TOPICS, 7)(throttle_time=ZERO, topics=(m.CreatableTopicResult(
        name="known", topic_id=None, error_code=ErrorCode.topic_already_exists, error_message="exists",
        topic_config_error_code=0, num_partitions=-1, replication_factor=-1, configs=None),))
    merged = decode_response_frame(CREATE_TOPICS, 7, decision.merge(
        encode_response_frame(CREATE_TOPICS, 7, 9, upstream)))[1]
    assert [(t.name, t.error_code) for t in merged.topics] == [
        ("known", ErrorCode.topic_already_exists), ("old", ErrorCode.topic_already_exists)]


def test_a_valid_topic_the_view_knows_writes_no_records_and_is_not_refused() -> None:
    assert check_create_topics(create_topics([{"name": "old", "partitions": 9_999}]),
                               facts(existing={"old": 1})) is None


def test_a_name_that_fills_a_string_field_is_shortened_in_the_message() -> None:
    # The structured fuzzer's longest string: the topic exists (Tansu took the name), and the
    # answer quoting it must still encode (a legacy string holds at most 32,767 bytes).
    name = "x" * 32767
    decision = decide(create_topics([{"name": name, "partitions": 1, "rf": 9}], version=4),
                      version=4, f=facts(existing={name: 1}))
    assert isinstance(decision, Local), decision
    back = decode_response_frame(CREATE_TOPICS, 4, encode_response_frame(CREATE_TOPICS, 4, 9, decision.response))[1]
    ((got, code, message),) = [(t.name, t.error_code, t.error_message) for t in back.topics]
    assert (got, code) == (name, ErrorCode.topic_already_exists)
    assert message == f"Topic '{'x' * 249}... (32767 characters)' already exists."
