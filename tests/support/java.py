"""Java kafka-clients 4.4 consumers as subprocesses (migration/rehearse/java/ConsumerDriver.java).

The jars come from Maven Central through scripts/fetch_java_jars.py (maven/clients/pom.xml),
run lazily on first use (idempotent; ~6 s with a warm ~/.m2). ``jars/`` holds the client set
(the drivers' classpath), ``jars-4.3/`` the 4.3.1 client for the driver baselines straight
against Tansu only (``TANSU_BASELINE_JARS``), ``libs/`` everything else (Connect, kafka-tools,
Streams); see ``libs_classpath``. The driver sources are compiled once per content hash into
<java cache>/classes/<hash>/: a JVM then reaches "ready" in ~0.4-0.5 s instead of
~1.4 s with the single-file source launcher, which recompiles on every start
(measured here: source launcher 1.36-1.40 s, precompiled 0.51-0.60 s, precompiled
with -XX:TieredStopAtLevel=1 -XX:+UseSerialGC 0.40-0.44 s).

JavaConsumer parses the driver's JSON lines on a reader thread into the same event
log as every other driver (support.consumer_events), so its rebalance callbacks land
in the OwnershipLedger on the shared CLOCK_MONOTONIC time line.
"""
from __future__ import annotations

import collections
import functools
import importlib.util
import itertools
import shutil
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from migration.rehearse import java_jars, streams_jars
from migration.rehearse.member import read_events, read_lines

from . import processes
from .consumer_events import EventLogConsumer
from .ownership import OwnershipLedger

REPO_ROOT = Path(__file__).resolve().parents[2]
# Test-only Java sources (NanoClock); ConsumerDriver ships with kcoord in migration/rehearse/java/.
JAVA_SOURCES = REPO_ROOT / "tests" / "clients" / "java"
FETCH_SCRIPT = REPO_ROOT / "scripts" / "fetch_java_jars.py"
DEFAULT_JVM_OPTS = java_jars.DEFAULT_JVM_OPTS  # stdout carries only JSON events
_names = itertools.count(1)
_setup_lock = threading.Lock()


@functools.cache
def _fetch_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kcoord_fetch_java_jars", FETCH_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def java_available() -> bool:
    return shutil.which("java") is not None and shutil.which("javac") is not None


def ensure_java_jars() -> Path:
    """The java cache dir, fetching the jars first if they are missing."""
    fetch = _fetch_module()
    cache = fetch.default_cache_dir()
    with _setup_lock:
        if not fetch.is_complete(cache):
            fetch.fetch(cache)  # raises fetch.FetchError with a readable message
    return cache


def libs_classpath(cache: Path | None = None) -> str:
    """Classpath of the full set (kafka-clients, -streams, -tools, connect-*), fetched if missing."""
    return str((cache or ensure_java_jars()) / "libs" / "*")


def java_sources() -> list[Path]:
    """The package's ConsumerDriver plus the test-only sources, compiled together."""
    return sorted([*java_jars.DRIVER_SOURCES.glob("*.java"), *JAVA_SOURCES.glob("*.java")])


def compiled_classes(cache: Path | None = None) -> Path:
    """Compile the Java sources once per content hash; returns the classes dir."""
    return java_jars.compiled_classes(cache or ensure_java_jars(), java_sources())


# The client set of every Java test but one: kafka-clients 4.4.0.
CLIENT_JARS = "jars"
# kafka-clients 4.3.1, for the driver baselines that run the Java consumer straight against
# Tansu 0.6 (tests/integration/harness/). The 4.4 client sends ApiVersions v5 (KIP-1242) with the
# cluster id on every connection after the bootstrap one; Tansu 0.6 advertises ApiVersions 0-4
# yet decodes v5 with its v4 schema instead of answering UNSUPPORTED_VERSION, runs past the frame
# and drops the connection, so a 4.4 consumer never reaches the coordinator. Through kcoord, which
# answers ApiVersions itself, every test uses 4.4. docs/design/testing-against-kafka.md.
TANSU_BASELINE_JARS = "jars-4.3"


