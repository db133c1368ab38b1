"""Fuzz a running `kcoord serve` over TCP, checking after every batch that it is still whole.

Each connection sends a few valid requests and then one mutated one (a class from
`fuzz.mutations`), so the mutated frame reaches the parser after real work on the same
connection; kcoord must answer what came before and then close. Connection-level abuse
runs beside it: half frames followed by silence (kcoord must close them after
connections.max.idle.ms) and bursts of many connections.

After every batch (the issue's bar): the server answers ApiVersions on a new connection
within 2 s, its RSS stays under the stated bound, its log holds no traceback, and the
process is alive. A failed check stops the run and is reported with the batch's seed.
"""
from __future__ import annotations

import asyncio
import random
import struct
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from coordinator.protocol.apis import API_VERSIONS, response_class
from coordinator.protocol.codec import decode_body

from .mutations import MUTATIONS
from .targets import TARGETS, Target, request_frame

_APIV = b"\x00\x12\x00\x03"   # ApiVersions v3

IDLE_MS = 3000
# The kcoord settings a fuzz run uses (Kafka's names), lowered so that connection abuse
# shows within a run; the tests and bench/bench_fuzz.py share them.
FUZZ_CONFIG = (f"connections.max.idle.ms={IDLE_MS}", "socket.request.max.bytes=1048576",
               "group.initial.rebalance.delay.ms=0")


@dataclass
class LiveReport:
    frames: int = 0
    mutated: int = 0
    connections: int = 0
    responses: int = 0
    closed_by_server: int = 0
    half_frames_closed: int = 0
    half_frames: int = 0
    seconds: float = 0.0
    max_rss_mb: float = 0.0
    batches: int = 0
    by_mutation: Counter = field(default_factory=Counter)
    by_api: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    @property
    def frames_per_second(self) -> float:
        return self.frames / self.seconds if self.seconds else 0.0

    def summary(self) -> str:
        return (f"{self.frames} frames ({self.mutated} mutated) on {self.connections} connections in "
                f"{self.seconds:.1f} s = {self.frames_per_second:,.0f} frames/s; {self.responses} responses, "
                f"{self.closed_by_server} connections closed by kcoord; half frames closed "
                f"{self.half_frames_closed}/{self.half_frames}; max RSS {self.max_rss_mb:.0f} MB; "
                f"{len(self.failures)} failures")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def _api_versions_frame(correlation_id: int) -> bytes:
    # header v2: key, version, correlation id, client id "fuzz", no tags; body: software
    # name and version (compact strings), no tags.
    payload = _APIV + struct.pack(">ih", correlation_id, 4) + b"fuzz\x00" + b"\x05kfuz\x02v\x00"
    return struct.pack(">i", len(payload)) + payload


async def _read_frames(reader: asyncio.StreamReader, timeout: float) -> tuple[int, bool]:
    """(responses read, closed by the server) until EOF or ``timeout``."""
    count = 0
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return count, False
            head = await asyncio.wait_for(reader.readexactly(4), left)
            (size,) = struct.unpack(">i", head)
            await asyncio.wait_for(reader.readexactly(size), max(0.01, deadline - time.monotonic()))
            count += 1
    except (asyncio.IncompleteReadError, ConnectionError):
        return count, True
    except TimeoutError:
        return count, False


