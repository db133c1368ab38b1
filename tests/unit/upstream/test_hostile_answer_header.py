"""An upstream answer whose response header does not decode (a flexible header's
tagged-field count past the frame, or a truncated varint) fails its request with
UpstreamError and closes the link, within the request's bound. The request is no longer
pending once its answer is read, so nothing else (the link's timer bounds pending requests
only) would ever answer it: a Produce would hold the lean writer's one request to that
broker for good, a SaslAuthenticate the link's shared open."""
from __future__ import annotations

import asyncio
import struct

import pytest
from kio.static.primitive import i16

from coordinator.runtime.fenced_links import PRODUCE, duration_ms, make_request
from coordinator.upstream.client import UpstreamClient, UpstreamError


async def _server_answering(tail: bytes) -> tuple[asyncio.Server, int]:
    """A server that answers the first request with its correlation id and ``tail``."""
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        request = await reader.readexactly(size)
        body = request[4:8] + tail
        writer.write(struct.pack(">i", len(body)) + body)
        await writer.drain()
        await reader.read()
        writer.close()
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


@pytest.mark.parametrize("tail", [b"\x7f", b"\x05\x00", b"\x80"], ids=["count-past-frame", "tag-past-frame",
                                                                        "truncated-varint"])
async def test_a_response_header_that_does_not_decode_fails_the_request_and_the_link(tail: bytes) -> None:
    server, port = await _server_answering(tail)
    try:
        link = await UpstreamClient.connect([("127.0.0.1", port)])
        request = make_request(PRODUCE, transactional_id=None, acks=i16(-1), timeout=duration_ms(1000),
                               topic_data=())
        async with asyncio.timeout(10):      # a bound against a hang, far above the request's own
            with pytest.raises(UpstreamError, match="does not parse"):
                await link.request(request, timeout=30.0)
        assert link.closed
    finally:
        server.close()
        await server.wait_closed()
