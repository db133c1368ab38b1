"""Fuzz a running `kcoord serve` over TCP, checking after every batch that it is still whole.

Two modes:
- ``bytes``: each connection sends a few valid requests and then one mutated one (a class
  from `fuzz.mutations`), so the mutated frame reaches the parser after real work on the
  same connection; kcoord must answer what came before and then close. Connection-level
  abuse runs beside it: half frames followed by silence (kcoord must close them after
  connections.max.idle.ms) and bursts of many connections.
- ``structured``: each connection pipelines up to 32 valid requests whose field values are
  extremes (`fuzz.structured`), for every API and version kcoord advertises; kcoord serves
  or forwards them, so they test what a value does to kcoord and to its upstream.

After every batch (the issue's bar): the server answers ApiVersions on a new connection
within 2 s, its RSS stays under the stated bound, its log holds no traceback, and the
process is alive; with an `UpstreamWatch`, the upstream broker too answers and stays
under its bound. A failed check stops the run and is reported with the batch's seed; a
broker that dies mid-batch stops it at once, with the requests it was handling.
"""
from __future__ import annotations

import asyncio
import random
import struct
import time
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from coordinator.protocol.apis import API_VERSIONS, FETCH, JOIN_GROUP, SYNC_GROUP, response_class
from coordinator.protocol.codec import decode_body

from .health import UpstreamWatch, alive, answers_api_versions, rss_mb
from .health import api_versions_frame as _api_versions_frame
from .mutations import MUTATIONS
from .structured import StructuredFrames, with_correlation_id
from .targets import TARGETS, Target, request_frame

MODES = ("bytes", "structured")
VALID_POOL = 32     # distinct valid requests per API version in bytes mode
HELD_APIS = frozenset({FETCH, JOIN_GROUP, SYNC_GROUP})

IDLE_MS = 3000
# The kcoord settings a fuzz run uses (Kafka's names), lowered so that connection abuse
# shows within a run; the tests and bench/bench_fuzz.py share them.
FUZZ_CONFIG = (f"connections.max.idle.ms={IDLE_MS}", "socket.request.max.bytes=1048576",
               "group.initial.rebalance.delay.ms=0")


def run(coro):
    """asyncio.run on uvloop when it is installed: the fuzzer shares the machine's cores with
    kcoord and the broker, and its own event loop costs less there."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency of kcoord
        return asyncio.run(coro)
    return uvloop.run(coro)


async def advertised(host: str, port: int) -> dict[int, tuple[int, int]]:
    """api key -> (min, max) version, as the server's ApiVersions v3 answer says."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(_api_versions_frame(1))
        head = await asyncio.wait_for(reader.readexactly(4), 5)
        frame = head + await reader.readexactly(struct.unpack(">i", head)[0])
    finally:
        writer.close()
    response = decode_body(response_class(API_VERSIONS, 3), frame, 8, exact=False)
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


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
    upstream_max_rss_mb: float = 0.0
    upstream_stalls: list[float] = field(default_factory=list)   # see health.UpstreamWatch
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
                f"{self.half_frames_closed}/{self.half_frames}; max RSS {self.max_rss_mb:.0f} MB, upstream's "
                f"{self.upstream_max_rss_mb:.0f} MB{self._stalls()}; {len(self.failures)} failures")

    def _stalls(self) -> str:
        if not self.upstream_stalls:
            return ""
        return (f", upstream answered late {len(self.upstream_stalls)} times (after "
                + ", ".join(f"{s:.1f}" for s in self.upstream_stalls) + " s, senders held)")


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
    except TimeoutError:
        return count, False
    except (asyncio.IncompleteReadError, OSError):
        # ConnectionError, and ENOTCONN from uvloop when the server closed first: closed either way.
        return count, True


