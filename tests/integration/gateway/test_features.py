"""The features kcoord advertises, seen by real tools and clients, on an upstream that finalizes
none of the group features (Tansu 0.6, Kafka 3.9) and on one that finalizes all (Kafka 4.4):
the merged map, one epoch across kcoord processes, `kafka-features describe`, UpdateFeatures,
ApiVersions v5, and the consumer protocol still working with librdkafka (docs/user/features.md)."""
from __future__ import annotations

import re
import socket
import struct
from collections.abc import Iterator

import pytest

from coordinator.protocol.api_versions import OWNED_FEATURES
from coordinator.protocol.messages import schema
from support.admin import admin_client, create_topic
from support.kafka_tools import run_tool
from support.kcoord import KcoordProcess
from support.produce import produce_records
from support.raw_client import call_with, encode_request, read_frame
from support.rdkafka import RdkafkaConsumer
from support.upstreams import FIXTURES

API_VERSIONS, UPDATE_FEATURES = 18, 57
FEATURE_COMMAND = "org.apache.kafka.tools.FeatureCommand"
UPSTREAMS = ("tansu", "kafka39", "kafka44")
# kafka-features describe: one line per supported feature (FeatureCommand.handleDescribe); levels
# of metadata.version are release names ("3.3-IV3", "UNKNOWN 33" for a tool older than the broker).
DESCRIBED = re.compile(r"Feature: (\S+)\s+SupportedMinVersion: (.+?)\s+SupportedMaxVersion: (.+?)\s+"
                       r"FinalizedVersionLevel: (.+?)\s+Epoch: (\S+)")


class Through:
    def __init__(self, kind: str, upstream, kcoord: KcoordProcess) -> None:  # type: ignore[no-untyped-def]
        self.kind, self.upstream, self.kcoord = kind, upstream, kcoord


@pytest.fixture(scope="module", params=UPSTREAMS)
def through(request: pytest.FixtureRequest) -> Iterator[Through]:
    """One kcoord per upstream for the module, with a state topic of its own."""
    upstream = request.getfixturevalue(FIXTURES[request.param])
    kcoord = KcoordProcess(upstream=upstream.bootstrap, state_topic=f"__kcoord_features_{request.param}").start()
    yield Through(request.param, upstream, kcoord)
    kcoord.stop()


def _api_versions(bootstrap: str):  # type: ignore[no-untyped-def]
    return call_with(bootstrap, API_VERSIONS, 4, client_software_name="kcoord-test", client_software_version="1")


def _features(response) -> tuple[dict, dict, int]:  # type: ignore[no-untyped-def]
    return ({f.name: (f.min_version, f.max_version) for f in response.supported_features},
            {f.name: (f.min_version_level, f.max_version_level) for f in response.finalized_features},
            response.finalized_features_epoch)


def test_group_features_are_kcoords_and_the_rest_the_upstreams(through: Through, names) -> None:  # type: ignore[no-untyped-def]
    up_supported, up_finalized, _ = _features(_api_versions(through.upstream.bootstrap))
    supported, finalized, epoch = _features(_api_versions(through.kcoord.bootstrap))
    assert finalized["group.version"] == (1, 1) and supported["group.version"] == (0, 1)
    for name in ("streams.version", "share.version"):
        assert name not in finalized and name not in supported
    # Every other key is the upstream's (transaction.version too: kcoord serves TxnOffsetCommit v5
    # and forwards Produce v12 wherever the upstream has them).
    assert {k: v for k, v in finalized.items() if k not in OWNED_FEATURES} == \
        {k: v for k, v in up_finalized.items() if k not in OWNED_FEATURES}
    # Supported: the upstream's ranges. kcoord reads the upstream's ApiVersions at v3, which leaves
    # out a feature whose minimum is 0 (KAFKA-17492): those may be missing, no others.
    passed_on = {k: v for k, v in supported.items() if k not in OWNED_FEATURES}
    assert passed_on.items() <= up_supported.items()
    assert {k for k, (low, _) in up_supported.items() if low >= 1 and k not in OWNED_FEATURES} <= set(passed_on)
    if through.kind == "kafka44":
        assert up_finalized["streams.version"] == (1, 1) and finalized["transaction.version"] == (2, 2)
    else:
        assert "transaction.version" not in finalized

    # A second process, started after the upstream's metadata moved on (a KRaft broker's epoch is
    # its metadata offset), answers the same map with the same epoch.
    create_topic(through.upstream.bootstrap, names.topic(), 1)
    second = KcoordProcess(upstream=through.upstream.bootstrap, state_topic=f"__kcoord_{names.topic()}").start()
    try:
        assert _features(_api_versions(second.bootstrap)) == (supported, finalized, epoch)
    finally:
        second.stop()


