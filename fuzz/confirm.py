"""Which of the requests sent before a broker fell over did it? Replay them to a fresh
target and bisect: a half that still harms the broker on its own keeps being halved.

The target is the caller's ``start``: a fresh `kcoord serve` in front of a fresh broker
(what gets through kcoord and harms the broker: bench/bench_fuzz.py) or a bare broker
(what harms the broker at all). The broker runs under an address-space cap (kcoord's
--embedded-memory-max, or ``cap_bytes`` here), so a replay can never take the machine's
memory. Frames keep the order they were first sent in (a Produce may need the topic a
CreateTopics before it made); when neither half harms on its own, the pair of halves is
reported as it is.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .health import alive, answers_api_versions, cap_address_space, rss_mb


@dataclass
class Broker:
    host: str               # where replays are sent: kcoord, or the broker itself
    port: int
    pid: int                # the broker's
    broker_host: str
    broker_port: int
    stop: Callable[[], None]


Frames = Sequence[tuple[str, bytes]]


CHUNK = 8     # frames per connection: kcoord closes a connection on a frame it refuses
SETTLE_S = 2.0


async def _send_all(broker: Broker, frames: Frames, connections: int, seconds: float) -> None:
    """Send ``frames`` in order, CHUNK per connection and ``connections`` at a time; wait
    for every answer or ``seconds``."""
    limit = asyncio.Semaphore(connections)

    async def one(part: Frames) -> None:
        async with limit:
            try:
                await asyncio.wait_for(_one(part), 2.0)   # a JoinGroup may be held for its rebalance
            except TimeoutError:
                pass

    async def _one(part: Frames) -> None:
        try:
            reader, writer = await asyncio.open_connection(broker.host, broker.port)
        except OSError:
            return
        try:
            writer.write(b"".join(frame for _, frame in part))
            writer.write_eof()
            while await reader.read(65536):
                pass
        except OSError:
            pass
        finally:
            writer.close()
    tasks = [asyncio.ensure_future(one(frames[i:i + CHUNK])) for i in range(0, len(frames), CHUNK)]
    await asyncio.wait(tasks, timeout=seconds)
    for task in tasks:
        task.cancel()


async def harm(broker: Broker, frames: Frames, *, rss_limit_mb: float, connections: int = 16) -> str | None:
    """What ``frames`` did to the broker: None, "died", "reached N MB RSS", or "stopped
    answering"."""
    seconds = 5.0 + len(frames) / 2000
    sending = asyncio.ensure_future(_send_all(broker, frames, connections, seconds))
    deadline = time.monotonic() + seconds
    peak = 0.0
    settled: float | None = None
    try:
        # a harm may show after the answers: a count stored now, allocated by a later Metadata
        while time.monotonic() < deadline and (settled is None or time.monotonic() < settled):
            if settled is None and sending.done():
                settled = time.monotonic() + SETTLE_S
            await asyncio.sleep(0.05)
            if not alive(broker.pid):
                return "died"
            peak = max(peak, rss_mb(broker.pid))
            if peak > rss_limit_mb:
                return f"reached {peak:.0f} MB RSS"
    finally:
        sending.cancel()
    if not alive(broker.pid):
        return "died"
    problem = await answers_api_versions(broker.broker_host, broker.broker_port, 5.0)
    return None if problem is None else f"stopped answering ({problem}; RSS {rss_mb(broker.pid):.0f} MB)"


async def confirm(suspects: Frames, start: Callable[[], Broker], *, rss_limit_mb: float = 1024,
                  cap_bytes: int | None = None, most: int = 3) -> list[str]:
    """Up to ``most`` culprits among ``suspects`` (newest first, as `UpstreamWatch` keeps
    them): 'label[; label...]: what it did'."""
    remaining = list(reversed(suspects))           # the order they were sent in
    found: list[str] = []

    async def harmful(frames: Frames) -> str | None:
        broker = start()
        if cap_bytes is not None:
            cap_address_space(broker.pid, cap_bytes)
        try:
            return await harm(broker, frames, rss_limit_mb=rss_limit_mb)
        finally:
            broker.stop()

    while len(found) < most and remaining:
        what = await harmful(remaining)
        if what is None:
            break
        culprit: Frames = remaining
        while len(culprit) > 1:
            first, second = culprit[:len(culprit) // 2], culprit[len(culprit) // 2:]
            if (step := await harmful(first)) is not None:
                culprit, what = first, step
            elif (step := await harmful(second)) is not None:
                culprit, what = second, step
            else:
                break                                # together only: report the whole set
        found.append(f"{'; '.join(label for label, _ in culprit[:5])}"
                     f"{f' (+{len(culprit) - 5} more)' if len(culprit) > 5 else ''}: {what}")
        taken = {id(item) for item in culprit}
        remaining = [item for item in remaining if id(item) not in taken]
    return found
