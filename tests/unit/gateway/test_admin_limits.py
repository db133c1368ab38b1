"""Kafka's controller limits on CreateTopics and CreatePartitions, enforced by the gateway
(admin_limits.py), and how the state-topic guard answers them (state_guard.py)."""
from __future__ import annotations

import sys
from datetime import timedelta

import pytest
from kio.schema.errors import ErrorCode

from coordinator.gateway.admin_limits import (
    ALTER_CLIENT_QUOTAS,
    ALTER_PARTITION_REASSIGNMENTS,
    CREATE_ACLS,
    DUPLICATE_TOPIC,
    INCREMENTAL_ALTER_CONFIGS,
    TOO_MANY_PARTITIONS,
    TOO_MANY_RECORDS,
    ClusterFacts,
    check_create_partitions,
    check_create_topics,
)
from coordinator.gateway.state_guard import Local, Split, StateTopicGuard
from coordinator.protocol.apis import (
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    request_class,
    request_header_version,
    response_class,
)
from coordinator.protocol.codec import decode_body, decode_response_frame, encode_body, encode_response_frame
from coordinator.protocol.framing import RequestHeader, frame, request_body_offset

ZERO = timedelta(0)
STATE = "__kcoord_offsets"


def facts(brokers: int = 3, existing: dict[str, int] | None = None, default: int = 1) -> ClusterFacts:
    known = existing or {}
    return ClusterFacts(brokers, known.get, default)


def create_topics(topics: list[dict], version: int = 7, validate_only: bool = False):  # type: ignore[no-untyped-def]
    cls = request_class(CREATE_TOPICS, version)
    m = sys.modules[cls.__module__]
    built = []
    for t in topics:
        assignments = tuple(m.CreatableReplicaAssignment(partition_index=i, broker_ids=(1,))
                            for i in t.get("assignments", ()))
        configs = tuple(m.CreatableTopicConfig(name=k, value=v) for k, v in t.get("configs", {}).items())
        built.append(m.CreatableTopic(name=t["name"], num_partitions=t.get("partitions", 1),
                                      replication_factor=t.get("rf", 1), assignments=assignments, configs=configs))
    return cls(topics=tuple(built), timeout=ZERO, validate_only=validate_only)


def create_partitions(topics: list[tuple[str, int]], version: int = 3):  # type: ignore[no-untyped-def]
    cls = request_class(CREATE_PARTITIONS, version)
    m = sys.modules[cls.__module__]
    return cls(topics=tuple(m.CreatePartitionsTopic(name=n, count=c, assignments=None) for n, c in topics),
               timeout=ZERO, validate_only=False)


def framed(api_key: int, version: int, body: object) -> tuple[bytes, int]:
    head = RequestHeader(api_key, version, 9, "t").encode(request_header_version(api_key, version))
    data = frame(head + encode_body(body))
    return data, request_body_offset(data, request_header_version(api_key, version))[1]


def decide(request, api_key: int = CREATE_TOPICS, version: int = 7, f: ClusterFacts | None = None):  # type: ignore[no-untyped-def]
    data, offset = framed(api_key, version, request)
    guard = StateTopicGuard(STATE, lambda: None, lambda: False)
    return guard.admin(api_key, version, request, data, offset, f or facts())


# --- CreateTopics: the whole request ------------------------------------------------------

def test_fifty_million_partitions_get_policy_violation_on_every_topic_and_nothing_is_forwarded() -> None:
    for version in (2, 4, 5, 7):
        request = create_topics([{"name": "huge", "partitions": 50_000_000}, {"name": "small"},
                                 {"name": STATE}], version)
        decision = decide(request, version=version)
        assert isinstance(decision, Local), decision
        assert [t.name for t in decision.response.topics] == ["huge", "small", STATE]
        assert {t.error_code for t in decision.response.topics} == {ErrorCode.policy_violation}
        assert {t.error_message for t in decision.response.topics} == {TOO_MANY_PARTITIONS}
        back = decode_response_frame(CREATE_TOPICS, version,
                                     encode_response_frame(CREATE_TOPICS, version, 9, decision.response))[1]
        assert [(t.name, t.error_code, t.error_message) for t in back.topics] == [
            (t.name, t.error_code, t.error_message) for t in decision.response.topics]


