"""Is a fuzzed process still whole? The checks a live run makes on kcoord and on its
upstream broker: alive (not a zombie), answering ApiVersions on a new connection within a
bound, and its RSS.

When the upstream dies or outgrows its RSS bound during a run, `UpstreamWatch` names the
requests sent shortly before (``window_s``) and those still unanswered: the one to blame
is among them (a request kcoord forwarded may still be at work upstream after kcoord
closed its client's connection), and `fuzz.confirm` replays each, newest first, against a
fresh broker. The failure text shows those whose label carries the largest numbers, since
a count or size is what a broker allocates from. A broker under test gets an address-space
cap (`cap_address_space`) so that one that tries to take the machine's memory aborts
instead.

Slow is not stopped: a broker that misses the ApiVersions bound under the flood (a JVM
collecting its heap on a machine shared with other work) is given ``recover_s`` more with
nothing new sent (``resumed`` holds the senders). One that answers then is counted in
``stalls`` and the run goes on; one that still does not answer has stopped answering.
"""
from __future__ import annotations

import asyncio
import re
import resource
import struct
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

_APIV = b"\x00\x12\x00\x03"   # ApiVersions v3
# RSS bounds of the brokers a run watches: Tansu idles at 30 MB and keeps a run's few records
# and topics; Kafka's JVM at -Xmx512m sits near 700 MB (heap, metaspace, code cache, page
# tables). Above them a broker holds memory out of proportion to the traffic.
TANSU_RSS_LIMIT_MB = 1024
KAFKA_RSS_LIMIT_MB = 1400


def api_versions_frame(correlation_id: int) -> bytes:
    # header v2: key, version, correlation id, client id "fuzz", no tags; body: software
    # name and version (compact strings), no tags.
    payload = _APIV + struct.pack(">ih", correlation_id, 4) + b"fuzz\x00" + b"\x05kfuz\x02v\x00"
    return struct.pack(">i", len(payload)) + payload


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a dead child not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


async def answers_api_versions(host: str, port: int, timeout: float, correlation_id: int = 7) -> str | None:
    """None when ApiVersions is answered with the right correlation id within ``timeout``,
    else what went wrong."""
    start = time.monotonic()
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        try:
            writer.write(api_versions_frame(correlation_id))
            head = await asyncio.wait_for(reader.readexactly(8), timeout - (time.monotonic() - start))
        finally:
            writer.close()
    except (TimeoutError, OSError, asyncio.IncompleteReadError) as e:
        return f"ApiVersions not answered within {timeout:g} s ({type(e).__name__}: {e})"
    if struct.unpack(">i", head[4:])[0] != correlation_id:
        return "ApiVersions answered with the wrong correlation id"
    return None


def cap_address_space(pid: int, limit_bytes: int) -> None:
    """RLIMIT_AS on a running process of ours (prlimit(2)): its next allocation past
    ``limit_bytes`` fails (a native broker aborts) instead of eating the machine."""
    resource.prlimit(pid, resource.RLIMIT_AS, (limit_bytes, limit_bytes))


def _largest_number(label: str) -> int:
    return max((abs(int(n)) for n in re.findall(r"-?\d+", label.split(":", 1)[-1])), default=0)