def test_kafka_features_describe_shows_what_kcoord_serves(through: Through) -> None:
    supported, finalized, epoch = _features(_api_versions(through.kcoord.bootstrap))
    result = run_tool(FEATURE_COMMAND, ["--bootstrap-server", through.kcoord.bootstrap, "describe"]).check()
    rows = {m[1]: (m[2], m[3], m[4], m[5]) for m in DESCRIBED.finditer(result.stdout)}
    assert rows["group.version"] == ("0", "1", "1", str(epoch)), result.describe()
    assert {row[3] for row in rows.values()} == {str(epoch)}
    assert "streams.version" not in rows and "share.version" not in rows, result.describe()
    assert set(rows) == set(supported), result.describe()
    for name, (_, level) in finalized.items():
        if name in rows and name != "metadata.version":
            assert rows[name][2] == str(level), result.describe()


def _feature_tool(bootstrap: str, *args: str):  # type: ignore[no-untyped-def]
    return run_tool(FEATURE_COMMAND, ["--bootstrap-server", bootstrap, *args])


def test_update_features_of_a_group_feature_is_refused_a_no_op_passes(through: Through, request) -> None:  # type: ignore[no-untyped-def]
    advertised = {k.api_key for k in _api_versions(through.kcoord.bootstrap).api_keys}
    if through.kind == "tansu":
        assert UPDATE_FEATURES not in advertised      # Tansu 0.6 has no UpdateFeatures: nothing to decide
        return
    bootstrap = through.kcoord.bootstrap
    refused = _feature_tool(bootstrap, "upgrade", "--feature", "streams.version=1", "--dry-run")
    assert refused.rc != 0 and "Invalid update version 1 for feature streams.version. kcoord serves" in \
        refused.stdout + refused.stderr, refused.describe()
    disabled = _feature_tool(bootstrap, "disable", "--feature", "group.version", "--dry-run")
    assert disabled.rc != 0 and "for feature group.version. kcoord serves" in disabled.stdout + disabled.stderr
    # kcoord's own level: taken out, the (empty) rest forwarded, so the upstream authorizes it.
    _feature_tool(bootstrap, "upgrade", "--feature", "group.version=1", "--dry-run").check()


def _v5(address: tuple[str, int], cluster_id: str | None, node_id: int) -> bytes:
    m = schema("api_versions", 5, "request")
    body = m.ApiVersionsRequest(client_software_name="apache-kafka-java", client_software_version="4.4.0",
                                cluster_id=cluster_id, node_id=node_id)
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(encode_request(API_VERSIONS, 5, 9, body))
        frame = read_frame(sock)
    assert frame is not None, f"connection closed instead of answering ApiVersions v5 at {address}"
    return frame


def test_api_versions_v5(through: Through) -> None:
    """The Java 4.4 client opens every connection with ApiVersions v5 (KIP-1242), naming the
    ClusterId and NodeId it means to reach on connections to a known node. While kcoord lists
    ApiVersions up to v4, v5 gets UNSUPPORTED_VERSION in the v0 format with kcoord's range
    (KIP-511) and the client retries at that version; once it lists v5, it answers
    REBOOTSTRAP_REQUIRED (129) where Kafka does: a cluster id or node that is not this
    listener's."""
    [listed] = [k for k in _api_versions(through.kcoord.bootstrap).api_keys if k.api_key == API_VERSIONS]
    bootstrap = ("127.0.0.1", through.kcoord.port)
    if listed.max_version < 5:
        assert _v5(bootstrap, "some-cluster", 1)[4:] == struct.pack(
            ">ihihhh", 9, 35, 1, API_VERSIONS, listed.min_version, listed.max_version)
        return
    metadata = admin_client(through.kcoord.bootstrap).list_topics(timeout=10)
    node_id, broker = sorted(metadata.brokers.items())[0]
    node = ("127.0.0.1", broker.port)

    def error(address: tuple[str, int], cluster_id: str | None, node: int) -> int:
        return struct.unpack_from(">h", _v5(address, cluster_id, node), 8)[0]

    assert error(bootstrap, None, -1) == 0
    assert error(node, metadata.cluster_id, node_id) == 0
    assert error(node, "another-cluster", node_id) == 129
    assert error(node, metadata.cluster_id, node_id + 1000) == 129
    # A single process's bootstrap listener is no node: only the cluster id is checked there
    # (in a kcoord cluster it is the instance's coordinator node, served_here._node_id_here).
    assert error(bootstrap, metadata.cluster_id, node_id) == 0
    assert error(bootstrap, "another-cluster", node_id) == 129


def test_consumer_protocol_works_through_kcoord_with_librdkafka(through: Through, names, drivers) -> None:  # type: ignore[no-untyped-def]
    """librdkafka picks the consumer protocol from ConsumerGroupHeartbeat v1 in ApiVersions, not
    from the features: it works whatever the upstream finalizes."""
    topic, group = names.topic(), names.group()
    create_topic(through.upstream.bootstrap, topic, 2)
    produce_records(through.upstream.bootstrap, topic, 10)
    consumer = drivers.add(RdkafkaConsumer(through.kcoord.bootstrap, topic, group, group_protocol="consumer"))
    consumer.start()
    consumer.wait_for(lambda: len(consumer.consumed()) >= 10, 60, f"10 records consumed by {group}")
    consumer.close()
