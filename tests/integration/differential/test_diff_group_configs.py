"""Per-group configuration (Kafka's `GroupConfig`, docs/user/group-configs.md) on Kafka 4.4 and
on kcoord in front of it, key by key: what DescribeConfigs answers for a group (every key, its
value, source and type, before and after a change), the validation errors of
IncrementalAlterConfigs, and the configs' lifetime across DeleteGroups. kcoord answers from
its own state topic, Kafka from its metadata: the answers must be the same."""
from __future__ import annotations

import pytest

from support.differential import DELETE_GROUPS, DESCRIBE_CONFIGS, GROUP_RESOURCE, INCREMENTAL_ALTER_CONFIGS
from support.wait import wait_until

SET, DELETE = 0, 1


def alter(side, group: str, changes, validate_only: bool = False) -> tuple:  # type: ignore[no-untyped-def]
    t = side.types(INCREMENTAL_ALTER_CONFIGS, 1)
    resource = t.AlterConfigsResource(resource_type=GROUP_RESOURCE, resource_name=group, configs=tuple(
        t.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in changes))
    (answer,) = side.call(INCREMENTAL_ALTER_CONFIGS, 1, resources=(resource,), validate_only=validate_only).responses
    return int(answer.error_code), answer.error_message


def described(side, group: str, keys=None, full: bool = False) -> dict:  # type: ignore[no-untyped-def]
    """DescribeConfigs v4 of a GROUP; ``full``: with synonyms and documentation."""
    t = side.types(DESCRIBE_CONFIGS, 4)
    resource = t.DescribeConfigsResource(resource_type=GROUP_RESOURCE, resource_name=group, configuration_keys=keys)
    (result,) = side.call(DESCRIBE_CONFIGS, 4, resources=(resource,), include_synonyms=full,
                          include_documentation=full).results
    return {"error": (int(result.error_code), result.error_message),
            "configs": {c.name: (c.value, int(c.config_source), int(c.config_type), c.read_only, c.is_sensitive,
                                 tuple((s.name, s.value, int(s.source)) for s in c.synonyms), c.documentation)
                        for c in result.configs}}


def settled(side, group: str, key: str, value):  # type: ignore[no-untyped-def]
    """Kafka's brokers apply a change once their metadata image has it (support.differential)."""
    return wait_until(lambda: described(side, group, (key,))["configs"].get(key, (None,))[0] == value, 15,
                      message=f"{side.name} describes {key}={value} for {group}")


CONSUMER_KEYS = ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms", "consumer.assignment.interval.ms")
# Keys whose broker setting the kcoord fixture sets (to Kafka's value, away from kcoord's own
# default), so kcoord's synonym says STATIC_BROKER_CONFIG where Kafka's says DEFAULT_CONFIG.
FIXTURE_SET_KEYS = CONSUMER_KEYS + ("streams.assignment.interval.ms",)


def test_describe_of_a_group_never_configured(sides, names) -> None:  # type: ignore[no-untyped-def]
    kafka, kcoord = sides
    group = names.group()
    theirs, ours = described(kafka, group, full=True), described(kcoord, group, full=True)
    assert theirs["error"] == ours["error"] == (0, "")
    assert set(ours["configs"]) == set(theirs["configs"])
    # The consumer values are each side's broker settings (the fixtures differ: kcoord's
    # heartbeat and assignment intervals are set, so its synonyms say STATIC_BROKER_CONFIG).
    key = "consumer.session.timeout.ms"
    assert ours["configs"][key] == theirs["configs"][key]
    for key in FIXTURE_SET_KEYS:
        assert ours["configs"][key][2:5] + ours["configs"][key][6:] == \
            theirs["configs"][key][2:5] + theirs["configs"][key][6:], key
    for key in set(theirs["configs"]) - set(FIXTURE_SET_KEYS):
        assert ours["configs"][key] == theirs["configs"][key], key


@pytest.mark.parametrize("changes", [
    [("consumer.session.timeout.ms", SET, "1")],
    [("consumer.session.timeout.ms", SET, "abc")],
    [("consumer.session.timeout.ms", SET, "0")],
    [("consumer.heartbeat.interval.ms", SET, "100")],
    [("consumer.assignment.interval.ms", SET, "20000")],
    [("consumer.no.such.key", SET, "1")],
    [("consumer.session.timeout.ms", SET, "7000"), ("consumer.heartbeat.interval.ms", SET, "8000")],
    [("share.isolation.level", SET, "dirty")],
    [("streams.num.standby.replicas", SET, "3")],
    [("errors.deadletterqueue.topic.name", SET, "__dlq")],
    [("consumer.session.timeout.ms", 2, "1")],
    [("streams.assignor.name", SET, "balanced")],
    [("streams.rack.aware.assignment.tags", SET, "zone,zone")],
    [("streams.rack.aware.assignment.tags", SET, "zone,")],
    [("streams.rack.aware.assignment.tags", SET, " , zone")],
    [("streams.rack.aware.assignment.tags", SET, "zone,,")],
    [("streams.rack.aware.assignment.tags", 2, "zone")],
    [("streams.rack.aware.assignment.tags", 3, "zone")],
    [("consumer.no.such.key", 3, "x")],
    [("share.auto.offset.reset", SET, "sometime")],
    [("share.auto.offset.reset", SET, "by_duration:xyz")],
    [("share.auto.offset.reset", SET, "by_duration:-PT1H")],
    [("consumer.assignor.offload.enable", SET, "maybe")],
])
def test_validation_errors(sides, names, changes) -> None:  # type: ignore[no-untyped-def]
    kafka, kcoord = sides
    group = names.group()
    assert alter(kcoord, group, changes) == alter(kafka, group, changes)