@dataclass
class UpstreamWatch:
    """The broker behind kcoord, watched during a run (alive and RSS every ``poll_s``,
    ApiVersions every ``probe_s``) and at each check."""

    name: str                  # "Tansu", "Kafka 4.3.1 (-Xmx512m)"
    host: str
    port: int
    pid: int
    rss_limit_mb: float
    timeout_s: float = 5.0
    poll_s: float = 0.05
    probe_s: float = 1.0
    max_rss_mb: float = 0.0
    died_at: float | None = None          # or outgrew its bound: either stops the run
    what: str = ""
    window_s: float = 0.5
    in_flight: dict[int, list[tuple[str, bytes]]] = field(default_factory=dict)   # connection -> (label, frame)
    recent: deque = field(default_factory=lambda: deque(maxlen=16384))     # (when, [(label, frame)])
    since: float = 0.0                     # suspects are sent from here on (the last answered probe)
    suspects: list[tuple[str, bytes]] = field(default_factory=list)        # newest first
    recover_s: float = 60.0                # the second chance, with the senders held
    stalls: list[float] = field(default_factory=list)     # seconds until a late probe was answered
    _go: asyncio.Event | None = None       # cleared while the senders are held

    async def resumed(self) -> None:
        """Return when senders may send: at once unless a late probe holds them."""
        if self._go is not None:
            await self._go.wait()

    def sent(self, connection: int, plan: list[tuple[str, bytes]]) -> None:
        self.in_flight[connection] = plan
        self.recent.append((time.monotonic(), plan))

    def everything_sent(self) -> list[tuple[str, bytes]]:
        """Every frame of the run still in ``recent``, newest first (when the harm needs
        state that older frames built)."""
        return [item for _, plan in reversed(self.recent) for item in reversed(plan)]

    def answered(self, connection: int) -> None:
        self.in_flight.pop(connection, None)

    async def watch(self) -> None:
        """Until cancelled: note the moment the broker dies, outgrows its RSS bound or stops
        answering, and what was sent to it shortly before."""
        self._go = asyncio.Event()
        self._go.set()
        probe = asyncio.create_task(self._probe())
        try:
            await self._poll()
        finally:
            probe.cancel()

    async def _probe(self) -> None:
        while self.died_at is None:
            asked = time.monotonic()
            problem = await self._answers_or_recovers(asked)
            if problem is not None and self.died_at is None and alive(self.pid):
                self._stop(f"stopped answering: {problem}")
                return
            self.since = asked
            await asyncio.sleep(self.probe_s)

    async def _poll(self) -> None:
        while self.died_at is None:
            if not alive(self.pid):
                self._stop("died")
            else:
                try:
                    rss = rss_mb(self.pid)
                except (OSError, RuntimeError):
                    continue      # exiting between the two reads: the next poll sees it dead
                self.max_rss_mb = max(self.max_rss_mb, rss)
                if rss > self.rss_limit_mb:
                    self._stop(f"reached {rss:.0f} MB RSS, above its bound {self.rss_limit_mb:.0f} MB")
            await asyncio.sleep(self.poll_s)

    async def _answers_or_recovers(self, asked: float) -> str | None:
        """None when the broker answers a probe within ``timeout_s``, or within ``recover_s``
        more while nothing new is sent to it (then the stall is counted); else both failures."""
        problem = await answers_api_versions(self.host, self.port, self.timeout_s)
        if problem is None or not alive(self.pid):
            return problem
        if self._go is not None:
            self._go.clear()
        try:
            second = await answers_api_versions(self.host, self.port, self.recover_s, correlation_id=8)
        finally:
            if self._go is not None:
                self._go.set()
        if second is not None:
            return f"{problem}; then, with nothing new sent, {second}"
        self.stalls.append(time.monotonic() - asked)
        return None

    def _stop(self, what: str) -> None:
        self.died_at, self.what = time.monotonic(), what
        start = min(self.died_at, self.since or self.died_at) - self.window_s
        plans = [plan for when, plan in reversed(self.recent) if when >= start]
        plans += [plan for plan in self.in_flight.values() if all(plan is not p for p in plans)]
        self.suspects = [item for plan in plans for item in reversed(plan)]

    async def check(self, where: str) -> list[str]:
        if self.died_at is None and not alive(self.pid):
            self._stop("died")
        if self.died_at is not None:
            largest = sorted(self.suspects, key=lambda item: _largest_number(item[0]), reverse=True)
            shown = "\n  ".join(label for label, _ in largest[:15]) or "(none recorded)"
            return [f"{where}: FINDING: {self.name} (pid {self.pid}) {self.what}; {len(self.suspects)} requests "
                    f"were in flight or sent just before, the largest values first:\n  {shown}"]
        failures = []
        problem = await self._answers_or_recovers(time.monotonic())
        if problem is not None:
            failures.append(f"{where}: {self.name} on {self.host}:{self.port}: {problem}")
        rss = rss_mb(self.pid)
        self.max_rss_mb = max(self.max_rss_mb, rss)
        if rss > self.rss_limit_mb:
            failures.append(f"{where}: {self.name} RSS {rss:.0f} MB above the bound {self.rss_limit_mb:.0f} MB")
        return failures
