"""A task cancelled while its link waits stops, even when the answer lands in the same loop
turn as the cancellation: on Python 3.11 `asyncio.wait_for` returned the answer and dropped
the cancellation there (CPython gh-86296), which kept the cluster membership's side
heartbeats running after their join had ended. The link awaits the bare future (nothing to
drop a cancellation) and bounds it with one timer per link: a request never answered still
fails within its timeout, also after an earlier request was answered, and a shorter timeout
after a longer one is kept."""
from __future__ import annotations

import asyncio

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest

from coordinator.upstream.client import UpstreamClient, UpstreamError


async def _silent_server() -> tuple[asyncio.AbstractServer, int]:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()      # reads requests, never answers: the test answers by hand
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def test_a_cancel_in_the_turn_the_answer_lands_is_not_dropped():
    server, port = await _silent_server()
    try:
        link = await UpstreamClient.connect([("127.0.0.1", port)])
        for _ in range(50):
            asking = asyncio.create_task(link.request(ApiVersionsRequest(), timeout=5))
            await asyncio.sleep(0)                  # the request is written and waiting
            (future, *_), = link._pending.values()
            future.set_result("answer")             # the answer lands ...
            asking.cancel()                         # ... in the turn the asker is cancelled
            with pytest.raises(asyncio.CancelledError):
                await asking
            link._pending.clear()
        link.close()
    finally:
        server.close()
        await server.wait_closed()


async def test_a_request_still_times_out_naming_the_api():
    server, port = await _silent_server()
    try:
        link = await UpstreamClient.connect([("127.0.0.1", port)])
        with pytest.raises(UpstreamError, match=r"api_versions v0 to 127.0.0.1:\d+ timed out after 0.05s"):
            await link.request(ApiVersionsRequest(), timeout=0.05)
        link.close()
    finally:
        server.close()
        await server.wait_closed()



async def test_the_link_timer_bounds_every_request_it_carries():
    """A request answered, then one never answered (the timer armed for the first is re-armed
    for it), then a long and a short one: each fails at its own bound, and a timeout closes
    the link."""
    server, port = await _silent_server()
    try:
        link = await UpstreamClient.connect([("127.0.0.1", port)])
        answered = asyncio.create_task(link.request(ApiVersionsRequest(), timeout=0.05))
        await asyncio.sleep(0)
        (future, *_), = link._pending.values()
        future.set_result("answer")
        link._pending.clear()
        assert await answered == "answer"
        async with asyncio.timeout(10):         # a bound far above the request's: no hang
            with pytest.raises(UpstreamError, match="timed out after 0.05s"):
                await link.request(ApiVersionsRequest(), timeout=0.05)
        assert link._transport is not None and link._transport.is_closing()
        link = await UpstreamClient.connect([("127.0.0.1", port)])
        long = asyncio.create_task(link.request(ApiVersionsRequest(), timeout=60))
        await asyncio.sleep(0)
        async with asyncio.timeout(10):
            with pytest.raises(UpstreamError, match="timed out after 0.05s"):
                await link.request(ApiVersionsRequest(), timeout=0.05)
            with pytest.raises(UpstreamError, match="lost"):
                await long                      # the link closed: the long one fails too
        assert link._pending == {} and link._timer is None
    finally:
        server.close()
        await server.wait_closed()
