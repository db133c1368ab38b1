#!/usr/bin/env python3
"""Fetch the Apache Kafka broker jars (KRaft) the integration tests start, from Maven Central.

    maven/broker/pom.xml depends on org.apache.kafka:kafka_2.13 plus the logging binding of
    the Kafka line; `mvn dependency:copy-dependencies` copies the runtime set into

        <cache>/<version>/libs/*.jar      (cache: <repo>/.cache/kafka, env KCOORD_KAFKA_CACHE)
        <cache>/<version>/.complete       marker, written last: the pom's hash and the jar list

Idempotent and offline once fetched: with the marker present (same pom, every jar in place)
nothing runs, not even Maven. Maven's own repository (~/.m2) keeps the downloads too, so a
removed cache directory refills without the network (`mvn -o` is tried first).

Without Maven, the reference line (KAFKA_44) comes the way `kcoord serve --embedded kafka`
fetches it (coordinator/upstream/kafka_dist.py: the same jars, listed with their SHA-256,
straight from Maven Central into the same layout); the cache layout and its variable are
that module's too.

Usage: fetch_kafka.py [VERSION ...] [--cache DIR] [--force]
Default versions: KAFKA_VERSIONS below (the reference line and the older line).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from coordinator.upstream import kafka_dist
from coordinator.upstream.kafka_jars import KAFKA_VERSION

REPO_ROOT = Path(__file__).resolve().parent.parent
POM = REPO_ROOT / "maven" / "broker" / "pom.xml"
ENV_CACHE = kafka_dist.ENV_CACHE

KAFKA_44 = KAFKA_VERSION   # the reference (4.4.0): the newest release Maven Central serves (2026-11-25)
KAFKA_43 = "4.3.1"   # the previous line, for a marked subset: newest 4.3 patch
KAFKA_39 = "3.9.1"   # the older line: no KIP-848 on the broker (3.9.2 is served too)
KAFKA_VERSIONS = (KAFKA_44, KAFKA_43, KAFKA_39)
MARKER = kafka_dist.MARKER


class FetchError(RuntimeError):
    pass


def cache_root() -> Path:
    return Path(os.environ.get(ENV_CACHE) or REPO_ROOT / ".cache" / "kafka")


def libs_dir(version: str, cache: Path | None = None) -> Path:
    return (cache or cache_root()) / version / "libs"


def logging_flavour(version: str) -> str:
    """The binding Kafka's own distribution ships: reload4j up to 3.x, Log4j 2 from 4.0."""
    return "reload4j" if int(version.split(".")[0]) < 4 else "log4j2"


def _pom_hash() -> str:
    return hashlib.sha256(POM.read_bytes()).hexdigest()[:16]


def is_complete(version: str, cache: Path | None = None) -> bool:
    libs = libs_dir(version, cache)
    marker = libs.parent / MARKER
    if not marker.is_file():
        return False
    lines = marker.read_text().splitlines()
    if not lines or lines[0] != f"pom {_pom_hash()}":
        return False
    return all((libs / name).is_file() for name in lines[1:])


def _mvn(version: str, out: Path, offline: bool) -> subprocess.CompletedProcess:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise FetchError("mvn (Apache Maven) is not on PATH: it fetches the Kafka broker jars")
    cmd = [mvn, "-q", "-B", "-f", str(POM), f"-Dkafka.version={version}",
           "dependency:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={out}"]
    if logging_flavour(version) == "reload4j":
        cmd.insert(-3, "-Dkafka.logging=reload4j")
    if offline:
        cmd.insert(1, "-o")
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def fetch(version: str, cache: Path | None = None, force: bool = False) -> Path:
    """The libs directory of ``version``, fetched first unless complete already."""
    cache = cache or cache_root()
    libs = libs_dir(version, cache)
    if not force and is_complete(version, cache):
        return libs
    if shutil.which("mvn") is None and version == KAFKA_VERSION:
        return kafka_dist.fetch(cache)
    libs.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=libs.parent, prefix=".fetch-") as tmp:
        staging = Path(tmp) / "libs"
        in_m2 = (Path.home() / ".m2/repository/org/apache/kafka/kafka_2.13" / version).is_dir()
        result = _mvn(version, staging, offline=True) if in_m2 else None     # no network needed?
        if result is None or result.returncode != 0:
            result = _mvn(version, staging, offline=False)
        if result.returncode != 0:
            raise FetchError(f"mvn could not fetch kafka_2.13 {version} (exit {result.returncode}):\n"
                             f"{result.stdout[-4000:]}")
        jars = sorted(p.name for p in staging.glob("*.jar"))
        if f"kafka_2.13-{version}.jar" not in jars:
            raise FetchError(f"mvn finished but kafka_2.13-{version}.jar is not among {jars}")
        (libs.parent / MARKER).unlink(missing_ok=True)
        if libs.exists():
            shutil.rmtree(libs)
        staging.rename(libs)
    (libs.parent / MARKER).write_text("\n".join([f"pom {_pom_hash()}", *jars]) + "\n")
    size = sum(p.stat().st_size for p in libs.iterdir())
    print(f"kafka {version}: {len(jars)} jars, {size / 1e6:.1f} MB in {libs} "
          f"({time.monotonic() - started:.1f} s)", file=sys.stderr)
    return libs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="*", default=list(KAFKA_VERSIONS))
    parser.add_argument("--cache", type=Path, default=None, help=f"default ${ENV_CACHE} or .cache/kafka")
    parser.add_argument("--force", action="store_true", help="fetch again even if complete")
    args = parser.parse_args(argv)
    try:
        for version in args.versions:
            if not args.force and is_complete(version, args.cache):
                print(f"kafka {version}: up to date in {libs_dir(version, args.cache)}", file=sys.stderr)
                continue
            fetch(version, args.cache, force=args.force)
    except FetchError as exc:
        print(f"fetch_kafka: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
