"""`kcoord serve` as a separate process, as an operator runs it, for the offsets tools'
tests (its log in a file the test names, ports from the worker's KCOORD_TEST_PORTS range).
A module of its own, not the conftest: a test importing ``conftest`` gets whichever
directory's conftest was imported first."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from support import ports

REPO = Path(__file__).resolve().parents[3]


class KcoordServe:
    """`kcoord serve` as a separate process, as an operator runs it."""

    def __init__(self, upstream: str, state_topic: str, partitions: int, log_path: Path, *,
                 port: int | None = None) -> None:
        # `port`: the first of 4 free ports (a suite with another port range picks its own).
        self.port = port if port is not None else ports.free_block(ports.pool(), 4)
        self.log_path = log_path
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self._log = open(log_path, "wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "coordinator.cli", "serve", "--upstream", upstream,
             "--listen", f"127.0.0.1:{self.port}", "--state-topic", state_topic,
             "--state-partitions", str(partitions)],
            cwd=REPO, env=env, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"kcoord serve exited with {self.process.returncode}:\n"
                                     f"{self.log_path.read_text(errors='replace')}")
            if b"kcoord ready" in self.log_path.read_bytes():
                return
            time.sleep(0.1)
        raise AssertionError(f"kcoord serve not ready after {timeout}s:\n"
                             f"{self.log_path.read_text(errors='replace')}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self._log.close()
