"""The real Apache Kafka fixture itself (support.kafka_broker): the settings it documents are the
ones the broker runs with, and the SASL/SCRAM, TLS and StandardAuthorizer switches work."""
from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding, AclOperation, AclPermissionType, AdminClient, ConfigResource, NewTopic, ResourcePatternType,
    ResourceType,
)

from support.kafka_broker import (
    KAFKA_44, ONE_NODE_SETTINGS, SETTINGS, THREE_NODE_SETTINGS, USER, USER_PASSWORD, start_kafka,
)


def broker_configs(conf: dict[str, str], node_id: int) -> dict[str, str]:
    admin = AdminClient(conf)
    resource = ConfigResource(ConfigResource.Type.BROKER, str(node_id))
    entries = admin.describe_configs([resource])[resource].result(timeout=20)
    return {name: entry.value for name, entry in entries.items()}


def test_one_node_runs_with_the_documented_settings(kafka44):
    configs = broker_configs(kafka44.client_config(), 1)
    expected = {**SETTINGS, **ONE_NODE_SETTINGS}
    wrong = {k: (v, configs.get(k)) for k, v in expected.items() if configs.get(k) != v}
    assert not wrong, f"broker 1 of {kafka44} runs with (wanted, actual) {wrong}"


@pytest.mark.kafka_subset
def test_three_nodes_form_one_quorum_with_the_documented_settings(kafka44_3node):
    admin = AdminClient(kafka44_3node.client_config())
    assert sorted(admin.list_topics(timeout=20).brokers) == [1, 2, 3], f"{kafka44_3node}: brokers in Metadata"
    for node in (1, 2, 3):
        configs = broker_configs(kafka44_3node.client_config(), node)
        expected = {**SETTINGS, **THREE_NODE_SETTINGS}
        wrong = {k: (v, configs.get(k)) for k, v in expected.items() if configs.get(k) != v}
        assert not wrong, f"broker {node} of {kafka44_3node} runs with (wanted, actual) {wrong}"


@pytest.mark.kafka_subset
def test_kafka39_has_no_kip848_of_its_own(kafka39):
    """The older line with its defaults (group.coordinator.rebalance.protocols=classic): it lists
    ConsumerGroupHeartbeat in ApiVersions but answers it UNSUPPORTED_VERSION, so consumer-protocol
    clients need kcoord in front of it (what the consumer_protocol suite runs against it)."""
    import datetime

    from support.raw_client import call_with

    host, port = kafka39.bootstrap.split(",")[0].split(":")
    response = call_with((host, int(port)), 68, 0, group_id="kip848-probe", member_id="m" * 22, member_epoch=0,
                         rebalance_timeout=datetime.timedelta(seconds=30), subscribed_topic_names=("t",),
                         topic_partitions=())
    assert int(response.error_code) == 35, f"{kafka39} answered ConsumerGroupHeartbeat with {response}"


def test_sasl_scram_tls_and_standard_authorizer_switches(tmp_path, names):
    cluster = start_kafka(KAFKA_44, tmp_path, sasl=True, tls=True, authorizer=True)
    try:
        assert cluster.security_protocol == "SASL_SSL"
        admin = AdminClient(cluster.client_config())
        assert 1 in admin.list_topics(timeout=20).brokers, "the super user reaches the SASL_SSL listener"

        # SCRAM: a wrong password is refused.
        bad = AdminClient({**cluster.client_config(password="wrong"), "socket.timeout.ms": 5000})
        with pytest.raises(KafkaException):
            bad.list_topics(timeout=8)

        # TLS: without the test CA the certificate is not trusted.
        untrusted = {k: v for k, v in cluster.client_config().items() if k != "ssl.ca.location"}
        with pytest.raises(KafkaException):
            AdminClient({**untrusted, "ssl.ca.location": "probe"}).list_topics(timeout=8)

        # StandardAuthorizer: alice may not create a topic until an ACL allows it.
        topic = names.topic()
        alice = AdminClient(cluster.client_config(USER, USER_PASSWORD))
        with pytest.raises(KafkaException) as refused:
            alice.create_topics([NewTopic(topic, 1, 1)])[topic].result(20)
        assert "AUTHORIZATION" in str(refused.value).upper(), f"alice's CreateTopics: {refused.value}"
        acl = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, f"User:{USER}", "*",
                         AclOperation.CREATE, AclPermissionType.ALLOW)
        admin.create_acls([acl])[acl].result(20)

        def created() -> bool:
            try:
                alice.create_topics([NewTopic(topic, 1, 1)])[topic].result(20)
                return True
            except KafkaException as exc:   # the ACL reaches the broker's authorizer asynchronously
                if "AUTHORIZATION" not in str(exc).upper():
                    raise
                return False

        from support.wait import wait_until

        wait_until(created, 20, 0.2, f"alice creates {topic} once the ACL allows it")
    finally:
        cluster.stop()