def java_command(main_class: str, args: Sequence[str] = (), jvm_opts: Sequence[str] = DEFAULT_JVM_OPTS,
                 jars: str = CLIENT_JARS) -> list[str]:
    """``java`` argv running a class (ConsumerDriver, NanoClock) with the client set ``<cache>/<jars>/``."""
    return java_jars.java_command(main_class, args, cache=ensure_java_jars(), sources=java_sources(),
                                  jvm_opts=jvm_opts, jars=jars)


# Test programs that need the full libs/ set (Kafka Streams, Connect plugins): compiled apart
# from the drivers, against libs/*, so the drivers' small classpath (fast JVM start) stays as it is.
LIBS_JAVA_SOURCES = JAVA_SOURCES / "streams"
CONNECT_JAVA_SOURCES = JAVA_SOURCES / "connect"


# The Streams apps print their JSON lines with StreamsEvents, which kcoord ships in its Streams
# rehearsal's source (streams_jars.SOURCES): compiled with them, so one copy serves both.
SHIPPED_STREAMS_SOURCES = streams_jars.SOURCES


def libs_classpath_with(sources_dir: Path, cache: Path | None = None, *also: Path) -> str:
    """Classpath of the classes of ``sources_dir`` and the ``also`` dirs' sources (compiled
    together, once per content hash) and libs/*."""
    cache = cache or ensure_java_jars()
    libs = cache / "libs" / "*"
    sources = sorted(source for folder in (sources_dir, *also) for source in folder.glob("*.java"))
    classes = java_jars.compiled_classes(cache, sources, (libs,))
    return f"{classes}:{libs}"


def libs_java_command(main_class: str, args: Sequence[str] = (),
                      jvm_opts: Sequence[str] = DEFAULT_JVM_OPTS) -> list[str]:
    """``java`` argv running a class of tests/clients/java/streams/ with the libs/ classpath."""
    cache = ensure_java_jars()
    return ["java", *jvm_opts, f"-Dlog4j2.configurationFile={cache / 'log4j2.properties'}",
            "-cp", libs_classpath_with(LIBS_JAVA_SOURCES, cache, SHIPPED_STREAMS_SOURCES), main_class, *args]


