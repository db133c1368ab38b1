"""Operator safeguards on forwarded admin requests (safeguards.py, admin_policy.py), decided
through the state-topic guard as the gateway does (state_guard.StateTopicGuard.admin)."""
from __future__ import annotations

import sys
from datetime import timedelta

import pytest
from kio.schema.errors import ErrorCode

from coordinator.config import CoordinatorConfig
from coordinator.gateway.admin_limits import ClusterFacts
from coordinator.gateway.admin_policy import Policy
from coordinator.gateway.safeguards import Rules, Safeguards, process_rules
from coordinator.gateway.state_guard import Local, Split, StateTopicGuard
from coordinator.protocol.apis import (
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
    INCREMENTAL_ALTER_CONFIGS,
    request_class,
    request_header_version,
    response_class,
)
from coordinator.protocol.codec import decode_response_frame, encode_body, encode_response_frame
from coordinator.protocol.framing import RequestHeader, frame, request_body_offset

ZERO = timedelta(0)
FACTS = ClusterFacts(3, {"old": 4}.get, 1)


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def decide(api_key: int, version: int, request, guards: Safeguards, listener: str = "PLAINTEXT",  # type: ignore[no-untyped-def]
           principal: str = "User:alice"):
    head = RequestHeader(api_key, version, 3, "t").encode(request_header_version(api_key, version))
    data = frame(head + encode_body(request))
    offset = request_body_offset(data, request_header_version(api_key, version))[1]
    policy = Policy(guards.rules(listener, principal), guards, principal)
    decision = StateTopicGuard("__kcoord", lambda: None, lambda: True).admin(
        api_key, version, request, data, offset, FACTS, policy)
    if isinstance(decision, Local):
        encode_response_frame(api_key, version, 3, decision.response)     # what the client reads
    return decision


def create_topics(topics: list[tuple[str, int, int, dict[str, str]]], version: int = 7, validate_only=False):  # type: ignore[no-untyped-def]
    cls = request_class(CREATE_TOPICS, version)
    m = sys.modules[cls.__module__]
    return cls(timeout=ZERO, validate_only=validate_only, topics=tuple(m.CreatableTopic(
        name=n, num_partitions=p, replication_factor=rf, assignments=(),
        configs=tuple(m.CreatableTopicConfig(name=k, value=v) for k, v in c.items())) for n, p, rf, c in topics))


def answers(decision) -> dict[str, tuple[int, str]]:  # type: ignore[no-untyped-def]
    assert isinstance(decision, Local), decision
    entries = getattr(decision.response, "topics", None) or getattr(decision.response, "results", None) \
        or decision.response.responses
    return {getattr(e, "name", None) or e.resource_name: (e.error_code, e.error_message) for e in entries}


def test_defaults_are_kafkas_limits_and_refuse_nothing_kafka_accepts() -> None:
    guards = Safeguards(process_rules(CoordinatorConfig()))
    assert guards.base == Rules()
    request = create_topics([("a", 9_000, 3, {"retention.ms": "-1"}), ("b", 900, 3, {})])
    assert decide(CREATE_TOPICS, 7, request, guards) is None


def test_process_listener_and_principal_scopes() -> None:
    config = CoordinatorConfig(safeguard_topic_max_partitions=100, safeguard_topic_name_pattern="team-[a-z]+\\..*")
    guards = Safeguards(process_rules(config), {
        "listener.name.external.safeguard.topic.max.partitions": "10",
        "principal.User:admin.safeguard.topic.max.partitions": "1000",
        "principal.User:admin.safeguard.topic.name.pattern": ""})
    request = create_topics([("team-a.orders", 50, 1, {}), ("scratch", 1, 1, {})])
    got = answers(decide(CREATE_TOPICS, 7, create_topics([("team-a.orders", 500, 1, {})]), guards))
    assert got["team-a.orders"] == (ErrorCode.policy_violation, "kcoord safeguard safeguard.topic.max.partitions "
                                    "(process): topic team-a.orders asks for 500 partitions, at most 100")
    split = decide(CREATE_TOPICS, 7, request, guards)
    assert isinstance(split, Split) and "topic.name.pattern" in split.note
    external = answers(decide(CREATE_TOPICS, 7, create_topics([("team-a.x", 50, 1, {})]), guards, "EXTERNAL"))
    assert external["team-a.x"][1].endswith("(listener EXTERNAL): topic team-a.x asks for 50 partitions, at most 10")
    assert decide(CREATE_TOPICS, 7, create_topics([("scratch", 500, 1, {})]), guards, "EXTERNAL", "User:admin") is None