def test_empty_group_name(sides) -> None:  # type: ignore[no-untyped-def]
    kafka, kcoord = sides
    change = [("consumer.session.timeout.ms", SET, "50000")]
    assert alter(kcoord, "", change) == alter(kafka, "", change)


def test_set_describe_delete_and_lifetime(sides, names) -> None:  # type: ignore[no-untyped-def]
    kafka, kcoord = sides
    group = names.group()
    change = [("consumer.session.timeout.ms", SET, "50000"), ("consumer.assignment.interval.ms", SET, "2000")]
    assert alter(kcoord, group, change) == alter(kafka, group, change) == (0, None)
    settled(kafka, group, "consumer.session.timeout.ms", "50000")
    theirs, ours = described(kafka, group, CONSUMER_KEYS, full=True), described(kcoord, group, CONSUMER_KEYS, full=True)
    for key in CONSUMER_KEYS[:1] + CONSUMER_KEYS[2:]:     # set on the group: the same on both
        assert ours["configs"][key][:5] == theirs["configs"][key][:5], key
        assert ours["configs"][key][5][0] == theirs["configs"][key][5][0], key
    assert ours["configs"]["consumer.session.timeout.ms"] == theirs["configs"]["consumer.session.timeout.ms"]
    # DeleteGroups of a group that never had members: both answer alike, and the configs stay.
    deleted = [[(r.group_id, int(r.error_code)) for r in side.call(DELETE_GROUPS, 2, groups_names=(group,)).results]
               for side in sides]
    assert deleted[0] == deleted[1]
    assert described(kcoord, group, CONSUMER_KEYS[:1]) == described(kafka, group, CONSUMER_KEYS[:1])
    delete = [("consumer.session.timeout.ms", DELETE, None)]
    assert alter(kcoord, group, delete) == alter(kafka, group, delete) == (0, None)
    settled(kafka, group, "consumer.session.timeout.ms", "45000")
    assert described(kcoord, group, CONSUMER_KEYS[:1]) == described(kafka, group, CONSUMER_KEYS[:1])


ALTER_CONFIGS = 33


def legacy_alter(side, group: str, configs: dict[str, str]) -> tuple:  # type: ignore[no-untyped-def]
    t = side.types(ALTER_CONFIGS, 2)
    resource = t.AlterConfigsResource(resource_type=GROUP_RESOURCE, resource_name=group, configs=tuple(
        t.AlterableConfig(name=k, value=v) for k, v in configs.items()))
    (answer,) = side.call(ALTER_CONFIGS, 2, resources=(resource,), validate_only=False).responses
    return int(answer.error_code), answer.error_message


def test_legacy_alter_configs_replaces_the_set(sides, names) -> None:  # type: ignore[no-untyped-def]
    """Kafka 4.4 serves the legacy AlterConfigs on a GROUP (its controller authorizes it): the
    whole set is replaced, so a key left out goes back to the broker's value."""
    kafka, kcoord = sides
    group = names.group()
    first = [("consumer.session.timeout.ms", SET, "50000"), ("consumer.assignment.interval.ms", SET, "2000")]
    assert alter(kcoord, group, first) == alter(kafka, group, first) == (0, None)
    settled(kafka, group, "consumer.assignment.interval.ms", "2000")
    replaced = {"consumer.session.timeout.ms": "55000"}
    assert legacy_alter(kcoord, group, replaced) == legacy_alter(kafka, group, replaced)
    settled(kafka, group, "consumer.session.timeout.ms", "55000")
    keys = ("consumer.session.timeout.ms", "consumer.assignment.interval.ms")
    ours, theirs = described(kcoord, group, keys), described(kafka, group, keys)
    assert ours["configs"]["consumer.session.timeout.ms"] == theirs["configs"]["consumer.session.timeout.ms"]
    # The assignment interval went back to each side's broker value (they differ: kcoord's is set).
    assert ours["configs"]["consumer.assignment.interval.ms"][1] in (4, 5)
    assert theirs["configs"]["consumer.assignment.interval.ms"][1] in (4, 5)
    bad = {"consumer.bogus": "1"}
    assert legacy_alter(kcoord, group, bad) == legacy_alter(kafka, group, bad)