class LiveFuzzer:
    def __init__(self, host: str, port: int, pid: int, log_path: Path, *, state_topic: str,
                 rss_limit_mb: float, seed: int = 0, concurrency: int = 16, read_timeout: float = 2.0,
                 targets: tuple[Target, ...] = TARGETS) -> None:
        self.host, self.port, self.pid, self.log_path = host, port, pid, log_path
        self.state_topic = state_topic
        self.rss_limit_mb = rss_limit_mb
        self.seed = seed
        self.concurrency = concurrency
        self.read_timeout = read_timeout
        self.targets = targets
        self.versions: dict[int, tuple[int, int]] = {}
        self.report = LiveReport()
        self._log_offset = 0

    async def advertised(self) -> dict[int, tuple[int, int]]:
        reader, writer = await asyncio.open_connection(self.host, self.port)
        try:
            writer.write(_api_versions_frame(1))
            head = await asyncio.wait_for(reader.readexactly(4), 5)
            frame = head + await reader.readexactly(struct.unpack(">i", head)[0])
        finally:
            writer.close()
        response = decode_body(response_class(API_VERSIONS, 3), frame, 8, exact=False)
        return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}

    def _plan(self, rng: random.Random) -> list[tuple[str, bytes]]:
        """(mutation, frame) for one connection: valid requests, then one mutated."""
        plan = []
        n = rng.randint(1, 7)
        for i in range(n):
            target = rng.choice(self._live)
            low, high = self.versions[target.api_key]
            frame, body = request_frame(target, rng.randint(low, high), i + 1, rng, self.state_topic)
            mutate = i == n - 1 and rng.random() < 0.7   # the last frame, most of the time
            name = rng.choice(target.live_mutations) if mutate else "valid"
            plan.append((name, MUTATIONS[name](frame, body, rng)))
            self.report.by_api[target.api_key] += 1
        return plan

    async def _connection(self, rng: random.Random) -> None:
        plan = self._plan(rng)
        try:
            reader, writer = await asyncio.open_connection(self.host, self.port)
        except OSError:
            self.report.by_mutation["refused_connection"] += 1   # a connection limit at work
            return
        self.report.connections += 1
        try:
            writer.write(b"".join(frame for _, frame in plan))
            # Half-close: kcoord answers what it can, then closes on the EOF, so a
            # connection whose requests wait (a JoinGroup held for its rebalance) costs no
            # read timeout. The mutated frame is still read and parsed first.
            try:
                writer.write_eof()
            except OSError:
                # kcoord already closed the connection (a frame it refused: a clean close
                # is an allowed answer); the shutdown of a reset socket fails (ENOTCONN).
                pass
            for name, _ in plan:
                self.report.frames += 1
                self.report.by_mutation[name] += 1
                self.report.mutated += name != "valid"
            responses, closed = await _read_frames(reader, self.read_timeout)
            self.report.responses += responses
            self.report.closed_by_server += closed
        except ConnectionError:
            self.report.closed_by_server += 1
        finally:
            writer.close()

    async def _half_frames(self, n: int) -> list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
        """Connections that send a size prefix and part of a frame, then nothing."""
        held = []
        for _ in range(n):
            reader, writer = await asyncio.open_connection(self.host, self.port)
            writer.write(struct.pack(">i", 100) + b"\x00\x12\x00")
            held.append((reader, writer))
        self.report.half_frames += n
        return held

    async def _burst(self, n: int) -> None:
        """``n`` connections at once, each asking ApiVersions: each is answered, or closed
        by a connection limit; none may hang past the read timeout."""
        async def one(i: int) -> None:
            try:
                reader, writer = await asyncio.open_connection(self.host, self.port)
            except OSError:
                self.report.by_mutation["refused_connection"] += 1
                return
            try:
                writer.write(_api_versions_frame(i))
                responses, closed = await _read_frames(reader, self.read_timeout)
                if responses == 0 and not closed:
                    self.report.failures.append(f"a connection of a burst of {n} was neither answered "
                                                f"nor closed within {self.read_timeout} s")
                self.report.responses += responses
            except ConnectionError:
                pass
            finally:
                writer.close()
        await asyncio.gather(*(one(i) for i in range(n)))
        self.report.connections += n
        self.report.by_mutation["burst_connection"] += n

    async def check(self, where: str) -> None:
        """The per-batch bar: alive, answers ApiVersions within 2 s, RSS bound, no traceback."""
        failures = self.report.failures
        if not Path(f"/proc/{self.pid}").exists():
            failures.append(f"{where}: kcoord (pid {self.pid}) is gone")
            return
        try:
            start = time.monotonic()
            reader, writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), 2)
            writer.write(_api_versions_frame(7))
            head = await asyncio.wait_for(reader.readexactly(8), 2 - (time.monotonic() - start))
            writer.close()
            if struct.unpack(">i", head[4:])[0] != 7:
                failures.append(f"{where}: ApiVersions answered with the wrong correlation id")
        except (TimeoutError, OSError, asyncio.IncompleteReadError) as e:
            failures.append(f"{where}: ApiVersions not answered within 2 s ({type(e).__name__}: {e})")
        rss = rss_mb(self.pid)
        self.report.max_rss_mb = max(self.report.max_rss_mb, rss)
        if rss > self.rss_limit_mb:
            failures.append(f"{where}: RSS {rss:.0f} MB above the bound {self.rss_limit_mb:.0f} MB")
        text = self.log_path.read_text(errors="replace")
        fresh, self._log_offset = text[self._log_offset:], len(text)
        if "Traceback" in fresh:
            at = fresh.index("Traceback")
            failures.append(f"{where}: traceback in kcoord's log:\n{fresh[at:at + 3000]}")

    async def run(self, frames: int, batch_frames: int = 5000, half_frames_per_batch: int = 2, burst: int = 200,
                  idle_ms: int | None = None, progress: Callable[[LiveReport], None] | None = None) -> LiveReport:
        """Send at least ``frames`` frames in batches; stop at the first failed check."""
        self.versions = await self.advertised()
        self._live = [t for t in self.targets if t.api_key in self.versions]
        start = time.monotonic()
        held: list[tuple[asyncio.StreamReader, asyncio.StreamWriter, float]] = []
        batch = 0
        while self.report.frames < frames and not self.report.failures:
            rng = random.Random(self.seed * 1_000_003 + batch)
            goal = min(frames, self.report.frames + batch_frames)
            now = time.monotonic()
            held += [(r, w, now) for r, w in await self._half_frames(half_frames_per_batch)]

            async def worker(wrng: random.Random, goal: int = goal) -> None:
                while self.report.frames < goal:
                    await self._connection(wrng)
            await asyncio.gather(*(worker(random.Random(rng.random())) for _ in range(self.concurrency)),
                                 self._burst(burst))
            held = await self._reap(held, idle_ms, final=False)
            await self.check(f"batch {batch} (seed {self.seed}, {self.report.frames} frames)")
            self.report.batches += 1
            self.report.seconds = time.monotonic() - start
            if progress is not None:
                progress(self.report)
            batch += 1
        await self._reap(held, idle_ms, final=True)
        self.report.seconds = time.monotonic() - start
        return self.report

    async def _reap(self, held, idle_ms: int | None, final: bool):
        """Half-frame connections kcoord has closed are counted; with ``final``, each must be
        closed by its idle deadline plus 5 s."""
        left = []
        for reader, writer, opened in held:
            if reader.at_eof() or writer.is_closing():
                self.report.half_frames_closed += 1
                writer.close()
                continue
            if final and idle_ms is not None:
                wait = max(0.0, opened + idle_ms / 1000 + 5 - time.monotonic())
                try:
                    closed = await asyncio.wait_for(reader.read(1), wait) == b""
                except TimeoutError:
                    closed = False
                except ConnectionError:
                    closed = True
                if closed or reader.at_eof():
                    self.report.half_frames_closed += 1
                else:
                    self.report.failures.append(
                        f"a half frame followed by silence was still open {idle_ms / 1000 + 5:.0f} s after it "
                        f"was sent (connections.max.idle.ms={idle_ms})")
                writer.close()
                continue
            left.append((reader, writer, opened))
        return left
