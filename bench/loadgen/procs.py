"""The processes a benchmark measures: a Tansu broker, a `kcoord serve`, and what they cost.

Ports come from this helper's loopback range (29400-29499 unless KCOORD_BENCH_PORTS says
otherwise). CPU time and RSS are read from /proc, so the figures are the server
process's own, whoever generates the load.
"""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from support import ports, processes  # noqa: E402
from support.kcoord import launch_serve  # noqa: E402
from support.tansu import TansuBroker, start_tansu  # noqa: E402

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def port_range() -> tuple[int, int]:
    low, _, high = os.environ.get("KCOORD_BENCH_PORTS", "29400-29499").partition("-")
    return int(low), int(high)


def free_ports(n: int = 1) -> int:
    """First port P of a block of ``n`` free ports in the range, not handed out before."""
    low, high = port_range()
    return ports.free_block(range(low, high + 1), n)


# --- /proc ------------------------------------------------------------------------------

def cpu_seconds(pid: int) -> float:
    """User + system CPU time of every thread of ``pid``."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def cpu_seconds_fine(pid: int) -> float:
    """CPU time of every thread of ``pid`` from schedstat (nanoseconds; /proc/PID/stat counts
    10 ms ticks, too coarse for a run of a few hundred ms of CPU)."""
    return _schedstat(pid, 0)


def run_queue_seconds(pid: int) -> float:
    """Time every thread of ``pid`` has spent runnable but waiting for a CPU (schedstat's
    second field): on a shared machine, the CPU the process wanted and other work had."""
    return _schedstat(pid, 1)


def _schedstat(pid: int, field: int) -> float:
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[field])
        except (FileNotFoundError, ProcessLookupError):   # a thread that just ended
            pass
    return total / 1e9


@dataclass
class Window:
    """What one measured window of forked load workers gave: each worker's result, in the
    order they were read, and each server process's CPU and run-queue wait over the window."""
    results: list
    cpu_by_pid: dict[int, float]
    waiting_by_pid: dict[int, float]


def forked_window(workers: list, ready, go, out, server_pids, *, warmup: float, seconds: float) -> Window:
    """Run forked load ``workers`` through one window measured on ``server_pids``.

    Each worker puts on ``ready`` once its sockets are open, waits for a start time on ``go``
    (all get the same one, 0.2 s ahead), warms up for ``warmup`` s, loads for ``seconds`` s and
    puts its result on ``out``. The servers' CPU and run-queue wait are read when the warm-up
    ends and when the window does, so they cover the window only. A worker still alive 30 s
    after the window is killed."""
    for p in workers:
        p.start()
    try:
        for _ in workers:
            ready.get(timeout=150)
        start_at = time.monotonic() + 0.2
        for _ in workers:
            go.put(start_at)
        time.sleep(max(0.0, start_at + warmup - time.monotonic()))
        before = {pid: cpu_seconds(pid) for pid in server_pids}
        queued = {pid: run_queue_seconds(pid) for pid in server_pids}
        time.sleep(max(0.0, start_at + warmup + seconds - time.monotonic()))
        by_pid = {pid: cpu_seconds(pid) - before[pid] for pid in server_pids}
        waiting = {pid: run_queue_seconds(pid) - queued[pid] for pid in server_pids}
        results = [out.get(timeout=seconds + warmup + 60) for _ in workers]
    finally:
        for p in workers:
            p.join(30)
            if p.is_alive():
                p.kill()
    return Window(results, by_pid, waiting)


def consume_from_beginning(conf: dict[str, object], topic: str, partitions: int, records: int,
                           cpu: Callable[[], float] | None = None) -> dict[str, float]:
    """Read ``records`` records of ``topic`` from the beginning with librdkafka (``conf``: the
    bootstrap and any security settings). Rate from assign() (connections, handshakes and
    metadata included) to the last record; ``cpu()`` (a server's CPU seconds) over the same
    interval, NaN without it."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"group.id": "bench-consume-unused", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100, "queued.max.messages.kbytes": 65536, **conf})
    where = conf.get("bootstrap.servers")
    try:
        first = time.monotonic()
        cpu_first = cpu() if cpu else 0.0
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        seen = size = 0
        deadline = first + 300
        while seen < records:
            if time.monotonic() > deadline:
                raise RuntimeError(f"read {seen} of {records} records through {where} in 300 s")
            for msg in consumer.consume(10000, 1.0):
                if msg.error():
                    raise RuntimeError(f"consume through {where}: {msg.error()}")
                seen += 1
                size += len(msg.value() or b"")
        seconds = time.monotonic() - first
        cpu_s = (cpu() - cpu_first) if cpu else float("nan")
    finally:
        consumer.close()
    mb = size / 1e6
    return {"mb_s": mb / seconds, "records_s": seen / seconds, "seconds": seconds, "cpu_s": cpu_s,
            "mb": mb, "cpu_ms_per_mb": cpu_s / mb * 1e3}


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


# --- Tansu ------------------------------------------------------------------------------

def tansu() -> TansuBroker:
    return start_tansu(free_ports(1))


async def create_topic(host: str, port: int, name: str, partitions: int) -> None:
    from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
    from kio.schema.errors import ErrorCode

    from .client import KafkaConnection
    conn = await KafkaConnection.open(host, port)
    try:
        response = await conn.call(19, 7, CreateTopicsRequest(
            topics=(CreatableTopic(name=name, num_partitions=partitions, replication_factor=1,
                                   assignments=(), configs=()),),
            timeout=timedelta(seconds=30), validate_only=False))
    finally:
        conn.close()
    code = response.topics[0].error_code
    if code not in (ErrorCode.none, ErrorCode.topic_already_exists):
        raise RuntimeError(f"CreateTopics {name}: {code!r} {response.topics[0].error_message}")


# --- kcoord -----------------------------------------------------------------------------

@dataclass
class Kcoord:
    """`kcoord serve` in a child process (from ``repo``: another checkout may be measured)."""

    upstream: str
    config: tuple[str, ...] = ()
    state_partitions: int = 1
    repo: Path = REPO
    port: int = 0
    process: subprocess.Popen | None = None
    log_path: Path | None = None
    lines: list[str] = field(default_factory=list)
    extra_args: tuple[str, ...] = ()              # more `kcoord serve` options, e.g. --metrics-port

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self, timeout: float = 60.0) -> Kcoord:
        self.port = self.port or free_ports(2)        # bootstrap + one listener per broker
        args = [sys.executable, "-m", "coordinator.cli", "--log-level", "WARNING", "serve", *self.extra_args,
                "--listen", f"127.0.0.1:{self.port}", "--upstream", self.upstream,
                "--state-topic", f"__kcoord_bench_{self.port}_{os.getpid()}",
                "--state-partitions", str(self.state_partitions)]
        for item in self.config:
            args += ["--config", item]
        self.process, self.log_path = launch_serve(
            args, self.repo, f"kcoord-bench-{self.port}", self.lines, timeout, env={"PYTHONPATH": str(self.repo)})
        return self

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path else ""

    def stop(self) -> None:
        if self.process is not None:
            processes.stop(self.process, 15)

    def print_log_tail(self, chars: int = 3000) -> None:
        """After a failed benchmark: what kcoord logged (warnings and errors only)."""
        print(f"--- kcoord log ({self.log_path}), last {chars} characters ---\n{self.log_text()[-chars:]}")


def run(coro):
    """asyncio.run with uvloop when available (the generator's own overhead matters)."""
    try:
        import uvloop
        return uvloop.run(coro)
    except ImportError:
        return asyncio.run(coro)