def test_validate_only_gets_the_same_answer() -> None:
    real = decide(create_topics([{"name": "huge", "partitions": 20_000}]))
    dry = decide(create_topics([{"name": "huge", "partitions": 20_000}], validate_only=True))
    assert isinstance(real, Local) and isinstance(dry, Local)
    assert real.response == dry.response


def test_partitions_are_summed_over_topics_as_kafka_does() -> None:
    # Kafka's own test: 5000 + 5000 + 1 partitions.
    request = create_topics([{"name": "foo", "partitions": 5000}, {"name": "bar", "partitions": 5000},
                             {"name": "baz", "partitions": 1}])
    assert check_create_topics(request, facts()).whole == (ErrorCode.policy_violation, TOO_MANY_PARTITIONS)


def test_ten_thousand_partitions_in_one_topic_is_one_record_too_many() -> None:
    # 1 TopicRecord + 10,000 PartitionRecords: Kafka's BoundedList of 10,000 overflows.
    refusal = check_create_topics(create_topics([{"name": "t", "partitions": 10_000}]), facts())
    assert refusal is not None and refusal.whole == (ErrorCode.policy_violation, TOO_MANY_RECORDS)
    assert check_create_topics(create_topics([{"name": "t", "partitions": 9_999}]), facts()) is None


