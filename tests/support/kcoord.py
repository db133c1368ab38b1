"""A real `kcoord serve` process in front of a real upstream broker.

It runs as a child process (so tests can kill -9 it) and is ready when it prints
"kcoord ready". The bootstrap listener takes port P and the per-broker listeners
P+1...; restarting on the same P gives clients the same addresses back.

Listeners of any protocol (issue 13): ``listeners=("SSL",)`` or
``listeners=("INTERNAL:PLAINTEXT", "EXTERNAL:SSL")`` give each listener a port block of its
own (``port_of(name)``, ``bootstrap_of(name)``); names that are not protocols go into
``listener.security.protocol.map``. TLS and other security settings go in ``config`` like
any ``--config`` item. Without ``listeners`` kcoord gets one bare host:port (PLAINTEXT),
as before.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from . import ports, processes

REPO = Path(__file__).resolve().parents[2]

# The membership group every `kcoord serve` joins (a plain serve's single-process check,
# docs/user/cluster.md "One process refuses company", and a cluster's membership) with a 3 s
# session: the Kafka fixtures lower group.min.session.timeout.ms to 1 s. A plain serve's
# check costs about half a session on Tansu, and a plain serve restarted after kill -9
# waits out its predecessor's session: with the default 10 s session a restart took 24-26 s
# on the loaded 2-core machine, with 3 s 8.3-8.8 s (a first start 11-16 s against 8-10 s).
MEMBERSHIP = ("cluster.session.timeout.ms=3000", "cluster.heartbeat.interval.ms=300", "cluster.lease.margin.ms=1000")
# Test-speed settings: short heartbeats so group changes settle in a second or two.
FAST = ("consumer_heartbeat_interval_ms=500", "consumer_session_timeout_ms=10000", *MEMBERSHIP)
# Several processes (`--instance-id`): the same membership timings, a 10 s rebalance bound.
CLUSTER = (*FAST, "cluster.rebalance.timeout.ms=10000")


def free_port_block(n: int) -> int:
    """A port P such that P..P+n-1 are free (bootstrap plus one listener per broker), all
    reserved in this process."""
    return ports.free_block(ports.pool(), n)


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
            why = (f"exited with {process.returncode}" if process.poll() is not None
                   else f"not ready after {timeout:.0f} s")
            raise RuntimeError(f"kcoord did not become ready ({why}):\n"
                               f"{log_path.read_text(errors='replace')[-4000:]}")
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
    # "PROTOCOL" or "NAME:PROTOCOL" per listener, in --listen order (empty: one bare host:port).
    listeners: tuple[str, ...] = ()
    advertised_host: str | None = None
    ports: dict[str, int] = field(default_factory=dict)   # listener name -> its bootstrap port
    extra_args: tuple[str, ...] = ()
    log_level: str = "INFO"             # kcoord's --log-level (e.g. "INFO,kcoord.cluster=DEBUG")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def listener_names(self) -> list[str]:
        return [item.partition(":")[0].upper() for item in self.listeners]

    def port_of(self, name: str) -> int:
        return self.ports[name.upper()] if self.listeners else self.port

    def bootstrap_of(self, name: str, host: str = "127.0.0.1") -> str:
        return f"{host}:{self.port_of(name)}"

    def listen_args(self) -> list[str]:
        if not self.listeners:
            return ["--listen", self.bootstrap]
        args = []
        mapping = []
        for item in self.listeners:
            name, sep, protocol = item.partition(":")
            name = name.upper()
            if sep:
                mapping.append(f"{name}:{protocol.upper()}")
            args += ["--listen", f"{name}://127.0.0.1:{self.ports[name]}"]
        if mapping:
            args += ["--config", "listener.security.protocol.map=" + ",".join(mapping)]
        return args

    def serve_args(self) -> list[str]:
        """The command line; subclasses add options (for example a metrics port)."""
        args = [sys.executable, "-m", "coordinator.cli", "--log-level", self.log_level, "serve", *self.listen_args(),
                "--upstream", self.upstream, "--state-topic", self.state_topic,
                "--state-partitions", str(self.state_partitions)]
        if self.advertised_host is not None:
            args += ["--advertised-host", self.advertised_host]
        for item in self.config:
            args += ["--config", item]
        return [*args, *self.extra_args]

    def assign_ports(self) -> None:
        """Bootstrap + one listener per upstream broker (in the bootstrap list), per listener."""
        brokers = len(self.upstream.split(","))
        self.port = free_port_block(1 + brokers)
        if self.listeners:
            names = self.listener_names()
            self.ports = {names[0]: self.port}
            for name in names[1:]:
                self.ports[name] = free_port_block(1 + brokers)

    def start(self, timeout: float = 60.0) -> KcoordProcess:
        if not self.port:
            self.assign_ports()
        args = self.serve_args()
        self.process, self.log_path = launch_serve(args, REPO, f"kcoord-{self.port}", self._lines, timeout)
        return self

    def run_to_exit(self, timeout: float = 60.0) -> subprocess.CompletedProcess:
        """Run `kcoord serve` expecting it to stop by itself (a configuration it refuses):
        its exit code, stdout and stderr."""
        if not self.port:
            self.port = free_port_block(1 + len(self.upstream.split(",")))
            names = self.listener_names()
            self.ports = {name: self.port + 10 * i for i, name in enumerate(names)}
        try:
            return subprocess.run(self.serve_args(), cwd=REPO, capture_output=True, text=True, timeout=timeout,
                                  env={**os.environ, "PYTHONUNBUFFERED": "1"})
        except subprocess.TimeoutExpired as e:
            # What the process was doing when its bound ran out is what a failure needs to show.
            tail = (e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr or "")[-4000:]
            raise AssertionError(f"kcoord serve did not stop by itself within {timeout:.0f}s; "
                                 f"its stderr ends:\n{tail}") from None

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

    def restart(self, timeout: float = 60.0) -> KcoordProcess:
        """Start again on the same ports and state topic (after kill or stop)."""
        self._lines.clear()
        return self.start(timeout)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


def serving(process: KcoordProcess) -> Iterator[KcoordProcess]:
    """The body of a fixture: start ``process``, hand it out, and at teardown stop it unless a
    test left it exited (a killed process stays as the test left it)."""
    process.start()
    yield process
    if process.running():
        process.stop()


def start_all(processes: list[KcoordProcess], timeout: float = 60.0) -> None:
    """Start (or restart, on their ports) several processes side by side: each waits for its
    own "kcoord ready", so three cost one start's wall time instead of three. Ports are
    handed out first, one process at a time, so no two get the same block."""
    for p in processes:
        if not p.port:
            p.assign_ports()
    errors: list[BaseException] = []

    def one(p: KcoordProcess) -> None:
        try:
            p.restart(timeout)
        except BaseException as exc:   # re-raised below, after every thread is done
            errors.append(exc)
    threads = [threading.Thread(target=one, args=(p,), daemon=True) for p in processes]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 10)
    if errors:
        raise errors[0]