def test_request_wide_limit_answers_every_topic_and_validate_only_gets_the_same() -> None:
    guards = Safeguards(Rules(request_max_partitions=10))
    for validate_only in (False, True):
        got = answers(decide(CREATE_TOPICS, 7, create_topics([("a", 6, 1, {}), ("b", 6, 1, {})],
                                                             validate_only=validate_only), guards))
        assert {code for code, _ in got.values()} == {ErrorCode.policy_violation}
        assert "the request asks for 12 partitions, at most 10" in got["a"][1]


def test_replication_factor_config_bounds_and_alter_configs() -> None:
    guards = Safeguards(Rules(topic_max_replication_factor=2), {
        "listener.name.plaintext.safeguard.topic.config.bounds": "retention.ms=60000:604800000,max.message.bytes=:"
                                                                 "8388608"})
    got = answers(decide(CREATE_TOPICS, 7, create_topics([("r", 1, 3, {}), ("c", 1, 1, {"retention.ms": "1"})]),
                         guards))
    assert "replication factor of 3, at most 2" in got["r"][1]
    assert "retention.ms=1 is outside [60000, 604800000]" in got["c"][1]
    cls = request_class(INCREMENTAL_ALTER_CONFIGS, 1)
    m = sys.modules[cls.__module__]
    alter = cls(validate_only=False, resources=(
        m.AlterConfigsResource(resource_type=2, resource_name="t", configs=(
            m.AlterableConfig(name="max.message.bytes", config_operation=0, value="99999999"),)),
        m.AlterConfigsResource(resource_type=2, resource_name="u", configs=(
            m.AlterableConfig(name="max.message.bytes", config_operation=1, value=None),))))
    decision = decide(INCREMENTAL_ALTER_CONFIGS, 1, alter, guards)
    assert isinstance(decision, Split), decision      # "u" deletes the key: forwarded


def test_create_partitions_and_delete_topics_guards() -> None:
    guards = Safeguards(Rules(topic_max_partitions=8, delete_topics_deny_pattern="prod\\..*"))
    cls = request_class(CREATE_PARTITIONS, 3)
    m = sys.modules[cls.__module__]
    grow = cls(timeout=ZERO, validate_only=False, topics=(m.CreatePartitionsTopic(name="old", count=9,
                                                                                   assignments=None),))
    assert "topic old would have 9 partitions, at most 8" in answers(decide(CREATE_PARTITIONS, 3, grow, guards))[
        "old"][1]
    for version in (4, 6):
        dcls = request_class(DELETE_TOPICS, version)
        dm = sys.modules[dcls.__module__]
        names = ("prod.orders", "dev.x")
        request = dcls(timeout=ZERO, topic_names=names) if version < 6 else dcls(timeout=ZERO, topics=tuple(
            dm.DeleteTopicState(name=n, topic_id=None) for n in names))
        decision = decide(DELETE_TOPICS, version, request, guards)
        assert isinstance(decision, Split) and "delete.topics.deny.pattern" in decision.note


def test_controller_mutation_rate_throttles_with_a_throttle_time_from_v6() -> None:
    clock = Clock()
    guards = Safeguards(Rules(), {"principal.User:alice.safeguard.controller.mutation.rate": "5"}, clock=clock)
    request = create_topics([("a", 6, 1, {}), ("b", 2, 1, {})])
    decision = decide(CREATE_TOPICS, 7, request, guards)
    assert isinstance(decision, Split) and decision.rule == "controller_mutation_rate"
    # The bucket is 1 partition in debt: the next topic waits 1/5 s.
    decision = decide(CREATE_TOPICS, 7, create_topics([("c", 1, 1, {})]), guards)
    assert isinstance(decision, Local)
    (topic,) = decision.response.topics
    assert topic.error_code == ErrorCode.throttling_quota_exceeded
    assert decision.response.throttle_time == timedelta(milliseconds=200)
    clock.now += 0.2
    assert decide(CREATE_TOPICS, 7, create_topics([("c", 1, 1, {})]), guards) is None
    # Another principal has its own bucket (unlimited here); validate_only takes nothing.
    assert decide(CREATE_TOPICS, 7, create_topics([("d", 50, 1, {})]), guards, principal="User:bob") is None
    assert decide(CREATE_TOPICS, 7, create_topics([("f", 50, 1, {})], validate_only=True), guards) is None
    # An older version is accepted (forwarded whole) and recorded: upstream's answer gets the
    # time until the debt (1 + 50 partitions at 5/s) is paid, as Kafka's permissive quota.
    decision = decide(CREATE_TOPICS, 5, create_topics([("e", 50, 1, {})], 5), guards)
    assert isinstance(decision, Split) and decision.rule == "controller_mutation_rate"
    m = sys.modules[response_class(CREATE_TOPICS, 5).__module__]
    upstream = response_class(CREATE_TOPICS, 5)(throttle_time=ZERO, topics=(m.CreatableTopicResult(
        name="e", error_code=ErrorCode.none, error_message=None, topic_config_error_code=0, num_partitions=50,
        replication_factor=1, configs=()),))
    merged = decode_response_frame(CREATE_TOPICS, 5, decision.merge(encode_response_frame(CREATE_TOPICS, 5, 3,
                                                                                         upstream)))[1]
    assert [t.name for t in merged.topics] == ["e"] and merged.throttle_time == timedelta(milliseconds=10_200)


