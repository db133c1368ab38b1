"""A real `kcoord serve` process in front of a real upstream broker.

It runs as a child process (so tests can kill -9 it) and is ready when it prints
"kcoord ready". The bootstrap listener takes port P and the per-broker listeners
P+1...; restarting on the same P gives clients the same addresses back.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import ports, processes

REPO = Path(__file__).resolve().parents[2]

# Test-speed settings: short heartbeats so group changes settle in a second or two.
FAST = ("consumer_heartbeat_interval_ms=500", "consumer_session_timeout_ms=10000")


def free_port_block(n: int) -> int:
    """A port P such that P..P+n-1 are free (bootstrap plus one listener per broker), all
    reserved in this process."""
    low, high = ports.port_range()
    return ports.free_block(range(low, high + 1), n)


def launch_serve(args: list[str], cwd: Path, log_name: str, lines: list[str], timeout: float,
                 env: dict[str, str] | None = None) -> tuple[subprocess.Popen, Path]:
    """Start `kcoord serve` (``args``), collect its stdout into ``lines``, and return once it
    printed "kcoord ready". stderr (the log) goes to a temporary file, returned with the
    process, so a failure can show what kcoord said."""
    log_path = Path(tempfile.gettempdir()) / f"{log_name}-{time.monotonic_ns()}.log"
    with open(log_path, "w") as log:
        process = processes.track(subprocess.Popen(
            args, cwd=cwd, stdout=subprocess.PIPE, stderr=log, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}, preexec_fn=processes.orphan_guard()))
    ready = threading.Event()

    def pump() -> None:
        for line in process.stdout:
            lines.append(line.rstrip())
            if line.startswith("kcoord ready"):
                ready.set()

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + timeout
    while not ready.wait(0.05):
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"kcoord did not become ready:\n{log_path.read_text(errors='replace')[-4000:]}")
    return process, log_path


@dataclass
class KcoordProcess:
    upstream: str
    state_topic: str
    state_partitions: int = 8
    config: tuple[str, ...] = FAST
    port: int = 0
    process: subprocess.Popen | None = None
    log_path: Path | None = None
    _lines: list[str] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def serve_args(self) -> list[str]:
        """The command line; subclasses add options (for example a metrics port)."""
        args = [sys.executable, "-m", "coordinator.cli", "serve", "--listen", self.bootstrap,
                "--upstream", self.upstream, "--state-topic", self.state_topic,
                "--state-partitions", str(self.state_partitions)]
        for item in self.config:
            args += ["--config", item]
        return args

    def start(self, timeout: float = 30.0) -> KcoordProcess:
        if not self.port:        # bootstrap + one listener per upstream broker (in the bootstrap list)
            self.port = free_port_block(1 + len(self.upstream.split(",")))
        args = self.serve_args()
        self.process, self.log_path = launch_serve(args, REPO, f"kcoord-{self.port}", self._lines, timeout)
        return self

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path else ""

    def output(self) -> list[str]:
        return list(self._lines)

    def kill(self) -> int:
        """kill -9: no flush, no goodbye."""
        return processes.kill(self.process)

    def stop(self, timeout: float = 15.0) -> int:
        rc = processes.stop(self.process, timeout)
        return rc

    def restart(self, timeout: float = 30.0) -> KcoordProcess:
        """Start again on the same ports and state topic (after kill or stop)."""
        self._lines.clear()
        return self.start(timeout)
