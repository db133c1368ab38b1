"""The Tansu fixtures and helpers: start, bootstrap, stop, kill -9, restart on the same port;
and the Tansu 0.6 fault that keeps the Java 4.4 client off plain Tansu (support.java's
TANSU_BASELINE_JARS)."""
from __future__ import annotations

import socket
import struct

from support.admin import admin_client, create_topic
from support.ports import port_range
from support.raw_client import assert_closed, call_with, encode_request, read_frame
from support.tansu import start_tansu

API_VERSIONS = 18


def test_fresh_tansu_is_empty_and_kill_9_then_restart_on_same_port(fresh_tansu, names, tmp_path) -> None:
    low, high = port_range()
    assert low <= fresh_tansu.port <= high and fresh_tansu.bootstrap == f"127.0.0.1:{fresh_tansu.port}"
    topic = names.topic()
    create_topic(fresh_tansu.bootstrap, topic, 3)
    assert topic in admin_client(fresh_tansu.bootstrap).list_topics(timeout=5).topics

    assert fresh_tansu.kill() == -9 and not fresh_tansu.is_running()
    with start_tansu(fresh_tansu.port, log_dir=tmp_path) as again:  # memory storage: nothing survives
        assert again.port == fresh_tansu.port
        assert topic not in admin_client(again.bootstrap).list_topics(timeout=5).topics
    assert not again.is_running() and again.process.returncode == 0
    assert "listening on" in again.log_text()


def _compact_string(value: str | None) -> bytes:
    raw = b"" if value is None else value.encode()
    return bytes([0 if value is None else len(raw) + 1]) + raw  # short strings: a one-byte varint


def test_tansu_drops_api_versions_v5_that_carries_a_cluster_id(tansu) -> None:
    """Tansu 0.6 advertises ApiVersions 0-4. Kafka answers a higher version with a v0 body holding
    UNSUPPORTED_VERSION and its range (KIP-511), and the Java 4.4 client, which starts every
    connection with v5 (KIP-1242: ClusterId, NodeId), then falls back. Tansu decodes v5 with its v4
    schema instead: a null ClusterId reads as "no tagged fields" and passes, a cluster id's length
    byte reads as a tagged-field count, the read runs past the frame and the connection is dropped.
    The Java 4.4 client sends the cluster id on every connection after the bootstrap one. When this
    test fails, Tansu has fixed it and the driver baselines can use the 4.4 client again."""
    [api_versions] = [k for k in call_with(tansu.bootstrap, API_VERSIONS, 3, client_software_name="t",
                                           client_software_version="1").api_keys if k.api_key == API_VERSIONS]
    assert api_versions.max_version == 4
    metadata = admin_client(tansu.bootstrap).list_topics(timeout=5)
    [node_id] = metadata.brokers

    def v5(cluster_id: str | None) -> bytes:  # hand-encoded: kcoord's message types stop at v4
        return encode_request(API_VERSIONS, 5, 1, _compact_string("apache-kafka-java") + _compact_string("4.4.0")
                              + _compact_string(cluster_id) + struct.pack(">i", node_id) + b"\x00")

    with socket.create_connection(("127.0.0.1", tansu.port), timeout=10) as sock:
        sock.sendall(v5(None))
        frame = read_frame(sock)  # ApiVersions responses keep header v0: correlation id, then ErrorCode
        assert frame is not None and struct.unpack(">ih", frame[4:10]) == (1, 0)
    with socket.create_connection(("127.0.0.1", tansu.port), timeout=10) as sock:
        sock.sendall(v5(metadata.cluster_id))
        assert_closed(sock)