class LiveFuzzer:
    def __init__(self, host: str, port: int, pid: int, log_path: Path, *, state_topic: str,
                 rss_limit_mb: float, seed: int = 0, concurrency: int = 16, read_timeout: float = 2.0,
                 targets: tuple[Target, ...] = TARGETS, mode: str = "bytes",
                 upstream: UpstreamWatch | None = None, exclude: Collection[int] = ()) -> None:
        if mode not in MODES:
            raise ValueError(f"mode {mode!r}: one of {MODES}")
        self.host, self.port, self.pid, self.log_path = host, port, pid, log_path
        self.state_topic = state_topic
        self.rss_limit_mb = rss_limit_mb
        self.seed = seed
        self.concurrency = concurrency
        self.read_timeout = read_timeout
        self.targets = targets
        self.exclude = exclude   # API keys the structured mode leaves out beyond structured.EXCLUDED
        self.mode = mode
        self.upstream = upstream
        self._structured: StructuredFrames | None = None
        self._valid_pool: dict[tuple[int, int], list[tuple[bytes, int]]] = {}
        self.versions: dict[int, tuple[int, int]] = {}
        self.report = LiveReport()
        self._log_offset = 0

    async def advertised(self) -> dict[int, tuple[int, int]]:
        return await advertised(self.host, self.port)

    def _plan(self, rng: random.Random) -> list[tuple[str, bytes]]:
        """(mutation or label, frame) for one connection: valid requests, then one mutated;
        in structured mode up to 32 requests with extreme values."""
        if self._structured is not None:
            frames = [self._structured.frame(rng, i + 1) for i in range(rng.randint(1, 32))]
            keys = [struct.unpack_from(">h", frame, 4)[0] for _, frame in frames]
            for key in keys:
                self.report.by_api[key] += 1
            # Requests a server may hold (a Fetch's max_wait_ms, a JoinGroup's rebalance) go
            # last: requests on a connection are answered in order, and one held in front
            # would keep the rest from being read within the run's read timeout.
            return [frame for _, frame in sorted(zip(keys, frames, strict=True), key=lambda kf: kf[0] in HELD_APIS)]
        plan = []
        n = rng.randint(1, 10)     # ~5.5 frames a connection: connections cost kcoord more than frames
        for i in range(n):
            target = rng.choice(self._live)
            low, high = self.versions[target.api_key]
            frame, body = self._valid_frame(target, rng.randint(low, high), i + 1, rng)
            mutate = i == n - 1 and rng.random() < 0.85  # the last frame, most of the time (~15 % of frames)
            name = rng.choice(target.live_mutations) if mutate else "valid"
            plan.append((name, MUTATIONS[name](frame, body, rng)))
            self.report.by_api[target.api_key] += 1
        return plan

    def _valid_frame(self, target: Target, version: int, correlation_id: int, rng: random.Random) -> tuple[bytes, int]:
        """A valid request: the first VALID_POOL of each API version are built (kio's encoder
        costs ~80 us a frame, a third of the run's CPU), later ones drawn from those."""
        pool = self._valid_pool.setdefault((target.api_key, version), [])
        if len(pool) < VALID_POOL:
            pool.append(request_frame(target, version, 0, rng, self.state_topic))
        frame, body = rng.choice(pool)
        return with_correlation_id(frame, correlation_id), body

    async def _connection(self, rng: random.Random) -> None:
        plan = self._plan(rng)
        try:
            reader, writer = await asyncio.open_connection(self.host, self.port)
        except OSError:
            self.report.by_mutation["refused_connection"] += 1   # a connection limit at work
            return
        self.report.connections += 1
        if self.upstream is not None:
            self.upstream.sent(id(writer), [(f"{label} (seed {self.seed})", frame) for label, frame in plan])
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
                if self._structured is not None:
                    name = "valid" if name.endswith(": valid") else "structured"
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
            if self.upstream is not None:
                self.upstream.answered(id(writer))

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
        """The per-batch bar: alive, answers ApiVersions within 2 s, RSS bound, no traceback;
        the same of the upstream, when watched."""
        failures = self.report.failures
        if self.upstream is not None:
            failures += await self.upstream.check(where)
            self.report.upstream_max_rss_mb = self.upstream.max_rss_mb
            self.report.upstream_stalls = list(self.upstream.stalls)
        if not alive(self.pid):
            failures.append(f"{where}: kcoord (pid {self.pid}) is gone")
            return
        problem = await answers_api_versions(self.host, self.port, 2.0)
        if problem is not None:
            failures.append(f"{where}: kcoord: {problem}")
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
        if self.mode == "structured":
            self._structured = StructuredFrames(self.versions, random.Random(self.seed), exclude=self.exclude)
        watch = asyncio.create_task(self.upstream.watch()) if self.upstream is not None else None
        try:
            return await self._batches(frames, batch_frames, half_frames_per_batch, burst, idle_ms, progress)
        finally:
            if watch is not None:
                watch.cancel()

    def _stopped(self) -> bool:
        return self.upstream is not None and self.upstream.died_at is not None

    async def _batches(self, frames: int, batch_frames: int, half_frames_per_batch: int, burst: int,
                       idle_ms: int | None, progress: Callable[[LiveReport], None] | None) -> LiveReport:
        start = time.monotonic()
        held: list[tuple[asyncio.StreamReader, asyncio.StreamWriter, float]] = []
        batch = 0
        while self.report.frames < frames and not self.report.failures:
            rng = random.Random(self.seed * 1_000_003 + batch)
            goal = min(frames, self.report.frames + batch_frames)
            now = time.monotonic()
            held += [(r, w, now) for r, w in await self._half_frames(half_frames_per_batch)]

            async def worker(wrng: random.Random, goal: int = goal) -> None:
                while self.report.frames < goal and not self._stopped():
                    if self.upstream is not None:
                        await self.upstream.resumed()
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
