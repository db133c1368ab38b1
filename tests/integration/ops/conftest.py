"""Fixtures of the offsets-tools integration tests: a real Tansu broker, a real
`kcoord serve` process, ports from the worker's own KCOORD_TEST_PORTS range, so two
xdist workers never race for a port."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import fixtures, ports
from support.tansu import TansuBroker, start_tansu

REPO = Path(__file__).resolve().parents[3]


def free_ports(pool: range, count: int = 1) -> int:
    return ports.free_block(pool, count)


@pytest.fixture(scope="module")
def ops_tansu(tmp_path_factory) -> Iterator[TansuBroker]:
    broker = start_tansu(free_ports(ports.pool()), log_dir=tmp_path_factory.mktemp("ops-tansu"))
    yield broker
    broker.stop()


upstream = fixtures.module_upstream(
    tansu="ops_tansu",
    doc="""The cluster the tools read and write: this suite's own Tansu or a session Kafka
    (support.upstreams parametrizes it).""")


class KcoordServe:
    """`kcoord serve` as a separate process, as an operator runs it."""

    def __init__(self, upstream: str, state_topic: str, partitions: int, log_path: Path, *,
                 port: int | None = None) -> None:
        # `port`: the first of 4 free ports (a suite with another port range picks its own).
        self.port = port if port is not None else free_ports(ports.pool(), 4)
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
