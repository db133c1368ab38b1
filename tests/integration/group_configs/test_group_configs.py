"""Per-group configuration through kcoord on Kafka 4.4 (docs/user/group-configs.md): set,
describe, list and the validation errors with raw requests and with Kafka 4.4's own
`kafka-configs --entity-type groups`; a request mixing GROUP and TOPIC resources split and
joined; the configs' lifetime across DeleteGroups; and a librdkafka consumer-protocol member
whose session timeout and heartbeat interval follow the group's config on the fly."""
from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.admin import create_topic
from support.kafka_broker import libs_dir
from support.java import JavaConsumer
from support.kcoord import FAST, KcoordProcess
from support.raw_client import call_with, request_types
from support.rdkafka import RdkafkaConsumer
from support.wait import wait_until

pytestmark = pytest.mark.integration

GROUP, TOPIC = 32, 2
DESCRIBE, INCREMENTAL, LIST = 32, 44, 74
SET, DELETE = 0, 1
TOOLS_4_4 = Path.home() / ".m2/repository/org/apache/kafka/kafka-tools/4.4.0/kafka-tools-4.4.0.jar"


# The broker's session timeout is 60 s (the maximum), its floor 6 s: a member whose group sets
# 6 s can only be gone within the tests' 30 s bound because the group's value applies.
BROKER = (*FAST, "consumer_session_timeout_ms=60000", "consumer_min_session_timeout_ms=6000")


@pytest.fixture(scope="module")
def kcoord(kafka44) -> Iterator[KcoordProcess]:  # type: ignore[no-untyped-def]
    process = KcoordProcess(upstream=kafka44.bootstrap, state_topic="__kcoord_group_configs", config=BROKER).start()
    yield process
    process.stop()


def alter(bootstrap: str, *resources, validate_only: bool = False):  # type: ignore[no-untyped-def]
    mod = request_types(INCREMENTAL, 1)
    return call_with(bootstrap, INCREMENTAL, 1, validate_only=validate_only, resources=tuple(
        mod.AlterConfigsResource(resource_type=rtype, resource_name=name, configs=tuple(
            mod.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in changes))
        for rtype, name, changes in resources)).responses


def describe(bootstrap: str, *resources):  # type: ignore[no-untyped-def]
    mod = request_types(DESCRIBE, 4)
    return call_with(bootstrap, DESCRIBE, 4, include_synonyms=False, include_documentation=False, resources=tuple(
        mod.DescribeConfigsResource(resource_type=rtype, resource_name=name, configuration_keys=keys)
        for rtype, name, keys in resources)).results


def listed(bootstrap: str, *types: int) -> set[tuple[int, str]]:
    return {(int(r.resource_type), r.resource_name)
            for r in call_with(bootstrap, LIST, 1, resource_types=types).config_resources}


def group_configs(bootstrap: str, group: str) -> dict[str, tuple[str | None, int]]:
    (result,) = describe(bootstrap, (GROUP, group, None))
    assert result.error_code == 0, result
    return {c.name: (c.value, c.config_source) for c in result.configs}


def test_set_describe_list_and_refusals(kcoord, kafka44) -> None:  # type: ignore[no-untyped-def]
    b = kcoord.bootstrap
    answers = alter(b, (GROUP, "cfg-a", [("consumer.session.timeout.ms", SET, "50000")]),
                    (GROUP, "cfg-a2", [("consumer.session.timeout.ms", SET, "1")]),
                    (GROUP, "cfg-a3", [("consumer.no.such.key", SET, "1")]),
                    (GROUP, "", [("consumer.session.timeout.ms", SET, "50000")]))
    assert [(a.resource_name, int(a.error_code), a.error_message) for a in answers] == [
        ("cfg-a", 0, None),
        ("cfg-a2", 40, "consumer.session.timeout.ms must be in the range 6000 to 60000 inclusive."),
        ("cfg-a3", 40, "Unknown group config name: consumer.no.such.key"),
        ("", 42, "Default group resources are not allowed.")]
    configs = group_configs(b, "cfg-a")
    assert configs["consumer.session.timeout.ms"] == ("50000", 8)
    # Not set on the group: the broker's, which kcoord's --config changed (STATIC_BROKER_CONFIG).
    assert configs["consumer.heartbeat.interval.ms"] == ("500", 4)
    assert group_configs(b, "cfg-never-set")["consumer.session.timeout.ms"] == ("60000", 4)
    assert group_configs(b, "cfg-never-set")["share.isolation.level"] == ("read_uncommitted", 5)
    assert (GROUP, "cfg-a") in listed(b, GROUP)
    assert (GROUP, "cfg-a") in listed(b)                              # v1, empty: every type
    # kcoord's configs are not Kafka's: the upstream never saw them.
    assert (GROUP, "cfg-a") not in listed(kafka44.bootstrap, GROUP)