class JavaConsumer(EventLogConsumer):
    """One ConsumerDriver JVM. start() → events → close() (clean) or kill() (kill -9)."""

    def __init__(
        self,
        bootstrap: str,
        topics: str | Sequence[str],
        group: str,
        *,
        member: str | None = None,
        ledger: OwnershipLedger | None = None,
        group_protocol: Literal["classic", "consumer"] = "classic",
        assignor: str | None = None,
        remote_assignor: str | None = None,
        group_instance_id: str | None = None,
        commit_mode: Literal["manual", "auto"] = "manual",
        session_timeout_ms: int | None = None,
        heartbeat_interval_ms: int | None = None,
        max_poll_interval_ms: int | None = None,
        extra_props: dict[str, Any] | None = None,
        poll_ms: int = 100,
        jvm_opts: Sequence[str] = DEFAULT_JVM_OPTS,
        jars: str = CLIENT_JARS,
    ) -> None:
        super().__init__(member or f"java-{next(_names)}", ledger)
        topic_list = [topics] if isinstance(topics, str) else list(topics)
        args = ["--bootstrap", bootstrap, "--topics", ",".join(topic_list), "--group", group,
                "--group-protocol", group_protocol, "--commit", commit_mode, "--poll-ms", str(poll_ms),
                "--client-id", self.member]
        if group_protocol == "classic":
            if remote_assignor is not None:
                raise ValueError("remote_assignor (group.remote.assignor) applies to group_protocol='consumer' only")
            session = session_timeout_ms if session_timeout_ms is not None else 6000
            args += ["--session-timeout-ms", str(session),
                     "--heartbeat-interval-ms", str(heartbeat_interval_ms or min(1000, session // 3))]
            if assignor is not None:
                args += ["--assignor", assignor]
        else:
            bad = [n for n, v in (("session_timeout_ms", session_timeout_ms), ("assignor", assignor),
                                  ("heartbeat_interval_ms", heartbeat_interval_ms)) if v is not None]
            if bad:
                raise ValueError(f"group.protocol=consumer: the Java client rejects {bad} (KIP-848); drop them")
            if remote_assignor is not None:
                args += ["--remote-assignor", remote_assignor]
        if group_instance_id is not None:
            args += ["--instance-id", group_instance_id]
        if max_poll_interval_ms is not None:
            args += ["--max-poll-interval-ms", str(max_poll_interval_ms)]
        for key, value in (extra_props or {}).items():
            args += ["--prop", f"{key}={value}"]
        self.args = args
        self.jvm_opts = tuple(jvm_opts)
        self.jars = jars
        self.process: subprocess.Popen | None = None
        self._stderr: collections.deque[str] = collections.deque(maxlen=400)
        self._noise: list[str] = []
        self._threads: list[threading.Thread] = []

    # --- lifecycle -------------------------------------------------------------------------

    def start(self, wait_ready: bool = True, timeout: float = 30.0) -> JavaConsumer:
        cmd = java_command("ConsumerDriver", self.args, self.jvm_opts, self.jars)
        self.process = processes.track(subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, encoding="utf-8", errors="replace", bufsize=1))
        self._threads = [
            threading.Thread(target=self._read_stdout, name=f"{self.member}-stdout", daemon=True),
            threading.Thread(target=self._read_stderr, name=f"{self.member}-stderr", daemon=True),
        ]
        for t in self._threads:
            t.start()
        if wait_ready:
            self.wait_for(lambda: self.events("ready") or self.process.poll() is not None, timeout, "ready")
            if not self.events("ready"):
                raise RuntimeError(f"{self.member}: JVM exited with {self.process.returncode} before ready; "
                                   f"stderr:\n{self.stderr_text()}")
        return self

    def close(self, timeout: float = 30.0, how: Literal["close", "leave", "remain"] = "close") -> int:
        """Ask for a clean stop (commitSync + close → LeaveGroup) and wait; returns the exit code.

        ``how``: "leave"/"remain" force CloseOptions LEAVE_GROUP/REMAIN_IN_GROUP (static members).
        """
        proc = self._require_process()
        if proc.poll() is None:
            try:
                proc.stdin.write(how + "\n")  # type: ignore[union-attr]
                proc.stdin.close()  # type: ignore[union-attr]
            except (BrokenPipeError, OSError):
                pass
        return self.wait_exit(timeout)

    def kill(self) -> int:
        """kill -9: no commit, no LeaveGroup; the coordinator notices only at session expiry."""
        proc = self._require_process()
        t_ns = time.monotonic_ns()
        rc = processes.kill(proc)
        self._join_readers(5)
        self.log.emit("gone", t_ns, signal="SIGKILL")
        return rc

    def wait_exit(self, timeout: float = 30.0) -> int:
        proc = self._require_process()
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"{self.member}: JVM still running {timeout}s after close; "
                               f"stderr:\n{self.stderr_text()}") from None
        processes.untrack(proc)
        self._join_readers(5)
        return rc

    def shutdown(self) -> None:
        """Best-effort teardown for fixtures."""
        if self.process is None or self.process.poll() is not None:
            if self.process is not None:
                processes.untrack(self.process)
            return
        try:
            self.close(timeout=20)
        except RuntimeError:
            self.kill()

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def stderr_text(self) -> str:
        return "\n".join(self._stderr)

    def stdout_noise(self) -> list[str]:
        """stdout lines that were not JSON events (should stay empty)."""
        return list(self._noise)

    def _require_process(self) -> subprocess.Popen:
        if self.process is None:
            raise RuntimeError(f"{self.member}: not started")
        return self.process

    def _join_readers(self, timeout: float) -> None:
        for t in self._threads:
            t.join(timeout)

    # --- reader threads ---------------------------------------------------------------------

    def _read_stdout(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        read_events(self.process.stdout, self.log.apply, self._noise)

    def _read_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        read_lines(self.process.stderr, self._stderr)