def test_bad_settings_are_refused_with_the_setting_named() -> None:
    with pytest.raises(ValueError, match="safeguard.topic.max.partitionz"):
        Safeguards(Rules(), {"listener.name.x.safeguard.topic.max.partitionz": "1"})
    with pytest.raises(ValueError, match="NAME=MIN:MAX"):
        process_rules(CoordinatorConfig(safeguard_topic_config_bounds=("retention.ms",)))


def test_settings_reach_the_rules_through_kcoords_config_parsing() -> None:
    """`kcoord serve --config`: process-wide names are CoordinatorConfig fields; the listener
    and principal ones travel with the security settings (their `listener.`/`principal.`
    prefixes), which the gateway keeps as `security_settings`."""
    import argparse

    from coordinator import cli

    args = argparse.Namespace(state_topic="s", state_partitions=1, config=[
        "safeguard.topic.config.bounds=retention.ms=60000:604800000,max.message.bytes=:8388608",
        "safeguard.controller.mutation.rate=2.5",
        "listener.name.external.safeguard.topic.max.partitions=3",
        "principal.User:alice.safeguard.topic.name.pattern=team-.*"])
    config, security = cli._configs_from_args(args)
    guards = Safeguards(process_rules(config), security)
    rules = guards.rules("EXTERNAL", "User:alice")
    assert (rules.topic_max_partitions, rules.topic_name_pattern, rules.controller_mutation_rate) == (3, "team-.*", 2.5)
    assert rules.topic_config_bounds == {"retention.ms": (60000, 604800000), "max.message.bytes": (None, 8388608)}
    assert guards.rules("PLAINTEXT", "User:bob").topic_max_partitions == 2**31 - 1


def test_delete_by_topic_id_is_judged_by_the_name_kcoords_view_gives_it() -> None:
    import uuid

    prod_id, dev_id, new_id = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    names = {prod_id: "prod.orders", dev_id: "dev.x"}
    facts = ClusterFacts(3, {"prod.orders": 3, "dev.x": 1}.get, 1, names.get)
    guards = Safeguards(Rules(delete_topics_deny_pattern="prod\\..*"))
    cls = request_class(DELETE_TOPICS, 6)
    m = sys.modules[cls.__module__]
    request = cls(timeout=ZERO, topics=tuple(m.DeleteTopicState(name=None, topic_id=i)
                                             for i in (prod_id, dev_id, new_id)))
    head = RequestHeader(DELETE_TOPICS, 6, 3, "t").encode(request_header_version(DELETE_TOPICS, 6))
    data = frame(head + encode_body(request))
    offset = request_body_offset(data, request_header_version(DELETE_TOPICS, 6))[1]
    decision = StateTopicGuard("__kcoord", lambda: None, lambda: True).admin(
        DELETE_TOPICS, 6, request, data, offset, facts, Policy(guards.rules("PLAINTEXT", None), guards, "User:a"))
    assert isinstance(decision, Split)
    m = sys.modules[response_class(DELETE_TOPICS, 6).__module__]
    upstream = response_class(DELETE_TOPICS, 6)(throttle_time=ZERO, responses=(m.DeletableTopicResult(
        name="dev.x", topic_id=dev_id, error_code=ErrorCode.none, error_message=None),))
    merged = decode_response_frame(DELETE_TOPICS, 6, decision.merge(encode_response_frame(DELETE_TOPICS, 6, 3,
                                                                                         upstream)))[1]
    assert {r.topic_id: r.error_code for r in merged.responses} == {
        dev_id: ErrorCode.none, prod_id: ErrorCode.policy_violation, new_id: ErrorCode.policy_violation}
