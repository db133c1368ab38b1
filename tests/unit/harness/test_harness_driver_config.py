"""Pure parts of the drivers and helpers: config rules, names, ports, the jar-cache marker."""
from __future__ import annotations

import importlib.util
import re
import socket
from pathlib import Path

import pytest

from support import ports
from support.names import TestNames, unique_name
from support.rdkafka import RdkafkaConsumer


def test_classic_config_defaults_to_a_short_session() -> None:
    c = RdkafkaConsumer("127.0.0.1:1", "t", "g")
    assert c.config["group.protocol"] == "classic"
    assert c.config["session.timeout.ms"] == 6000 and c.config["heartbeat.interval.ms"] == 1000
    assert c.config["enable.auto.commit"] is False and "partition.assignment.strategy" not in c.config
    assert not c.incremental


def test_cooperative_strategy_means_incremental_callbacks() -> None:
    c = RdkafkaConsumer("127.0.0.1:1", ["a", "b"], "g", assignment_strategy="cooperative-sticky",
                        session_timeout_ms=3000, commit_mode="auto")
    assert c.incremental and c.config["heartbeat.interval.ms"] == 1000 and c.config["enable.auto.commit"] is True


def test_consumer_protocol_omits_classic_settings_and_is_incremental() -> None:
    c = RdkafkaConsumer("127.0.0.1:1", "t", "g", group_protocol="consumer", remote_assignor="uniform",
                        group_instance_id="i-1")
    assert c.incremental
    assert not {"session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy"} & set(c.config)
    assert c.config["group.remote.assignor"] == "uniform" and c.config["group.instance.id"] == "i-1"


@pytest.mark.parametrize("kwargs", [{"session_timeout_ms": 6000}, {"assignment_strategy": "range"},
                                    {"extra_config": {"heartbeat.interval.ms": 500}}])
def test_consumer_protocol_rejects_classic_only_settings(kwargs: dict) -> None:
    with pytest.raises(ValueError, match="librdkafka rejects"):
        RdkafkaConsumer("127.0.0.1:1", "t", "g", group_protocol="consumer", **kwargs)


def test_classic_rejects_remote_assignor_and_unknown_protocol() -> None:
    with pytest.raises(ValueError, match="consumer' only"):
        RdkafkaConsumer("127.0.0.1:1", "t", "g", remote_assignor="uniform")
    with pytest.raises(ValueError, match="'classic' or 'consumer'"):
        RdkafkaConsumer("127.0.0.1:1", "t", "g", group_protocol="share")  # type: ignore[arg-type]


def test_unique_names_are_legal_and_distinct() -> None:
    names = TestNames("test_x[param/with spaces]")
    made = {names.topic() for _ in range(50)} | {names.group() for _ in range(50)} | {unique_name("a b")}
    assert len(made) == 101
    assert all(re.fullmatch(r"[a-zA-Z0-9._-]+", n) and len(n) < 249 for n in made)


def test_free_port_is_in_range_bindable_and_not_repeated(monkeypatch: pytest.MonkeyPatch) -> None:
    # A slice of this worker's own range: another xdist worker's brokers bind the ports of its
    # own slice, so a fixed range could leave fewer than three free ones (a repeat, seen in CI).
    low, high = ports.port_range()
    high = min(high, low + 49)
    monkeypatch.setenv("KCOORD_TEST_PORTS", f"{low}-{high}")
    got = [ports.free_port() for _ in range(3)]
    assert len(set(got)) == 3 and all(low <= p <= high for p in got)
    with socket.socket() as s:
        s.bind(("127.0.0.1", got[0]))
    for p in got:
        ports.release(p)


def test_fetch_manifest_requires_every_listed_file_and_every_set(tmp_path: Path) -> None:
    script = Path(__file__).resolve().parents[3] / "scripts" / "fetch_java_jars.py"
    spec = importlib.util.spec_from_file_location("fetch_java_jars_under_test", script)
    fetch = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fetch)  # type: ignore[union-attr]
    assert not fetch.is_complete(tmp_path)
    jars = [n + "4.3.1.jar" for n in fetch.NEEDS]  # one jar per required prefix, e.g. libs/jetty-security-
    for rel in [*jars, "libs/rocksdbjni-10.1.3.jar", "log4j2.properties"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"x")
    assert not fetch.is_complete(tmp_path)  # no manifest yet
    fetch.write_manifest(tmp_path, ".complete", fetch.maven_marker(), fetch.SETS)
    assert fetch.is_complete(tmp_path)
    (tmp_path / "libs" / "rocksdbjni-10.1.3.jar").unlink()
    assert not fetch.is_complete(tmp_path)  # a deleted jar is noticed
    fetch.write_manifest(tmp_path, ".complete", fetch.maven_marker(), fetch.SETS)
    (tmp_path / "libs" / "jetty-security-4.3.1.jar").unlink()
    fetch.write_manifest(tmp_path, ".complete", fetch.maven_marker(), fetch.SETS)
    assert not fetch.is_complete(tmp_path)  # Connect's REST server needs jetty-security