def test_a_mixed_request_is_split_and_joined_in_order(kcoord) -> None:  # type: ignore[no-untyped-def]
    b = kcoord.bootstrap
    create_topic(b, "cfg-topic", 1)
    answers = alter(b, (TOPIC, "cfg-topic", [("retention.ms", SET, "3600000")]),
                    (GROUP, "cfg-mixed", [("consumer.heartbeat.interval.ms", SET, "6000")]),
                    (TOPIC, "cfg-topic-missing", [("retention.ms", SET, "3600000")]))
    assert [(a.resource_name, int(a.resource_type), int(a.error_code)) for a in answers] == [
        ("cfg-topic", TOPIC, 0), ("cfg-mixed", GROUP, 0), ("cfg-topic-missing", TOPIC, 3)]
    topic, group = describe(b, (TOPIC, "cfg-topic", ("retention.ms",)), (GROUP, "cfg-mixed", None))
    assert [(c.name, c.value) for c in topic.configs] == [("retention.ms", "3600000")]
    assert {c.name: c.value for c in group.configs}["consumer.heartbeat.interval.ms"] == "6000"


def test_configs_outlive_delete_groups(kcoord) -> None:  # type: ignore[no-untyped-def]
    b = kcoord.bootstrap
    create_topic(b, "cfg-life", 1)
    alter(b, (GROUP, "cfg-life", [("consumer.session.timeout.ms", SET, "55000")]))
    consumer = RdkafkaConsumer(b, "cfg-life", "cfg-life", group_protocol="consumer").start()
    consumer.wait_for_assignment(lambda a: len(a) == 1, timeout=30)
    consumer.close()
    (deleted,) = call_with(b, 42, 2, groups_names=("cfg-life",)).results
    assert int(deleted.error_code) == 0
    assert group_configs(b, "cfg-life")["consumer.session.timeout.ms"] == ("55000", 8)


