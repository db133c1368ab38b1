"""Where the Streams rehearsal's jars come from: the harness's full set, a cache filled by an
earlier run, or Maven (with a pom written on the fly); no route hides a failure."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from migration.rehearse import java_jars, streams_jars


def _jar(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"PK")


def test_the_harness_libs_are_used_as_they_are(tmp_path: Path):
    _jar(tmp_path / "libs" / "kafka-streams-4.4.0.jar")
    (tmp_path / java_jars.FULL_MARKER).write_text("marker\n")
    assert streams_jars.ensure_streams_jars(tmp_path) == (tmp_path, "libs")


def test_a_cache_filled_by_an_earlier_run_is_used(tmp_path: Path):
    _jar(tmp_path / streams_jars.STREAMS_DIR / "kafka-streams-4.4.0.jar")
    (tmp_path / "log4j2.properties").write_text(java_jars.LOG4J2_PROPERTIES)
    java_jars.write_manifest(tmp_path, streams_jars.STREAMS_MARKER, streams_jars.MARKER, [streams_jars.STREAMS_DIR])
    assert streams_jars.ensure_streams_jars(tmp_path) == (tmp_path, streams_jars.STREAMS_DIR)


def test_without_maven_the_error_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    real_which = java_jars.shutil.which
    monkeypatch.setattr(java_jars.shutil, "which", lambda name: None if name == "mvn" else real_which(name) or name)
    with pytest.raises(java_jars.FetchError, match="mvn not found on PATH"):
        streams_jars.ensure_streams_jars(tmp_path)
    assert not (tmp_path / streams_jars.STREAMS_MARKER).exists()


def test_the_pom_asks_for_kafka_streams_and_the_logging_binding():
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    deps = {(d.findtext("m:artifactId", namespaces=ns), d.findtext("m:version", namespaces=ns))
            for d in ET.fromstring(streams_jars.POM).iterfind(".//m:dependency", ns)}
    assert ("kafka-streams", streams_jars.KAFKA_VERSION) in deps and len(deps) == 3


def test_the_application_source_ships_beside_the_consumer_driver_but_apart_from_it():
    """Apart: java/*.java is compiled against kafka-clients alone (java_jars.DRIVER_SOURCES)."""
    assert sorted(p.name for p in streams_jars.SOURCES.glob("*.java")) == ["StreamsEvents.java", "StreamsRehearsalApp.java"]
    assert not list(java_jars.DRIVER_SOURCES.glob("StreamsRehearsalApp.java"))
