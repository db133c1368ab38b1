"""scripts/fetch_kafka.py's completion marker: a fetched version is reused without Maven, and
a changed pom or a missing jar makes it fetch again."""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "scripts"))
import fetch_kafka  # noqa: E402

sys.path.remove(str(REPO / "scripts"))


def fake_fetch(cache: Path, version: str, jars: list[str], pom_hash: str) -> None:
    libs = fetch_kafka.libs_dir(version, cache)
    libs.mkdir(parents=True)
    for jar in jars:
        (libs / jar).write_bytes(b"PK")
    (libs.parent / fetch_kafka.MARKER).write_text("\n".join([f"pom {pom_hash}", *jars]) + "\n")


def test_complete_only_with_the_same_pom_and_every_jar(tmp_path, monkeypatch):
    jars = ["kafka_2.13-9.9.9.jar", "kafka-clients-9.9.9.jar"]
    fake_fetch(tmp_path, "9.9.9", jars, fetch_kafka._pom_hash())
    assert fetch_kafka.is_complete("9.9.9", tmp_path)
    # fetch() returns at once, without Maven, when complete
    monkeypatch.setattr(fetch_kafka, "_mvn", lambda *a, **k: (_ for _ in ()).throw(AssertionError("mvn ran")))
    assert fetch_kafka.fetch("9.9.9", tmp_path) == fetch_kafka.libs_dir("9.9.9", tmp_path)

    (fetch_kafka.libs_dir("9.9.9", tmp_path) / jars[1]).unlink()
    assert not fetch_kafka.is_complete("9.9.9", tmp_path), "a missing jar must refetch"


def test_a_changed_pom_refetches(tmp_path):
    fake_fetch(tmp_path, "9.9.9", ["kafka_2.13-9.9.9.jar"], "0" * 16)
    assert not fetch_kafka.is_complete("9.9.9", tmp_path)


def test_logging_binding_follows_the_kafka_line():
    assert fetch_kafka.logging_flavour("3.9.1") == "reload4j"
    assert fetch_kafka.logging_flavour("4.3.1") == "log4j2"