def test_config_records_count_once_per_distinct_name() -> None:
    configs = {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert check_create_topics(create_topics([{"name": "t", "partitions": 9_997, "configs": configs}]),
                               facts()) is None
    refusal = check_create_topics(create_topics([{"name": "t", "partitions": 9_998, "configs": configs}]), facts())
    assert refusal is not None and refusal.whole == (ErrorCode.policy_violation, TOO_MANY_RECORDS)


def test_duplicated_names_and_refused_entries_are_not_counted() -> None:
    request = create_topics([{"name": "a", "partitions": 9_000}, {"name": "a", "partitions": 9_000},
                             {"name": "b", "partitions": 5_000}])
    refusal = check_create_topics(request, facts())
    assert refusal is not None and refusal.whole is None   # not counted: no POLICY_VIOLATION
    assert refusal.entries == {0: (ErrorCode.invalid_request, DUPLICATE_TOPIC),
                               1: (ErrorCode.invalid_request, DUPLICATE_TOPIC)}
    request = create_topics([{"name": STATE, "partitions": 9_000}, {"name": "b", "partitions": 5_000}])
    assert check_create_topics(request, facts(), refused=[0]) is None
    assert check_create_topics(request, facts()) is not None


def test_assignments_count_and_minus_one_counts_the_default() -> None:
    over = create_topics([{"name": "a", "partitions": -1, "rf": -1, "assignments": range(6_000)},
                          {"name": "b", "partitions": 4_001}])
    assert check_create_topics(over, facts()).whole[1] == TOO_MANY_PARTITIONS   # type: ignore[index,union-attr]
    defaulted = create_topics([{"name": "a", "partitions": -1}, {"name": "b", "partitions": 9_990}])
    assert check_create_topics(defaulted, facts(default=1)) is None
    assert check_create_topics(defaulted, facts(default=11)).whole[1] == TOO_MANY_PARTITIONS  # type: ignore[union-attr,index]


def test_an_existing_topic_writes_no_records() -> None:
    request = create_topics([{"name": "old", "partitions": 6_000}, {"name": "new", "partitions": 4_000}])
    assert check_create_topics(request, facts()) is not None        # 10,002 records
    assert check_create_topics(request, facts(existing={"old": 3})) is None


# --- CreateTopics: per topic ---------------------------------------------------------------

@pytest.mark.parametrize(("topic", "code", "message"), [
    ({"partitions": -1, "rf": 2, "assignments": [0]}, ErrorCode.invalid_request,
     "A manual partition assignment was specified, but replication factor was not set to -1."),
    ({"partitions": 1, "rf": -1, "assignments": [0]}, ErrorCode.invalid_request,
     "A manual partition assignment was specified, but numPartitions was not set to -1."),
    ({"partitions": -1, "rf": -1, "assignments": [0, 0]}, ErrorCode.invalid_replica_assignment,
     "Found multiple manual partition assignments for partition 0"),
    ({"partitions": -1, "rf": -1, "assignments": [1, 2]}, ErrorCode.invalid_replica_assignment,
     "partitions should be a consecutive 0-based integer sequence"),
    ({"partitions": -1, "rf": -1, "assignments": [-1]}, ErrorCode.invalid_replica_assignment,
     "partitions should be a consecutive 0-based integer sequence"),
    ({"partitions": 1, "rf": 0}, ErrorCode.invalid_replication_factor,
     "Replication factor must be larger than 0, or -1 to use the default value."),
    ({"partitions": -7, "rf": 1}, ErrorCode.invalid_partitions,
     "Number of partitions was set to an invalid non-positive value."),
    ({"partitions": 2, "rf": 4}, ErrorCode.invalid_replication_factor,
     "Unable to replicate the partition 4 time(s): The target replication factor of 4 cannot be reached "
     "because only 3 broker(s) are registered or some brokers have all their log directories cordoned."),  # noqa: E501
])
def test_per_topic_rules_answer_that_topic_and_forward_the_rest(topic: dict, code: int, message: str) -> None:
    request = create_topics([{"name": "bad", **topic}, {"name": "good"}])
    decision = decide(request)
    assert isinstance(decision, Split), decision
    m = sys.modules[response_class(CREATE_TOPICS, 7).__module__]
    upstream = response_class(CREATE_TOPICS, 7)(throttle_time=ZERO, topics=(m.CreatableTopicResult(
        name="good", topic_id=None, error_code=ErrorCode.none, error_message=None, topic_config_error_code=0,
        num_partitions=1, replication_factor=1, configs=()),))
    merged = decode_response_frame(CREATE_TOPICS, 7, decision.merge(encode_response_frame(CREATE_TOPICS, 7, 9,
                                                                                         upstream)))[1]
    assert [(t.name, t.error_code, t.error_message) for t in merged.topics] == [
        ("good", ErrorCode.none, None), ("bad", code, message)]
    forwarded = decode_body(request_class(CREATE_TOPICS, 7), decision.frame,
                            request_body_offset(decision.frame, request_header_version(CREATE_TOPICS, 7))[1])
    assert [t.name for t in forwarded.topics] == ["good"]


def test_per_topic_rules_match_kafkas_messages() -> None:
    good = create_topics([{"name": "ok", "partitions": -1, "rf": -1, "assignments": [1, 0]}])
    assert check_create_topics(good, facts()) is None
    refusal = check_create_topics(create_topics([{"name": "x", "partitions": 2, "rf": 4}]), facts())
    assert refusal is not None and refusal.entries == {0: (
        ErrorCode.invalid_replication_factor, "Unable to replicate the partition 4 time(s): The target replication "
        "factor of 4 cannot be reached because only 3 broker(s) are registered or some brokers have all their "
        "log directories cordoned.")}
    # Brokers not known yet: no broker check. An existing topic that breaks a rule gets Kafka's
    # first answer, TOPIC_ALREADY_EXISTS, here: the view may lag a DeleteTopics, and forwarding
    # would let the upstream create it as sent (fuzz/README.md, the CreateTopics+DeleteTopics finding).
    assert check_create_topics(create_topics([{"name": "x", "rf": 4}]), facts(brokers=0)) is None
    refusal = check_create_topics(create_topics([{"name": "x", "rf": 4}]), facts(existing={"x": 1}))
    assert refusal is not None and refusal.entries == {0: (ErrorCode.topic_already_exists, "Topic 'x' already exists.")}


def test_every_topic_refused_is_answered_here() -> None:
    decision = decide(create_topics([{"name": "x", "partitions": 2, "rf": 9}]))
    assert isinstance(decision, Local) and decision.rule
    (topic,) = decision.response.topics
    assert topic.error_code == ErrorCode.invalid_replication_factor


# --- CreatePartitions ----------------------------------------------------------------------

def test_create_partitions_bounds_the_partitions_a_request_adds() -> None:
    f = facts(existing={"a": 5_000, "b": 1})
    assert check_create_partitions(create_partitions([("a", 15_000)]), f) is None      # adds 10,000
    refusal = check_create_partitions(create_partitions([("a", 15_000), ("b", 2)]), f)
    assert refusal is not None and refusal.whole == (ErrorCode.policy_violation, TOO_MANY_PARTITIONS)
    # A topic kcoord has not seen has at least one partition.
    assert check_create_partitions(create_partitions([("new", 10_001)]), f) is None
    assert check_create_partitions(create_partitions([("new", 2**31 - 1)]), f) is not None


def test_absurd_create_partitions_is_answered_on_every_topic() -> None:
    request = create_partitions([("a", 2**31 - 1), ("b", 3)])
    decision = decide(request, CREATE_PARTITIONS, 3, facts(existing={"a": 1, "b": 1}))
    assert isinstance(decision, Local)
    assert [(r.name, r.error_code, r.error_message) for r in decision.response.results] == [
        ("a", ErrorCode.policy_violation, TOO_MANY_PARTITIONS), ("b", ErrorCode.policy_violation, TOO_MANY_PARTITIONS)]


# --- the other admin writes: 10,000 records per request -------------------------------------

def _capped(api_key: int, version: int, request):  # type: ignore[no-untyped-def]
    data, offset = framed(api_key, version, request)
    return StateTopicGuard(STATE, lambda: None, lambda: True).admin(api_key, version, request, data, offset)


def test_alter_configs_over_ten_thousand_keys_answer_every_resource() -> None:
    cls = request_class(INCREMENTAL_ALTER_CONFIGS, 1)
    m = sys.modules[cls.__module__]

    def request(keys: int, resources: int = 2):  # type: ignore[no-untyped-def]
        return cls(validate_only=False, resources=tuple(m.AlterConfigsResource(
            resource_type=2, resource_name=f"t{r}", configs=tuple(
                m.AlterableConfig(name=f"k{k}", config_operation=0, value="1") for k in range(keys)))
            for r in range(resources)))
    assert _capped(INCREMENTAL_ALTER_CONFIGS, 1, request(5_000)) is None
    decision = _capped(INCREMENTAL_ALTER_CONFIGS, 1, request(5_001))
    assert isinstance(decision, Local) and decision.rule
    assert [(r.resource_name, r.error_code, r.error_message) for r in decision.response.responses] == [
        ("t0", ErrorCode.policy_violation, TOO_MANY_RECORDS), ("t1", ErrorCode.policy_violation, TOO_MANY_RECORDS)]
    encode_response_frame(INCREMENTAL_ALTER_CONFIGS, 1, 9, decision.response)


def test_create_acls_count_distinct_bindings_and_quotas_distinct_keys() -> None:
    cls = request_class(CREATE_ACLS, 3)
    m = sys.modules[cls.__module__]

    def acl(n: int):  # type: ignore[no-untyped-def]
        return m.AclCreation(resource_type=2, resource_name=f"t{n}", resource_pattern_type=3, principal="User:a",
                             host="*", operation=3, permission_type=3)
    assert _capped(CREATE_ACLS, 3, cls(creations=tuple(acl(0) for _ in range(10_001)))) is None
    decision = _capped(CREATE_ACLS, 3, cls(creations=tuple(acl(n) for n in range(10_001))))
    assert isinstance(decision, Local) and len(decision.response.results) == 10_001
    assert {r.error_code for r in decision.response.results} == {ErrorCode.policy_violation}
    q = request_class(ALTER_CLIENT_QUOTAS, 1)
    qm = sys.modules[q.__module__]
    entries = tuple(qm.EntryData(entity=(qm.EntityData(entity_type="user", entity_name=f"u{n}"),), ops=(
        qm.OpData(key="producer_byte_rate", value=1.0, remove=False),)) for n in range(10_001))
    decision = _capped(ALTER_CLIENT_QUOTAS, 1, q(entries=entries, validate_only=True))
    assert isinstance(decision, Local) and decision.response.entries[5].entity[0].entity_name == "u5"
    encode_response_frame(ALTER_CLIENT_QUOTAS, 1, 9, decision.response)
    assert _capped(ALTER_CLIENT_QUOTAS, 1, q(entries=entries[:10_000], validate_only=True)) is None


@pytest.mark.parametrize(("lists", "message"), [
    ([()], "The manual partition assignment includes an empty replica list."),
    ([(1, 9)], "The manual partition assignment includes broker 9, but no such broker is registered."),
    ([(2, 1, 2)], "The manual partition assignment includes the broker 2 more than once."),
    ([(1, 2), (3,)], "The manual partition assignment includes a partition with 1 replica(s), but this is not "
                     "consistent with previous partitions, which have 2 replica(s)."),
])
def test_manual_replica_lists_are_checked_as_kafka_checks_them(lists: list[tuple[int, ...]], message: str) -> None:
    cls = request_class(CREATE_TOPICS, 7)
    m = sys.modules[cls.__module__]
    topic = m.CreatableTopic(name="t", num_partitions=-1, replication_factor=-1, configs=(), assignments=tuple(
        m.CreatableReplicaAssignment(partition_index=i, broker_ids=ids) for i, ids in enumerate(lists)))
    request = cls(topics=(topic,), timeout=ZERO, validate_only=False)
    known = ClusterFacts(3, {}.get, 1, broker_ids=frozenset({1, 2, 3}))
    refusal = check_create_topics(request, known)
    assert refusal is not None and refusal.entries == {0: (ErrorCode.invalid_replica_assignment, message)}
    # Brokers not known yet: only the list's own shape is checked.
    unknown = check_create_topics(request, ClusterFacts(0, {}.get, 1))
    assert (unknown is None) == ("registered" in message)


def test_alter_partition_reassignments_over_ten_thousand_partitions() -> None:
    cls = request_class(ALTER_PARTITION_REASSIGNMENTS, 0)
    m = sys.modules[cls.__module__]

    def request(n: int):  # type: ignore[no-untyped-def]
        return cls(timeout=ZERO, topics=(m.ReassignableTopic(name="t", partitions=tuple(
            m.ReassignablePartition(partition_index=i, replicas=(1,)) for i in range(n))),))
    decision = _capped(ALTER_PARTITION_REASSIGNMENTS, 0, request(10_001))
    assert isinstance(decision, Local)
    assert (decision.response.error_code, decision.response.error_message) == (ErrorCode.policy_violation,
                                                                             TOO_MANY_RECORDS)
    assert len(decision.response.responses[0].partitions) == 10_001
    encode_response_frame(ALTER_PARTITION_REASSIGNMENTS, 0, 9, decision.response)
    assert not isinstance(_capped(ALTER_PARTITION_REASSIGNMENTS, 0, request(10_000)), Local)


def test_a_name_given_twice_is_answered_here_on_every_entry_and_never_forwarded() -> None:
    # Tansu 0.6 creates a name given twice and allocates from an absurd count (fuzz/README.md).
    request = create_topics([{"name": "dup", "partitions": -1, "rf": -1, "assignments": [0]},
                             {"name": "ok", "partitions": 1}, {"name": "dup", "partitions": 1}])
    refusal = check_create_topics(request, facts())
    assert refusal is not None and set(refusal.entries or {}) == {0, 2}
    assert {e for e in (refusal.entries or {}).values()} == {(ErrorCode.invalid_request, DUPLICATE_TOPIC)}
    grow = create_partitions([("t", 2), ("t", 3), ("u", 2)])
    refusal = check_create_partitions(grow, facts())
    assert refusal is not None and refusal.entries == {0: (ErrorCode.invalid_request, DUPLICATE_TOPIC),
                                                       1: (ErrorCode.invalid_request, DUPLICATE_TOPIC)}
