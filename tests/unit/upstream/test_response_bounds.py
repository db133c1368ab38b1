"""The upstream client (coordinator/upstream/client.py) reads response sizes from the upstream:
a size outside [4, MAX_RESPONSE_BYTES] fails the link at once, naming the size, instead of
reading (or allocating) it or crashing its reader; requests in flight get the error."""
from __future__ import annotations

import asyncio
import struct

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest

from coordinator.upstream.client import MAX_RESPONSE_BYTES, UpstreamClient, UpstreamError, open_plain_link
from support.ports import free_port


@pytest.mark.parametrize("size", [-1, 0, 3, MAX_RESPONSE_BYTES + 1])
async def test_an_impossible_response_size_fails_the_request_naming_it(size):
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        (length,) = struct.unpack(">i", await reader.readexactly(4))
        await reader.readexactly(length)
        writer.write(struct.pack(">i", size) + b"\x00" * 8)
        await writer.drain()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        link = await UpstreamClient.connect([("127.0.0.1", port)])
        with pytest.raises(UpstreamError, match=f"response of {size} bytes"):
            await link.request(ApiVersionsRequest(), timeout=5)
        assert link.closed
        link.close()
    finally:
        server.close()


async def test_the_plain_opener_links_to_the_first_reachable_address():
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    unused = free_port()       # nobody listens there: the opener moves on
    try:
        link = await open_plain_link([("127.0.0.1", unused), ("127.0.0.1", port)])
        assert link.address == ("127.0.0.1", port) and link.client_id == "kcoord-state"
        assert not link.closed
        link.close()
    finally:
        server.close()

