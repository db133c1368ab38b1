"""Which of the requests in flight when a broker fell over did it? Replay each, alone,
straight to a fresh broker (no kcoord in between: kcoord forwards the body byte for
byte), and see whether the broker dies or outgrows its bound within a few seconds.

The broker is started by the caller's ``start`` (tests/support/tansu.py, bench/loadgen
procs) under an address-space cap, so a replay can never take the machine's memory.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from .health import alive, cap_address_space, rss_mb


@dataclass
class Broker:
    host: str
    port: int
    pid: int
    stop: Callable[[], None]


async def _replay_one(broker: Broker, frame: bytes, rss_limit_mb: float, seconds: float) -> str | None:
    """What the frame did to ``broker``: None when it answered (or closed) and stayed whole;
    else "died", "reached N MB RSS", or "no answer within S s" (the broker is then replaced,
    so that work it still does is not blamed on the next frame)."""
    try:
        reader, writer = await asyncio.open_connection(broker.host, broker.port)
    except OSError as e:
        return f"refused the connection ({e})"
    answer = asyncio.ensure_future(reader.read(4))
    try:
        writer.write(frame)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            await asyncio.sleep(0.02)
            if not alive(broker.pid):
                return "died"
            rss = rss_mb(broker.pid)
            if rss > rss_limit_mb:
                return f"reached {rss:.0f} MB RSS"
            if answer.done():
                return None
        return f"no answer within {seconds:g} s (RSS {rss_mb(broker.pid):.0f} MB)"
    finally:
        answer.cancel()
        writer.close()


async def confirm(suspects: list[tuple[str, bytes]], start: Callable[[], Broker], *, rss_limit_mb: float = 1024,
                  cap_bytes: int = 2 * 1024**3, seconds: float = 1.5, limit: int = 5000) -> list[str]:
    """'label: what it did' for each suspect that harms a fresh broker on its own (or leaves
    it busy past ``seconds``); a new broker replaces one that was harmed or busy."""
    found = []
    broker = start()
    cap_address_space(broker.pid, cap_bytes)
    try:
        for label, frame in suspects[:limit]:
            harm = await _replay_one(broker, frame, rss_limit_mb, seconds)
            if harm is None:
                continue
            found.append(f"{label}: {harm}")
            broker.stop()
            broker = start()
            cap_address_space(broker.pid, cap_bytes)
    finally:
        broker.stop()
    return found