def kafka_configs(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    """Kafka 4.4's kafka-configs (org.apache.kafka.tools.ConfigCommand)."""
    classpath = f"{TOOLS_4_4}:{libs_dir('4.4.0')}/*"
    return subprocess.run(["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", classpath,
                           "org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", bootstrap,
                           "--entity-type", "groups", *args],
                          capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL)


@pytest.mark.skipif(not TOOLS_4_4.exists(), reason="kafka-tools 4.4.0 is not in the Maven cache")
def test_kafka_configs_tool(kcoord) -> None:  # type: ignore[no-untyped-def]
    b = kcoord.bootstrap
    done = kafka_configs(b, "--entity-name", "cfg-tool", "--alter", "--add-config",
                         "consumer.session.timeout.ms=52000,consumer.heartbeat.interval.ms=7000")
    assert done.returncode == 0, done.stderr
    shown = kafka_configs(b, "--entity-name", "cfg-tool", "--describe")
    assert shown.returncode == 0, shown.stderr
    assert "consumer.session.timeout.ms=52000" in shown.stdout and "consumer.heartbeat.interval.ms=7000" in shown.stdout
    refused = kafka_configs(b, "--entity-name", "cfg-tool", "--alter", "--add-config", "consumer.bogus=1")
    assert refused.returncode != 0 and "Unknown group config name: consumer.bogus" in refused.stdout + refused.stderr
    everything = kafka_configs(b, "--describe")
    assert "cfg-tool" in everything.stdout, everything.stdout + everything.stderr


def test_a_running_members_session_timeout_changes_on_the_fly(kcoord) -> None:  # type: ignore[no-untyped-def]
    """A Java consumer-protocol member joins under the broker's 60 s session; the group's
    session is then set to 6 s while it runs; a librdkafka member joins, so the Java member
    heartbeats to give up a partition (its session timer re-armed with the group's value);
    the Java member is killed (-9, no leave) and the librdkafka member gets both partitions
    well within 30 s, which the broker's 60 s would not allow."""
    b = kcoord.bootstrap
    create_topic(b, "cfg-fly", 2)
    java = JavaConsumer(b, "cfg-fly", "cfg-fly", group_protocol="consumer").start()
    rd = RdkafkaConsumer(b, "cfg-fly", "cfg-fly", group_protocol="consumer")
    try:
        java.wait_for_assignment(lambda a: len(a) == 2, timeout=30)
        assert alter(b, (GROUP, "cfg-fly", [("consumer.session.timeout.ms", SET, "6000")]))[0].error_code == 0
        rd.start()
        wait_until(lambda: len(java.assignment()) == 1 and len(rd.assignment()) == 1, 30,
                   message="the Java member gave a partition to the librdkafka member")
        java.kill()
        rd.wait_for_assignment(lambda a: len(a) == 2, timeout=30)
    finally:
        rd.close()
        java.shutdown()


def test_on_tansu_which_has_no_group_configs(tansu) -> None:  # type: ignore[no-untyped-def]
    """Tansu 0.6 knows DescribeConfigs and IncrementalAlterConfigs but no GROUP resource:
    kcoord serves them all the same (ListConfigResources is not advertised: Tansu lacks it)."""
    process = KcoordProcess(upstream=tansu.bootstrap, state_topic="__kcoord_group_configs_tansu").start()
    try:
        b = process.bootstrap
        assert [int(a.error_code) for a in alter(
            b, (GROUP, "cfg-tansu", [("consumer.assignment.interval.ms", SET, "0")]),
            (GROUP, "cfg-tansu2", [("consumer.heartbeat.interval.ms", SET, "100000")]))] == [0, 40]
        assert group_configs(b, "cfg-tansu")["consumer.assignment.interval.ms"] == ("0", 8)
    finally:
        process.stop()


def kcoord_groups(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "coordinator.cli", "groups", "configs", "--bootstrap-server",
                           bootstrap, *args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def test_kcoord_groups_configs(kcoord) -> None:  # type: ignore[no-untyped-def]
    b = kcoord.bootstrap
    done = kcoord_groups(b, "--group", "cfg-cli", "--set", "consumer.heartbeat.interval.ms=8000",
                         "--set", "consumer.assignment.interval.ms=0")
    assert done.returncode == 0 and "Completed updating config for group cfg-cli." in done.stdout, done.stderr
    shown = kcoord_groups(b, "--group", "cfg-cli", "--json")
    assert shown.returncode == 0, shown.stderr
    assert {(r["key"], r["value"]) for r in json.loads(shown.stdout)} == {
        ("consumer.heartbeat.interval.ms", "8000"), ("consumer.assignment.interval.ms", "0")}
    refused = kcoord_groups(b, "--group", "cfg-cli", "--set", "consumer.heartbeat.interval.ms=1")
    assert refused.returncode == 1 and "consumer.heartbeat.interval.ms must be in the range" in refused.stderr
    assert kcoord_groups(b, "--group", "cfg-cli", "--delete", "consumer.assignment.interval.ms").returncode == 0
    listed = kcoord_groups(b, "--all-groups", "--json")
    assert ("cfg-cli", "consumer.heartbeat.interval.ms", "8000") in {
        (r["group"], r["key"], r["value"]) for r in json.loads(listed.stdout)}
    assert ("cfg-cli", "consumer.assignment.interval.ms", "0") not in {
        (r["group"], r["key"], r["value"]) for r in json.loads(listed.stdout)}


def test_configs_survive_a_kill_and_restart(kcoord) -> None:  # type: ignore[no-untyped-def]
    """Last in the module: kcoord is killed (-9) and started again on the same state topic;
    the configs are replayed from it."""
    b = kcoord.bootstrap
    assert alter(b, (GROUP, "cfg-restart", [("consumer.session.timeout.ms", SET, "58000")]))[0].error_code == 0
    kcoord.kill()
    kcoord.restart()
    assert group_configs(kcoord.bootstrap, "cfg-restart")["consumer.session.timeout.ms"] == ("58000", 8)
    assert (GROUP, "cfg-restart") in listed(kcoord.bootstrap, GROUP)
