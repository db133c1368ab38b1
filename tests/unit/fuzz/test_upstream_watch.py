"""The fuzzer's watch on the upstream broker (fuzz/health.py): a probe that misses its bound
holds the senders and gets a second chance; a broker that answers it is counted as a stall
and the run goes on, one that does not has stopped answering."""
from __future__ import annotations

import asyncio
import os

from fuzz.health import UpstreamWatch


async def _broker(silent_probes: int, on_probe=lambda: None) -> tuple[asyncio.Server, int]:
    """A fake broker that reads each probe (calling ``on_probe``) and answers it with its
    correlation id, except the first ``silent_probes`` ones, which it never answers."""
    seen = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal seen
        size = int.from_bytes(await reader.readexactly(4), "big")
        frame = await reader.readexactly(size)
        on_probe()
        seen += 1
        if seen > silent_probes:
            writer.write((4).to_bytes(4, "big") + frame[4:8])
            await writer.drain()
        else:
            await asyncio.sleep(5)
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def _watch(port: int) -> UpstreamWatch:
    return UpstreamWatch("broker", "127.0.0.1", port, pid=os.getpid(), rss_limit_mb=1e9,
                         timeout_s=0.2, recover_s=1.0, probe_s=0.05)


def test_a_late_answer_holds_the_senders_and_counts_as_a_stall_not_a_stop():
    held: list[bool] = []       # per probe: were the senders held when it arrived?

    async def scenario() -> UpstreamWatch:
        watches: list[UpstreamWatch] = []
        server, port = await _broker(1, lambda: held.append(not watches[0]._go.is_set()))
        watches.append(_watch(port))
        task = asyncio.create_task(watches[0].watch())
        try:
            async with asyncio.timeout(5):
                while len(held) < 3:
                    await asyncio.sleep(0.05)
            await asyncio.wait_for(watches[0].resumed(), 2.0)
            return watches[0]
        finally:
            task.cancel()
            server.close()
    watch = asyncio.run(scenario())
    assert held[:3] == [False, True, False]     # the late probe's second chance ran held
    assert watch.died_at is None and len(watch.stalls) == 1 and 0.2 <= watch.stalls[0] < 2.0


def test_a_broker_silent_past_the_second_chance_has_stopped_answering():
    async def scenario() -> UpstreamWatch:
        server, port = await _broker(silent_probes=2)
        watch = _watch(port)
        task = asyncio.create_task(watch.watch())
        try:
            async with asyncio.timeout(5):
                while watch.died_at is None:
                    await asyncio.sleep(0.05)
            return watch
        finally:
            task.cancel()
            server.close()
    watch = asyncio.run(scenario())
    assert watch.what.startswith("stopped answering: ApiVersions not answered within 0.2 s")
    assert "then, with nothing new sent, ApiVersions not answered within 1 s" in watch.what
    assert watch.stalls == []
